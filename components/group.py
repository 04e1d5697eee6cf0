"""A model spanning nodes (issue 29): each replica is a group of pods, one per node, each holding
gpusPerPod GPUs (config_model/stack.py: gpuPool.gpusPerNode), that the orchestrator creates, schedules
and restarts as one (components/orchestrators/). The engine runs on every pod with the same argv but its
rank; the leader (rank 0) serves, is routed to and probed, and the other ranks join it at the address the
orchestrator gives (policy/engines/ group_args). This module builds the leader and worker pods from the
combined pod (components/combined.py pod_spec, which asks it): the rank flags, the pod's own IP for the engine, NCCL and
Gloo settings and RDMA devices from gpuPool.network, and the placement in one topology domain.
"""

from __future__ import annotations

from dataclasses import replace

from components.engines import engine_of
from components.orchestrators import orchestrator_of
from components.orchestrators.base import GROUP_ROLE
from components.pod_template import EnginePodSpec, engine_pod_template
from components.topologies import group_size
from config_model import GpuPool, ServedModel

# NCCL and Gloo read these themselves (neither engine does: facts in tests/upstream_vllm.py and
# upstream_sglang.py); the program sets them from gpuPool.network and refuses them in models[].env.
NETWORK_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "LLM_SERVING_GROUP_ADDRESS")
# The leader's address as the engine takes it (policy/engines/ group_address), built in the pod's environment
# from what the controller injects first, so the argv names it whole.
GROUP_ADDRESS_ENV = "LLM_SERVING_GROUP_ADDRESS"
# The pod's own address: what each engine binds and announces on the group network.
POD_IP_FIELD = "status.podIP"
IPC_LOCK = "IPC_LOCK"


def spans_nodes(model: ServedModel) -> bool:
    return group_size(model) > 1


def network_env(pool: GpuPool) -> dict[str, str]:
    """NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME from socketInterface, NCCL_IB_HCA from ibHca; none unset."""
    net = pool.network
    out = {}
    if net.socket_interface is not None:
        out |= {"NCCL_SOCKET_IFNAME": net.socket_interface, "GLOO_SOCKET_IFNAME": net.socket_interface}
    if net.ib_hca is not None:
        out["NCCL_IB_HCA"] = net.ib_hca
    return out


def group_affinity(model: ServedModel, pool: GpuPool) -> dict | None:
    """Every pod of one group in one topology domain (gpuPool.network.topologyKey): a required pod affinity
    to the pods of its own group, the group taken from the pod's own label (matchLabelKeys, Kubernetes
    1.31+ MatchLabelKeysInPodAffinity, GA in 1.33). The first pod of a group matches itself, which the
    scheduler accepts (the inter-pod affinity plugin's self-match rule)."""
    key = pool.network.topology_key
    if key is None:
        return None
    group_label = orchestrator_of(model).group_label
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"llm-serving.io/model": model.name}},
        "matchLabelKeys": [group_label], "topologyKey": key}]}}


def group_pod_spec(base: EnginePodSpec, model: ServedModel, pool: GpuPool, namespace: str, leader: bool,
                   route_labels: tuple[str, ...]) -> EnginePodSpec:
    """The combined pod `base` as one rank of a group: the leader (routed to, probed) or a worker, without
    the `route_labels` (the AIBrix labels: no gateway routes to it; a vLLM worker serves no port at all)."""
    engine = engine_of(model)
    who = orchestrator_of(model).group_identity(model, namespace)
    (container,) = base.engines
    rdma = pool.network.rdma
    container = replace(
        container, env={**container.env, **network_env(pool), GROUP_ADDRESS_ENV: engine.group_address(who.leader_address)},
        group_args=tuple(engine.group_args(group_size(model), who.rank, f"$({GROUP_ADDRESS_ENV})", leader)),
        field_env=((engine.HOST_IP_ENV, POD_IP_FIELD),), rank_env=who.rank_env,
        serves_http=leader or engine.WORKER_SERVES_HTTP,
        extra_resources={rdma.resource_name: str(rdma.count)} if rdma else {},
        add_capabilities=(IPC_LOCK,) if rdma else ())
    labels = {k: v for k, v in base.labels.items() if leader or k not in route_labels}
    labels[GROUP_ROLE] = "leader" if leader else "worker"
    return replace(base, engines=[container], labels=labels)


def group_pod_templates(base: EnginePodSpec, model: ServedModel, pool: GpuPool, namespace: str,
                        route_labels: tuple[str, ...]) -> dict[str, dict]:
    """The leader's and the workers' pod templates, by role."""
    # The same placement and scheduler for every pod of the group.
    placement = {"affinity": group_affinity(model, pool), "schedulerName": pool.gang_scheduling.pod_scheduler_name}
    templates = {}
    for role, leader in (("leader", True), ("worker", False)):
        template = engine_pod_template(group_pod_spec(base, model, pool, namespace, leader, route_labels))
        template["spec"].update({k: v for k, v in placement.items() if v is not None})
        templates[role] = template
    return templates
