"""The rules `pulumi up` applies to a resource that changed, ported from the two programs that decide:

- The provider's diff, pulumi/pulumi-kubernetes tag v4.32.0 (the newest tag in the mirror; the SDK pin is
  pulumi_kubernetes 4.34.2): provider/pkg/provider/diff.go (forceNew, forceNewProperties) and
  provider/pkg/provider/provider.go (Diff, convertPatchToDiff/addPatchValueToDiff, DiffConfig),
  provider/pkg/openapi/match.go (PatchPropertiesChanged), provider/pkg/metadata/naming.go.
- The engine, pulumi/pulumi tag v3.259.0 (the newest tag in the mirror; requirements.txt pins the SDK
  3.272.0): pkg/resource/deploy/step_generator.go (getOldResource, generateAliases, collapseAliasToUrn,
  continueStepsFromDiff, applyReplaceOnChanges, providerChanged, GenerateDeletes),
  pkg/resource/deploy/step.go (DeleteStep.Apply), sdk/go/common/resource/alias.go (CreateURN),
  sdk/go/common/resource/properties_path.go (PropertyPath.Contains).

Pure functions over two resources.json records (old and new); render/changes.py orders the steps.
The provider diffs the old object's live state pruned to its old inputs; offline the old inputs stand
for it (fields the server defaults inside them are not seen).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# The releases read, machine-readable: tests/test_upstream_releases.py compares each with the release the
# stacks run (the `component`) and names these files when they differ. The engine was read at v3.259.0 (the
# mirror's newest tag); the CLI the project runs (e2e/tools/pulumi/go.mod) was compared with it function by
# function in its module source (`go env GOMODCACHE`/github.com/pulumi/pulumi/pkg/v3@v3.276.0 and sdk/v3).
PULUMI_ENGINE = {
    "repo": "pulumi/pulumi", "release": "v3.259.0", "component": "pulumi",
    "files": ("pkg/resource/deploy/step_generator.go", "pkg/resource/deploy/step.go",
              "sdk/go/common/resource/alias.go", "sdk/go/common/resource/properties_path.go"),
    "covers": {"from": "v3.259.0", "to": "v3.276.0", "why": (
        "at v3.276.0 generateAliases, collapseAliasToUrn, inheritedChildAlias, applyReplaceOnChanges, "
        "generateStepsFromDiff, ScheduleDeletes, alias.go and properties_path.go are unchanged; getOldResource, "
        "continueStepsFromDiff, GenerateDeletes, diff and DeleteStep.Apply change only for states pending "
        "replacement after an interrupted update, state-migration URN rewrites (none without a migration), "
        "deletedWith (which the program never sets) and the plugin request types")},
}
PULUMI_KUBERNETES_PROVIDER = {
    "repo": "pulumi/pulumi-kubernetes", "release": "v4.32.0", "component": "pulumi-kubernetes",
    "files": ("provider/pkg/provider/diff.go", "provider/pkg/provider/provider.go", "provider/pkg/openapi/match.go",
              "provider/pkg/metadata/naming.go"),
    "not_read": {"4.34.2": "the newest tag in the mirror is v4.32.0: the SDK pin's release could not be read here"},
}
PORTED_FROM = (PULUMI_KUBERNETES_PROVIDER, PULUMI_ENGINE)

# ---- provider: diff.go forceNew (v4.32.0) ----
# Every property is a JSONPath; a changed leaf whose path (with its new value) matches one of them
# turns the change into a replacement (provider.go addPatchValueToDiff + openapi/match.go).
_SELECTOR = [".spec.selector.matchExpressions", ".spec.selector.matchExpressions.key",
             ".spec.selector.matchExpressions.operator", ".spec.selector.matchExpressions.values",
             ".spec.selector.matchLabels"]  # labelSelectorForceNewProperties(".spec.selector")
_CONTAINER_FIELDS = ("args", "command", "env", "env.value", "image", "imagePullPolicy", "lifecycle", "livenessProbe",
                     "ports", "readinessProbe", "resources", "securityContext", "stdin", "stdinOnce",
                     "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts",
                     "workingDir")
_POD = ([f".spec.{f}" for f in ("affinity", "automountServiceAccountToken", "dnsConfig", "dnsPolicy",
                                  "enableServiceLinks", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostname",
                                  "imagePullSecrets", "nodeName", "nodeSelector", "overhead", "preemptionPolicy",
                                  "priority", "priorityClassName", "readinessGates", "restartPolicy",
                                  "runtimeClassName", "schedulerName", "securityContext", "serviceAccount",
                                  "serviceAccountName", "shareProcessNamespace", "subdomain",
                                  "terminationGracePeriodSeconds", "volumes")]
        + [f"{p}.{f}" for p in (".spec.containers[*]", ".spec.initContainers[*]") for f in _CONTAINER_FIELDS])
_PV = [f".spec.{s}" for s in ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc",
                               "flexVolume", "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local",
                               "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO",
                               "storageos", "vsphereVolume")]
_CORE = {"PersistentVolume": _PV,
         "PersistentVolumeClaim": [".spec.accessModes", ".spec.selector", ".spec.storageClassName", ".spec.volumeName",
                                   *_SELECTOR],
         "Pod": _POD, "ResourceQuota": [".spec.scopes"], "Secret": [".type"], "Service": [".spec.clusterIP"]}
_APPS = {"DaemonSet": [".spec.selector", *_SELECTOR], "Deployment": [".spec.selector", *_SELECTOR],
         "StatefulSet": [".spec.podManagementPolicy", ".spec.revisionHistoryLimit", ".spec.selector",
                         ".spec.serviceName", ".spec.volumeClaimTemplates", *_SELECTOR]}
_JOB = [".spec.completions", ".spec.parallelism", ".spec.selector", ".spec.template", *_SELECTOR]
_ROLE_BINDING = [".roleRef"]
FORCE_NEW: dict[str, dict[str, dict[str, list[str]]]] = {
    "apps": {"v1beta1": {"StatefulSet": _APPS["StatefulSet"]}, "v1beta2": _APPS, "v1": _APPS},
    "core": {"v1": _CORE}, "": {"v1": _CORE},
    # Only policy/v1beta1: a policy/v1 PodDisruptionBudget has no entry, so it updates in place.
    "policy": {"v1beta1": {"PodDisruptionBudget": [".spec"]}},
    "rbac.authorization.k8s.io": {v: {"ClusterRoleBinding": _ROLE_BINDING, "RoleBinding": _ROLE_BINDING}
                                  for v in ("v1alpha1", "v1beta1", "v1")},
    "storage.k8s.io": {"v1": {"StorageClass": [".parameters", ".provisioner"]}},
    "batch": {v: {"Job": _JOB} for v in ("v1beta1", "v1", "v2alpha1")},
}
METADATA_FORCE_NEW = [".metadata.name", ".metadata.namespace"]  # metadataForceNewProperties(".metadata")

# Kinds the API server serves cluster-scoped among those a stack may render: the provider clears
# their namespace and defaults every other kind's to "default" before diffing (provider.go Diff).
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "PriorityClass", "RuntimeClass", "IngressClass", "GatewayClass",
                  "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Node"}


def group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def force_new_properties(obj: dict, provider_config: dict) -> list[str]:
    """diff.go forceNewProperties. A Secret replaces on .type, .stringData and .data unless the provider
    sets enableSecretMutable (and the Secret is not immutable); a ConfigMap on .binaryData and .data
    unless enableConfigMapMutable (provider.go Configure: both default false)."""
    group, version = group_version(str(obj.get("apiVersion", "")))
    kind = obj.get("kind")
    props = list(METADATA_FORCE_NEW)
    kinds = FORCE_NEW.get(group, {}).get(version)
    if kinds is None:
        return props  # a custom resource (StormService, RayClusterFleet, HTTPRoute, ...): identity only
    core = group in ("", "core")
    truthy = ("true", True)
    if core and kind == "Secret" and (provider_config.get("enableSecretMutable") not in truthy or obj.get("immutable")):
        return props + [".type", ".stringData", ".data"]
    if kind in kinds:
        return props + kinds[kind]
    if core and kind == "ConfigMap" and (provider_config.get("enableConfigMapMutable") not in truthy
                                         or obj.get("immutable")):
        return props + [".binaryData", ".data"]
    return props


def _jsonpath(path: str) -> list[str]:
    """`.spec.containers[*].image` -> ["spec", "containers", "*", "image"]."""
    return [p for p in re.split(r"\.|\[|\]", path) if p]


def _walk(node: Any, segs: list[str]) -> bool:
    """client-go jsonpath with AllowMissingKeys(false): does the path find a value (null included)?"""
    if not segs:
        return True
    head, rest = segs[0], segs[1:]
    if head == "*":
        return isinstance(node, list) and any(_walk(v, rest) for v in node)
    return isinstance(node, dict) and head in node and _walk(node[head], rest)


def _patch_slice(path: tuple, value: Any) -> Any:
    """provider.go makePatchSlice: the changed value nested at its path, a one-element list per index."""
    for p in reversed(path):
        value = {p: value} if isinstance(p, str) else [value]
    return value


def forces_replace(path: tuple, value: Any, force_new: list[str]) -> bool:
    return any(_walk(_patch_slice(path, value), _jsonpath(p)) for p in force_new)


ADD, DELETE, UPDATE = "add", "delete", "update"


@dataclass(frozen=True)
class Change:
    path: tuple          # keys and indices
    kind: str            # add / delete / update
    replace: bool = False

    @property
    def text(self) -> str:
        """provider.go addPatchValueToDiff's path string: a.b[0]["x.y"]."""
        out = ""
        for p in self.path:
            if isinstance(p, int):
                out += f"[{p}]"
            elif any(c in p for c in '."[]'):
                out += '["' + p.replace('"', '\\"') + '"]'
            else:
                out += f".{p}" if out else p
        return out


