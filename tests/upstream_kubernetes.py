"""Kubernetes controller behaviour the stacks depend on, ported from github.com/kubernetes/kubernetes:
the one place a maintainer re-checks it when the supported Kubernetes range moves. (The API
server's validation is ported in apivalidation/apiserver.py, which `make render` runs; this module
holds kube-controller-manager behaviour that only the tests use.)

Read from the search index's stored copy of kubernetes/kubernetes at commit
003e86297d18a8538c9da3619871393f9703bf70 (no release tag recorded with it; the repository is too
large to fetch whole here). A second stored copy, newer by its imports (typed workqueues,
HandleErrorWithContext), has the same functions below line for line. Re-read them at the release
tag when bumping:

  D = pkg/controller/disruption/disruption.go
  I = staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go (GetScaledValueFromIntOrPercent)

The disruption controller writes each PodDisruptionBudget's status, and the eviction API refuses
an eviction (429 "Cannot evict pod as it would violate the pod's disruption budget.") at
status.disruptionsAllowed 0 (pkg/registry/core/pod/storage/eviction.go checkAndDecrement; read in an
index excerpt that names no repository or commit). A sync that fails is "fail safe" (D failSafe):
disruptionsAllowed 0 and condition DisruptionAllowed=False, reason SyncFailed, so every eviction of
the budget's healthy pods is refused until the cause goes away: `kubectl drain` waits forever.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# Read at a commit, not a tag: the newest Kubernetes minor the stacks accept (config_model Cluster) is what
# it stands for, and it is held to the whole supported range, as the docstring says. Compared by
# tests/test_upstream_releases.py with every stack's cluster.kubernetesVersion and the supported range.
PORTED_FROM = {
    "repo": "kubernetes/kubernetes", "release": "1.37", "commit": "003e86297d18a8538c9da3619871393f9703bf70",
    "component": "kubernetes",
    "files": ("pkg/controller/disruption/disruption.go", "staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go",
              "pkg/registry/core/pod/storage/eviction.go", "pkg/controller/deployment/sync.go",
              "pkg/controller/replicaset/replica_set.go"),
    "covers": {"from": "1.29", "to": "1.37", "why": "the one place re-checked when the supported Kubernetes range "
               "moves (above); read only at the 1.37-era commit, not re-read at each older minor"},
}


@dataclass(frozen=True)
class Controller:
    """An object named by a controller ownerReference (metav1.GetControllerOf), as the finders see it."""

    api_version: str
    kind: str
    name: str
    replicas: int                       # spec.replicas: what the lister, or /scale, reads
    resource: str = ""                  # plural resource name (the RESTMapping's), for custom resources
    implements_scale: bool = False      # custom resources: discovery lists <resource>/scale (its CRD has subresources.scale)
    owner: Controller | None = None     # its own controller: a ReplicaSet's Deployment

    @property
    def uid(self) -> tuple[str, str, str]:
        return (self.api_version, self.kind, self.name)

    @property
    def group(self) -> str:
        # schema.ParseGroupVersion: "v1" is the core group "", "apps/v1" is group "apps".
        return self.api_version.rpartition("/")[0]


def deployment_pod_controller(deployment: dict) -> Controller:
    """The controller of a Deployment's pods at steady state: one ReplicaSet, controlled by the
    Deployment (pkg/controller/deployment/sync.go getNewReplicaSet gives the new ReplicaSet the
    Deployment as controller; pkg/controller/replicaset/replica_set.go manageReplicas creates pods
    with metav1.NewControllerRef(rs, ...)). D getPodDeployment follows that chain to the Deployment."""
    name, replicas = deployment["metadata"]["name"], deployment["spec"].get("replicas", 1)
    owner = Controller("apps/v1", "Deployment", name, replicas, "deployments")
    return Controller("apps/v1", "ReplicaSet", f"{name}-<pod-template-hash>", replicas, "replicasets", owner=owner)


@dataclass
class Pod:
    name: str
    controller: Controller | None
    ready: bool = True                  # apipod.IsPodReady
    deleting: bool = False              # DeletionTimestamp set


class SyncFailed(Exception):
    """An error out of D trySync: the PDB's status goes through failSafe."""


@dataclass
class Status:
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    sync_failed: str | None = None      # the SyncFailed condition's message, when the sync failed
    unmanaged_pods: list[str] = field(default_factory=list)


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """I GetScaledValueFromIntOrPercent: an int as is, "N%" of total (rounded up here, as D asks)."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"(\d+)%", value)
    if m is None:
        # I refuses it too; its exact message is not ported (the API server refuses such a spec first).
        raise SyncFailed(f"not a percentage: {value!r}")
    exact = int(m.group(1)) * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def _verify_group_kind(ref: Controller, kind: str, groups: tuple[str, ...]) -> bool:
    """D verifyGroupKind."""
    return ref.kind == kind and ref.group in groups


# D finders(), in its order. Each returns (uid, scale), None when it does not apply, or raises.
def _replication_controller(ref: Controller) -> tuple | None:
    if not _verify_group_kind(ref, "ReplicationController", ("",)):
        return None
    return ref.uid, ref.replicas


def _deployment(ref: Controller) -> tuple | None:
    """D getPodDeployment: a ReplicaSet controlled by a Deployment counts the Deployment's replicas."""
    if not _verify_group_kind(ref, "ReplicaSet", ("apps", "extensions")):
        return None
    owner = ref.owner
    if owner is None or not _verify_group_kind(owner, "Deployment", ("apps", "extensions")):
        return None
    return owner.uid, owner.replicas


