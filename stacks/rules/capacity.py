"""Rules over GPUs and memory: the GPU budget at peak (rollouts, surge and autoscaling included, whatever
each model's GPU resource name), the GPU pool's and each model's requests and limits, KV-cache offload, and
what one node of each node pool holds."""

from __future__ import annotations

from typing import Iterator

from components import autoscaling
from components.engines import cold_start_estimate_seconds, engine_of, offload_memory_gib
from components.prepull import CPU_MILLI as PREPULL_CPU_MILLI
from components.prepull import MEMORY_MIB as PREPULL_MEMORY_MIB
from components.prepull import prepull_pools
from components.topologies import (
    gpu_workloads,
    gpus_per_pod,
    pod_base,
    pod_memory_limit_gib,
    pod_resources,
    sidecar_cpu_milli,
    topology_of,
)
from config_model import StackConfig, stack_key
from config_model.resources import (
    EngineResources,
    PoolPod,
    cpu_text,
    field_report_per_gpu,
    gib_number,
)
from policy.engines import engine_offloading_with
from policy.gpu_accounting import peak_pods
from stacks.rules.problem import Problem


def gpu_demand(cfg: StackConfig) -> list[tuple[str, int]]:
    """(workload, peak GPUs) for every workload, rollout surge and known overshoot included; a GPU is a GPU
    under any models[].gpuResourceName, as the policy pack counts it (policy/workloads.py GPU_RESOURCES)."""
    return [(w.name, w.peak_gpus) for m in cfg.models for w in gpu_workloads(m)]


def gpu_total(cfg: StackConfig) -> int:
    return sum(g for _, g in gpu_demand(cfg))


def autoscaling_bounds(cfg: StackConfig) -> Iterator[Problem]:
    """Autoscalers v0.7.0 can run, within bounds, on a metric it really reads (components/autoscaling.py)."""
    for i, m in enumerate(cfg.models):
        a = m.autoscaling
        if not a.enabled:
            continue
        at = f"models[{i}].autoscaling"
        why = autoscaling.refusal(m)
        if why is not None:
            field, value = (("orchestrator", m.orchestrator) if topology_of(m).autoscale_refusal is None
                            else ("topology", m.topology))
            yield Problem(f"models[{i}].{field}", value, f"cannot be autoscaled: {why}")
        if a.min_replicas > a.max_replicas:
            yield Problem(f"{at}.minReplicas", a.min_replicas, f"must not exceed maxReplicas {a.max_replicas}")
        elif not a.min_replicas <= m.replicas <= a.max_replicas:
            yield Problem(f"models[{i}].replicas", m.replicas, f"is the count the workload starts with and must lie "
                          f"within autoscaling.minReplicas {a.min_replicas} and maxReplicas {a.max_replicas}")
        if a.min_replicas == 0 and not cfg.allow_scale_to_zero:
            yield Problem(f"{at}.minReplicas", 0, "scale to zero needs allowScaleToZero: true. With no pod the gateway "
                          "refuses the model's requests, AIBrix v0.7.0 has no pod metric to scale up on, and the first "
                          f"request after a manual scale-up waits a full cold start{_measured(m)}")
        elif a.min_replicas == 0:
            ops = cfg.operations
            jobs = [f"operations.{key}.enabled" for key, on in (
                ("smoke", ops.smoke.enabled), ("warmup", ops.warmup.enabled), ("loadTest", ops.load_test.enabled)) if on]
            if jobs:
                named = ", ".join(jobs[:-1]) + " and " + jobs[-1] if len(jobs) > 1 else jobs[0]
                yield Problem(f"{at}.minReplicas", 0, f"cannot be 0 with {named}: those Jobs run after every rollout "
                              "and need a serving pod, and at zero pods AIBrix v0.7.0 never scales up by itself, so "
                              "they wait out their deadline and fail `pulumi up`; disable them or keep minReplicas 1")
        if a.metric == "ttft":
            yield Problem(f"{at}.metric", a.metric, "is not readable by AIBrix v0.7.0: TTFT is a histogram, and its "
                          "pod metric fetcher takes a histogram's value as 0 (pkg/metrics/types.go HistogramMetricValue."
                          "GetSimpleValue), so the autoscaler would always scale down; use kv-cache-usage or queue-length")
        if a.metric == "kv-cache-usage" and autoscaling.target_value(m) > 1:
            yield Problem(f"{at}.targetValue", a.target_value, "must be at most 1: the engines report KV-cache usage "
                          "as a 0-1 ratio")
        elif a.metric == "kv-cache-usage" and autoscaling.target_value(m) * (1 + autoscaling.UP_TOLERANCE) >= 1:
            yield Problem(f"{at}.targetValue", a.target_value, f"must be below {1 / (1 + autoscaling.UP_TOLERANCE):.3f}: "
                          f"AIBrix v0.7.0 scales up only when the pods' average exceeds the target by "
                          f"{autoscaling.UP_TOLERANCE:.0%} (algorithm/apa.go), and KV-cache usage never exceeds 1, so "
                          "the autoscaler would never add a pod")


