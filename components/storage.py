"""The weights bucket and its read-only credentials (field report 3.2).

Created buckets are versioned, encrypted and closed to the public; outside dev they are protected
and retained on delete, so `pulumi destroy` never loses 156 GiB of verified weights. Credentials
created here can only list and read the model prefixes of this one bucket: an IAM user's key, or,
with objectStore.workloadIdentity, an IAM role the sync Job's ServiceAccount assumes (IRSA or EKS Pod
Identity), so no long-lived key exists at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.base import Component, labels
from config_model import ObjectStore


def read_only_policy(bucket: str, prefixes: list[str]) -> str:
    """IAM policy JSON: list the model prefixes and get their objects, nothing else."""
    objects = [f"arn:aws:s3:::{bucket}/{p}/*" for p in sorted(set(prefixes))]
    listable = sorted({f"{p}/*" for p in prefixes} | set(prefixes) | {f"{p}/" for p in prefixes})
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ListModelPrefixes", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": [f"arn:aws:s3:::{bucket}"],
             "Condition": {"StringLike": {"s3:prefix": listable}}},
            {"Sid": "ReadModelObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects},
        ],
    }, sort_keys=True)


# IRSA as the EKS pod identity webhook sets it up (github.com/aws/amazon-eks-pod-identity-webhook,
# pkg/handler/handler.go NewModifier and pkg/cache: the role from this ServiceAccount annotation, the
# token audience sts.amazonaws.com by default). The sync Job renders the same token volume itself
# (components/sync_job.py), so it works where no webhook runs and the webhook changes nothing.
IRSA_AUDIENCE = "sts.amazonaws.com"
IRSA_ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
SYNC_SERVICE_ACCOUNT = "llm-serving-model-sync"


def trust_policy(oidc_provider_arn: str, namespace: str, service_account: str) -> str:
    """Who may assume the reader role: this one ServiceAccount's token, issued for STS by the cluster's
    OIDC provider (IAM User Guide, "Create a role for OpenID Connect federation"; EKS User Guide,
    "Assign IAM roles to Kubernetes service accounts": the :sub and :aud condition keys)."""
    issuer = oidc_provider_arn.split(":oidc-provider/", 1)[1]
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": oidc_provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                                       f"{issuer}:aud": IRSA_AUDIENCE}}}]}, sort_keys=True)


# EKS Pod Identity (EKS User Guide, "Create IAM role with trust policy required by EKS Pod Identity"): the
# EKS Auth service assumes the role (sts:AssumeRole) with session tags (sts:TagSession) naming the cluster,
# namespace and ServiceAccount of the pod ("Enable or disable session tags": eks-cluster-name,
# kubernetes-namespace, kubernetes-service-account), which the trust policy's conditions match.
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_trust_policy(cluster_name: str, namespace: str, service_account: str) -> str:
    """Who may assume the reader role: EKS Pod Identity, for this one ServiceAccount of this cluster."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "AllowEksAuthToAssumeRoleForPodIdentity", "Effect": "Allow",
        "Principal": {"Service": POD_IDENTITY_PRINCIPAL}, "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {"aws:RequestTag/eks-cluster-name": cluster_name,
                                       "aws:RequestTag/kubernetes-namespace": namespace,
                                       "aws:RequestTag/kubernetes-service-account": service_account}}}]}, sort_keys=True)


@dataclass(frozen=True)
class ModelStoreArgs:
    store: ObjectStore
    model_prefixes: list[str]
    protect_data: bool          # true outside dev
    user_name: str              # the IAM reader (user or role), config_model.derived.iam_user_name
    namespace: str = ""         # of the sync Job's ServiceAccount (workloadIdentity)


