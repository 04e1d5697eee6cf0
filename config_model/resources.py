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

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.infra import GpuPool, Toleration
from config_model.names import NAME_ERROR, GpuNodeLabelKey, NonEmptyLabelValue, checked
from config_model.types import Model
from policy import quantity
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


def engine_resources(pool: GpuPool, model: ServedModel) -> EngineResources:
    r = model.resources
    cpu_request = _milli(r.cpu) if r.cpu is not None else pool.cpu_request * MILLI
    memory_request = _bytes(r.memory) if r.memory is not None else pool.memory_request_gib * GIB
    if r.cpu_limit is not None:
        cpu_limit = _milli(r.cpu_limit)
    else:
        cpu_limit = cpu_request if r.cpu is not None else pool.cpu_limit * MILLI
    if r.memory_limit is not None:
        memory_limit = _bytes(r.memory_limit)
    else:
        memory_limit = memory_request if r.memory is not None else pool.memory_limit_gib * GIB
    return EngineResources(
        cpu_request=cpu_request, cpu_limit=cpu_limit, memory_request=memory_request, memory_limit=memory_limit,
        shm=_bytes(r.shm) if r.shm is not None else pool.shm_size_gib * GIB,
        node_selector=dict(model.node_selector if model.node_selector is not None else pool.node_selector),
        tolerations=tuple(model.tolerations if model.tolerations is not None else pool.tolerations),
        gpu_resource_name=model.gpu_resource_name)


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
