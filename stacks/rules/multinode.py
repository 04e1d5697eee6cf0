"""Rules over models that span nodes (issue 29): a replica is a group of pods, one per node, each holding
gpuPool.gpusPerNode GPUs (config_model/stack.py fills gpusPerPod), run by an orchestrator that starts,
schedules and restarts the group as one (components/orchestrators/). What cannot run across nodes is
refused here naming the field: a parallel size that is no whole number of nodes, more nodes than the pool
has, an orchestrator, engine or topology that cannot run a group, data parallelism across nodes, and
autoscaling."""

from __future__ import annotations

from typing import Iterator

from components.engines import engine_of, parallel_size
from components.orchestrators import ORCHESTRATORS
from components.topologies import group_size, topology_of
from config_model import ServedModel, StackConfig
from stacks.rules.problem import Problem


def exceeds_one_node(cfg: StackConfig, m: ServedModel) -> bool:
    """Its engine needs more GPUs than one node of the pool has."""
    return parallel_size(m) > cfg.gpu_pool.gpus_per_node


def group_orchestrators(engine: str) -> list[str]:
    """The orchestrators that run a group of pods per replica for this engine."""
    return [name for name, o in ORCHESTRATORS.items() if engine in o.group_engines]


def multi_node(cfg: StackConfig) -> Iterator[Problem]:
    per_node = cfg.gpu_pool.gpus_per_node
    net = cfg.gpu_pool.network
    minor = int(cfg.cluster.kubernetes_version.split(".")[1])
    if net.topology_key is not None and minor < 31 and any(exceeds_one_node(cfg, m) for m in cfg.models):
        yield Problem("gpuPool.network.topologyKey", net.topology_key,
                      f"needs Kubernetes 1.31 or later (cluster.kubernetesVersion is {cfg.cluster.kubernetes_version}): "
                      "a group is kept in one domain by a pod affinity with matchLabelKeys (components/group.py), "
                      "an alpha field before 1.31 (KEP-3633 MatchLabelKeysInPodAffinity: beta and on by default in "
                      "1.31, GA in 1.33) that an API server without the gate drops, putting every group of the model "
                      "in one domain")
    if net.ib_hca is not None and net.rdma is None:
        yield Problem("gpuPool.network.ibHca", net.ib_hca, "needs gpuPool.network.rdma: without RDMA devices in the "
                      "pod NCCL cannot open the adapters and runs over TCP sockets")
    for i, m in enumerate(cfg.models):
        at, engine = f"models[{i}]", engine_of(m)
        section, size = engine.section(m), parallel_size(m)
        orchestrator = ORCHESTRATORS.get(m.orchestrator)
        if not exceeds_one_node(cfg, m):
            if orchestrator is not None and not orchestrator.single_node:
                yield Problem(f"{at}.orchestrator", m.orchestrator,
                              f"runs models that span nodes; {m.name} needs {size} GPUs "
                              f"({engine.describe_parallel_size(section)}), which one node of gpuPool.gpusPerNode "
                              f"{per_node} holds: run it on "
                              + ", ".join(n for n, o in ORCHESTRATORS.items() if o.single_node))
            continue
        where = f"{at}.{engine.SECTION}"
        if "gpus_per_pod" not in m.model_fields_set and size % per_node:
            yield Problem(f"{where}.tensorParallelSize", section.tensor_parallel_size,
                          f"with the other parallel sizes makes {size} GPUs ({engine.describe_parallel_size(section)}), "
                          f"more than one node of gpuPool.gpusPerNode {per_node} and no whole number of nodes: a model "
                          f"spanning nodes takes whole nodes, so the product must be a multiple of {per_node}")
            continue
        if getattr(section, "data_parallel_size", 1) > 1:
            yield Problem(f"{where}.dataParallelSize", section.data_parallel_size,
                          f"must be 1 for a model spanning nodes ({size} GPUs > gpuPool.gpusPerNode {per_node}): data "
                          "parallelism across nodes is not offered; raise replicas for more copies of the model, or "
                          "keep TP x DP within one node")
        nodes = group_size(m)
        if cfg.gpu_pool.node_count is not None and nodes > cfg.gpu_pool.node_count:
            yield Problem("gpuPool.nodeCount", cfg.gpu_pool.node_count,
                          f"is fewer than the {nodes} nodes one replica of {at} ({m.name}) spans")
        if topology_of(m).name != "combined":
            yield Problem(f"{at}.topology", m.topology,
                          f"must be 'combined' for a model spanning nodes ({nodes} nodes per replica): the pinned "
                          "P/D paths (AIBrix v0.7.0 RayClusterFleet head-only pods, the same-pod proxy) run each side "
                          "in one pod, so prefill and decode cannot split a model across nodes here")
        elif orchestrator is None or m.engine not in orchestrator.group_engines:
            able = group_orchestrators(m.engine)
            yield Problem(f"{at}.orchestrator", m.orchestrator,
                          f"cannot run {m.name} across nodes ({nodes} pods of {per_node} GPUs per replica, "
                          f"{engine.describe_parallel_size(section)}): "
                          + (orchestrator.group_refusal(m.engine) if orchestrator is not None
                             else "it has no group of pods per replica")
                          + (f"; for {engine.DISPLAY_NAME} use {' or '.join(able)}" if able else "")
                          + ("" if "tensor_parallel_size" in section.model_fields_set else
                             f". {engine.SECTION}.tensorParallelSize is unset, so the field report's 8 for one 8-GPU "
                             "node (1): set it for this pool if the model fits one node"))
        if orchestrator is not None and m.engine in orchestrator.group_engines:
            yield from _gang(cfg, at, m, orchestrator)
        if m.autoscaling.enabled:
            yield Problem(f"{at}.autoscaling.enabled", True,
                          "must be false for a model spanning nodes: AIBrix v0.7.0's PodAutoscaler averages the metric "
                          "over every pod its target selects, and the workers of a group serve no /metrics (only the "
                          "leader serves), so the average would read each group at a fraction of its load")


