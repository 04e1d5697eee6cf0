"""Rules that relate several fields of a valid-typed stack config.

Each rule returns Problems instead of raising, so a stack file with three mistakes is reported
with three messages in one run. Paths are the stack file's camelCase paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from components import autoscaling
from components.base import labels
from components.combined import rollout_deadline_seconds
from components.dashboards import CONFIG_MAP_BASE
from components.engines import (
    COLD_START_ESTIMATE_SECONDS,
    OFFLOAD_ENGINE,
    gpu_workloads,
    gpus_per_pod,
    max_model_len,
    offload_memory_gib,
    parallel_size,
    pod_memory_limit_gib,
    speculative_decoding,
    startup_budget_seconds,
)
from components.gateway import service_name
from components.image_refs import PULL_THROUGH_UPSTREAMS, ecr_prefix, parse_upstream
from components.operations import KEY_DIR, RESULTS_MOUNT, engines_service
from components.pod_template import CACHE_MOUNT, SCRIPTS_MOUNT
from components.prepull import MEMORY_MIB as PREPULL_MEMORY_MIB
from components.prepull import engine_image_keys
from config_model import Environment, ServedModel, StackConfig, derived, is_ip_host, k8s

# /dev/shm per GPU: NCCL and the engine's worker queues live there; the field report asks for
# 64-128 GiB on an 8-GPU pod (section 2.1), i.e. at least 8 GiB per GPU.
SHM_GIB_PER_GPU = 8
# Kubernetes removed the in-tree CephFS volume plugin in 1.31.
IN_TREE_CEPHFS_LAST_MINOR = 30
# The combinations the field report validated: vLLM on a plain pod (5) and on a StormService
# (11.1), SGLang on a RoleBasedGroup (12), P/D on two RayClusterFleets (11.2), 4P+4D in one pod
# (9), and combined pods beside a P/D roleset (11.5).
SUPPORTED = {
    ("combined", "vllm", "deployment"), ("combined", "vllm", "stormservice"), ("combined", "sglang", "rolebasedgroup"),
    ("pd", "vllm", "rayclusterfleet"), ("pd-same-pod", "vllm", "deployment"),
    ("hybrid", "vllm", "deployment"), ("hybrid", "vllm", "stormservice"),
}


@dataclass(frozen=True)
class Problem:
    path: str
    value: Any
    allowed: str

    def render(self, stack_file: str) -> str:
        return f"{stack_file}: llm-serving:{self.path} = {_show(self.value)}: {self.allowed}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "(unset)"
    return str(value)


def gpu_demand(cfg: StackConfig) -> list[tuple[str, int]]:
    """(workload, peak GPUs) for every workload, rollout surge and known overshoot included."""
    return [(w.name, w.peak_gpus) for m in cfg.models for w in gpu_workloads(m)]


def gpu_total(cfg: StackConfig) -> int:
    return sum(g for _, g in gpu_demand(cfg))


def _models(cfg: StackConfig) -> Iterator[Problem]:
    seen_names: dict[str, int] = {}
    seen_served: dict[str, int] = {}
    by_directory: dict[str, int] = {}
    for i, m in enumerate(cfg.models):
        at = f"models[{i}]"
        if m.name in seen_names:
            yield Problem(f"{at}.name", m.name, f"must be unique; models[{seen_names[m.name]}] uses it")
        seen_names.setdefault(m.name, i)
        if m.served_model_name in seen_served:
            yield Problem(f"{at}.servedModelName", m.served_model_name,
                          f"must be unique; models[{seen_served[m.served_model_name]}] uses it")
        seen_served.setdefault(m.served_model_name, i)

        # Models may share a directory (one sync, e.g. a DSpark A/B beside the baseline) only if
        # they agree on what the directory holds.
        first = by_directory.setdefault(m.directory, i)
        other = cfg.models[first]
        for field, mine, theirs in (("objectPrefix", m.object_prefix, other.object_prefix),
                                    ("revision", m.revision, other.revision),
                                    ("expectedShardCount", m.expected_shard_count, other.expected_shard_count),
                                    ("sizeGiB", m.size_gib, other.size_gib),
                                    ("keepRevisions", m.keep_revisions, other.keep_revisions)):
            if first != i and mine != theirs:
                yield Problem(f"{at}.{field}", mine, f"must equal models[{first}].{field} {theirs!r}: "
                              f"both models use directory {m.directory!r}")

        size = parallel_size(m)
        if m.gpus_per_pod is not None and m.gpus_per_pod != size:
            how = (f"sglang.tensorParallelSize {size}" if m.engine == "sglang" else
                   f"tensorParallelSize {m.vllm.tensor_parallel_size} x dataParallelSize {m.vllm.data_parallel_size}")
            yield Problem(f"{at}.gpusPerPod", m.gpus_per_pod, f"must equal the parallel size {size} ({how})")
        if gpus_per_pod(m) > cfg.gpu_pool.gpus_per_node:
            section = m.sglang if m.engine == "sglang" else m.vllm
            yield Problem(f"{at}.{m.engine}.tensorParallelSize", section.tensor_parallel_size,
                          f"one engine pod needs {gpus_per_pod(m)} GPUs but gpuPool.gpusPerNode is "
                          f"{cfg.gpu_pool.gpus_per_node}; a pod must fit on one node")

        estimate = COLD_START_ESTIMATE_SECONDS[m.engine]
        if startup_budget_seconds(m) < estimate:
            yield Problem(f"{at}.startupBudgetSeconds", m.startup_budget_seconds,
                          f"must be at least {estimate} (the measured {m.engine} cold start, "
                          f"field report); a shorter budget kills every cold start")

        need_shm = SHM_GIB_PER_GPU * gpus_per_pod(m)
        if cfg.gpu_pool.shm_size_gib < need_shm:
            yield Problem("gpuPool.shmSizeGiB", cfg.gpu_pool.shm_size_gib,
                          f"must be at least {need_shm} GiB for {at} ({m.name}) with "
                          f"{gpus_per_pod(m)} GPUs per pod (TP={parallel_size(m)}"
                          f"{' per engine, two engines' if m.topology == 'pd-same-pod' else ''})")

        yield from _engine_and_orchestrator(cfg, i, m)
        if m.rollout.max_surge != 0:
            yield Problem(f"{at}.rollout.maxSurge", m.rollout.max_surge,
                          "must be 0: a surge pod needs another full set of GPUs, so the engine "
                          "rollout would raise the GPU count (use Recreate or maxUnavailable)")


def _engine_and_orchestrator(cfg: StackConfig, i: int, m: ServedModel) -> Iterator[Problem]:
    at = f"models[{i}]"
    if (m.topology, m.engine, m.orchestrator) not in SUPPORTED:
        combos = ", ".join(f"{t} {e}+{o}" for t, e, o in sorted(SUPPORTED))
        yield Problem(f"{at}.orchestrator", m.orchestrator,
                      f"topology {m.topology!r} with engine {m.engine!r} on {m.orchestrator!r} is not a combination "
                      f"this program supports; supported (validated in the field report): {combos}")
    if m.topology in ("pd", "hybrid") and cfg.images.vllm_ray is None:
        yield Problem("images.vllmRay", None, f"is required: {at} runs P/D on RayClusterFleets, whose image must "
                      "bring Ray itself (field report 11.3)")
    if m.topology == "pd-same-pod":
        sp = m.same_pod
        ports = {"prefillPort": sp.prefill_port, "decodePort": sp.decode_port, "proxyPort": sp.proxy_port,
                 "prefillSideChannelPort": sp.prefill_side_channel_port, "decodeSideChannelPort": sp.decode_side_channel_port}
        seen: dict[int, str] = {}
        for key, port in ports.items():
            if port in seen:
                yield Problem(f"{at}.samePod.{key}", port, f"must differ from samePod.{seen[port]}: one pod, one port each")
            seen.setdefault(port, key)
    other = "sglang" if m.engine == "vllm" else "vllm"
    if other in m.model_fields_set:
        yield Problem(f"{at}.{other}", "(set)", f"must be unset for engine {m.engine!r}: only the {m.engine} section applies")
    if m.orchestrator != "deployment" and m.rollout.strategy == "Recreate":
        yield Problem(f"{at}.rollout.strategy", "Recreate",
                      f"{m.orchestrator} has no Recreate; it rolls with RollingUpdate, maxSurge 0")
    if m.engine == "sglang":
        if cfg.images.sglang is None:
            yield Problem("images.sglang", None, f"is required: {at} runs SGLang")
        if cfg.compile_cache.kind != "existingClaim":
            yield Problem("compileCache.kind", cfg.compile_cache.kind,
                          f"must be 'existingClaim' for SGLang ({at}): its JIT and graph capture are most of a "
                          "23-minute cold start and must survive the pod (field report 12.2)")


# What may differ inside a DSpark A/B pair: identity and the speculative switch, nothing else.
_AB_IDENTITY = {"name", "served_model_name", "dspark_of"}


def _comparable(m: ServedModel) -> dict:
    data = m.model_dump(exclude=_AB_IDENTITY)
    data["vllm"].pop("speculative_decoding")
    data["sglang"].pop("speculative_algorithm")
    return data


def _flatten(data: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _dspark_pairs(cfg: StackConfig) -> Iterator[Problem]:
    by_name = {m.name: (i, m) for i, m in enumerate(cfg.models)}
    for i, m in enumerate(cfg.models):
        if m.dspark_of is None:
            continue
        at = f"models[{i}].dsparkOf"
        if m.dspark_of not in by_name or m.dspark_of == m.name:
            yield Problem(at, m.dspark_of, "must name another model of this stack (the target-only arm)")
            continue
        j, base = by_name[m.dspark_of]
        if base.dspark_of is not None or speculative_decoding(base):
            yield Problem(at, m.dspark_of, f"models[{j}] must be target-only (speculative decoding off, no dsparkOf)")
        if not speculative_decoding(m):
            yield Problem(at, m.dspark_of, f"models[{i}] must turn DSpark on: it is the DSpark arm of the pair")
        mine, theirs = _flatten(_comparable(m)), _flatten(_comparable(base))
        differing = sorted(k for k in mine if mine[k] != theirs.get(k))
        if differing:
            yield Problem(at, m.dspark_of, "an A/B pair may differ only in speculative decoding, name and served "
                          f"name; models[{i}] and models[{j}] also differ in: {', '.join(differing)}")


def _images(cfg: StackConfig) -> Iterator[Problem]:
    mirror = cfg.images.mirror
    section = {"ecr": mirror.ecr, "registry": mirror.registry}
    if mirror.kind in section and section[mirror.kind] is None:
        yield Problem(f"images.mirror.{mirror.kind}", None, f"is required when images.mirror.kind is {mirror.kind!r}")
    for other, value in section.items():
        if other != mirror.kind and value is not None:
            yield Problem(f"images.mirror.{other}", "(set)", f"must be unset when images.mirror.kind is {mirror.kind!r}")
    if mirror.kind == "ecr" and mirror.ecr is not None:
        if cfg.object_store.endpoint:
            yield Problem("images.mirror.kind", "ecr", "needs AWS, but this stack's aws provider points at the "
                          f"non-AWS endpoint {cfg.object_store.endpoint}; use kind 'registry'")
        too_long: set[str] = set()
        for key, ref in sorted(cfg.all_images().items()):
            registry = parse_upstream(ref.upstream).registry
            path = cfg.image_path(key)
            prefix = ecr_prefix(mirror.ecr.repository_prefix, registry) if registry in PULL_THROUGH_UPSTREAMS else ""
            if len(prefix) > k8s.ECR_CACHE_PREFIX_MAX and prefix not in too_long:
                too_long.add(prefix)
                room = k8s.ECR_CACHE_PREFIX_MAX - (len(prefix) - len(mirror.ecr.repository_prefix))
                yield Problem("images.mirror.ecr.repositoryPrefix", mirror.ecr.repository_prefix,
                              f"derives the pull-through cache prefix {prefix!r} ({len(prefix)} characters) for "
                              f"{registry}, which ECR allows at most {k8s.ECR_CACHE_PREFIX_MAX}; this field may have "
                              f"at most {room} characters")
            if registry not in PULL_THROUGH_UPSTREAMS:
                yield Problem(f"{path}.upstream", ref.upstream,
                              f"ECR cannot pull-through-cache {registry}; supported: "
                              f"{', '.join(sorted(PULL_THROUGH_UPSTREAMS))}. Use images.mirror.kind 'registry'")
            elif PULL_THROUGH_UPSTREAMS[registry][2] and registry not in mirror.ecr.upstream_credential_arns:
                yield Problem("images.mirror.ecr.upstreamCredentialArns", mirror.ecr.upstream_credential_arns,
                              f"needs a Secrets Manager ARN for {registry} (used by {path}): ECR caches "
                              f"{registry} only with credentials")


# preStop endpoint removal plus the engine's own shutdown after the last request.
DRAIN_MARGIN_SECONDS = 30


def _warmup_fits(cfg: StackConfig) -> Iterator[Problem]:
    """The warm-up's longest request fits each model's context; components/ops_commands.py
    warmup_args would refuse it while resources are being registered."""
    warmup = cfg.operations.warmup
    if not warmup.enabled:
        return
    for i, m in enumerate(cfg.models):
        limit = max_model_len(m)
        longest = max([*warmup.input_tokens, int(limit * warmup.near_max_input_fraction)])
        if longest + warmup.output_tokens > limit:
            at = f"models[{i}].{'sglang.contextLength' if m.engine == 'sglang' else 'vllm.maxModelLen'}"
            yield Problem(at, limit, f"the warm-up sends {longest} input + {warmup.output_tokens} output "
                          "tokens, more than this context; lower operations.warmup.inputTokens or "
                          "nearMaxInputFraction, or disable operations.warmup")


def _operations(cfg: StackConfig) -> Iterator[Problem]:
    ops = cfg.operations
    for i, sc in enumerate(ops.load_test.scenarios):
        if sc.num_warmups < sc.concurrency:
            yield Problem(f"operations.loadTest.scenarios[{i}].numWarmups", sc.num_warmups,
                          f"must be at least the concurrency {sc.concurrency}: fewer warm-ups leave shapes to JIT "
                          "inside the measured round (field report 8.2)")
    if ops.load_test.enabled and cfg.environment == Environment.prod and not ops.load_test.allow_live_traffic:
        yield Problem("operations.loadTest.enabled", True,
                      "runs `vllm bench serve` against the engines that serve this prod stack's users after every "
                      "rollout, and its rounds compete with their requests (the idle check only waits for a moment "
                      "with nothing in flight); run it on staging, or set operations.loadTest.allowLiveTraffic: true "
                      "for a window without users")
    if ops.smoke.enabled and not ops.smoke.expected_text.strip():
        yield Problem("operations.smoke.expectedText", ops.smoke.expected_text,
                      "must be the exact answer the deterministic prompt returns (field report 12.3)")
    if ops.smoke.enabled and not ops.smoke.prompt.strip():
        yield Problem("operations.smoke.prompt", ops.smoke.prompt, "must not be empty")
    if ops.open_webui.enabled and ops.open_webui.image is None:
        yield Problem("operations.openWebUI.image", None, "is required when operations.openWebUI.enabled is true")
    if cfg.gateway.external_endpoint and is_ip_host(cfg.gateway.external_endpoint):
        yield Problem("gateway.externalEndpoint", cfg.gateway.external_endpoint,
                      "must be a stable DNS name, never an IP: a Pod IP changes when the pod is re-created (field report 10)")
    dash = ops.monitoring.dashboards
    if ops.monitoring.enabled and dash.enabled and dash.label_key in labels(CONFIG_MAP_BASE, "dashboards"):
        yield Problem("operations.monitoring.dashboards.labelKey", dash.label_key,
                      "must not be a label the program sets on every object (app.kubernetes.io/name, component, "
                      "part-of, managed-by): the sidecar label would replace it")
    yield from _warmup_fits(cfg)
    need = cfg.gateway.request_timeout_seconds + DRAIN_MARGIN_SECONDS
    for i, m in enumerate(cfg.models):
        if m.termination_grace_seconds < need:
            yield Problem(f"models[{i}].terminationGraceSeconds", m.termination_grace_seconds,
                          f"must be at least {need}: the gateway request timeout {cfg.gateway.request_timeout_seconds}s "
                          f"plus {DRAIN_MARGIN_SECONDS}s, so in-flight requests finish before the engine stops")


def _autoscaling(cfg: StackConfig) -> Iterator[Problem]:
    """Autoscalers v0.7.0 can run, within bounds, on a metric it really reads (components/autoscaling.py)."""
    for i, m in enumerate(cfg.models):
        a = m.autoscaling
        if not a.enabled:
            continue
        at = f"models[{i}].autoscaling"
        why = autoscaling.refusal(m)
        if why is not None:
            field, value = ("orchestrator", m.orchestrator) if m.topology == "combined" else ("topology", m.topology)
            yield Problem(f"models[{i}].{field}", value, f"cannot be autoscaled: {why}")
        if a.min_replicas > a.max_replicas:
            yield Problem(f"{at}.minReplicas", a.min_replicas, f"must not exceed maxReplicas {a.max_replicas}")
        elif not a.min_replicas <= m.replicas <= a.max_replicas:
            yield Problem(f"models[{i}].replicas", m.replicas, f"is the count the workload starts with and must lie "
                          f"within autoscaling.minReplicas {a.min_replicas} and maxReplicas {a.max_replicas}")
        if a.min_replicas == 0 and not cfg.allow_scale_to_zero:
            yield Problem(f"{at}.minReplicas", 0, "scale to zero needs allowScaleToZero: true. With no pod the gateway "
                          "refuses the model's requests, AIBrix v0.7.0 has no pod metric to scale up on, and the first "
                          f"request after a manual scale-up waits a full cold start (~{COLD_START_ESTIMATE_SECONDS[m.engine] // 60} min)")
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


def _budget(cfg: StackConfig) -> Iterator[Problem]:
    demand = gpu_demand(cfg)
    total = sum(g for _, g in demand)
    if total > cfg.gpu_budget:
        detail = ", ".join(f"{name} {gpus}" for name, gpus in demand)
        scaled = " or autoscaling.maxReplicas" if any(m.autoscaling.enabled for m in cfg.models) else ""
        yield Problem("gpuBudget", cfg.gpu_budget,
                      f"the workloads need {total} GPUs at peak, rollouts included ({detail}); "
                      f"raise gpuBudget or lower replicas{scaled}")


def _gpu_pool(cfg: StackConfig) -> Iterator[Problem]:
    pool = cfg.gpu_pool
    if pool.cpu_request > pool.cpu_limit:
        yield Problem("gpuPool.cpuRequest", pool.cpu_request, f"must not exceed gpuPool.cpuLimit {pool.cpu_limit}")
    if pool.memory_request_gib > pool.memory_limit_gib:
        yield Problem("gpuPool.memoryRequestGiB", pool.memory_request_gib,
                      f"must not exceed gpuPool.memoryLimitGiB {pool.memory_limit_gib}")
    if pool.shm_size_gib >= pool.memory_limit_gib:
        yield Problem("gpuPool.shmSizeGiB", pool.shm_size_gib,
                      f"must be below gpuPool.memoryLimitGiB {pool.memory_limit_gib}: "
                      "a Memory emptyDir counts against the pod's memory")


def _kv_cache_offload(cfg: StackConfig) -> Iterator[Problem]:
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
        if offload.backend == "hicache" and m.engine == "sglang":
            yield Problem(f"{at}.backend", "hicache", "is not offered: both pinned SGLang releases (0.5.17, 0.5.23) "
                          "refuse --hicache-size for DeepSeek-V4's KV pool (mem_cache/hybrid_cache/hybrid_pool_assembler.py "
                          "_deepseek_v4_num_host_pages: \"DeepSeek V4 HiCache currently does not support --hicache-size; "
                          "use --hicache-ratio instead\"), so the engine would fail at start; a ratio sizes the host pool "
                          "from the GPU KV pool the engine sizes at start, which leaves nothing fixed for the pod's memory "
                          "to reserve. Set kvCacheOffload.backend 'off'")
            continue
        if OFFLOAD_ENGINE[offload.backend] != m.engine:
            yield Problem(f"{at}.backend", offload.backend, f"is a {OFFLOAD_ENGINE[offload.backend]} backend; engine "
                          f"{m.engine!r} offloads with {next(b for b, e in OFFLOAD_ENGINE.items() if e == m.engine)!r}")
        if offload.size_gib == 0:
            yield Problem(f"{at}.sizeGiB", 0, f"must be at least 1 when kvCacheOffload.backend is {offload.backend!r}")
        if m.topology != "combined":
            yield Problem(f"{at}.backend", offload.backend, f"is only for topology 'combined', not {m.topology!r}: "
                          "vLLM's --kv-offloading-size overwrites the connector of the NixlConnector "
                          "--kv-transfer-config P/D runs on (vllm/config/vllm.py _post_init_kv_transfer_config), "
                          "so KV would no longer reach the decode side")
        if cfg.gpu_pool.node_memory_gib is None:
            yield Problem("gpuPool.nodeMemoryGiB", None, f"is required: {at} offloads KV cache to host memory, "
                          "and only the node's allocatable memory says whether the grown pods still fit")


def _node_memory(cfg: StackConfig) -> Iterator[Problem]:
    """The engine pods that may land on one node, GPUs allowing, must fit its memory with their limits.
    Bounded by each workload's pods at peak (rollout surge and overshoot included)."""
    pool = cfg.gpu_pool
    if pool.node_memory_gib is None:
        return
    # Best fill of one node by memory: a bounded knapsack over GPUs (at most 16 per node).
    best: list[tuple[int, tuple[int, ...]]] = [(0, ())] * (pool.gpus_per_node + 1)
    for i, m in enumerate(cfg.models):
        memory = pod_memory_limit_gib(pool, m)
        for w in gpu_workloads(m):
            for _ in range(min(w.pods + w.extra_pods, pool.gpus_per_node // max(w.gpus_per_pod, 1))):
                for gpus in range(pool.gpus_per_node, w.gpus_per_pod - 1, -1):
                    held, pods = best[gpus - w.gpus_per_pod]
                    if held + memory > best[gpus][0]:
                        best[gpus] = (held + memory, (*pods, i))
    need, pods = max(best)
    # The pre-pull DaemonSets put a pod of their own on every GPU node, beside the engine pods.
    prepull = len(engine_image_keys(cfg.models, cfg.images.named())) if cfg.operations.image_pre_pull.enabled else 0
    if need + prepull * PREPULL_MEMORY_MIB / 1024 <= pool.node_memory_gib:
        return
    offloading = [i for i in dict.fromkeys(pods) if offload_memory_gib(cfg.models[i])]
    parts = ", ".join(f"{cfg.models[i].name} {pod_memory_limit_gib(pool, cfg.models[i])} GiB" for i in pods)
    path, value = ((f"models[{offloading[0]}].kvCacheOffload.sizeGiB", cfg.models[offloading[0]].kv_cache_offload.size_gib)
                   if offloading else ("gpuPool.memoryLimitGiB", pool.memory_limit_gib))
    yield Problem(path, value, f"one node of gpuPool.gpusPerNode {pool.gpus_per_node} GPUs may hold engine pods whose "
                  f"memory limits sum to {need} GiB ({parts}: gpuPool.memoryLimitGiB {pool.memory_limit_gib} per pod"
                  f"{' plus the KV offload' if offloading else ''}; the Memory /dev/shm emptyDir is charged within "
                  f"these limits)"
                  + (f" and {prepull} pre-pull DaemonSet pod{'s' if prepull > 1 else ''} (operations.imagePrePull) "
                     f"with {PREPULL_MEMORY_MIB}Mi{' each' if prepull > 1 else ''}" if prepull else "")
                  + f", more than gpuPool.nodeMemoryGiB {pool.node_memory_gib}")


def _model_volume(cfg: StackConfig) -> Iterator[Problem]:
    vol = cfg.model_volume
    section = {"cephfs": vol.cephfs, "nfs": vol.nfs, "existingClaim": vol.existing_claim}
    if section[vol.kind] is None:
        yield Problem(f"modelVolume.{vol.kind}", None, f"is required when modelVolume.kind is {vol.kind!r}")
    for other, value in section.items():
        if other != vol.kind and value is not None:
            yield Problem(f"modelVolume.{other}", "(set)", f"must be unset when modelVolume.kind is {vol.kind!r}")
    ceph = vol.cephfs
    if vol.kind == "cephfs" and ceph is not None:
        minor = int(cfg.cluster.kubernetes_version.split(".")[1])
        if ceph.driver == "in-tree":
            if minor > IN_TREE_CEPHFS_LAST_MINOR:
                yield Problem("modelVolume.cephfs.driver", ceph.driver,
                              f"Kubernetes {cfg.cluster.kubernetes_version} has no in-tree CephFS "
                              "plugin (removed in 1.31); use 'csi' (ceph-csi)")
            if not ceph.monitors:
                yield Problem("modelVolume.cephfs.monitors", ceph.monitors, "needs at least one host:port for the in-tree driver")
        else:
            for field, value in (("clusterId", ceph.cluster_id), ("fsName", ceph.fs_name)):
                if not value:
                    yield Problem(f"modelVolume.cephfs.{field}", value, "is required for the csi driver")


def _model_capacity(cfg: StackConfig) -> Iterator[Problem]:
    """The volume holds, for every directory, the revisions the sync Job keeps, the one it downloads
    included: older ones go once the bucket's listing shows the new revision and before its download
    fills the volume (components/scripts/verify_model.py, prune on the download's "listed" signal)."""
    need: dict[str, tuple[int, float]] = {}
    for i, m in enumerate(cfg.models):
        need.setdefault(m.directory, (i, m.size_gib * m.keep_revisions))
    total = sum(gib for _, gib in need.values())
    if need and cfg.model_volume.capacity_gib < total:
        parts = ", ".join(f"{d!r}: models[{i}].keepRevisions {cfg.models[i].keep_revisions} x "
                          f"{cfg.models[i].size_gib:g} GiB" for d, (i, _) in sorted(need.items()))
        yield Problem("modelVolume.capacityGiB", cfg.model_volume.capacity_gib,
                      f"must be at least {total:.1f} GiB to hold every directory's kept revisions, the one being "
                      f"synced included ({parts}); raise it or lower keepRevisions")


def _object_store(cfg: StackConfig) -> Iterator[Problem]:
    store = cfg.object_store
    if store.endpoint and store.create_credentials:
        yield Problem("objectStore.createCredentials", True,
                      "must be false with a non-AWS endpoint: IAM users exist only on AWS; set "
                      "llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey with --secret")
    if store.endpoint and store.create:
        yield Problem("objectStore.create", True,
                      "must be false with a non-AWS endpoint: adopt the existing bucket by name")


def _compile_cache(cfg: StackConfig) -> Iterator[Problem]:
    cache = cfg.compile_cache
    if cache.kind == "existingClaim" and not cache.claim_name:
        yield Problem("compileCache.claimName", None, "is required when compileCache.kind is 'existingClaim'")


def _names_apart(cfg: StackConfig) -> Iterator[Problem]:
    """A model's name is its workload's, and controllers name their own Services after the workload
    (the StormService headless Service takes it whole: tests/upstream_aibrix.py), so no model may be
    named like a Service this program makes for another model (`<model>-api`, `<model>-engines`)."""
    ours = {name: m.name for m in cfg.models for name in (service_name(m), engines_service(m))}
    for i, m in enumerate(cfg.models):
        if m.name in ours:
            yield Problem(f"models[{i}].name", m.name, f"is the name of a Service this program makes for model "
                          f"{ours[m.name]!r}; a controller would name this model's own Service the same. Choose another name")


def _gateway(cfg: StackConfig) -> Iterator[Problem]:
    """P/D exists only behind the AIBrix gateway: its plugin picks the prefill/decode pair and injects
    the transfer parameters (field report 11.3, 11.5). Without the routes, clients reach prefill and
    decode pods directly, each answering alone, and the smoke Job could prove nothing."""
    if cfg.gateway.enabled:
        return
    for i, m in enumerate(cfg.models):
        if m.topology in ("pd", "hybrid"):
            yield Problem(f"models[{i}].topology", m.topology, "needs gateway.enabled: true; the AIBrix gateway is what "
                          "pairs prefill and decode (field report 11.3), without it every pod answers on its own")


# Where the program mounts something into a pod that also mounts the model root: the engine pods
# (shm, compile cache, scripts), the model gate (scripts) and the load-test Job (key, results,
# /tmp); and what the kubelet itself mounts into every container (kubelet makeMounts: /etc/hosts;
# the default terminationMessagePath, k8s.io/api core/v1 types.go).
PROGRAM_MOUNTS = ("/dev/shm", CACHE_MOUNT, SCRIPTS_MOUNT, KEY_DIR, RESULTS_MOUNT, "/tmp", "/etc/hosts",
                  "/dev/termination-log")


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _mounts(cfg: StackConfig) -> Iterator[Problem]:
    """The same path twice is refused by the API server ("must be unique"); one inside another puts
    a mount point inside a read-only volume (the runtime cannot create it) or hides the other."""
    path = cfg.model_volume.mount_path
    for mount in PROGRAM_MOUNTS:
        if _overlaps(path, mount):
            yield Problem("modelVolume.mountPath", path, f"must not be, contain or lie inside {mount}, which the "
                          f"program mounts beside the model root (in use: {', '.join(PROGRAM_MOUNTS)})")


def _int32_deadlines(cfg: StackConfig) -> Iterator[Problem]:
    """progressDeadlineSeconds is the startup budget plus the pre-start allowance, an int32."""
    for i, m in enumerate(cfg.models):
        deadline = rollout_deadline_seconds(m)
        if deadline > k8s.INT32_MAX:
            yield Problem(f"models[{i}].startupBudgetSeconds", m.startup_budget_seconds,
                          f"derives progressDeadlineSeconds {deadline}, above the int32 maximum {k8s.INT32_MAX}; "
                          f"at most {m.startup_budget_seconds - (deadline - k8s.INT32_MAX)}")


def _derived_names(cfg: StackConfig, stack: str | None) -> Iterator[Problem]:
    for path, value, allowed in derived.problems(cfg, stack):
        yield Problem(path, value, allowed)


RULES: list[Callable[[StackConfig], Iterator[Problem]]] = [
    _models, _dspark_pairs, _autoscaling, _budget, _gpu_pool, _kv_cache_offload, _node_memory, _model_volume,
    _model_capacity, _object_store, _compile_cache, _images, _operations,
    _gateway, _mounts, _int32_deadlines, _names_apart,
]


def check(cfg: StackConfig, stack: str | None = None) -> list[Problem]:
    """Every problem; `stack` (the stack's name) lets the names derived from it be checked too."""
    return [p for rule in RULES for p in rule(cfg)] + list(_derived_names(cfg, stack))
