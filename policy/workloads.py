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
    surge: int            # extra pods a rollout may start


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def _deployment_surge(spec: dict) -> int:
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(surge, str):
        # A percentage rounds up to at least one pod.
        return max(1, -(-_int(spec.get("replicas"), 1) * int(surge.rstrip("%")) // 100)) if surge != "0%" else 0
    return int(surge)


def pod_templates(kind: str, manifest: dict) -> list[PodTemplateRef]:
    spec = manifest.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        surge = _deployment_surge(spec) if kind == "Deployment" else 0
        return [PodTemplateRef("spec.template", spec.get("template") or {}, _int(spec.get("replicas"), 1), surge)]
    if kind == "Job":
        return [PodTemplateRef("spec.template", spec.get("template") or {}, _int(spec.get("parallelism"), 1), 0)]
    if kind == "Pod":
        return [PodTemplateRef("", {"metadata": manifest.get("metadata") or {}, "spec": spec}, 1, 0)]
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
