"""What the Kubernetes API server refuses on an UPDATE of an object that exists: the fields its update
validation keeps immutable and the admission plugin that refuses a claim's resize, beyond the object's
own validation (apiserver.check_object). The offline update planner (render/changes.py) asks
check_update for every step pulumi-kubernetes sends as an in-place update; the storage pairs ask
pv_update / pvc_update, which also take a claim's status.

Ported from k8s.io/kubernetes v1.37.2 (the Go module in the module cache):
  V  = pkg/apis/core/validation/validation.go (ValidatePersistentVolumeUpdate,
       ValidatePersistentVolumeClaimUpdate with ValidationOptionsForPersistentVolumeClaim: the
       RecoverVolumeExpansionFailure gate is GA and locked on since 1.34, pkg/features/kube_features.go;
       ValidateServiceUpdate, ValidateSecretUpdate, ValidateConfigMapUpdate)
  AV = pkg/apis/apps/validation/validation.go
  BV = pkg/apis/batch/validation/validation.go
  A  = plugin/pkg/admission/storage/persistentvolume/resize/admission.go (PersistentVolumeClaimResize,
       on by default), which sees only an increase of spec.resources.requests.storage.
ValidateObjectMetaUpdate is not ported (a new name or namespace is a replacement, never an update).
What the PV and claim rules read that the objects here never carry (the beta storage-class annotation,
a PV's nodeAffinity or volumeAttributesClassName, a claim's volumeAttributesClassName) is not ported:
`NotPorted` is raised rather than an answer the server might not give.
"""


from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from apivalidation.apiserver import parse_quantity

BETA_CLASS = "volume.beta.kubernetes.io/storage-class"  # core.BetaStorageClassAnnotation
# PersistentVolumeSpec's own fields; every other key of spec is the inline PersistentVolumeSource
# (k8s.io/api v0.37.2 core/v1/types.go PersistentVolumeSpec).
PV_SPEC_FIELDS = {"capacity", "accessModes", "claimRef", "persistentVolumeReclaimPolicy", "storageClassName",
                  "mountOptions", "volumeMode", "nodeAffinity", "volumeAttributesClassName"}
V = "V core ValidatePersistentVolumeClaimUpdate"


class NotPorted(ValueError):
    """The objects use a field whose update rule is not ported here."""


def _storage(spec: dict) -> Decimal:
    value = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    q = parse_quantity(value) if value is not None else Decimal(0)
    if q is None:
        raise ValueError(f"not a quantity: {value!r}")
    return q


def _no_false(value):
    """A Go bool that is false and one left out are the same field (readOnly of every source here)."""
    if isinstance(value, dict):
        return {k: _no_false(v) for k, v in value.items() if v is not False}
    if isinstance(value, list):
        return [_no_false(v) for v in value]
    return value


def _defaulted(spec: dict, pv: bool) -> dict:
    """pkg/apis/core/v1/defaults.go: SetDefaults_PersistentVolume (reclaim policy Retain, volumeMode
    Filesystem) and SetDefaults_PersistentVolumeClaimSpec (volumeMode Filesystem) run on every write."""
    out = _no_false(copy.deepcopy(spec))
    out.setdefault("volumeMode", "Filesystem")
    if pv:
        out.setdefault("persistentVolumeReclaimPolicy", "Retain")
    return out


def _semantic(spec: dict) -> dict:
    """apiequality.Semantic compares resource.Quantity by value: 1Gi equals 1024Mi."""
    out = _defaulted(spec, pv=False)
    for part in ("requests", "limits"):
        values = (out.get("resources") or {}).get(part)
        if values:
            out["resources"][part] = {k: parse_quantity(v) for k, v in values.items()}
    return out


def _claim_class(pvc: dict) -> str:
    """apihelper.GetPersistentVolumeClaimClass, the annotation left out (NotPorted)."""
    return (pvc.get("spec") or {}).get("storageClassName") or ""


