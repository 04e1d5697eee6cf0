"""What one model's engine pods hold and where they run: CPU, memory and /dev/shm, the node pool
(selector and tolerations) and the extended resource its GPUs are counted under.

Each per-model value is optional; unset, the stack's gpuPool decides, as before models could say it
(field report 2.1's 64/320Gi request, 128/512Gi limit, 128Gi /dev/shm). `engine_resources` is the
one place a model's values meet the pool's: the pod template, the pre-pull, the budget and the node
fit all ask it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.infra import GpuPool, Toleration
from config_model.inherited import Inherited
from config_model.names import NAME_ERROR, GpuNodeLabelKey, NonEmptyLabelValue, checked
from config_model.types import Model, stack_key
from policy import quantity
from policy.kv_cache import KvCacheShape
from policy.manifests import SHM_GIB_PER_GPU
from policy.workloads import GPU, GPU_RESOURCES

if TYPE_CHECKING:
    from config_model.serving import ServedModel

GIB = 2**30
MILLI = 1000


def _number_as_text(value: Any) -> Any:
    # `cpu: 32` is a YAML number; the API server reads a number quantity by its JSON text too
    # (policy/quantity.py parse_field), so it is taken as that text. true/false stay refused.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    return value


def _quantity(value: str) -> list[str]:
    try:
        q = quantity.parse(value)
    except quantity.QuantityError as err:
        return [f"must be a Kubernetes quantity such as \"32\", \"500m\" or \"256Gi\" ({err})"]
    return [] if q > 0 else ["must be more than 0"]


def _cpu(value: str) -> list[str]:
    errs = _quantity(value)
    if not errs and quantity.parse(value) * MILLI % 1:
        errs.append("must be a whole number of millicores (the API server rounds a finer CPU quantity up)")
    return errs


def _memory(value: str) -> list[str]:
    errs = _quantity(value)
    if not errs and quantity.parse(value) % 1:
        errs.append("must be a whole number of bytes")
    return errs


def _gpu_resource(value: str) -> list[str]:
    errs = k8s.extended_resource_name(value)
    if not errs and value not in GPU_RESOURCES:
        errs.append(f"must be a GPU resource the policy pack counts: {', '.join(GPU_RESOURCES)} (a new vendor's "
                    "name is added to policy/workloads.py GPU_RESOURCES, so that the GPU budget counts it)")
    return errs


CpuQuantity = Annotated[checked(_cpu), BeforeValidator(_number_as_text)]
MemoryQuantity = Annotated[checked(_memory), BeforeValidator(_number_as_text)]
GpuResourceName = checked(_gpu_resource)


class ModelResources(Model):
    """CPU, memory and /dev/shm of each engine pod of the model, as Kubernetes quantities. One value
    sets request and limit alike: the pod holds a node's GPUs, so what it may use is what the scheduler
    reserves for it; a memory limit above the request lets it use memory promised to its neighbours, and
    a node short of memory OOM-kills it after a cold start of minutes; the node-fit rule counts limits
    and then agrees with the scheduler. cpuLimit and memoryLimit raise a limit above it where wanted.
    Unset keys keep gpuPool's values."""

    cpu: CpuQuantity | None = Field(
        None, description="CPU of each engine pod, request and limit alike (e.g. \"32\" or \"31500m\"); unset means "
        "gpuPool.cpuRequest and gpuPool.cpuLimit.")
    cpu_limit: CpuQuantity | None = Field(
        None, description="A CPU limit above the request; unset means equal to cpu (or gpuPool.cpuLimit when cpu is unset).")
    memory: MemoryQuantity | None = Field(
        None, description="Memory of each engine pod, request and limit alike (e.g. 256Gi); the /dev/shm emptyDir is "
        "charged within it. Unset means gpuPool.memoryRequestGiB and gpuPool.memoryLimitGiB.")
    memory_limit: MemoryQuantity | None = Field(
        None, description="A memory limit above the request; unset means equal to memory (or gpuPool.memoryLimitGiB "
        "when memory is unset). The node-fit rule counts limits.")
    shm: MemoryQuantity | None = Field(
        None, description="Size of /dev/shm (a Memory emptyDir) of each engine pod, below the memory limit and at least "
        "8Gi per GPU; unset means gpuPool.shmSizeGiB.")


