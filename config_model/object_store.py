"""The bucket that holds the weights and how the sync Job reaches it: S3's bucket-name rules, AWS regions
and hosts, workload identity, and a private CA's bundle for an S3-compatible store (field report 3.2)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.names import checked
from config_model.types import CREDENTIAL_ERROR, Model, NonEmpty, field_report, text, url_text

# AWS region names: the union of the partitions' regionRegex in botocore 1.44.8 data/partitions.json
# (aws, aws-cn, aws-us-gov, aws-iso*, aws-eusc), the release requirements-s3.txt pins beside awscli;
# tests/test_messages.py compares it with the installed file. A new region of a known shape passes.
AWS_REGION = (r"^(?:(?:us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+|cn-\w+-\d+|us-gov-\w+-\d+|us-iso[bf]?-\w+-\d+"
              r"|eu-isoe-\w+-\d+|eusc-de-\w+-\d+)$")
# An endpoint on one of AWS's own S3 hosts (s3.<region>.amazonaws.com, s3-fips..., s3.dualstack...,
# VPC endpoints *.vpce.amazonaws.com, China's amazonaws.com.cn): AWS S3 reached by name, with IAM and STS.
AWS_HOST = r"(^|\.)amazonaws\.com(\.cn)?$"
# The region label of such a host: s3.<region>., s3-<region>. (legacy), s3-fips.<region>., s3.dualstack.<region>.
AWS_HOST_REGION = r"(?:^|\.)s3(?:[.-]fips)?(?:\.dualstack)?[.-]([a-z]{2}(?:-[a-z]+)+-\d+)\.|\.s3\.([a-z]{2}(?:-[a-z]+)+-\d+)\.vpce\."


class WorkloadIdentity(Model):
    """AWS credentials for the sync Job from its Kubernetes ServiceAccount instead of an IAM user's
    long-lived key. The stack creates an IAM role limited to reading the model prefixes that only that
    one ServiceAccount can assume: through the cluster's OIDC provider (IRSA), or through an EKS Pod
    Identity association (podIdentity)."""

    kind: Literal["irsa", "podIdentity"] = Field(
        "irsa", description="irsa: IAM Roles for Service Accounts; the Job exchanges a projected ServiceAccount token "
        "(audience sts.amazonaws.com) for the role's credentials (AssumeRoleWithWebIdentity); needs oidcProviderArn. "
        "podIdentity: EKS Pod Identity; the stack associates the role with the Job's ServiceAccount in the EKS "
        "cluster clusterName, and the cluster's EKS Pod Identity Agent hands the Job the role's credentials "
        "(the agent add-on must be installed); needs clusterName.")
    oidc_provider_arn: text(r"^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:oidc-provider/[^\s/]+(/[^\s/]+)*$",
                            "an IAM OIDC provider ARN, arn:aws:iam::<account>:oidc-provider/<issuer host and path>") | None = Field(
        None, description="kind irsa: the IAM OIDC provider of the cluster's service-account issuer (on EKS: aws eks "
        "describe-cluster --query cluster.identity.oidc.issuer, registered with aws iam create-open-id-connect-provider "
        "or eksctl utils associate-iam-oidc-provider). The role's trust policy names it.")
    cluster_name: text(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", "an EKS cluster name: up to 100 letters, digits, '-' "
                       "or '_', starting with a letter or digit") | None = Field(
        None, description="kind podIdentity: the EKS cluster the Job runs in, where the Pod Identity association is "
        "created. The role's trust policy admits only that cluster, namespace and ServiceAccount (session tags).")
    cluster_region: text(AWS_REGION, "an AWS region name such as us-east-1 or eu-west-1") | None = Field(
        None, description="kind podIdentity: the region of that EKS cluster, when it is not objectStore.region.")


# Field report 3.2: one 155.43 GiB download from one COS bucket took about 364 s, about 437 MiB/s
# (3.67 Gbit/s); a second run in a similar environment took about 326 s. The only storage throughput the
# report measures.
FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND = 437

# Amazon S3 User Guide, "General purpose bucket naming rules"
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html, also reached as
# https://docs.aws.amazon.com/console/s3/bucket-naming): besides the pattern below (3-63 characters of
# a-z, 0-9, '.' and '-', a letter or digit at both ends), the names S3 refuses: IP form, '..', the
# prefixes xn--, sthree- (sthree-configurator), amzn-s3-demo-, the suffixes -s3alias, --ol-s3, .mrap,
# --x-s3 and --table-s3. The last two are also what "Directory bucket naming rules" (every directory
# bucket ends in --x-s3) and "Amazon S3 table bucket ... naming rules" (reserved suffixes: -s3alias,
# --ol-s3, --x-s3, --table-s3) reserve. A reserved prefix or suffix names what AWS keeps it for.
# Checked for every store: a name AWS refuses is one no bucket on AWS can have, and S3-compatible
# stores refuse the IP form and '..' too (neither is a host name for virtual-hosted addressing).
BUCKET_PREFIXES = {
    "xn--": "reserved for internationalized (punycode) host names",
    "sthree-": "reserved by S3 (sthree- and sthree-configurator)",
    "amzn-s3-demo-": "reserved by S3 for its documentation's examples",
}
BUCKET_SUFFIXES = {
    "-s3alias": "reserved for access point aliases",
    "--ol-s3": "reserved for Object Lambda Access Point aliases",
    ".mrap": "reserved for Multi-Region Access Points",
    "--x-s3": "reserved for directory buckets",
    "--table-s3": "reserved for S3 Tables buckets",
}
BUCKET_RULES = "S3 general purpose bucket naming rules"


def _bucket_rules(name: str) -> list[str]:
    errs = []
    if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", name):
        errs.append(f"must not be formatted as an IP address ({BUCKET_RULES})")
    if ".." in name:
        errs.append(f"must not contain two adjacent periods '..' ({BUCKET_RULES})")
    errs += [f"must not start with '{p}': {why} ({BUCKET_RULES})" for p, why in BUCKET_PREFIXES.items() if name.startswith(p)]
    errs += [f"must not end with '{x}': {why} ({BUCKET_RULES})" for x, why in BUCKET_SUFFIXES.items() if name.endswith(x)]
    return errs


# PEM certificates (RFC 7468 section 5): what OpenSSL, behind the AWS CLI's AWS_CA_BUNDLE, reads from
# a CA bundle file; text between the blocks (a bundle's comments) is ignored as OpenSSL ignores it.
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----([^-]*)-----END \1-----")
# Plain config may be at most this long: a bundle of a few CAs is a few KiB; ConfigMaps hold 1 MiB.
CA_BUNDLE_MAX_CHARS = 256 * 1024


def _pem_certificates(value: str) -> str:
    blocks = _PEM_BLOCK.findall(value)
    if "PRIVATE KEY" in value:
        # Plain config reaches the stack file and the state unencrypted (stacks/loader.py hides the value).
        raise PydanticCustomError(CREDENTIAL_ERROR, "must hold only CA certificates, never a private key: plain config "
                                  "reaches the stack file and the state unencrypted")
    if not blocks or any(kind != "CERTIFICATE" for kind, _ in blocks):
        raise PydanticCustomError("ca_bundle", "must be PEM CA certificates: one or more CERTIFICATE blocks, each between "
                                  "its BEGIN CERTIFICATE and END CERTIFICATE lines (the CA that signed the store's "
                                  "certificate)")
    for _, body in blocks:
        try:
            base64.b64decode("".join(body.split()), validate=True)
        except (binascii.Error, ValueError):
            raise PydanticCustomError("ca_bundle", "has a CERTIFICATE block that is not base64 (a PEM file's body "
                                      "lines were changed or cut)") from None
    return value


CaBundle = Annotated[str, Field(max_length=CA_BUNDLE_MAX_CHARS), AfterValidator(_pem_certificates)]


class ObjectStore(Model):
    """The bucket that holds the weights (field report 3.2)."""

    bucket_name: checked(_bucket_rules, base=text(
        r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$", "an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'")) = Field(
        ..., description="Bucket name (S3 general purpose bucket naming rules): 3-63 lowercase letters, digits, '.' or "
        "'-', a letter or digit at both ends; not an IP address, no '..', not starting with "
        f"{', '.join(BUCKET_PREFIXES)}, not ending with {', '.join(BUCKET_SUFFIXES)}.")
    create: bool = Field(True, description="Create and manage the bucket; false adopts an existing "
                         "bucket by name without managing it (the usual choice for non-AWS endpoints).")
    region: checked(k8s.kubelet_expansions, base=NonEmpty) = Field(
        "us-east-1", description="Region of the bucket or of the S3-compatible service. On AWS (no endpoint, or "
        "an amazonaws.com one) an AWS region name such as eu-west-1, the endpoint's own if it names one; an "
        "S3-compatible store's names are its own (COS ap-shanghai, a Ceph RGW zonegroup) and are not checked.")
    endpoint: checked(k8s.kubelet_expansions, base=url_text(r"^https://[^\s/]+/?$", "an https:// endpoint without a path")) | None = Field(
        None, description="S3-compatible endpoint (for example Tencent COS), https only. Unset means AWS S3. "
        "With virtual-hosted addressing give the service endpoint; the bucket is prefixed by the client.")
    ca_bundle: CaBundle | None = Field(
        None, description="PEM of the CA certificate(s) an S3-compatible store's TLS certificate chains to, when that "
        "is a private CA (MinIO, Ceph RGW). The stack writes it into the ConfigMap llm-serving-object-store-ca, mounted "
        "read-only into the sync Job's download container, whose AWS CLI verifies the store against it alone "
        "(AWS_CA_BUNDLE): TLS is never switched off. Needs an endpoint off AWS; a new bundle re-runs the sync Job.")
    addressing_style: Literal["virtual", "path"] = Field(
        "virtual", description="S3 addressing style. Some S3-compatible stores (COS) refuse path-style "
        "requests with PathStyleDomainForbidden (field report 3.2, 11.1).")
    create_credentials: bool = Field(
        True, description="On AWS, create a dedicated IAM user and key limited to reading the model "
        "prefix. Must be false for a non-AWS endpoint and with workloadIdentity; without either, keys come from "
        "secret config llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey.")
    kms_key_arn: str | None = Field(None, description="KMS key for server-side encryption; unset uses SSE-S3 (AES256).")
    workload_identity: WorkloadIdentity | None = Field(
        None, description="On AWS, give the sync Job a ServiceAccount with a read-only IAM role (IRSA or EKS Pod Identity) instead of a key: no IAM user, no access key, no credentials Secret. Needs createCredentials false.")
    download_rate_mibps: float = Field(
        FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND, gt=0, le=100000, json_schema_extra=field_report("3.2"),
        description="MiB/s the sync Job downloads from this store, as measured on this cluster (for example a "
        "first sync's size over its duration); only plan.md's time-to-first-token estimate reads it. Unset: "
        f"{FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND} MiB/s, the field report's one measured download from one COS "
        "bucket (3.2), listed in plan.md as inherited.")

    @property
    def host(self) -> str | None:
        return re.sub(r"^https://|[:/].*$", "", self.endpoint) if self.endpoint else None

    @property
    def on_aws(self) -> bool:
        """AWS S3: no endpoint, or an endpoint on AWS's own hosts (a FIPS, dual-stack or VPC endpoint)."""
        return self.host is None or re.search(AWS_HOST, self.host) is not None

    @property
    def endpoint_region(self) -> str | None:
        """The region an AWS endpoint names, if it names one."""
        found = re.search(AWS_HOST_REGION, self.host or "")
        return (found.group(1) or found.group(2)) if found else None
