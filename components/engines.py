"""Engine knowledge of a served model as pure functions: its engine module (policy/engines/, which
holds every engine-specific fact and argv builder) asked with the model's own settings, and the GPU
accounting of its workloads.

Nothing here registers a resource, so every flag can be tested without the Pulumi runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from config_model import GpuPool, ServedModel, derived
from policy.engines import Engine, engine_named, engine_offloading_with


def engine_of(model: ServedModel) -> Engine:
    return engine_named(model.engine)


@dataclass(frozen=True)
class EngineCommand:
    """The container command of one engine and the environment it needs besides secrets."""

    command: list[str]
    args: list[str]
    env: dict[str, str]


def parallel_size(model: ServedModel) -> int:
    """GPUs one engine pod drives: TP x DP for vLLM, TP for SGLang."""
    engine = engine_of(model)
    return engine.parallel_size(engine.section(model))


def gpus_per_pod(model: ServedModel) -> int:
    """GPUs of one engine pod: the parallel size, twice over for same-pod 4P+4D."""
    if model.gpus_per_pod is not None:
        return model.gpus_per_pod
    return parallel_size(model) * (2 if model.topology == "pd-same-pod" else 1)


@dataclass(frozen=True)
class GpuWorkload:
    """One workload of a served model, for GPU accounting: pods at steady state, the extra pods a
    rollout or a known controller overshoot may add, and GPUs per pod."""

    name: str
    pods: int
    extra_pods: int
    gpus_per_pod: int

    @property
    def peak_gpus(self) -> int:
        return (self.pods + self.extra_pods) * self.gpus_per_pod


def peak_replicas(model: ServedModel) -> int:
    """Pods the model's (combined) workload may run at steady state: its replicas, or as many as its
    autoscaler may make, whichever is more."""
    if model.autoscaling.enabled:
        return max(model.replicas, model.autoscaling.max_replicas)
    return model.replicas


def gpu_workloads(model: ServedModel) -> list[GpuWorkload]:
    per_pod = gpus_per_pod(model)
    rollout = model.rollout
    surge = 0 if rollout.strategy == "Recreate" else rollout.max_surge
    out = []
    if model.topology in ("combined", "pd-same-pod", "hybrid"):
        out.append(GpuWorkload(model.name, peak_replicas(model), surge, per_pod))
    if model.topology in ("pd", "hybrid"):
        pd_replicas = 1 if model.topology == "hybrid" else model.replicas
        # The pair's overshoot reserve sits on the prefill side; either fleet may use it.
        out.append(GpuWorkload(derived.fleet_name(model.name, "prefill"), pd_replicas, model.pd.rollout_overshoot_pods,
                               per_pod))
        out.append(GpuWorkload(derived.fleet_name(model.name, "decode"), pd_replicas, 0, per_pod))
    return out


def startup_budget_seconds(model: ServedModel) -> int:
    if model.startup_budget_seconds is not None:
        return model.startup_budget_seconds
    return engine_of(model).DEFAULT_STARTUP_BUDGET_SECONDS


def max_model_len(model: ServedModel) -> int:
    """Longest prompt plus output the engine accepts, in tokens."""
    engine = engine_of(model)
    return engine.max_model_len(engine.section(model))


def tokenizer_mode(model: ServedModel) -> str:
    engine = engine_of(model)
    return engine.tokenizer_mode(engine.section(model))


def speculative_decoding(model: ServedModel) -> bool:
    engine = engine_of(model)
    return engine.speculative_decoding(engine.section(model))


def with_speculative_decoding(model: ServedModel, on: bool) -> ServedModel:
    """The same model with DSpark switched on or off and nothing else changed."""
    engine = engine_of(model)
    return model.model_copy(update={engine.SECTION: engine.with_speculative_decoding(engine.section(model), on)})


def roleset_name(model: ServedModel) -> str:
    return model.pd.roleset_name or derived.default_roleset(model.name)


# Weights come only from the read-only volume; a hub download would bypass the integrity check and
# the ready marker.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# ---- KV-cache offload to CPU memory (issue 13): each engine module holds its backend and arithmetic ----

def kv_offload_args(model: ServedModel) -> list[str]:
    """The engine flags of models[].kvCacheOffload; none when it is off or not the engine's backend
    (stacks/rules.py refuses that, lmcache and, for DeepSeek-V4, SGLang's hicache)."""
    offload, engine = model.kv_cache_offload, engine_of(model)
    return engine.offload_args(offload.size_gib) if offload.backend == engine.OFFLOAD_BACKEND else []


def offload_memory_gib(model: ServedModel) -> int:
    """Host memory one engine container holds for offloaded KV, in GiB, by the arithmetic of the engine
    whose backend the model names."""
    offload = model.kv_cache_offload
    engine = engine_offloading_with(offload.backend)
    return 0 if engine is None else engine.offload_memory_gib(engine.section(model), offload.size_gib)


def offload_shm_gib(model: ServedModel) -> int:
    """What of the offload lives in /dev/shm: all of it where the backend's engine may map it there."""
    engine = engine_offloading_with(model.kv_cache_offload.backend)
    return offload_memory_gib(model) if engine is not None and engine.OFFLOAD_IN_SHM else 0


# Memory of the same-pod P/D proxy container (components/disaggregated.py), GiB.
SAME_POD_PROXY_MEMORY = (4, 8)


def engines_per_pod(model: ServedModel) -> int:
    return 2 if model.topology == "pd-same-pod" else 1


def pod_memory_limit_gib(pool: GpuPool, model: ServedModel) -> int:
    """Sum of the memory limits of one engine pod's containers, as components/pod_template.py
    engine_memory_gib sets them (tests/test_kv_offload.py compares it with every rendered pod): the bound
    of what the pod may hold in memory, its Memory /dev/shm emptyDir included."""
    share = engines_per_pod(model)
    limit = share * (pool.memory_limit_gib // share + offload_memory_gib(model))
    return limit + (SAME_POD_PROXY_MEMORY[1] if model.topology == "pd-same-pod" else 0)


def engine_command(model_path: str, model: ServedModel) -> EngineCommand:
    engine = engine_of(model)
    return EngineCommand(command=[engine.COMMAND],
                         args=engine.serve_args(model_path, model.served_model_name, engine.PORT, engine.section(model))
                         + kv_offload_args(model),
                         env={**OFFLINE_ENV, **engine.ENV})