def _equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual or equalNumbers (an int and a float of the same value are equal)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def leaf_changes(old: Any, new: Any, path: tuple = ()) -> list[tuple[tuple, str, Any]]:
    """(path, kind, new value or None) of every changed leaf: maps key by key, lists index by index, a
    type change at its path. What convertPatchToDiff finds walking the merge patch of old to new."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            if k not in new:
                out.append((path + (k,), DELETE, None))
            elif k not in old:
                out.append((path + (k,), ADD, new[k]))
            else:
                out += leaf_changes(old[k], new[k], path + (k,))
        return out
    if isinstance(old, list) and isinstance(new, list):
        out = []
        for i in range(max(len(old), len(new))):
            if i >= len(new):
                out.append((path + (i,), DELETE, None))
            elif i >= len(old):
                out.append((path + (i,), ADD, new[i]))
            else:
                out += leaf_changes(old[i], new[i], path + (i,))
        return out
    return [] if _equal(old, new) else [(path, UPDATE, new)]


# ---- engine: property paths (sdk/go/common/resource/properties_path.go) ----
def property_path(text: str) -> tuple:
    """ParsePropertyPath: `spec.replicas`, `a[0]`, `metadata.annotations["x.y"]`, `*` / `[*]` wildcards."""
    out: list[Any] = []
    for m in re.finditer(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+|\*)\]|([^.\[\]]+)', text):
        quoted, index, name = m.groups()
        if quoted is not None:
            out.append(quoted.replace('\\"', '"'))
        elif index is not None:
            out.append("*" if index == "*" else int(index))
        else:
            out.append(name)
    return tuple(out)


def path_contains(prefix: tuple, path: tuple) -> bool:
    """PropertyPath.Contains: `prefix` names `path` or one of its parents; `*` matches any element."""
    if len(prefix) > len(path):
        return False
    return all(p == "*" or p == q for p, q in zip(prefix, path))


@dataclass
class ProviderDiff:
    changes: list[Change] = field(default_factory=list)
    delete_before_replace: bool = False
    replace_unready: bool = False

    @property
    def replaces(self) -> list[Change]:
        return [c for c in self.changes if c.replace]


def namespace_of(obj: dict) -> str:
    """The namespace the provider compares (provider.go Diff: canonicalNamespace for namespaced kinds)."""
    if obj.get("kind") in CLUSTER_SCOPED:
        return ""
    return (obj.get("metadata") or {}).get("namespace") or "default"


def kubernetes_diff(old: dict, new: dict, ignore_changes: list[str], replace_on_changes: list[str],
                    provider_config: dict) -> ProviderDiff:
    """provider.go Diff for one Kubernetes object, then the engine's ignoreChanges (also applied by the
    provider: req.IgnoreChanges) and replaceOnChanges (step_generator.go applyReplaceOnChanges)."""
    force_new = force_new_properties(new, provider_config)
    ignore = [property_path(p) for p in ignore_changes]
    replace_on = [property_path(p) for p in replace_on_changes]
    old_obj = {**old, "metadata": {**(old.get("metadata") or {}), "namespace": namespace_of(old)}}
    new_obj = {**new, "metadata": {**(new.get("metadata") or {}), "namespace": namespace_of(new)}}
    changes = []
    for path, kind, value in leaf_changes(old_obj, new_obj):
        if any(path_contains(i, path) for i in ignore):
            continue
        replace = forces_replace(path, value, force_new) or any(path_contains(r, path) for r in replace_on)
        changes.append(Change(path, kind, replace))
    diff = ProviderDiff(changes)
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    # metadata.ReplaceUnready: a Job that is not Complete is replaced on every `pulumi up` (checkjob Ready).
    diff.replace_unready = new.get("kind") == "Job" and annotations.get("pulumi.com/replaceUnready") == "true"
    # The delete-before-replace decision (provider.go Diff): a replacement of a named object, not
    # autonamed (pulumi.com/autonamed, naming.go IsAutonamed), under the same name and namespace.
    meta_new, meta_old = new.get("metadata") or {}, old.get("metadata") or {}
    diff.delete_before_replace = (bool(diff.replaces) and bool(meta_new.get("name"))
                                  and annotations.get("pulumi.com/autonamed") != "true"
                                  and meta_new.get("name") == meta_old.get("name")
                                  and namespace_of(new) == namespace_of(old))
    return diff


def provider_config_replaces(old_inputs: dict, new_inputs: dict) -> list[str]:
    """provider.go DiffConfig of the kubernetes provider: clusterIdentifier updated replaces it (and with
    it every resource it manages); set and unchanged, nothing does. Without one, kubeconfig, context or
    cluster naming another active cluster does (read from the inputs: offline only their text)."""
    if "clusterIdentifier" in old_inputs and old_inputs.get("clusterIdentifier") != new_inputs.get("clusterIdentifier"):
        return ["clusterIdentifier"]
    if new_inputs.get("clusterIdentifier") is not None:
        return []
    return [k for k in ("kubeconfig", "context", "cluster") if old_inputs.get(k) != new_inputs.get(k)]


# ---- engine: options (step_generator.go) ----
def options(record: dict) -> dict:
    """A record's options with the defaults an older resources.json lacks: an absent key is the SDK's
    default (unset), and deleteBeforeReplace counts as set only when it is true."""
    o = dict(record.get("options") or {})
    o.setdefault("protect", False)
    o.setdefault("retainOnDelete", False)
    o.setdefault("deleteBeforeReplace", False)
    o.setdefault("deleteBeforeReplaceDefined", bool(o["deleteBeforeReplace"]))
    o.setdefault("ignoreChanges", [])
    o.setdefault("replaceOnChanges", [])
    o.setdefault("aliases", [])
    return o


def delete_before_replace(opts: dict, provider_says: bool) -> bool:
    """continueStepsFromDiff: the provider's decision unless the program set deleteBeforeReplace."""
    return bool(opts["deleteBeforeReplace"]) if opts["deleteBeforeReplaceDefined"] else provider_says