@dataclass(frozen=True)
class EngineResources:
    """A model's engine pod, resolved: CPU in millicores, memory and /dev/shm in bytes, for the whole pod."""

    cpu_request: int
    cpu_limit: int
    memory_request: int
    memory_limit: int
    shm: int
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    gpu_resource_name: str

    @property
    def pool_key(self) -> tuple:
        """Which nodes the pods go to: models with the same key run on the same pool (one pre-pull
        DaemonSet per image and key)."""
        return node_pool_key(self.node_selector, self.tolerations)


def node_pool_key(node_selector: dict[str, str], tolerations: tuple[Toleration, ...] | list[Toleration]) -> tuple:
    """A node pool as a value: its selector and tolerations."""
    return (tuple(sorted(node_selector.items())),
            tuple(json.dumps(t.model_dump(exclude_none=True), sort_keys=True) for t in tolerations))


def _milli(text: str) -> int:
    return quantity.milli_value(quantity.parse(text))


def _bytes(text: str) -> int:
    return quantity.value(quantity.parse(text))


# Field report 2.1: the engine pod of 8 x H20 96 GB, 64 CPU / 320Gi requested, 128 CPU / 512Gi limit, a 128Gi
# /dev/shm. Where the stack does not declare what its node holds, a pod gets these per GPU, scaled to its GPUs;
# plan.md lists them as inherited (inherited_pod_sizes).
FIELD_REPORT_POD_GPUS = 8
FIELD_REPORT_POD = {"cpu_request": 64, "cpu_limit": 128, "memory_request_gib": 320, "memory_limit_gib": 512,
                    "shm_size_gib": 128}
# What a node keeps back from its engine pods' shares: this stack's pre-pull pods (components/prepull.py, 10m CPU
# and 32Mi each, one per engine image and node pool) rounded up to a whole core and GiB, as the pods are sized in
# whole cores and GiB. The kubelet's own (kube-reserved, system-reserved, the eviction threshold) is already
# outside the allocatable nodeCpu and nodeMemoryGiB state, and other DaemonSets the user takes off them.
NODE_RESERVED_CPU = 1
NODE_RESERVED_GIB = 1
# /dev/shm of a pod sized from the node: a quarter of its memory, the field report's ratio (128Gi of a 512Gi limit).
SHM_SHARE_OF_MEMORY = 4


@dataclass(frozen=True)
class PoolPod:
    """One engine pod as gpuPool sizes it, before models[].resources: whole cores and GiB, and where
    each figure came from ("gpuPool" set, "node" share, "fieldReport" scaled per GPU)."""

    cpu_request: int
    cpu_limit: int
    memory_request_gib: int
    memory_limit_gib: int
    shm_size_gib: int
    sources: dict[str, str]