def _replica_set(ref: Controller) -> tuple | None:
    """D getPodReplicaSet: a ReplicaSet not controlled by a Deployment."""
    if not _verify_group_kind(ref, "ReplicaSet", ("apps", "extensions")):
        return None
    if ref.owner is not None and ref.owner.kind == "Deployment":
        return None
    return ref.uid, ref.replicas


def _stateful_set(ref: Controller) -> tuple | None:
    if not _verify_group_kind(ref, "StatefulSet", ("apps",)):
        return None
    return ref.uid, ref.replicas


# Built-in kinds that serve /scale themselves (reachable through getScaleController when a pod names
# one directly); any other kind is a custom resource, whose CRD decides.
BUILTIN_SCALE = {("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"), ("", "ReplicationController")}


def _scale_controller(ref: Controller) -> tuple | None:
    """D getScaleController: GET <resource>/scale; NotFound, with discovery listing no such
    subresource, is the error that fails the sync."""
    if (ref.group, ref.kind) in BUILTIN_SCALE or ref.implements_scale:
        return ref.uid, ref.replicas
    group_resource = f"{ref.resource}.{ref.group}" if ref.group else ref.resource
    raise SyncFailed(f"{group_resource} does not implement the scale subresource")


FINDERS = (_replication_controller, _deployment, _replica_set, _stateful_set, _scale_controller)


def expected_scale(pods: list[Pod]) -> tuple[int, list[str]]:
    """D getExpectedScale: the sum of the scale of every distinct controller of the pods; pods
    without a controller are returned as unmanaged; a controller no finder knows fails the sync."""
    scales: dict[tuple, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        ref = pod.controller
        if ref is None:
            unmanaged.append(pod.name)
            continue
        if ref.uid in scales:
            continue
        for finder in FINDERS:
            found = finder(ref)
            if found is not None:
                uid, scale = found
                # Keyed by the controller found (a Deployment for its ReplicaSets' pods), so pods of
                # one controller count its scale once.
                scales[uid] = scale
                break
        else:
            raise SyncFailed(f'found no controllers for pod "{pod.name}"')
    return sum(scales.values()), unmanaged


def expected_pod_count(spec: dict, pods: list[Pod]) -> tuple[int, int, list[str]]:
    """D getExpectedPodCount: (expectedCount, desiredHealthy, unmanaged pods). maxUnavailable and a
    percentage minAvailable need the controllers' scale; an integer minAvailable counts the pods."""
    if spec.get("maxUnavailable") is not None:
        expected, unmanaged = expected_scale(pods)
        desired = max(0, expected - scaled_value(spec["maxUnavailable"], expected, True))
        return expected, desired, unmanaged
    if spec.get("minAvailable") is not None:
        value = spec["minAvailable"]
        if isinstance(value, int):
            return len(pods), value, []
        expected, unmanaged = expected_scale(pods)
        return expected, scaled_value(value, expected, True), unmanaged
    return 0, 0, []


def needs_scale(spec: dict) -> bool:
    """Whether D getExpectedPodCount looks up the pods' controllers for this spec."""
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def sync(spec: dict, pods: list[Pod]) -> Status:
    """D trySync -> updatePdbStatus, or failSafe on an error. No disrupted pods are pending."""
    current = sum(1 for p in pods if not p.deleting and p.ready)   # D countHealthyPods
    try:
        expected, desired, unmanaged = expected_pod_count(spec, pods)
    except SyncFailed as e:
        # failSafe writes only disruptionsAllowed 0 and the SyncFailed condition.
        return Status(0, 0, current, 0, sync_failed=str(e))
    allowed = current - desired
    # updatePdbStatus: no disruption while the budget expects no pods.
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return Status(expected, desired, current, allowed, unmanaged_pods=unmanaged)


# ---- the kubelet's $(VAR) expansion (read at kubernetes/kubernetes v1.37 in the search index's stored copies) ----
# third_party/forked/golang/expansion/expand.go Expand/MappingFuncFor: `$$` is one `$`, `$(NAME)` is NAME's value
# when the mapping has it and stays `$(NAME)` when not, an unclosed `$(` stays as written.
# pkg/kubelet/kubelet_pods.go makeEnvironmentVariables: the container's env in order, each value expanded with the
# variables declared before it (a valueFrom is resolved, not expanded); then command and args are expanded with
# the whole environment (pkg/kubelet/container/helpers.go ExpandContainerCommandAndArgs).

def expand(text: str, mapping: dict[str, str]) -> str:
    out, checkpoint, cursor = [], 0, 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1:]
            if rest[0] == "$":
                out.append("$")
                advance = 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close < 0:
                    out.append("$(")
                    advance = 1
                else:
                    name = rest[1:close]
                    out.append(mapping.get(name, f"$({name})"))
                    advance = close + 1
            else:
                out.append("$" + rest[0])
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def container_environment(env: list[dict], resolve) -> dict[str, str]:
    """The container's environment as the kubelet makes it from `env` (the controller's injected variables
    first, as it writes them): `resolve(valueFrom)` answers a valueFrom (the downward API, a Secret)."""
    out: dict[str, str] = {}
    for e in env:
        value = e.get("value") or ""
        out[e["name"]] = expand(value, out) if value else (resolve(e["valueFrom"]) if "valueFrom" in e else "")
    return out
