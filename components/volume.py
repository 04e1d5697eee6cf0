"""The model volume: a read-only claim for serving pods and a writable one for the sync Job only.

CephFS (field report 3.3) and NFS are static PersistentVolumes on the same directory: the serving
PV is ReadOnlyMany with the driver's readOnly flag set, the sync PV is ReadWriteMany. Both are
Retain, so deleting them never touches the data. An existing claim is used as is.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels, metadata
from config_model import ModelVolume, derived
from config_model.derived import SERVING_CLAIM, SYNC_CLAIM


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
            self.serving_claim_name, self.sync_claim_name = SERVING_CLAIM, SYNC_CLAIM
            self._pair(name, "ro", SERVING_CLAIM, "ReadOnlyMany", read_only=True, args=args)
            self._pair(name, "rw", SYNC_CLAIM, "ReadWriteMany", read_only=False, args=args)
        self.register_outputs({"servingClaimName": self.serving_claim_name, "syncClaimName": self.sync_claim_name})

    def _pair(self, name: str, suffix: str, claim: str, mode: str, read_only: bool, args: ModelVolumeArgs) -> None:
        ns, vol = args.namespace, args.volume
        pv_name = derived.volume_name(ns, claim)  # PVs are cluster-scoped: the namespace keeps stacks apart.
        size = f"{vol.capacity_gib}Gi"
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv-{suffix}",
            metadata={"name": pv_name, "labels": labels(pv_name, "model-volume")},
            spec={
                "accessModes": [mode],
                "capacity": {"storage": size},
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
                  "volumeMode": "Filesystem", "resources": {"requests": {"storage": size}}},
            opts=self.child_opts(depends_on=[pv]),
        )