def create_urn(name: str, type_: str, parent: str, project: str, stack: str) -> str:
    """sdk/go/common/resource/alias.go CreateURN."""
    if not parent:
        return f"urn:pulumi:{stack}::{project}::{type_}::{name}"
    return parent[:parent.rindex("::")] + "$" + type_ + "::" + name


def urn_parts(urn: str) -> tuple[str, str, str, str]:
    """(stack, project, qualified type, name) of urn:pulumi:<stack>::<project>::<qualified type>::<name>."""
    stack_project, _, rest = urn.removeprefix("urn:pulumi:").partition("::")
    project, _, rest = rest.partition("::")
    qualified, _, name = rest.partition("::")
    return stack_project, project, qualified, name


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def collapse_alias(alias: dict, name: str, type_: str, parent: str, urn: str, parent_aliases: dict[str, str]) -> str:
    """step_generator.go collapseAliasToUrn: a spec's empty fields are the resource's own; a parent that
    was itself matched by alias stands for its old URN; no parent for noParent or the root stack."""
    if alias.get("urn"):
        return alias["urn"]
    stack, project, _, _ = urn_parts(urn)
    alias_parent = alias.get("parentUrn") or ""
    if alias_parent:
        alias_parent = parent_aliases.get(alias_parent, alias_parent)
    else:
        alias_parent = parent
    if alias.get("noParent") or (alias_parent and urn_parts(alias_parent)[2].split("$")[-1] == ROOT_STACK_TYPE):
        alias_parent = ""
    return create_urn(alias.get("name") or name, alias.get("type") or type_, alias_parent,
                      alias.get("project") or project, alias.get("stack") or stack)


