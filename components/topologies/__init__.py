"""One module per topology (combined, pd, pd-same-pod, hybrid): which workloads it registers, its
routing labels and strategy, its GPU accounting, what autoscaling, the pre-pull, the day-2 Jobs and
the plan need to know of it. Everything else asks `topology_of(model)` instead of comparing the
name. A new topology is one module here and its entry in TOPOLOGIES, its name in config_model/
serving.py's Literal, and, where it derives names or proves a route of its own, config_model/derived.py
and components/scripts/route_evidence.py (which cannot ask: a leaf, and a script shipped alone).

The package imports no workload component (they ask it: a top-level import of them here would be a
cycle), only engine facts, the smoke route type and the accounting rules of policy/gpu_accounting.py.
"""

from __future__ import annotations

from components.engines import offload_memory_gib
from components.pod_template import engine_memory
from components.topologies import combined, hybrid, pd, pd_same_pod
from components.topologies.base import GpuWorkload, Topology, peak_replicas, roleset_name
from config_model import GpuPool, ServedModel
from config_model.inherited import Inherited
from config_model.resources import (
    GIB,
    MILLI,
    EngineResources,
    PoolPod,
    engine_resources,
    gib_number,
    inherited_pod_sizes,
    pool_pod,
)

__all__ = ["TOPOLOGIES", "GpuWorkload", "Topology", "gpu_workloads", "gpus_per_pod", "group_size", "inherited_pod_sizes_of",
           "peak_replicas", "pod_base", "pod_memory_limit_gib", "pod_resources", "roleset_name", "sidecar_cpu_milli",
           "topology_of"]

TOPOLOGIES: dict[str, Topology] = {t.name: t for t in (combined.TOPOLOGY, pd.TOPOLOGY, pd_same_pod.TOPOLOGY,
                                                        hybrid.TOPOLOGY)}


def topology_of(model: ServedModel) -> Topology:
    return TOPOLOGIES[model.topology]


def gpus_per_pod(model: ServedModel) -> int:
    """GPUs of one engine pod: the parallel size, twice over for same-pod 4P+4D."""
    return topology_of(model).gpus_per_pod(model)


def group_size(model: ServedModel) -> int:
    """Pods of one replica of the model's own workload: 1, or for a model spanning nodes its parallel size /
    GPUs per pod (config_model/stack.py fills gpusPerPod with gpuPool.gpusPerNode), one pod per node."""
    return topology_of(model).group_size(model)


def gpu_workloads(model: ServedModel) -> list[GpuWorkload]:
    return topology_of(model).gpu_workloads(model)


def pod_resources(pool: GpuPool, model: ServedModel) -> EngineResources:
    """The model's engine pod (config_model/resources.py engine_resources) for its GPUs per pod, its share of
    a declared node's memory leaving room for what the pod holds besides the engines' own: each engine's KV
    offload and the sidecars' memory limits. Every reader of a pod's CPU and memory asks this."""
    return engine_resources(pool, model, gpus_per_pod(model), *_reserved(model))


def pod_base(pool: GpuPool, model: ServedModel) -> PoolPod:
    """gpuPool's sizing of the model's engine pod, before models[].resources, with where each figure came from."""
    return pool_pod(pool, gpus_per_pod(model), *_reserved(model))


def _reserved(model: ServedModel) -> tuple[int, int]:
    t = topology_of(model)
    return int(t.engines_per_pod * offload_memory_gib(model) + t.sidecar_memory_gib), t.sidecar_cpu


def inherited_pod_sizes_of(pool: GpuPool, models: list[ServedModel]) -> list[Inherited]:
    """The engine pod sizes of these models that fell back to field report 2.1 (no node allocatable and no value
    of the stack's own), for plan.md's "Defaults this stack inherits" (config_model/resources.py)."""
    return inherited_pod_sizes(pool, [(m, gpus_per_pod(m)) for m in models])


def sidecar_cpu_milli(model: ServedModel) -> int:
    """CPU the pod's containers besides the engines request, millicores."""
    return topology_of(model).sidecar_cpu * MILLI


def pod_memory_limit_gib(pool: GpuPool, model: ServedModel) -> int | float:
    """Sum of the memory limits of one engine pod's containers in GiB, as components/pod_template.py
    engine_memory sets them (tests/test_kv_offload.py compares it with every rendered pod): the bound
    of what the pod may hold in memory, its Memory /dev/shm emptyDir included."""
    t = topology_of(model)
    share = t.engines_per_pod
    _, limit = engine_memory(pod_resources(pool, model), offload_memory_gib(model), share)
    return gib_number(share * limit + t.sidecar_memory_gib * GIB)