def pool_pod(pool: GpuPool, gpus: int, reserved_gib: int = 0, reserved_cpu: int = 0) -> PoolPod:
    """gpuPool's engine pod of `gpus` GPUs. `reserved_gib` and `reserved_cpu`: what the pod holds besides the
    engines' own memory (KV offload, sidecars) and CPU (sidecars), which its share of the node leaves room for."""
    # A pod of more GPUs than a node holds is refused (stacks/rules/models.py); it is sized as a whole node.
    gpus = min(gpus, pool.gpus_per_node)
    share = gpus / pool.gpus_per_node
    derived: dict[str, int] = {}
    if pool.node_cpu is not None:
        cpu = max(1, int((pool.node_cpu - NODE_RESERVED_CPU) * share) - reserved_cpu)
        derived |= {"cpu_request": cpu, "cpu_limit": cpu}
    if pool.node_memory_gib is not None:
        memory = max(1, int((pool.node_memory_gib - NODE_RESERVED_GIB) * share) - reserved_gib)
        derived |= {"memory_request_gib": memory, "memory_limit_gib": memory, "shm_size_gib": _shm(memory, gpus)}
    values, sources = {}, {}
    for field, whole in FIELD_REPORT_POD.items():
        set_value = getattr(pool, field)
        if set_value is not None:
            values[field], sources[field] = set_value, "gpuPool"
        elif field in derived:
            values[field], sources[field] = derived[field], "node"
        else:
            values[field], sources[field] = whole * gpus // FIELD_REPORT_POD_GPUS, "fieldReport"
    # A request worked out from the node stays within a limit the stack set itself.
    for request, limit in (("cpu_request", "cpu_limit"), ("memory_request_gib", "memory_limit_gib")):
        if sources[request] == "node" and sources[limit] == "gpuPool":
            values[request] = min(values[request], values[limit])
    # The /dev/shm quarter of a memory the stack set itself.
    if sources["shm_size_gib"] == "node" and sources["memory_limit_gib"] == "gpuPool":
        values["shm_size_gib"] = _shm(values["memory_limit_gib"], gpus)
    return PoolPod(**values, sources=sources)


