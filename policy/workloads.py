"""Find the pod templates inside any workload manifest, whatever its kind.

Policies and the plan read pods through this one function, so a new workload kind (StormService
roles, RayClusterFleet head and workers, RoleBasedGroup roles) is taught here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class PodTemplateRef:
    path: str             # dotted path of the template inside the manifest
    template: dict        # the PodTemplateSpec (metadata + spec)
    replicas: int         # pods this template runs at steady state
    surge: int            # extra pods the rollout strategy allows
    overshoot: int = 0    # extra pods a controller is known to start anyway (annotation, field report 11.2)

    @property
    def extra_pods(self) -> int:
        return self.surge + self.overshoot


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def _surge(value: Any, replicas: int) -> int:
    """maxSurge as pods: an int, or a percentage of replicas rounded up (as Kubernetes does)."""
    if isinstance(value, str):
        percent = int(value.rstrip("%"))
        return -(-replicas * percent // 100)
    return int(value)


def _deployment_surge(spec: dict) -> int:
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    replicas = _int(spec.get("replicas"), 1)
    return _surge((strategy.get("rollingUpdate") or {}).get("maxSurge", "25%"), replicas)


def _stormservice_templates(spec: dict) -> list[PodTemplateRef]:
    """Roles of spec.template; a missing role or top-level maxSurge is counted as one pod, since
    the AIBrix CRD sets no default and its controller was seen to overshoot (field report 11.2)."""
    role_sets = _int(spec.get("replicas"), 1)
    top_surge = (spec.get("updateStrategy") or {}).get("maxSurge", 1)
    refs = []
    roles = ((spec.get("template") or {}).get("spec") or {}).get("roles") or []
    for i, role in enumerate(roles):
        replicas = _int(role.get("replicas"), 1)
        role_surge = (role.get("updateStrategy") or {}).get("maxSurge", 1)
        surge = _surge(role_surge, replicas) * role_sets + _surge(top_surge, role_sets) * replicas
        refs.append(PodTemplateRef(f"spec.template.spec.roles[{i}].template", role.get("template") or {},
                                   replicas * role_sets, surge))
    return refs


def _rayclusterfleet_templates(manifest: dict) -> list[PodTemplateRef]:
    """The head and worker groups of every RayCluster of the fleet. An unset maxSurge counts as one
    pod; the fleet's declared overshoot (llm-serving.io/rollout-overshoot-pods) is added too."""
    spec = manifest.get("spec") or {}
    clusters = _int(spec.get("replicas"), 1)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge_clusters = _surge(rolling.get("maxSurge", 1), clusters)
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    overshoot_clusters = _int(annotations.get("llm-serving.io/rollout-overshoot-pods"), 0)
    ray = ((spec.get("template") or {}).get("spec") or {})
    refs = [PodTemplateRef("spec.template.spec.headGroupSpec.template",
                           (ray.get("headGroupSpec") or {}).get("template") or {}, clusters, surge_clusters,
                           overshoot_clusters)]
    for i, group in enumerate(ray.get("workerGroupSpecs") or []):
        per_cluster = _int(group.get("replicas"), 0) * _int(group.get("numOfHosts"), 1)
        refs.append(PodTemplateRef(f"spec.template.spec.workerGroupSpecs[{i}].template", group.get("template") or {},
                                   per_cluster * clusters, per_cluster * surge_clusters, per_cluster * overshoot_clusters))
    return refs


def _rolebasedgroup_templates(spec: dict) -> list[PodTemplateRef]:
    """Standalone and leader-worker roles; the CRD defaults maxSurge to 0."""
    refs = []
    for i, role in enumerate(spec.get("roles") or []):
        replicas = _int(role.get("replicas"), 1)
        rolling = (role.get("rolloutStrategy") or {}).get("rollingUpdate") or {}
        surge = _surge(rolling.get("maxSurge", 0), replicas)
        if "standalonePattern" in role:
            refs.append(PodTemplateRef(f"spec.roles[{i}].standalonePattern.template",
                                       (role["standalonePattern"] or {}).get("template") or {}, replicas, surge))
        elif "leaderWorkerPattern" in role:
            lwp = role["leaderWorkerPattern"] or {}
            size = _int(lwp.get("size"), 1)
            refs.append(PodTemplateRef(f"spec.roles[{i}].leaderWorkerPattern.template",
                                       lwp.get("template") or {}, replicas * size, surge * size))
    return refs


def pod_templates(kind: str, manifest: dict) -> list[PodTemplateRef]:
    spec = manifest.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        surge = _deployment_surge(spec) if kind == "Deployment" else 0
        return [PodTemplateRef("spec.template", spec.get("template") or {}, _int(spec.get("replicas"), 1), surge)]
    if kind == "Job":
        return [PodTemplateRef("spec.template", spec.get("template") or {}, _int(spec.get("parallelism"), 1), 0)]
    if kind == "Pod":
        return [PodTemplateRef("", {"metadata": manifest.get("metadata") or {}, "spec": spec}, 1, 0)]
    if kind == "StormService":
        return _stormservice_templates(spec)
    if kind == "RoleBasedGroup":
        return _rolebasedgroup_templates(spec)
    if kind == "RayClusterFleet":
        return _rayclusterfleet_templates(manifest)
    return []


def containers(template: dict) -> Iterator[tuple[str, dict]]:
    spec = template.get("spec") or {}
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            yield group, c


def gpu_count(container: dict) -> tuple[int, int]:
    res = container.get("resources") or {}
    return (_int((res.get("requests") or {}).get(GPU), 0), _int((res.get("limits") or {}).get(GPU), 0))


def pod_gpus(template: dict) -> int:
    return sum(max(gpu_count(c)) for group, c in containers(template) if group == "containers")