class ModelStore(Component):
    bucket_name: pulumi.Output[str]
    access_key_id: pulumi.Output[str] | None = None
    secret_access_key: pulumi.Output[str] | None = None
    # With workloadIdentity: the ServiceAccount the sync Job runs as; with IRSA the role it assumes
    # itself (with EKS Pod Identity the association names the role and the Job needs no ARN).
    service_account: str | None = None
    role_arn: pulumi.Output[str] | None = None
    pod_identity: bool = False

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:storage:ModelStore", name, opts)
        store = args.store
        if store.create:
            # Outside dev every resource that configures the bucket is protected and retained as well:
            # `pulumi destroy` would otherwise delete the versioning, encryption and public-access
            # block before it reached the protected bucket, leaving it unversioned and exposed.
            keep = {"protect": args.protect_data, "retain_on_delete": args.protect_data}
            self.bucket = aws.s3.Bucket(
                f"{name}-bucket", bucket=store.bucket_name, force_destroy=False, opts=self.child_opts(**keep))
            bucket_id = self.bucket.id
            self.bucket_name = self.bucket.bucket
            aws.s3.BucketVersioning(
                f"{name}-versioning", bucket=bucket_id,
                versioning_configuration={"status": "Enabled"}, opts=self.child_opts(**keep))
            sse = ({"sse_algorithm": "aws:kms", "kms_master_key_id": store.kms_key_arn}
                   if store.kms_key_arn else {"sse_algorithm": "AES256"})
            aws.s3.BucketServerSideEncryptionConfiguration(
                f"{name}-encryption", bucket=bucket_id,
                rules=[{"apply_server_side_encryption_by_default": sse, "bucket_key_enabled": bool(store.kms_key_arn)}],
                opts=self.child_opts(**keep))
            aws.s3.BucketPublicAccessBlock(
                f"{name}-public-access-block", bucket=bucket_id,
                block_public_acls=True, block_public_policy=True,
                ignore_public_acls=True, restrict_public_buckets=True, opts=self.child_opts(**keep))
        else:
            self.bucket_name = pulumi.Output.from_input(store.bucket_name)

        if store.create_credentials:
            user = aws.iam.User(f"{name}-reader", name=args.user_name,
                                tags={"purpose": "llm-serving model sync, read-only"}, opts=self.child_opts())
            aws.iam.UserPolicy(f"{name}-reader-policy", user=user.name,
                               policy=self.bucket_name.apply(lambda b: read_only_policy(b, args.model_prefixes)),
                               opts=self.child_opts())
            key = aws.iam.AccessKey(f"{name}-reader-key", user=user.name, opts=self.child_opts())
            self.access_key_id = pulumi.Output.secret(key.id)
            self.secret_access_key = pulumi.Output.secret(key.secret)
        if store.workload_identity is not None:
            self._workload_identity(name, args)
        self.register_outputs({"bucketName": self.bucket_name})

    def _workload_identity(self, name: str, args: ModelStoreArgs) -> None:
        identity = args.store.workload_identity
        assert identity is not None
        self.service_account = SYNC_SERVICE_ACCOUNT
        self.pod_identity = identity.kind == "podIdentity"
        if self.pod_identity:
            assert identity.cluster_name is not None
            trust = pod_identity_trust_policy(identity.cluster_name, args.namespace, SYNC_SERVICE_ACCOUNT)
        else:
            assert identity.oidc_provider_arn is not None
            trust = trust_policy(identity.oidc_provider_arn, args.namespace, SYNC_SERVICE_ACCOUNT)
        role = aws.iam.Role(f"{name}-reader-role", name=args.user_name, assume_role_policy=trust,
                            tags={"purpose": "llm-serving model sync, read-only"}, opts=self.child_opts())
        aws.iam.RolePolicy(f"{name}-reader-role-policy", role=role.name,
                           policy=self.bucket_name.apply(lambda b: read_only_policy(b, args.model_prefixes)),
                           opts=self.child_opts())
        # No API token of its own: the Job mounts only the projected token for STS (IRSA), or the one the
        # EKS Pod Identity webhook adds. No IRSA annotation with Pod Identity: the IRSA webhook would then
        # inject AWS_ROLE_ARN, which the CLI's chain reads before the container provider.
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sync-service-account", automount_service_account_token=False,
            metadata={"name": SYNC_SERVICE_ACCOUNT, "namespace": args.namespace,
                      "labels": labels(SYNC_SERVICE_ACCOUNT, "model-sync"),
                      **({} if self.pod_identity else {"annotations": {IRSA_ROLE_ANNOTATION: role.arn}})},
            opts=self.child_opts())
        if not self.pod_identity:
            self.role_arn = role.arn
            return
        # Session tags stay on: the trust policy's conditions read them.
        aws.eks.PodIdentityAssociation(
            f"{name}-sync-pod-identity", cluster_name=identity.cluster_name, namespace=args.namespace,
            service_account=SYNC_SERVICE_ACCOUNT, role_arn=role.arn, disable_session_tags=False,
            region=identity.cluster_region, tags={"purpose": "llm-serving model sync, read-only"},
            opts=self.child_opts(depends_on=[service_account]))