def _shm(memory_gib: int, gpus: int) -> int:
    """/dev/shm of a pod sized from its memory: a quarter of it, and never below the 8 GiB per GPU the rules and
    the pack ask (policy/manifests.py SHM_GIB_PER_GPU); a memory too small for that is refused there."""
    return max(memory_gib // SHM_SHARE_OF_MEMORY, SHM_GIB_PER_GPU * gpus)


def engine_resources(pool: GpuPool, model: ServedModel, gpus: int, reserved_gib: int = 0,
                     reserved_cpu: int = 0) -> EngineResources:
    """The model's engine pod of `gpus` GPUs (components/topologies pod_resources gives them, with what the
    pod holds besides the engines' memory): models[].resources where set, else gpuPool's pool_pod."""
    r, base = model.resources, pool_pod(pool, gpus, reserved_gib, reserved_cpu)
    cpu_request = _milli(r.cpu) if r.cpu is not None else base.cpu_request * MILLI
    memory_request = _bytes(r.memory) if r.memory is not None else base.memory_request_gib * GIB
    if r.cpu_limit is not None:
        cpu_limit = _milli(r.cpu_limit)
    else:
        cpu_limit = cpu_request if r.cpu is not None else base.cpu_limit * MILLI
    if r.memory_limit is not None:
        memory_limit = _bytes(r.memory_limit)
    else:
        memory_limit = memory_request if r.memory is not None else base.memory_limit_gib * GIB
    return EngineResources(
        cpu_request=cpu_request, cpu_limit=cpu_limit, memory_request=memory_request, memory_limit=memory_limit,
        shm=_bytes(r.shm) if r.shm is not None else base.shm_size_gib * GIB,
        node_selector=dict((model.node_selector if model.node_selector is not None else pool.node_selector) or {}),
        tolerations=tuple(model.tolerations if model.tolerations is not None else pool.tolerations),
        gpu_resource_name=model.gpu_resource_name)


def field_report_per_gpu(field: str) -> str:
    """A pool_pod field's field-report figure per GPU, in words: "8 cores per GPU", "40 GiB per GPU"."""
    unit = "cores" if field.startswith("cpu") else "GiB"
    return f"{FIELD_REPORT_POD[field] // FIELD_REPORT_POD_GPUS} {unit} per GPU"


# What a model's pod takes from models[].resources instead of gpuPool, per pool_pod field.
_MODEL_OVERRIDES = {"cpu_request": ("cpu",), "cpu_limit": ("cpu_limit", "cpu"), "memory_request_gib": ("memory",),
                    "memory_limit_gib": ("memory_limit", "memory"), "shm_size_gib": ("shm",)}


def inherited_pod_sizes(pool: GpuPool, pods: list[tuple[ServedModel, int]]) -> list[Inherited]:
    """gpuPool's pod sizes that fell back to field report 2.1 (no nodeCpu / nodeMemoryGiB and no value of
    the stack's own), once per field, for every (model, GPUs per pod) whose pod uses them; the value is
    the per-GPU figure with the pods' totals."""
    used: dict[str, set[int]] = {}
    for model, gpus in pods:
        base = pool_pod(pool, gpus)
        for field, source in base.sources.items():
            if source == "fieldReport" and all(getattr(model.resources, o) is None for o in _MODEL_OVERRIDES[field]):
                used.setdefault(field, set()).add(getattr(base, field))
    out = []
    for field, totals in used.items():
        out.append(Inherited(f"gpuPool.{stack_key(field)}", f"{field_report_per_gpu(field)}: "
                             + ", ".join(str(t) for t in sorted(totals)), "2.1",
                             "the field report's 8-GPU pod per GPU, times the pod's GPUs; set gpuPool.nodeCpu and "
                             "nodeMemoryGiB to size pods from the node"))
    return out


def model_node_label_keys(models: list[ServedModel]) -> tuple[str, ...]:
    """The label keys of the models' own node selectors, which CPU Jobs must not run on besides gpuPool's."""
    return tuple(sorted({k for m in models if m.node_selector for k in m.node_selector}))


def cpu_text(milli: int) -> str:
    """Millicores as the manifest writes them: whole cores as "64", the rest as "31500m"."""
    return str(milli // MILLI) if milli % MILLI == 0 else f"{milli}m"


def memory_text(size: int) -> str:
    """Bytes as the manifest writes them: the largest binary unit that divides them ("320Gi", "1536Mi")."""
    for suffix, exponent in (("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if size % 2**exponent == 0:
            return f"{size >> exponent}{suffix}"
    return str(size)


def gib_number(size: int) -> int | float:
    """Bytes as GiB for the messages and the fit rule: whole GiB as an int, else to two decimals."""
    return size // GIB if size % GIB == 0 else round(size / GIB, 2)


# The per-model fields of ServedModel (config_model/serving.py), kept here beside what reads them.
def _not_empty(selector: dict[str, str]) -> dict[str, str]:
    if not selector:
        raise PydanticCustomError(NAME_ERROR, "must name at least one node label: an empty selector puts the model's "
                                  "pods on any node that has its GPUs; leave nodeSelector out to use gpuPool.nodeSelector")
    return selector


NodeSelector = Annotated[dict[GpuNodeLabelKey, NonEmptyLabelValue], AfterValidator(_not_empty)]
DEFAULT_GPU_RESOURCE = GPU


class KvCache(Model):
    """The attention shape of the model's checkpoint, as its config.json names it: what one token of KV cache
    takes (policy/kv_cache.py), for the memory-fit rule and plan.md's per-GPU budget. Unset: the profile's, if
    it knows one; without either the rule checks the weights only."""

    layers: int = Field(..., ge=1, le=1024, description="num_hidden_layers of config.json.")
    kv_heads: int | None = Field(None, ge=1, le=1024, description="num_key_value_heads (MHA and GQA), with headDim.")
    head_dim: int | None = Field(None, ge=1, le=4096, description="head_dim (where config.json has none: hidden_size "
                                 "/ num_attention_heads), with kvHeads.")
    latent_dim: int | None = Field(None, ge=1, le=65536, description="MLA (DeepSeek): kv_lora_rank + qk_rope_head_dim, "
                                   "one latent per token that every tensor-parallel rank holds; instead of kvHeads and headDim.")

    @model_validator(mode="after")
    def _one_shape(self) -> KvCache:
        if not KvCacheShape.one_form(self.kv_heads, self.head_dim, self.latent_dim):
            raise PydanticCustomError(NAME_ERROR, "must give kvHeads and headDim (key/value heads) or latentDim (MLA), "
                                      "not both and not one of kvHeads and headDim alone")
        return self

    @property
    def shape(self) -> KvCacheShape:
        return KvCacheShape(self.layers, self.kv_heads, self.head_dim, self.latent_dim)