def inherited_alias(type_: str, name: str, parent: str, parent_alias: str) -> str:
    """step_generator.go inheritedChildAlias: a child of an aliased parent is looked up under the parent's
    old URN, its name's parent-name prefix swapped for the old parent's name."""
    parent_name, alias_name = urn_parts(parent)[3], urn_parts(parent_alias)[3]
    child = alias_name + name[len(parent_name):] if name.startswith(parent_name) else name
    stack, project, qualified, _ = urn_parts(parent_alias)
    return f"urn:pulumi:{stack}::{project}::{qualified}${type_}::{child}"


def aliases_of(record: dict, urn: str, parent: str, parent_aliases: dict[str, str]) -> list[str]:
    """step_generator.go generateAliases: the resource's own aliases, then those its parent's alias implies."""
    out: list[str] = []
    for a in options(record)["aliases"]:
        out.append(collapse_alias(a, record["name"], record["type"], parent, urn, parent_aliases))
    if parent and parent in parent_aliases:
        out.append(inherited_alias(record["type"], record["name"], parent, parent_aliases[parent]))
        for a in options(record)["aliases"]:
            child = collapse_alias(a, record["name"], record["type"], parent, urn, parent_aliases)
            _, _, qualified, child_name = urn_parts(child)
            out.append(inherited_alias(qualified.split("$")[-1], child_name, parent, parent_aliases[parent]))
    return list(dict.fromkeys(out))


# The engine's refusals, worded as it words them.
def replace_protected(urn: str) -> str:
    """continueStepsFromDiff: a replacement entails a delete, refused while old and new are protected."""
    return (f"unable to replace resource \"{urn}\" as it is currently marked for protection (step_generator.go): "
            "`pulumi up` fails")


def delete_protected(urn: str) -> str:
    """step.go DeleteStep.Apply: deleteProtectedError."""
    return (f"resource \"{urn}\" cannot be deleted because it is protected (step.go): `pulumi up` fails; "
            f"`pulumi state unprotect '{urn}'` first, or keep it in the program")
