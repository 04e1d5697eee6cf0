"""Where the stack runs and what it pulls: cluster, bucket, volumes, GPU pool, images, caches, sync Job."""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.names import (
    NAME_ERROR,
    GpuNodeLabelKey,
    LabelKey,
    LabelValue,
    MountPath,
    NonEmptyLabelValue,
    StorageClassName,
    checked,
)
from config_model.types import DnsLabel, KubeconfigPath, Model, NonEmpty, stack_key, text, url_text


class Environment(str, Enum):
    dev = "dev"
    staging = "staging"
    prod = "prod"


class Cluster(Model):
    """How to reach the Kubernetes cluster. The kubeconfig itself, if not a path, is the secret
    `llm-serving:kubeconfig`."""

    kubeconfig_path: KubeconfigPath | None = Field(
        None, description="Path to a kubeconfig file; unset means the secret llm-serving:kubeconfig, "
        "or the ambient kubeconfig when neither is set.")
    context: str | None = Field(None, description="kubeconfig context to use.")
    kubernetes_version: text(r"^1\.(2[9]|3[0-7])$", "a supported minor version, '1.29' to '1.37' (quoted)") = Field(
        "1.33", description="Minor version of the cluster (1.29 to 1.37 are supported); decides "
        "which volume drivers are allowed and which schema the manifests are validated against.")
    create_namespace: bool = Field(True, description="Create the namespace; false adopts an existing one.")


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


class ObjectStore(Model):
    """The bucket that holds the weights (field report 3.2)."""

    bucket_name: text(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$", "an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'") = Field(
        ..., description="Bucket name (S3 naming rules).")
    create: bool = Field(True, description="Create and manage the bucket; false adopts an existing "
                         "bucket by name without managing it (the usual choice for non-AWS endpoints).")
    region: checked(k8s.kubelet_expansions, base=NonEmpty) = Field(
        "us-east-1", description="Region of the bucket or of the S3-compatible service. On AWS (no endpoint, or "
        "an amazonaws.com one) an AWS region name such as eu-west-1, the endpoint's own if it names one; an "
        "S3-compatible store's names are its own (COS ap-shanghai, a Ceph RGW zonegroup) and are not checked.")
    endpoint: checked(k8s.kubelet_expansions, base=url_text(r"^https://[^\s/]+/?$", "an https:// endpoint without a path")) | None = Field(
        None, description="S3-compatible endpoint (for example Tencent COS), https only. Unset means AWS S3. "
        "With virtual-hosted addressing give the service endpoint; the bucket is prefixed by the client.")
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


class CephFsVolume(Model):
    """A static CephFS volume, field report 3.3. `csi` is ceph-csi's static volume; `in-tree` is the
    legacy `cephfs:` volume source, removed from Kubernetes in 1.31."""

    driver: Literal["csi", "in-tree"] = Field("csi", description="Volume driver: ceph-csi (csi) or the legacy in-tree plugin.")
    monitors: list[NonEmpty] = Field(default_factory=list, description="Ceph monitors host:port (in-tree only; ceph-csi reads them from its cluster config).")
    cluster_id: str | None = Field(None, description="ceph-csi clusterID (csi only).")
    fs_name: str | None = Field(None, description="CephFS file system name (csi only).")
    path: text(r"^/", "an absolute path") = Field(..., description="Absolute path of the model root inside CephFS.")
    user: NonEmpty = Field(..., description="Ceph user; its key is the secret llm-serving:cephUserKey.")


class NfsVolume(Model):
    server: NonEmpty = Field(..., description="NFS server host name or address.")
    path: text(r"^/", "an absolute path") = Field(..., description="Exported path of the model root.")


class ExistingClaim(Model):
    claim_name: DnsLabel = Field(..., description="Existing PersistentVolumeClaim holding the model root. "
                                 "Serving pods mount it read-only; the sync Job writes to it.")


class ModelVolume(Model):
    """Where the weights live inside the cluster: reusable storage, never emptyDir (field report 3.2,
    11.1: an emptyDir re-downloads about 156 GiB on every pod re-creation while 8 GPUs wait)."""

    kind: Literal["cephfs", "nfs", "existingClaim"] = Field(..., description="Volume source of the model root.")
    capacity_gib: int = Field(400, gt=0, description="Capacity of the static volumes in GiB (the default model is about 156 GiB).")
    mount_path: MountPath = Field(
        "/models", description="Where serving pods see the model root: absolute and normalized, apart from the "
        "mounts the program adds (scripts, caches, /dev/shm, /tmp).")
    cephfs: CephFsVolume | None = Field(None, description="Settings when kind is cephfs.")
    nfs: NfsVolume | None = Field(None, description="Settings when kind is nfs.")
    existing_claim: ExistingClaim | None = Field(None, description="Settings when kind is existingClaim.")


