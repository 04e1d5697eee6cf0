"""The CPU-only Job that fills one model directory from the bucket and verifies it (field report 3.2).

It is decoupled from GPU allocation: it runs on CPU nodes, is kept off every GPU node by a node
affinity on the GPU pool's label keys, and requests no GPU. The download container syncs with
retries; the verify container beside it hashes each file as it lands, then checks files, shard count
and sha256, writes the ready marker that the serving pods' gate reads, and prunes old revisions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, job_metadata, labels, metadata
from components.pod_template import (
    DIGEST_CACHE,
    READY_MARKER,
    SCRIPTS_MOUNT,
    container_security,
    cpu_job_pod,
    expected_shards_args,
    pinned_manifest_args,
    revision_path,
)
from components.secrets import secret_tag_annotation
from components.storage import IRSA_AUDIENCE
from config_model import GpuPool, ModelSync, ObjectStore, ServedModel

WORK_DIR = "/work"
CREDENTIALS_DIR = "/var/run/secrets/object-store"
# The webhook's names and defaults (amazon-eks-pod-identity-webhook pkg/handler/handler.go NewModifier;
# 86400 s is its default --token-expiration): the kubelet renews the token at 80% of its life.
IRSA_VOLUME = "aws-iam-token"
IRSA_TOKEN_DIR = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
IRSA_TOKEN = "token"
IRSA_TOKEN_SECONDS = 86400
# The webhook mutates every container of the pod unless the pod names it here (handler.go
# getContainersToSkip): the verifier needs no AWS credentials.
IRSA_SKIP_CONTAINERS = "eks.amazonaws.com/skip-containers"
SYNC_MOUNT = "/models"
ANN_MODEL_SIZE = "llm-serving.io/model-size-gib"
ANN_MODEL_PROFILE = "llm-serving.io/model-profile"
# In the pod's emptyDir: how the download container tells the verify container beside it that it is
# alive and how it ended (components/scripts/sync_model.sh, verify_model.py --download-status).
STATUS_DIR = f"{WORK_DIR}/download-status"
# Kubernetes awaits a Job to completion; beyond activeDeadlineSeconds it has failed anyway.
AWAIT_MARGIN_SECONDS = 300
# objectStore.caBundle: a ConfigMap of the stack (the CA is public; its content is plain config, so
# preview checks it and its digest re-runs the Job), mounted read-only into the download container.
# The AWS CLI verifies the store against that file alone: AWS_CA_BUNDLE is botocore's ca_bundle, the
# `verify` of every client the CLI makes, the classic and the CRT transfer client alike (awscli 1.46.2
# awscli/botocore/configprovider.py and session.py create_client, run by tests/test_sync_tls.py; v2 at
# tests/upstream_aws_cli.py V2_COMMIT: the same configprovider.py entry, session.py, and
# customizations/s3/factory.py _resolve_verify for the CRT client). Never --no-verify-ssl (field report 3.2).
CA_CONFIG_MAP = "llm-serving-object-store-ca"
CA_KEY = "ca.pem"
CA_DIR = "/etc/llm-serving/object-store-ca"
ANN_CA_BUNDLE = "llm-serving.io/object-store-ca-sha256"
# The CLI's own retries of each request to the store, said in the Job rather than left to the CLI's
# defaults, which differ by major version: v2 (the pod's image) defaults to retry mode standard with 3
# attempts (github.com/aws/aws-cli tag 2.36.7 awscli/botocore/configprovider.py 'retry_mode' and
# 'max_attempts'); v1 (awscli 1.46.2, what the tests run) to legacy with 5 (its botocore's
# configprovider.py _DEFAULT_RETRY_MODE, data/_retry.json). Standard mode (awscli/botocore/retries/
# standard.py at both) retries 500/502/503/504, throttling codes such as S3's 503 SlowDown, and
# connection errors, after rand(0,1) x min(2^(attempt-1), 20) s. A GET whose body breaks off is retried
# by the transfer layer beneath (s3transfer manager.py TransferConfig num_download_attempts=5, the
# awscli/s3transfer both CLIs carry; tests/upstream_aws_cli.py); beyond both, sync_model.sh
# runs the whole sync again (modelSync.syncAttempts) and Kubernetes the pod (modelSync.backoffLimit).
# tests/test_sync_faults.py injects each fault through the real CLI with these settings.
RETRY_ENV = {"AWS_RETRY_MODE": "standard", "AWS_MAX_ATTEMPTS": "3"}


@dataclass(frozen=True)
class ModelSyncArgs:
    namespace: str
    model: ServedModel
    store: ObjectStore
    sync: ModelSync
    gpu_pool: GpuPool
    bucket_name: str
    sync_claim_name: str
    # The Secret holding an AWS shared-credentials file, None with a workload identity (below).
    credentials_secret: str | None
    # content_tag of that Secret (an Output while the stack's IAM access key is created): rotated
    # credentials replace the Job, which then proves them on the bucket (issue 18 case 3).
    credentials_tag: Any
    scripts_config_map: str
    sync_image: Any             # pulumi.Input[str], a mirror reference may be an Output
    verify_image: Any
    image_pull_secrets: list[str] = field(default_factory=list)
    # Revisions the stack serves from this directory (every model that shares it): never pruned.
    revisions_in_use: tuple[str, ...] = ()
    # Label keys of the models' own node pools (config_model/resources.py model_node_label_keys): CPU Jobs avoid them too.
    model_label_keys: tuple[str, ...] = ()
    # objectStore.workloadIdentity: the ServiceAccount the Job runs as; with IRSA the role it assumes,
    # with EKS Pod Identity (pod_identity) none: the association names the role.
    service_account: str | None = None
    role_arn: Any = None
    pod_identity: bool = False
    # The ConfigMap holding objectStore.caBundle (ObjectStoreCa), None without one.
    ca_config_map: str | None = None


def job_name(model: ServedModel) -> str:
    """One Job per model directory; the hash of prefix and revision makes a new revision a new Job."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.directory.lower()).strip("-")[:40].rstrip("-")
    tag = hashlib.sha256(f"{model.directory}:{model.object_prefix}@{model.revision}".encode()).hexdigest()[:8]
    return f"sync-{slug}-{tag}"