def budget(cfg: StackConfig) -> Iterator[Problem]:
    demand = gpu_demand(cfg)
    total = sum(g for _, g in demand)
    if total > cfg.gpu_budget:
        detail = ", ".join(f"{name} {gpus}" for name, gpus in demand)
        scaled = " or autoscaling.maxReplicas" if any(m.autoscaling.enabled for m in cfg.models) else ""
        yield Problem("gpuBudget", cfg.gpu_budget,
                      f"the workloads need {total} GPUs at peak, rollouts included ({detail}); "
                      f"raise gpuBudget or lower replicas{scaled}")


def gpu_pool(cfg: StackConfig) -> Iterator[Problem]:
    """gpuPool's engine pod for each model's GPUs (config_model/resources.py pool_pod): requests not above
    limits, /dev/shm below the memory limit; a figure the stack did not set is named with where it came from.
    Each broken pair is reported once, for the first model whose pod breaks it."""
    pool, seen = cfg.gpu_pool, set()
    for i, m in enumerate(cfg.models):
        base, gpus = pod_base(pool, m), gpus_per_pod(m)
        for low, high, what in (("cpu_request", "cpu_limit", "must not exceed"),
                                ("memory_request_gib", "memory_limit_gib", "must not exceed"),
                                ("shm_size_gib", "memory_limit_gib", "must be below")):
            a, b = getattr(base, low), getattr(base, high)
            if not (a > b if what == "must not exceed" else a >= b) or (low, high) in seen:
                continue
            seen.add((low, high))
            field = low if base.sources[low] == "gpuPool" or base.sources[high] != "gpuPool" else high
            other = high if field == low else low
            text = what if field == low else ("must not be below" if what == "must not exceed" else "must be above")
            reason = ": a Memory emptyDir counts against the pod's memory" if low == "shm_size_gib" else ""
            yield Problem(f"gpuPool.{stack_key(field)}", getattr(pool, field) if getattr(pool, field) is not None
                          else getattr(base, field), f"{text} gpuPool.{stack_key(other)} {getattr(base, other)}"
                          f"{_derived(pool, base, other, gpus, i, m.name)}{reason}")
    for i, m in enumerate(cfg.models):
        yield from _model_resources(f"models[{i}].resources", m.resources, pod_resources(pool, m))


def _derived(pool, base: PoolPod, field: str, gpus: int, i: int, name: str) -> str:
    """Where an unset gpuPool pod figure came from, for a message."""
    source = base.sources[field]
    if source == "gpuPool":
        return ""
    if source == "node":
        node = "nodeCpu" if field.startswith("cpu") else "nodeMemoryGiB"
        return (f" (unset: the share of gpuPool.{node} of a pod of {gpus} GPUs of gpuPool.gpusPerNode "
                f"{pool.gpus_per_node}, models[{i}] {name})")
    return (f" (unset: field report 2.1's {field_report_per_gpu(field)} for the "
            f"{gpus}-GPU pods of models[{i}] {name}; declare gpuPool.nodeCpu and nodeMemoryGiB to size pods from the node)")


def _model_resources(at: str, r, res: EngineResources) -> Iterator[Problem]:
    """A model's own CPU, memory and /dev/shm (models[].resources): limits not below requests, /dev/shm
    below the memory limit. Only what the model sets is judged here; gpuPool's own values are above."""
    if r.cpu_limit is not None and res.cpu_limit < res.cpu_request:
        yield Problem(f"{at}.cpuLimit", r.cpu_limit, f"must not be below the CPU request "
                      f"{r.cpu if r.cpu is not None else 'of gpuPool.cpuRequest'}")
    if r.memory_limit is not None and res.memory_limit < res.memory_request:
        yield Problem(f"{at}.memoryLimit", r.memory_limit, f"must not be below the memory request "
                      f"{r.memory if r.memory is not None else 'of gpuPool.memoryRequestGiB'}")
    elif (r.shm, r.memory, r.memory_limit) != (None, None, None) and res.shm >= res.memory_limit:
        field = next(f for f, v in (("shm", r.shm), ("memoryLimit", r.memory_limit), ("memory", r.memory)) if v)
        yield Problem(f"{at}.{field}", getattr(r, {"memoryLimit": "memory_limit"}.get(field, field)),
                      f"leaves /dev/shm ({gib_number(res.shm)} GiB) not below the engine pod's memory limit "
                      f"({gib_number(res.memory_limit)} GiB): a Memory emptyDir counts against the pod's memory")


