"""Rules over where the weights live: the model volume, its capacity for the kept revisions, the
object store, the compile cache, and the mount paths beside the model root."""

from __future__ import annotations

import re
from typing import Iterator

from components.openwebui import NAME as OPEN_WEBUI
from components.operations import KEY_DIR, RESULTS_CLAIM, RESULTS_MOUNT
from components.pod_template import CACHE_MOUNT, SCRIPTS_MOUNT
from config_model import AWS_REGION, StackConfig, WorkloadIdentity, derived
from stacks.rules.problem import Problem

# Kubernetes removed the in-tree CephFS volume plugin in 1.31.
IN_TREE_CEPHFS_LAST_MINOR = 30


def model_volume(cfg: StackConfig) -> Iterator[Problem]:
    vol = cfg.model_volume
    section = {"cephfs": vol.cephfs, "nfs": vol.nfs, "existingClaim": vol.existing_claim}
    if section[vol.kind] is None:
        yield Problem(f"modelVolume.{vol.kind}", None, f"is required when modelVolume.kind is {vol.kind!r}")
    for other, value in section.items():
        if other != vol.kind and value is not None:
            yield Problem(f"modelVolume.{other}", "(set)", f"must be unset when modelVolume.kind is {vol.kind!r}")
    ceph = vol.cephfs
    if vol.kind == "cephfs" and ceph is not None:
        minor = int(cfg.cluster.kubernetes_version.split(".")[1])
        if ceph.driver == "in-tree":
            if minor > IN_TREE_CEPHFS_LAST_MINOR:
                yield Problem("modelVolume.cephfs.driver", ceph.driver,
                              f"Kubernetes {cfg.cluster.kubernetes_version} has no in-tree CephFS "
                              "plugin (removed in 1.31); use 'csi' (ceph-csi)")
            if not ceph.monitors:
                yield Problem("modelVolume.cephfs.monitors", ceph.monitors, "needs at least one host:port for the in-tree driver")
        else:
            for field, value in (("clusterId", ceph.cluster_id), ("fsName", ceph.fs_name)):
                if not value:
                    yield Problem(f"modelVolume.cephfs.{field}", value, "is required for the csi driver")


def model_capacity(cfg: StackConfig) -> Iterator[Problem]:
    """The volume holds, for every directory, the revisions the sync Job keeps, the one it downloads
    included: older ones go once the bucket's listing shows the new revision and before its download
    fills the volume (components/scripts/verify_model.py, prune on the download's "listed" signal)."""
    need: dict[str, tuple[int, float]] = {}
    for i, m in enumerate(cfg.models):
        if m.size_gib is not None:   # unset for a profile without one: stacks/rules/models.py says so
            need.setdefault(m.directory, (i, m.size_gib * m.keep_revisions))
    total = sum(gib for _, gib in need.values())
    if need and cfg.model_volume.capacity_gib < total:
        parts = ", ".join(f"{d!r}: models[{i}].keepRevisions {cfg.models[i].keep_revisions} x "
                          f"{cfg.models[i].size_gib:g} GiB" for d, (i, _) in sorted(need.items()))
        yield Problem("modelVolume.capacityGiB", cfg.model_volume.capacity_gib,
                      f"must be at least {total:.1f} GiB to hold every directory's kept revisions, the one being "
                      f"synced included ({parts}); raise it or lower keepRevisions")


def object_store(cfg: StackConfig) -> Iterator[Problem]:
    store = cfg.object_store
    keys = "set llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey with --secret"
    if not store.on_aws:
        if store.create_credentials:
            yield Problem("objectStore.createCredentials", True, f"must be false with the non-AWS endpoint "
                          f"{store.endpoint}: it has no IAM to create a user in; {keys}")
        if store.create:
            yield Problem("objectStore.create", True, f"must be false with the non-AWS endpoint {store.endpoint}: "
                          "adopt the existing bucket by name")
        if store.workload_identity is not None:
            yield Problem("objectStore.workloadIdentity", "(set)", f"needs AWS S3, not the non-AWS endpoint "
                          f"{store.endpoint}: that store does not take AWS IAM roles; unset it and {keys}")
        # S3-compatible stores name their regions their own way (Tencent COS ap-shanghai, a Ceph RGW
        # zonegroup such as default, MinIO any text): nothing of AWS's naming is checked for them.
        return
    if store.ca_bundle is not None:
        # The bundle replaces the CLI's trust store for every call (botocore ca_bundle): AWS's hosts
        # would then fail verification, and they chain to public CAs the image trusts anyway.
        yield Problem("objectStore.caBundle", "(set)", "is for an S3-compatible store behind a private CA (objectStore."
                      "endpoint off AWS); AWS S3's certificates chain to public CAs the sync image already trusts")
    if not re.fullmatch(AWS_REGION, store.region):
        yield Problem("objectStore.region", store.region, "must be an AWS region name such as us-east-1 or eu-west-1 "
                      "(<area>-<direction>-<number>, e.g. cn-north-1, us-gov-west-1), as the bucket is on AWS S3"
                      + (" (its endpoint is on AWS)" if store.endpoint else ""))
    elif store.endpoint_region not in (None, store.region):
        yield Problem("objectStore.region", store.region, f"must be {store.endpoint_region!r}, the region of the AWS "
                      f"endpoint {store.endpoint}: requests are signed for objectStore.region")
    if store.workload_identity is not None:
        yield from workload_identity(store.workload_identity)
    if store.workload_identity is not None and store.create_credentials:
        yield Problem("objectStore.createCredentials", True, "must be false with objectStore.workloadIdentity: the "
                      "sync Job assumes its role through its ServiceAccount, so no IAM user or access key is created")