def sync_pod_spec(args: ModelSyncArgs) -> dict:
    m, store, sync = args.model, args.store, args.sync
    dest = f"{SYNC_MOUNT}/{revision_path(m.directory, m.revision)}"
    resources = {"requests": {"cpu": str(sync.cpu_request), "memory": f"{sync.memory_request_gib}Gi"},
                 "limits": {"cpu": str(sync.cpu_request), "memory": f"{sync.memory_request_gib}Gi"}}
    mounts = [{"name": "model", "mountPath": SYNC_MOUNT},
              {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
              {"name": "work", "mountPath": WORK_DIR},
              {"name": "tmp", "mountPath": "/tmp"}]
    env = {
        "BUCKET": args.bucket_name, "PREFIX": m.object_prefix, "DEST": dest, "MARKER": READY_MARKER, "DIGEST_CACHE": DIGEST_CACHE,
        "STATUS_DIR": STATUS_DIR,
        "ADDRESSING_STYLE": store.addressing_style,
        "MAX_CONCURRENT_REQUESTS": str(sync.max_concurrent_requests),
        "SYNC_ATTEMPTS": str(sync.sync_attempts),
        "AWS_DEFAULT_REGION": store.region,
        # No instance metadata lookups: credentials come only from the Secret or the role (field report 3.2).
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": f"{WORK_DIR}/aws-config",
        "HOME": WORK_DIR,
        **RETRY_ENV,
    }
    credentials_mounts, credentials_volumes = credentials(args, env)
    if store.endpoint:
        env["ENDPOINT_URL"] = store.endpoint.rstrip("/")
    ca_mounts, ca_volumes = [], []
    if args.ca_config_map is not None:
        env["AWS_CA_BUNDLE"] = f"{CA_DIR}/{CA_KEY}"
        ca_mounts = [{"name": "object-store-ca", "mountPath": CA_DIR, "readOnly": True}]
        ca_volumes = [{"name": "object-store-ca", "configMap": {"name": args.ca_config_map, "defaultMode": 0o444,
                                                                 "items": [{"key": CA_KEY, "path": CA_KEY}]}}]
    download = {
        "name": "download",
        "image": args.sync_image,
        "command": ["/bin/sh", f"{SCRIPTS_MOUNT}/sync_model.sh"],
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "resources": resources,
        "securityContext": container_security(non_root=True),
        "volumeMounts": mounts + credentials_mounts + ca_mounts,
    }
    verify = {
        "name": "verify",
        "image": args.verify_image,
        "command": ["python3", f"{SCRIPTS_MOUNT}/verify_model.py"],
        # Hashes each file as it lands, on as many threads as the container has cores (its CPU limit).
        "args": ["--model-dir", dest, "--revision", m.revision, *expected_shards_args(m.expected_shard_count),
                 "--marker", READY_MARKER, "--workers", str(max(1, sync.cpu_request)),
                 "--digest-cache", DIGEST_CACHE, "--download-status", STATUS_DIR,
                 "--keep-revisions", str(m.keep_revisions),
                 *[x for r in sorted(set(args.revisions_in_use) | {m.revision}) for x in ("--in-use", r)],
                 *pinned_manifest_args(m.manifest_sha256)],
        "resources": resources,
        "securityContext": container_security(non_root=True),
        "volumeMounts": mounts,
    }
    # Files land on the model volume owned by our job UID: the directory must be writable by it.
    # Download and verify run side by side, so hashing keeps pace with the download; the pod
    # succeeds only if both exit 0, and the verifier writes the marker only after the download did.
    pod = cpu_job_pod(args.gpu_pool, [download, verify], [
        {"name": "model", "persistentVolumeClaim": {"claimName": args.sync_claim_name}},
        {"name": "scripts", "configMap": {"name": args.scripts_config_map, "defaultMode": 0o555}},
        {"name": "work", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        *credentials_volumes,
        *ca_volumes,
    ], image_pull_secrets=args.image_pull_secrets, model_label_keys=args.model_label_keys)
    if args.service_account:
        # Its token is the projected volume above (IRSA) or the Pod Identity webhook's; the API token
        # stays unmounted (cpu_job_pod).
        pod["serviceAccountName"] = args.service_account
    if sync.node_selector:
        pod["nodeSelector"] = dict(sorted(sync.node_selector.items()))
    return pod


def credentials(args: ModelSyncArgs, env: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    """(download container mounts, pod volumes) of the Job's AWS credentials, their variables added to env.

    A key is a shared-credentials file from the Secret, never environment variables of the pod. With
    IRSA the download container gets what the EKS pod identity webhook would inject (handler.go
    addEnvToContainer, getPodSpecPatch: volume aws-iam-token, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,
    AWS_STS_REGIONAL_ENDPOINTS and a region), so the webhook, where it runs, leaves it as it is; the
    AWS CLI reads the two variables in its chain before any file (aws/aws-cli v2 awscli/botocore/
    credentials.py AssumeRoleWithWebIdentityProvider, tests/upstream_aws_cli.py CREDENTIAL_CHAIN).
    With EKS Pod Identity nothing: EKS injects AWS_CONTAINER_CREDENTIALS_FULL_URI (the node's Pod
    Identity Agent, http://169.254.170.23/v1/credentials) and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE with
    its own token volume into the pods of an associated ServiceAccount (EKS User Guide, "Understand how
    EKS Pod Identity works"), which the CLI's container provider reads (tests/upstream_aws_cli.py
    CONTAINER_PROVIDER); nothing the Job sets comes before it in the chain."""
    if args.service_account is None:
        assert args.credentials_secret is not None
        env["AWS_SHARED_CREDENTIALS_FILE"] = f"{CREDENTIALS_DIR}/credentials"
        return ([{"name": "credentials", "mountPath": CREDENTIALS_DIR, "readOnly": True}],
                [{"name": "credentials", "secret": {"secretName": args.credentials_secret, "defaultMode": 0o440,
                                                    "items": [{"key": "credentials", "path": "credentials"}]}}])
    if args.pod_identity:
        return [], []
    env.update(AWS_ROLE_ARN=args.role_arn, AWS_WEB_IDENTITY_TOKEN_FILE=f"{IRSA_TOKEN_DIR}/{IRSA_TOKEN}",
               AWS_STS_REGIONAL_ENDPOINTS="regional")
    return ([{"name": IRSA_VOLUME, "mountPath": IRSA_TOKEN_DIR, "readOnly": True}],
            [{"name": IRSA_VOLUME, "projected": {"defaultMode": 0o440, "sources": [{"serviceAccountToken": {
                "audience": IRSA_AUDIENCE, "expirationSeconds": IRSA_TOKEN_SECONDS, "path": IRSA_TOKEN}}]}}])


def pod_annotations(args: ModelSyncArgs) -> dict[str, Any]:
    # A new CA bundle replaces the Job, which then proves it on the bucket, as rotated credentials do.
    ca = {ANN_CA_BUNDLE: ca_digest(args.store.ca_bundle)} if args.store.ca_bundle is not None else {}
    if args.credentials_secret is not None:
        return {secret_tag_annotation(args.credentials_secret): args.credentials_tag, **ca}
    # The IRSA webhook's opt-out. EKS documents none for Pod Identity, whose variables then reach the
    # verifier too, which never calls AWS (the role only reads the model prefixes anyway).
    return ca if args.pod_identity else {IRSA_SKIP_CONTAINERS: "verify", **ca}


def ca_digest(pem: str) -> str:
    return "sha256:" + hashlib.sha256(pem.encode()).hexdigest()


class ObjectStoreCa(Component):
    """The ConfigMap of objectStore.caBundle, which every sync Job's download container mounts."""

    config_map_name: str

    def __init__(self, name: str, namespace: str, pem: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:jobs:ObjectStoreCa", name, opts)
        self.config_map_name = CA_CONFIG_MAP
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-configmap", metadata=metadata(CA_CONFIG_MAP, namespace, "object-store-ca"),
            data={CA_KEY: pem}, opts=self.child_opts())
        self.register_outputs({"configMapName": self.config_map_name})


class ModelSyncJob(Component):
    job_name: str

    def __init__(self, name: str, args: ModelSyncArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:jobs:ModelSync", name, opts)
        self.job_name = job_name(args.model)
        pod_labels = {**labels(self.job_name, "model-sync"), "llm-serving.io/model-revision": args.model.revision}
        timeout = f"{args.sync.active_deadline_seconds + AWAIT_MARGIN_SECONDS}s"
        meta = job_metadata(self.job_name, args.namespace, "model-sync")
        annotations = {"annotations": a} if (a := pod_annotations(args)) else {}
        # What it syncs, for plan.md's time to first token (sync at 437 MiB/s, field report 3.2).
        meta["annotations"][ANN_MODEL_SIZE] = format(args.model.size_gib, "g")
        # And whose cold start it measures (policy/profiles/).
        meta["annotations"][ANN_MODEL_PROFILE] = args.model.profile
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=meta,
            spec={
                "backoffLimit": args.sync.backoff_limit,
                "activeDeadlineSeconds": args.sync.active_deadline_seconds,
                "template": {"metadata": {"labels": pod_labels, **annotations},
                             "spec": sync_pod_spec(args)},
            },
            # A Job's template is immutable: any change replaces it, and its fixed name means the old
            # one must go first.
            opts=self.child_opts(delete_before_replace=True,
                            custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)),
        )
        self.register_outputs({"jobName": self.job_name})