def kv_cache_offload(cfg: StackConfig) -> Iterator[Problem]:
    """What each engine refuses, or would silently break, with KV offload (sources: tests/upstream_vllm.py,
    tests/upstream_sglang.py)."""
    for i, m in enumerate(cfg.models):
        offload, at = m.kv_cache_offload, f"models[{i}].kvCacheOffload"
        if offload.backend == "off":
            if offload.size_gib:
                yield Problem(f"{at}.sizeGiB", offload.size_gib, "must be 0 (unset) while kvCacheOffload.backend is 'off'")
            continue
        if offload.backend == "lmcache":
            yield Problem(f"{at}.backend", "lmcache", "is not offered: with the pinned vLLM (0.26.0, 0.33.0) "
                          "--kv-offloading-backend lmcache selects LMCacheMPConnector, which needs a separate LMCache "
                          "server process and ignores the size, and LMCache is not part of the vLLM release (which "
                          "LMCache an image carries cannot be checked here); use 'native'")
            continue
        owner, engine = engine_offloading_with(offload.backend), engine_of(m)
        if owner is engine and engine.OFFLOAD_REFUSED:
            yield Problem(f"{at}.backend", offload.backend, engine.OFFLOAD_REFUSED)
            continue
        if owner is not engine:
            yield Problem(f"{at}.backend", offload.backend, f"is a {owner.NAME if owner else 'unknown'} backend; engine "
                          f"{m.engine!r} offloads with {engine.OFFLOAD_BACKEND!r}")
        if offload.size_gib == 0:
            yield Problem(f"{at}.sizeGiB", 0, f"must be at least 1 when kvCacheOffload.backend is {offload.backend!r}")
        if topology_of(m).transfers_kv:
            yield Problem(f"{at}.backend", offload.backend, f"is only for topology 'combined', not {m.topology!r}: "
                          "vLLM's --kv-offloading-size overwrites the connector of the NixlConnector "
                          "--kv-transfer-config P/D runs on (vllm/config/vllm.py _post_init_kv_transfer_config), "
                          "so KV would no longer reach the decode side")
        if cfg.gpu_pool.node_memory_gib is None:
            yield Problem("gpuPool.nodeMemoryGiB", None, f"is required: {at} offloads KV cache to host memory, "
                          "and only the node's allocatable memory says whether the grown pods still fit")


def _shared_node(a: dict[str, str], b: dict[str, str]) -> bool:
    """Whether one node may match both selectors: no label key asked with two values."""
    return all(b.get(k, v) == v for k, v in a.items())


def node_fit(cfg: StackConfig) -> Iterator[Problem]:
    """The engine pods that may land on one node, GPUs allowing, must fit its memory with their limits
    (gpuPool.nodeMemoryGiB) and its CPU with their requests, what the scheduler counts (gpuPool.nodeCpu).
    Bounded by each workload's pods at peak (rollout surge and overshoot included). Pods of models whose
    node selectors one node may match both (no key with two values) and whose GPUs are one resource may
    share a node: per model, its node is filled with every such model's pods, gpuPool.gpusPerNode,
    nodeCpu and nodeMemoryGiB describing every GPU node of the stack."""
    pool = cfg.gpu_pool
    if pool.node_memory_gib is None and pool.node_cpu is None:
        return
    res = [pod_resources(pool, m) for m in cfg.models]
    prepulls = ([r for pools in prepull_pools(cfg.models, cfg.images.named(), pool).values() for _, r in pools]
                if cfg.operations.image_pre_pull.enabled else [])
    judged: set[tuple[int, ...]] = set()
    for anchor in res:
        group = tuple(i for i, r in enumerate(res) if r.gpu_resource_name == anchor.gpu_resource_name
                      and _shared_node(r.node_selector, anchor.node_selector))
        if group in judged:
            continue
        judged.add(group)
        # The pre-pull DaemonSets put a pod of their own on every node of their pool, beside the engine pods.
        prepull = sum(1 for r in prepulls if _shared_node(r.node_selector, anchor.node_selector))
        problems = [*(_node_fill(cfg, group, prepull) if pool.node_memory_gib is not None else ()),
                    *(_node_cpu(cfg, group, prepull, res) if pool.node_cpu is not None else ())]
        if problems:
            yield from problems
            return