def pvc_update(old: dict, new: dict, phase: str, status_capacity: str | None,
               expandable_classes: frozenset[str] = frozenset()) -> list[tuple[str, object, str]]:
    """Problems of updating claim `old` (its status: `phase`, `status_capacity`) to `new`.
    `expandable_classes`: the StorageClasses with allowVolumeExpansion true."""
    for obj in (old, new):
        if BETA_CLASS in ((obj.get("metadata") or {}).get("annotations") or {}):
            raise NotPorted(f"the {BETA_CLASS} annotation")
        if "volumeAttributesClassName" in (obj.get("spec") or {}):
            raise NotPorted("spec.volumeAttributesClassName")
    found: list[tuple[str, object, str]] = []
    old_spec, new_spec = _defaulted(old.get("spec") or {}, pv=False), _defaulted(new.get("spec") or {}, pv=False)
    old_clone, new_clone = _semantic(old_spec), _semantic(new_spec)
    if not old_spec.get("volumeName"):
        # volumeName changes are allowed once (the PV controller binds).
        if "volumeName" in new_clone:
            old_clone["volumeName"] = new_clone["volumeName"]
        else:
            old_clone.pop("volumeName", None)
    # validateStorageClassUpgradeFromNil: a class may be set where none was (no annotation here).
    if "storageClassName" not in old_spec and new_spec.get("storageClassName") is not None:
        old_clone["storageClassName"] = new_clone["storageClassName"]
    old_size, new_size = _storage(old_spec), _storage(new_spec)
    if phase == "Bound" and ((new_clone.get("resources") or {}).get("requests")) is not None:
        # "lets make sure storage values are same": only a bound claim's request may change.
        # (a request without storage gets the zero Quantity inserted, as the Go map read does)
        new_clone["resources"]["requests"]["storage"] = old_size
    if old_clone != new_clone:
        found.append(("spec", new_spec, f"{V}: spec is immutable after creation except resources.requests and "
                      "volumeAttributesClassName for bound claims"))
    if new_size < old_size:
        status = parse_quantity(status_capacity) if status_capacity is not None else Decimal(0)
        if new_size <= status:
            found.append(("spec.resources.requests.storage", new_spec["resources"]["requests"]["storage"],
                          f"{V}: field can not be less than status.capacity"))
    if old_spec.get("volumeMode") != new_spec.get("volumeMode"):
        found.append(("volumeMode", new_spec.get("volumeMode"), f"{V}: field is immutable"))
    # Admission runs after validation passes; both refuse the request, the first answer is the user's.
    if new_size > old_size:
        rule = "A PersistentVolumeClaimResize"
        if phase != "Bound":
            found.append(("spec.resources.requests.storage", new_spec["resources"]["requests"]["storage"],
                          f"{rule}: Only bound persistent volume claims can be expanded"))
        else:
            cls, old_cls = _claim_class(new), _claim_class(old)
            if not cls or not old_cls or cls != old_cls or cls not in expandable_classes:
                found.append(("spec.resources.requests.storage", new_spec["resources"]["requests"]["storage"],
                              f"{rule}: only dynamically provisioned pvc can be resized and the storageclass that "
                              "provisions the pvc must support resize"))
    return found


def _source(spec: dict) -> dict:
    return {k: v for k, v in spec.items() if k not in PV_SPEC_FIELDS}


def pv_update(old: dict, new: dict) -> list[tuple[str, object, str]]:
    """Problems of updating PersistentVolume `old` to `new` (ValidatePersistentVolumeUpdate)."""
    old_spec, new_spec = _defaulted(old.get("spec") or {}, pv=True), _defaulted(new.get("spec") or {}, pv=True)
    for spec in (old_spec, new_spec):
        for f in ("nodeAffinity", "volumeAttributesClassName"):
            if f in spec:
                raise NotPorted(f"spec.{f}")
    old_src, new_src = _source(old_spec), copy.deepcopy(_source(new_spec))
    # A CSI controllerExpandSecretRef may be added to a PV that had none.
    if "csi" in old_src and "csi" in new_src and "controllerExpandSecretRef" not in old_src["csi"]:
        new_src["csi"].pop("controllerExpandSecretRef", None)
    found: list[tuple[str, object, str]] = []
    if old_src != new_src:
        found.append(("spec.persistentvolumesource", new_src, "V core ValidatePersistentVolumeUpdate: "
                      "spec.persistentvolumesource is immutable after creation"))
    if old_spec.get("volumeMode") != new_spec.get("volumeMode"):
        found.append(("volumeMode", new_spec.get("volumeMode"), "V core ValidatePersistentVolumeUpdate: field is immutable"))
    return found




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
        return [(f, rule.split(": ", 1)[-1]) for f, _, rule in pv_update(old, new)]
    if kind == "PersistentVolumeClaim":
        # The live status is not known offline: a claim of a deployed stack is taken as Bound with the
        # capacity it asked for (a static PV's claimRef binds it at once).
        expandable = frozenset(n for n, c in (classes or {}).items() if c.get("allowVolumeExpansion"))
        requested = (((old.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        return [(f, rule.split(": ", 1)[-1]) for f, _, rule in pvc_update(old, new, "Bound", requested, expandable)]
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