class Toleration(Model):
    key: checked(k8s.label_key, base=NonEmpty) = Field(..., description="Taint key (a label key).")
    operator: Literal["Equal", "Exists"] = Field("Exists", description="Toleration operator.")
    value: LabelValue | None = Field(None, description="Taint value (Equal only; a label value).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Taint effect; unset tolerates all.")

    @field_validator("value")
    @classmethod
    def _no_value_with_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        # pkg/apis/core/validation ValidateTolerations: "value must be empty when `operator` is 'Exists'".
        if value and info.data.get("operator") == "Exists":
            raise PydanticCustomError(NAME_ERROR, "must be unset when operator is 'Exists' (the API server refuses "
                                      "a value with Exists); use operator 'Equal' to match this value")
        return value


class GpuPool(Model):
    """The GPU nodes serving pods run on; defaults are field report 2.1 (8 x H20 96 GB)."""

    node_selector: dict[GpuNodeLabelKey, NonEmptyLabelValue] = Field(
        default_factory=lambda: {"nvidia.com/gpu.product": "NVIDIA-H20"},
        description="Node labels a GPU node must carry. Their keys also keep the sync Job off GPU nodes.")
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        description="Tolerations for the GPU node taints.")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs on one node of the pool.")
    gpu_architecture: text(r"^sm[0-9]{2,3}a?$", "a CUDA architecture such as 'sm90'") = Field(
        "sm90", description="CUDA architecture of the pool (H20 is Hopper, sm90); part of the JIT cache key.")
    driver_version: text(r"^[0-9][0-9.]*$", "an NVIDIA driver version such as '570.133.20' (quoted)") | None = Field(
        None, description="NVIDIA driver on the pool's nodes; part of the JIT cache key (field report 12.2).")
    cpu_request: int = Field(64, ge=1, description="CPU cores requested per engine pod (field report 2.1).")
    cpu_limit: int = Field(128, ge=1, description="CPU core limit per engine pod.")
    memory_request_gib: int = Field(320, ge=1, description="Memory requested per engine pod in GiB.")
    memory_limit_gib: int = Field(512, ge=1, description="Memory limit per engine pod in GiB.")
    shm_size_gib: int = Field(128, ge=1, description="Size of /dev/shm (a Memory emptyDir) in GiB; at least 8 GiB per GPU.")
    node_memory_gib: int | None = Field(
        None, ge=1, description="Allocatable memory of one node in GiB (kubectl get node -o "
        "jsonpath='{.status.allocatable.memory}', less what other DaemonSets take; this stack's pre-pull pods are counted). "
        "The field report does not state it, "
        "so it has no default; required when a model offloads KV cache, and when set the engine pods that may "
        "share a node must fit in it with their memory limits.")


IMAGE_UPSTREAM = text(r"^[a-z0-9][A-Za-z0-9._\-/:]*$",
                      "an image reference registry/repository[:tag] without a digest, e.g. vllm/vllm-openai:v0.26.0-cu129")
SHA256_DIGEST = text(r"^sha256:[0-9a-f]{64}$", "a digest: sha256: and 64 lowercase hex digits")


class ImageRef(Model):
    """An upstream image and the digest it must resolve to. The tag documents; the digest pins."""

    upstream: IMAGE_UPSTREAM = Field(..., description="Upstream reference, repository[:tag], no digest.")
    digest: SHA256_DIGEST = Field(..., description="sha256 digest the image is pinned to (field report 11.3: verify it, then pin it).")
    cuda_version: text(r"^[0-9]+\.[0-9]+$", "a CUDA version such as '12.9' (quoted)") | None = Field(
        None, description="CUDA runtime inside the image; part of the JIT cache key (field report 12.2).")


class RayImageRef(ImageRef):
    """The Ray-enabled vLLM image P/D on RayClusterFleet needs: an image of its own, with Ray
    installed at build time rather than pip-installed at every start (field report 11.3)."""

    ray_version: text(r"^[0-9]+\.[0-9]+\.[0-9]+$", "a Ray version such as '2.47.1' (quoted)") = Field(
        ..., description="The ray[default] version baked into the image (2.47.1 in the field report).")


class EcrMirror(Model):
    repository_prefix: DnsLabel = Field("llm-serving", description="Prefix of the ECR repositories and pull-through cache rules.")
    upstream_credential_arns: dict[NonEmpty, NonEmpty] = Field(
        default_factory=dict, description="Secrets Manager ARN (name prefixed ecr-pullthroughcache/) per upstream registry "
        "that needs one for pull-through caching, keyed by registry host (docker.io, ghcr.io).")
    keep_images: int = Field(30, ge=5, le=1000, description="Images kept per repository by the lifecycle policy.")