# AIBrix v0.7.0's webhook refuses a StormService whose PodSet names could pass 63 characters:
# len(name) + the longest role name + 36 (pkg/webhook/stormservice_webhook.go ValidateCreate); its pod
# names must stay within 62 too, or utils.Shorten rewrites them and the leader's DNS name no longer holds.
STORMSERVICE_GROUP_NAME_MAX = 63 - 36 - len("server")


def _gang(cfg: StackConfig, at: str, m: ServedModel, orchestrator) -> Iterator[Problem]:
    gang = cfg.gpu_pool.gang_scheduling
    able = sorted(orchestrator.gang_schedulers)
    if gang.scheduler is None:
        yield Problem("gpuPool.gangScheduling.scheduler", None,
                      f"is required: {at} ({m.name}) spans {group_size(m)} nodes per replica, and without gang "
                      "scheduling two groups can each bind part of their pods and hold those GPUs while neither "
                      f"starts. {m.orchestrator} gangs with {' or '.join(able)} (docs/topologies.md); 'none' "
                      "accepts the risk")
    elif gang.scheduler != "none" and gang.scheduler not in able:
        yield Problem("gpuPool.gangScheduling.scheduler", gang.scheduler,
                      f"is not one {m.orchestrator} creates pod groups for ({at}, {m.name}): use {' or '.join(able)}, "
                      "or 'none'")
    if m.orchestrator == "stormservice" and len(m.name) > STORMSERVICE_GROUP_NAME_MAX:
        yield Problem(f"{at}.name", m.name, f"must be at most {STORMSERVICE_GROUP_NAME_MAX} characters for a StormService "
                      "spanning nodes: AIBrix v0.7.0 refuses longer (its PodSet names would pass 63 characters) and "
                      "its pod names are the leader's DNS name")