def _best_fill(cfg: StackConfig, group: tuple[int, ...], measure) -> tuple[float, tuple[int, ...]]:
    """The most of `measure` (per model's pod) one node of gpusPerNode GPUs may hold: a bounded knapsack
    over GPUs (at most 16 per node), each workload bounded by its pods at peak."""
    pool = cfg.gpu_pool
    best: list[tuple[float, tuple[int, ...]]] = [(0, ())] * (pool.gpus_per_node + 1)
    for i in group:
        m = cfg.models[i]
        amount = measure(i)
        for w in gpu_workloads(m):
            for _ in range(min(peak_pods(w.pods, w.extra_pods), pool.gpus_per_node // max(w.gpus_per_pod, 1))):
                for gpus in range(pool.gpus_per_node, w.gpus_per_pod - 1, -1):
                    held, pods = best[gpus - w.gpus_per_pod]
                    if held + amount > best[gpus][0]:
                        best[gpus] = (held + amount, (*pods, i))
    return max(best)


def _node_cpu(cfg: StackConfig, group: tuple[int, ...], prepull: int, res: list[EngineResources]) -> Iterator[Problem]:
    pool = cfg.gpu_pool
    need, pods = _best_fill(cfg, group, lambda i: res[i].cpu_request + sidecar_cpu_milli(cfg.models[i]))
    if need + prepull * PREPULL_CPU_MILLI <= pool.node_cpu * 1000:
        return
    own = [i for i in dict.fromkeys(pods) if cfg.models[i].resources.cpu]
    base = pod_base(pool, cfg.models[pods[0]])
    path, value = ((f"models[{own[0]}].resources.cpu", cfg.models[own[0]].resources.cpu) if own
                   else ("gpuPool.cpuRequest", pool.cpu_request if pool.cpu_request is not None else base.cpu_request))
    parts = ", ".join(f"{cfg.models[i].name} {cpu_text(res[i].cpu_request + sidecar_cpu_milli(cfg.models[i]))}"
                      for i in pods)
    yield Problem(path, value, f"one node of gpuPool.gpusPerNode {pool.gpus_per_node} GPUs may hold engine pods whose "
                  f"CPU requests sum to {cpu_text(int(need))} cores ({parts})"
                  + (f" and {prepull} pre-pull pod{'s' if prepull > 1 else ''} of {PREPULL_CPU_MILLI}m" if prepull else "")
                  + f", more than gpuPool.nodeCpu {pool.node_cpu}: the scheduler would leave GPUs of the node idle")


def _node_fill(cfg: StackConfig, group: tuple[int, ...], prepull: int) -> Iterator[Problem]:
    pool = cfg.gpu_pool
    need, pods = _best_fill(cfg, group, lambda i: pod_memory_limit_gib(pool, cfg.models[i]))
    if need + prepull * PREPULL_MEMORY_MIB / 1024 <= pool.node_memory_gib:
        return
    need = gib_number(round(need * 2**30))
    offloading = [i for i in dict.fromkeys(pods) if offload_memory_gib(cfg.models[i])]
    own = [i for i in dict.fromkeys(pods) if cfg.models[i].resources.memory or cfg.models[i].resources.memory_limit]
    parts = ", ".join(f"{cfg.models[i].name} {pod_memory_limit_gib(pool, cfg.models[i])} GiB" for i in pods)
    limit = pod_base(pool, cfg.models[pods[0]]).memory_limit_gib
    if offloading:
        path, value = (f"models[{offloading[0]}].kvCacheOffload.sizeGiB", cfg.models[offloading[0]].kv_cache_offload.size_gib)
    elif own:
        r = cfg.models[own[0]].resources
        path, value = ((f"models[{own[0]}].resources.memoryLimit", r.memory_limit) if r.memory_limit
                       else (f"models[{own[0]}].resources.memory", r.memory))
    else:
        path, value = ("gpuPool.memoryLimitGiB", pool.memory_limit_gib if pool.memory_limit_gib is not None else limit)
    per_pod = (f"gpuPool.memoryLimitGiB {limit} per pod" if not own
               else "each model's memory limit per pod (models[].resources, else gpuPool.memoryLimitGiB)")
    yield Problem(path, value, f"one node of gpuPool.gpusPerNode {pool.gpus_per_node} GPUs may hold engine pods whose "
                  f"memory limits sum to {need} GiB ({parts}: {per_pod}"
                  f"{' plus the KV offload' if offloading else ''}; the Memory /dev/shm emptyDir is charged within "
                  f"these limits)"
                  + (f" and {prepull} pre-pull DaemonSet pod{'s' if prepull > 1 else ''} (operations.imagePrePull) "
                     f"with {PREPULL_MEMORY_MIB}Mi{' each' if prepull > 1 else ''}" if prepull else "")
                  + f", more than gpuPool.nodeMemoryGiB {pool.node_memory_gib}")


def _measured(m) -> str:
    """The model's measured cold start in a message, where its profile has one."""
    estimate = cold_start_estimate_seconds(m)
    return "" if estimate is None else f" (~{estimate // 60} min)"