class RegistryMirror(Model):
    host: text(r"^[a-z0-9][a-z0-9.\-]*(:[0-9]+)?$", "a registry host[:port]") = Field(..., description="Internal registry host, e.g. registry.internal:5000.")
    repository_prefix: text(r"^[a-z0-9][a-z0-9._\-/]*[a-z0-9]$", "a repository path prefix") = Field(
        "llm-serving", description="Path under the host where mirrored repositories live.")
    copy_image: ImageRef = Field(..., description="Image with skopeo for the copy Job; pulled from upstream, not the mirror.")


class Mirror(Model):
    kind: Literal["none", "ecr", "registry"] = Field("none", description="none pulls from upstream; ecr or registry pulls from a mirror.")
    ecr: EcrMirror | None = Field(None, description="Settings when kind is ecr.")
    registry: RegistryMirror | None = Field(None, description="Settings when kind is registry (credentials: secret llm-serving:registryDockerConfigJson).")


class Images(Model):
    """Container images, each an upstream reference plus a sha256 digest: a tag can move under a
    running fleet, a digest cannot (field report 11.3)."""

    vllm: ImageRef | None = Field(None, description="vLLM OpenAI server image, required by vllm models and by "
                                  "operations.loadTest (`vllm bench serve`); DeepSeek V4 needs a release that supports "
                                  "it (field report 2.2).")
    sglang: ImageRef | None = Field(None, description="SGLang image, required by sglang models (field report 12: v0.5.17, CUDA 13.0).")
    vllm_ray: RayImageRef | None = Field(None, description="Ray-enabled vLLM image for RayClusterFleet P/D.")
    model_sync: ImageRef = Field(..., description="Image with the AWS CLI, for the model sync Job.")
    model_verify: ImageRef = Field(..., description="Image with python3, for the integrity check and ready marker.")
    mirror: Mirror = Field(default_factory=Mirror, description="Where pods pull the images from.")

    def named(self) -> dict[str, ImageRef]:
        """Every configured image by its stack-file key."""
        return {stack_key(name): ref for name in type(self).model_fields
                if isinstance(ref := getattr(self, name), ImageRef)}


# The claim the stack makes for compileCache.kind claim, unless claimName names another.
COMPILE_CACHE_CLAIM = "llm-compile-cache"


class CompileCache(Model):
    """Writable JIT/compile cache, kept apart from the read-only model (field report 3.1, 12.2). Every
    engine writes under its own directory of it, keyed by image, CUDA, driver, GPU architecture and
    arguments (components/pod_template.py compile_cache_key), so one claim serves every engine pod."""

    kind: Literal["emptyDir", "claim", "existingClaim"] = Field(
        "emptyDir", description="emptyDir (lost with the pod); claim: a ReadWriteMany claim the stack creates and "
        "keeps outside dev (beyond `pulumi destroy`), shared by restarts and every engine pod; existingClaim: a "
        "writable claim made beforehand, shared the same way.")
    claim_name: DnsLabel | None = Field(None, description="The claim: required when kind is existingClaim; with kind "
                                        f"claim, the name the stack gives it (default {COMPILE_CACHE_CLAIM}).")
    storage_class_name: StorageClassName | None = Field(
        None, description="StorageClass of the claim the stack creates (kind claim, required then): one that "
        "provisions ReadWriteMany volumes (CephFS, NFS, EFS and the like).")
    size_gib: int = Field(50, gt=0, description="Size of the cache in GiB: the emptyDir's size limit, or the storage "
                          "the claim of kind claim requests.")

    @property
    def claim(self) -> str | None:
        """The claim the engine pods mount, or None for an emptyDir."""
        if self.kind == "claim":
            return self.claim_name or COMPILE_CACHE_CLAIM
        return self.claim_name if self.kind == "existingClaim" else None


class ModelSync(Model):
    """The CPU-only Job that fills the model volume from the bucket (field report 3.2)."""

    max_concurrent_requests: int = Field(20, ge=1, le=256, description="AWS CLI s3 max_concurrent_requests (field report 3.2 suggests trying 10, 20, 32).")
    backoff_limit: int = Field(4, ge=0, le=20, description="Pod retries of the Job (Kubernetes backs off exponentially between them).")
    sync_attempts: int = Field(3, ge=1, le=10, description="`aws s3 sync` attempts inside one pod, with doubling sleeps between them.")
    active_deadline_seconds: int = Field(7200, ge=600, description="Upper bound for one Job run in seconds (one 156 GiB download took about 6 min).")
    cpu_request: int = Field(4, ge=1, description="CPU cores of each of the Job's two containers, the download and "
                             "the verifier beside it (its hashing threads); the pod requests twice this.")
    memory_request_gib: int = Field(8, ge=1, description="Memory of each of the Job's two containers in GiB; the pod "
                                    "requests twice this.")
    node_selector: dict[LabelKey, NonEmptyLabelValue] = Field(default_factory=dict, description="Labels of the CPU nodes the Job may use.")
