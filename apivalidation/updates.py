"""What the Kubernetes API server refuses on an UPDATE of an object that exists: the fields its update
validation keeps immutable and the admission plugin that refuses a claim's resize. apiserver.py holds
the create-time rules; these are the update-time ones the offline update planner (render/changes.py)
needs for the steps pulumi-kubernetes sends as an in-place update (everything its replace lists do
not cover, render/update_rules.py).

Upstream: kubernetes/kubernetes v1.37.2 (the Go module in the module cache):
  V  = pkg/apis/core/validation/validation.go
  AV = pkg/apis/apps/validation/validation.go
  BV = pkg/apis/batch/validation/validation.go
  RZ = plugin/pkg/admission/storage/persistentvolume/resize/admission.go

Each rule returns (field, server's message). The live object's status is not known offline: a claim
of a static PV (spec.volumeName set) is taken as Bound, which is what its PV's claimRef makes it.
"""

from __future__ import annotations

from typing import Any

from apivalidation.apiserver import parse_quantity

# V ValidatePersistentVolumeUpdate: "PersistentVolumeSource should be immutable after creation" (the
# inline volume source fields of core/v1 PersistentVolumeSpec).
PV_SOURCES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
              "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
              "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume")


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _immutable(old: dict, new: dict, *path: str) -> list[tuple[str, str]]:
    """V ValidateImmutableField: `field is immutable`."""
    if _get(old, *path) != _get(new, *path):
        return [(".".join(path), "field is immutable")]
    return []


def _persistent_volume(old: dict, new: dict) -> list[tuple[str, str]]:
    """V ValidatePersistentVolumeUpdate (nodeAffinity: MutablePVNodeAffinity is alpha, off, in 1.37)."""
    found = []
    old_src = {k: v for k, v in (old.get("spec") or {}).items() if k in PV_SOURCES}
    new_src = {k: v for k, v in (new.get("spec") or {}).items() if k in PV_SOURCES}
    if old_src != new_src:
        found.append(("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"))
    found += _immutable(old, new, "spec", "volumeMode")
    if _get(old, "spec", "nodeAffinity") is not None:
        found += _immutable(old, new, "spec", "nodeAffinity")
    return found


def _storage(claim: dict) -> Any:
    return parse_quantity(_get(claim, "spec", "resources", "requests", "storage") or 0)


def _claim(old: dict, new: dict, classes: dict[str, dict]) -> list[tuple[str, str]]:
    """V ValidatePersistentVolumeClaimUpdate and RZ Validate, for a Bound claim."""
    found = []
    old_spec, new_spec = dict(old.get("spec") or {}), dict(new.get("spec") or {})
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")  # volumeName may be set once
    # Bound: resources.requests.storage and volumeAttributesClassName may change.
    for spec in (old_spec, new_spec):
        spec.pop("volumeAttributesClassName", None)
        requests = dict(_get(spec, "resources", "requests") or {})
        requests.pop("storage", None)
        spec["resources"] = {**(spec.get("resources") or {}), "requests": requests}
    if old_spec != new_spec:
        found.append(("spec", "spec is immutable after creation except resources.requests and "
                              "volumeAttributesClassName for bound claims"))
    old_size, new_size = _storage(old), _storage(new)
    if old_size is not None and new_size is not None:
        if new_size < old_size:
            found.append(("spec.resources.requests.storage", "field can not be less than previous value"))
        elif new_size > old_size and not _allows_resize(old, new, classes):
            # RZ: the PersistentVolumeClaimResize admission plugin (enabled by default).
            found.append(("spec.resources.requests.storage", "only dynamically provisioned pvc can be resized and "
                                                             "the storageclass that provisions the pvc must support resize"))
    return found


def _allows_resize(old: dict, new: dict, classes: dict[str, dict]) -> bool:
    """RZ allowResize: both claims name the same non-empty class and it sets allowVolumeExpansion.
    A class this stack does not render is unknown offline: counted as refusing (the safe answer)."""
    name, old_name = _get(new, "spec", "storageClassName"), _get(old, "spec", "storageClassName")
    if not name or name != old_name:
        return False
    return bool((classes.get(name) or {}).get("allowVolumeExpansion"))


def _selector(old: dict, new: dict) -> list[tuple[str, str]]:
    """AV ValidateDeploymentUpdate / DaemonSet (apps/v1): spec.selector is immutable."""
    return _immutable(old, new, "spec", "selector")


def _statefulset(old: dict, new: dict) -> list[tuple[str, str]]:
    """AV ValidateStatefulSetUpdate."""
    return [f for path in (("spec", "selector"), ("spec", "volumeClaimTemplates"), ("spec", "serviceName"),
                           ("spec", "podManagementPolicy")) for f in _immutable(old, new, *path)]


def _job(old: dict, new: dict) -> list[tuple[str, str]]:
    """BV ValidateJobSpecUpdate: selector, completionMode, podFailurePolicy, backoffLimitPerIndex,
    managedBy, successPolicy immutable; the pod template too (validatePodTemplateUpdate allows only
    a suspended Job's scheduling directives, which our Jobs never use)."""
    found = [f for key in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy",
                           "successPolicy", "template") for f in _immutable(old, new, "spec", key)]
    return found


def _service(old: dict, new: dict) -> list[tuple[str, str]]:
    """V ValidateServiceUpdate: a set clusterIP stays (unless the Service becomes type ExternalName)."""
    before = _get(old, "spec", "clusterIP")
    if before and _get(new, "spec", "type") != "ExternalName" and _get(new, "spec", "clusterIP") != before:
        return [("spec.clusterIP", "field is immutable")]
    return []


def _immutable_data(old: dict, new: dict, keys: tuple[str, ...]) -> list[tuple[str, str]]:
    """V ValidateSecretUpdate / ValidateConfigMapUpdate: `immutable: true` freezes the data."""
    found = _immutable(old, new, "type") if old.get("kind") == "Secret" else []
    if old.get("immutable"):
        if not new.get("immutable"):
            found.append(("immutable", "field is immutable when `immutable` is set"))
        found += [(k, "field is immutable when `immutable` is set") for k in keys if old.get(k) != new.get(k)]
    return found


def check_update(old: dict, new: dict, classes: dict[str, dict] | None = None) -> list[tuple[str, str]]:
    """(field, server message) for every refusal of updating `old` to `new` in place. `classes`: the
    StorageClasses the stack renders, by name (a claim's resize needs its class's allowVolumeExpansion)."""
    kind = new.get("kind")
    if kind == "PersistentVolume":
        return _persistent_volume(old, new)
    if kind == "PersistentVolumeClaim":
        return _claim(old, new, classes or {})
    if kind in ("Deployment", "DaemonSet", "ReplicaSet"):
        return _selector(old, new)
    if kind == "StatefulSet":
        return _statefulset(old, new)
    if kind == "Job":
        return _job(old, new)
    if kind == "Service":
        return _service(old, new)
    if kind == "Secret":
        return _immutable_data(old, new, ("data", "stringData"))
    if kind == "ConfigMap":
        return _immutable_data(old, new, ("data", "binaryData"))
    return []