def workload_identity(identity: WorkloadIdentity) -> Iterator[Problem]:
    """Each kind names what it needs: IRSA the cluster's OIDC provider, EKS Pod Identity the cluster."""
    at = "objectStore.workloadIdentity"
    if identity.kind == "irsa":
        if identity.oidc_provider_arn is None:
            yield Problem(f"{at}.oidcProviderArn", None, "is required with kind 'irsa': the role's trust policy names the "
                          "cluster's IAM OIDC provider (without one, use kind 'podIdentity' and clusterName on EKS)")
        for field, value in (("clusterName", identity.cluster_name), ("clusterRegion", identity.cluster_region)):
            if value is not None:
                yield Problem(f"{at}.{field}", value, "is for kind 'podIdentity' only: IRSA trusts the OIDC provider "
                              "of whatever cluster issued the token; unset it, or set kind: podIdentity")
        return
    if identity.cluster_name is None:
        yield Problem(f"{at}.clusterName", None, "is required with kind 'podIdentity': the Pod Identity association "
                      "that lets the sync Job's ServiceAccount assume the role is made in that EKS cluster")
    if identity.oidc_provider_arn is not None:
        yield Problem(f"{at}.oidcProviderArn", identity.oidc_provider_arn, "is for kind 'irsa' only: EKS Pod Identity "
                      "needs no OIDC provider; unset it, or set kind: irsa")


def compile_cache(cfg: StackConfig) -> Iterator[Problem]:
    cache = cfg.compile_cache
    if cache.kind == "existingClaim" and not cache.claim_name:
        yield Problem("compileCache.claimName", None, "is required when compileCache.kind is 'existingClaim'")
    if cache.kind == "claim" and cache.storage_class_name is None:
        yield Problem("compileCache.storageClassName", None, "is required when compileCache.kind is 'claim': the "
                      "stack's claim is ReadWriteMany (every engine pod mounts it, on any node), which a cluster's "
                      "default class often cannot provision; name one that can (CephFS, NFS, EFS and the like)")
    if cache.kind != "claim" and cache.storage_class_name is not None:
        yield Problem("compileCache.storageClassName", cache.storage_class_name,
                      f"must be unset when compileCache.kind is {cache.kind!r}: only a claim of kind 'claim' is "
                      "created by the stack")
    taken = {RESULTS_CLAIM: "operations.loadTest's results claim", OPEN_WEBUI: "operations.openWebUI's data claim"}
    if cache.kind == "claim" and (cache.claim in taken or cache.claim.startswith(f"{derived.SERVING_CLAIM}-")):
        yield Problem("compileCache.claimName", cache.claim_name, "must differ from the claims the stack makes "
                      f"itself: {taken.get(cache.claim, 'the model volume claims model-store-<tag>')} has it")


# Where the program mounts something into a pod that also mounts the model root: the engine pods
# (shm, compile cache, scripts), the model gate (scripts) and the load-test Job (key, results,
# /tmp); and what the kubelet itself mounts into every container (kubelet makeMounts: /etc/hosts;
# the default terminationMessagePath, k8s.io/api core/v1 types.go).
PROGRAM_MOUNTS = ("/dev/shm", CACHE_MOUNT, SCRIPTS_MOUNT, KEY_DIR, RESULTS_MOUNT, "/tmp", "/etc/hosts",
                  "/dev/termination-log")


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def mounts(cfg: StackConfig) -> Iterator[Problem]:
    """The same path twice is refused by the API server ("must be unique"); one inside another puts
    a mount point inside a read-only volume (the runtime cannot create it) or hides the other."""
    path = cfg.model_volume.mount_path
    for mount in PROGRAM_MOUNTS:
        if _overlaps(path, mount):
            yield Problem("modelVolume.mountPath", path, f"must not be, contain or lie inside {mount}, which the "
                          f"program mounts beside the model root (in use: {', '.join(PROGRAM_MOUNTS)})")
