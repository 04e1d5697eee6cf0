"""The model volume: a read-only claim for serving pods and a writable one for the sync Job only.

CephFS (field report 3.3) and NFS are static PersistentVolumes on the same directory: the serving
PV is ReadOnlyMany with the driver's readOnly flag set, the sync PV is ReadWriteMany. Both are
Retain, so deleting them never touches the data. An existing claim is used as is.

Day 2 (docs/day-2/storage.md): the PV and claim names carry a tag of the volume source, so a new
source is a new PV and claim, created before the old pair goes; the claims never change size, so
`modelVolume.capacityGiB` updates only the PVs, in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels, metadata
from components.retention import kept, kept_annotations
from config_model import CompileCache, ModelVolume, derived
from config_model.derived import SERVING_CLAIM, SYNC_CLAIM

# What the claims request, whatever modelVolume.capacityGiB says. A claim's request can only grow, and
# only through a storage class that allows expansion (k8s.io/kubernetes v1.37.2
# plugin/pkg/admission/storage/persistentvolume/resize/admission.go refuses any increase of a claim of
# class ""), and never shrink below status.capacity (pkg/apis/core/validation/validation.go
# ValidatePersistentVolumeClaimUpdate): a claim sized from the config could never follow it. The
# request is not what the pair binds on: a PV pre-bound by claimRef binds to its claim without the
# size check (pkg/controller/volume/persistentvolume/pv_controller.go syncUnboundClaim,
# IsVolumeBoundToClaim), and the claim's status.capacity is the PV's at binding. So a constant, below
# any capacity, and never more than status.capacity (a request above it reads as a pending
# expansion: pkg/controller/volume/expand/expand_controller.go syncHandler).
CLAIM_REQUEST = "1Gi"


@dataclass(frozen=True)
class ModelVolumeArgs:
    volume: ModelVolume
    namespace: str
    ceph_secret_name: str | None


def volume_source(vol: ModelVolume, namespace: str, ceph_secret: str | None, read_only: bool, handle: str) -> dict:
    """The PV's volume source (camelCase) for the configured backend."""
    if vol.kind == "nfs":
        assert vol.nfs is not None
        return {"nfs": {"server": vol.nfs.server, "path": vol.nfs.path, "readOnly": read_only}}
    ceph = vol.cephfs
    assert ceph is not None and ceph_secret is not None
    if ceph.driver == "in-tree":
        return {"cephfs": {"monitors": list(ceph.monitors), "path": ceph.path, "user": ceph.user,
                           "secretRef": {"name": ceph_secret, "namespace": namespace}, "readOnly": read_only}}
    return {"csi": {
        "driver": "cephfs.csi.ceph.com",
        "volumeHandle": handle,
        "readOnly": read_only,
        "nodeStageSecretRef": {"name": ceph_secret, "namespace": namespace},
        "volumeAttributes": {"clusterID": ceph.cluster_id, "fsName": ceph.fs_name,
                             "staticVolume": "true", "rootPath": ceph.path},
    }}


def shared_source(vol: ModelVolume, namespace: str, ceph_secret: str | None) -> dict:
    """The source both PVs share: all of it but readOnly (fixed per PV: the serving PV's is set) and
    the CSI volumeHandle (each PV's own name). Its tag names both PVs and claims."""
    return volume_source(vol, namespace, ceph_secret, read_only=False, handle="")


class ModelVolumeClaims(Component):
    serving_claim_name: str
    sync_claim_name: str

    def __init__(self, name: str, args: ModelVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:volume:ModelVolume", name, opts)
        vol = args.volume
        if vol.kind == "existingClaim":
            assert vol.existing_claim is not None
            self.serving_claim_name = self.sync_claim_name = vol.existing_claim.claim_name
        else:
            tag = derived.source_tag(shared_source(vol, args.namespace, args.ceph_secret_name))
            self.serving_claim_name = derived.claim_name(SERVING_CLAIM, tag)
            self.sync_claim_name = derived.claim_name(SYNC_CLAIM, tag)
            self._pair(name, "ro", self.serving_claim_name, "ReadOnlyMany", read_only=True, args=args)
            self._pair(name, "rw", self.sync_claim_name, "ReadWriteMany", read_only=False, args=args)
        self.register_outputs({"servingClaimName": self.serving_claim_name, "syncClaimName": self.sync_claim_name})

    def _pair(self, name: str, suffix: str, claim: str, mode: str, read_only: bool, args: ModelVolumeArgs) -> None:
        ns, vol = args.namespace, args.volume
        pv_name = derived.volume_name(ns, claim)  # PVs are cluster-scoped: the namespace keeps stacks apart.
        # Logical names stay: a new source is a replacement of the same resource, created first since
        # the name differs (pulumi-kubernetes v4.32.0 provider.go Diff: DeleteBeforeReplace only when the
        # name and namespace stay), its old object deleted after every create (step_generator.go).
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv-{suffix}",
            metadata={"name": pv_name, "labels": labels(pv_name, "model-volume")},
            spec={
                "accessModes": [mode],
                # No provisioner or resizer acts on a pre-bound static PV's capacity (the claim never asks for
                # more), and it is mutable: ValidatePersistentVolumeUpdate keeps the volume source and
                # volumeMode immutable, not the capacity, and diff.go does not replace a PV for it.
                "capacity": {"storage": f"{vol.capacity_gib}Gi"},
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "volumeMode": "Filesystem",
                "claimRef": {"namespace": ns, "name": claim},
                **volume_source(vol, ns, args.ceph_secret_name, read_only, handle=pv_name),
            },
            opts=self.child_opts(),
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc-{suffix}",
            metadata=metadata(claim, ns, "model-volume"),
            spec={"accessModes": [mode], "storageClassName": "", "volumeName": pv_name,
                  "volumeMode": "Filesystem", "resources": {"requests": {"storage": CLAIM_REQUEST}}},
            opts=self.child_opts(depends_on=[pv]),
        )


class CompileCacheClaim(Component):
    """The compile cache's claim when the stack makes it (compileCache.kind claim). ReadWriteMany: every
    engine pod of the stack mounts it, on whatever node, each engine container writable at its own keyed
    directory (components/pod_template.py compile_cache_key: a cache of another image, CUDA, driver,
    architecture or argv is never reused), and nothing else mounts it. Kept outside dev as the bench
    results are (components/retention.py): the JIT and graph capture it holds are most of a cold start
    (field report 12.2), so neither switching it off nor `pulumi destroy` deletes it, and switching it on
    again adopts it. In dev it goes with the stack."""

    def __init__(self, name: str, namespace: str, cache: CompileCache, retained: k8s.Provider | None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:volume:CompileCache", name, opts)
        assert cache.kind == "claim" and cache.claim is not None and cache.storage_class_name is not None
        self.claim_name = cache.claim
        # Unbound until the first engine pod mounts it where the class binds on first consumer (as
        # most do), and the engine pods come after it: Pulumi must not wait for Bound.
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-claim",
            metadata={**metadata(self.claim_name, namespace, "compile-cache"),
                      "annotations": {"pulumi.com/skipAwait": "true", **kept_annotations(retained)}},
            spec={"accessModes": ["ReadWriteMany"], "storageClassName": cache.storage_class_name,
                  "volumeMode": "Filesystem", "resources": {"requests": {"storage": f"{cache.size_gib}Gi"}}},
            opts=self.child_opts(**kept(retained)))
        self.register_outputs({"claimName": self.claim_name})
