"""plan.md's section on models spanning nodes (issue 29), present only when the stack has one: per model its
shape (nodes per replica, GPUs per pod, replicas x nodes x GPUs), what its orchestrator creates, who of the
group serves and is probed, the gang scheduler and the pod group its controller creates, the failure domain,
the group network (RDMA or the TCP fallback), the topology domain, the startup budget that must cover the
slowest node, and what the cluster must have.

The shape, the network and the gang come from the validated config through the homes the program asks
(components/group.py, components/orchestrators/, components/topologies/); the probes and whether the
NetworkPolicies let a group's pods reach each other are read off the rendered objects, like the rest of
plan.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.engines import engine_of, parallel_size
from components.group import spans_nodes
from components.orchestrators import orchestrator_of
from components.orchestrators.base import GROUP_ROLE
from components.topologies import gpus_per_pod, group_size
from config_model.startup import LOAD_MIB_PER_SECOND, derived_startup_budget, startup_budget_seconds
from policy.workloads import containers, pod_templates
from render.manifest_facts import probe_kinds
from render.runtime import Rendered
from render.serialize import kubernetes_objects

TOPOLOGIES_DOC = 'docs/topologies.md, "Models larger than one node"'


@dataclass(frozen=True)
class GroupShape:
    """One model spanning nodes: replicas groups of `nodes` pods of `gpus_per_pod` GPUs each."""

    model: str
    kind: str
    replicas: int
    nodes: int
    gpus_per_pod: int
    max_unavailable: int    # groups a rollout takes down at once (models[].rollout.maxUnavailable)

    @property
    def pods(self) -> int:
        return self.replicas * self.nodes

    @property
    def gpus(self) -> int:
        return self.replicas * self.nodes * self.gpus_per_pod


def group_shapes(cfg: Any) -> dict[str, GroupShape]:
    """The models of the stack that span nodes, by name (none without a validated config)."""
    if cfg is None:
        return {}
    return {m.name: GroupShape(m.name, orchestrator_of(m).kind, m.replicas, group_size(m), gpus_per_pod(m),
                                m.rollout.max_unavailable)
            for m in cfg.models if spans_nodes(m)}


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _engine_refs(rendered: Rendered, shape: GroupShape) -> list[tuple[str, Any]]:
    """(who, template) of each engine pod template of the model's workload: leader, workers, or every rank
    where one template makes them all."""
    out = []
    for obj in kubernetes_objects(rendered):
        if obj.get("kind") != shape.kind:
            continue
        refs = [r for r in pod_templates(shape.kind, obj)
                if ((r.template.get("metadata") or {}).get("labels") or {}).get("llm-serving.io/model") == shape.model]
        for r in refs:
            role = ((r.template.get("metadata") or {}).get("labels") or {}).get(GROUP_ROLE)
            who = ("leader" if role == "leader" else "workers") if len(refs) > 1 else "every rank (one template)"
            out.append((who, r.template))
    return out


def _probes(refs: list[tuple[str, Any]]) -> str:
    parts = []
    for who, template in refs:
        engine = [c for g, c in containers(template) if g == "containers" and c.get("name") == "engine"]
        parts.append(f"{who}: {probe_kinds(engine[0]) if engine else 'no engine container'}")
    return "; ".join(parts)


def _selects(selector: dict, labels: dict) -> bool:
    """A label selector (matchLabels and matchExpressions In, NotIn, Exists, DoesNotExist: apimachinery
    pkg/apis/meta/v1 LabelSelectorAsSelector) that selects pods with these labels."""
    if not all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        held = key in labels
        if not {"In": held and labels[key] in values, "NotIn": not held or labels[key] not in values,
                "Exists": held, "DoesNotExist": not held}.get(op, False):
            return False
    return True


def _every_tcp_port(rule: dict) -> bool:
    """No ports (every port, every protocol), or a TCP entry without a port (every TCP port)."""
    ports = rule.get("ports")
    return not ports or any(p.get("protocol", "TCP") == "TCP" and p.get("port") is None for p in ports)


def group_traffic(rendered: Rendered, labels: dict) -> str:
    """Whether the rendered NetworkPolicies let a group's pods (these labels) reach each other on every TCP
    port, as both engines need (rendezvous, message queues and NCCL/Gloo on ephemeral ports: the facts in
    policy/engines/vllm.py and sglang.py)."""
    policies = [o for o in kubernetes_objects(rendered) if o.get("kind") == "NetworkPolicy"
                and "Ingress" in ((o.get("spec") or {}).get("policyTypes") or ["Ingress"])
                and _selects((o.get("spec") or {}).get("podSelector") or {}, labels)]
    if not policies:
        return "no NetworkPolicy selects the engine pods: the group's pods reach each other on every port"
    for p in policies:
        for rule in (p.get("spec") or {}).get("ingress") or []:
            if not _every_tcp_port(rule):
                continue
            for peer in rule.get("from") or []:
                if "namespaceSelector" not in peer and "ipBlock" not in peer and _selects(peer.get("podSelector") or {}, labels):
                    return f"NetworkPolicy `{p['metadata']['name']}` admits the group's pods to each other on every port"
    names = ", ".join(f"`{p['metadata']['name']}`" for p in policies)
    return (f"**blocked**: the NetworkPolicies selecting the engine pods ({names}) admit no pod of the group to another "
            "on every port, and the engines need it (the rendezvous, message queues and NCCL/Gloo bind ephemeral "
            "ports), so with networkPolicy.enabled the group cannot form")


def _network(cfg: Any, rendered: Rendered, labels: dict) -> str:
    net = cfg.gpu_pool.network
    if net.rdma is not None:
        rdma = (f"RDMA: each pod requests {net.rdma.count} x `{net.rdma.resource_name}` and IPC_LOCK; "
                + (f"NCCL_IB_HCA `{net.ib_hca}`" if net.ib_hca else "NCCL_IB_HCA unset: NCCL picks the adapters itself"))
    else:
        rdma = ("**TCP fallback**: no gpuPool.network.rdma, NCCL runs over TCP sockets, so every tensor and pipeline "
                "exchange between the nodes crosses the pod network at socket speed")
    sockets = (f"NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME `{net.socket_interface}`" if net.socket_interface else
               "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME unset: NCCL and Gloo pick an interface themselves, which may "
               "be one the other node cannot reach (gpuPool.network.socketInterface)")
    return f"{rdma}. {sockets}. Between the pods: {group_traffic(rendered, labels)}."


def _topology(cfg: Any, orchestrator: Any) -> tuple[str, str | None]:
    """The placement of a group, and what it needs of the cluster (None: nothing)."""
    key = cfg.gpu_pool.network.topology_key
    if key is None:
        return "anywhere in the pool (gpuPool.network.topologyKey unset)", None
    version = cfg.cluster.kubernetes_version
    minor = int(version.split(".")[1])
    need = ("MatchLabelKeysInPodAffinity for the affinity's matchLabelKeys: Kubernetes 1.31+ (beta, on by default; GA "
            "in 1.33, KEP-3633)" + ("" if minor >= 31 else f"; **cluster.kubernetesVersion {version} has it as alpha, off "
                                    "unless the API server and scheduler enable it**"))
    return (f"every pod of a group on nodes with one value of `{key}`: a required pod affinity to the pods of its own "
            f"group (matchLabelKeys `{orchestrator.group_label}`)", need)


def _startup(m: Any, shape: GroupShape) -> str:
    seconds = startup_budget_seconds(m)
    if m.startup_budget_seconds is not None:
        how = "models[].startupBudgetSeconds, as the stack file sets it"
    else:
        budget = derived_startup_budget(m)
        how = f"derived: {budget.basis}"
        if "read at" in budget.basis:
            how += (f". It counts the whole model ({m.size_gib:g} GiB), not one node's share of "
                    f"{m.size_gib / shape.nodes:g} GiB: the {shape.nodes} nodes load their shards at the same time from "
                    f"the one shared read-only volume, and the only storage rate known ({LOAD_MIB_PER_SECOND} MiB/s) is "
                    "one reader's; nothing measured says the volume gives each node that much at once, so the slowest "
                    "node is bounded by the whole model at that rate")
        else:
            how += (f". That cold start was measured on one node; across {shape.nodes} nodes the group also waits for "
                    "the slowest node's load and the cross-node NCCL initialisation, which nothing here measured: set "
                    "models[].startupBudgetSeconds from a measured group start")
    return (f"{seconds} s ({seconds / 60:g} min) per pod, every pod of the group alike, so it covers the slowest node "
            f"({how})")


def _model_lines(cfg: Any, rendered: Rendered, m: Any, shape: GroupShape, namespace: str) -> list[str]:
    engine, orchestrator = engine_of(m), orchestrator_of(m)
    section = engine.section(m)
    gang = cfg.gpu_pool.gang_scheduling
    fill = {"name": m.name, "nodes": shape.nodes, "last": shape.nodes - 1, "pods": shape.pods,
            "workers": plural(shape.nodes - 1, "worker pod")}
    node_count = cfg.gpu_pool.node_count
    shape_line = (f"{engine.describe_parallel_size(section)} = {parallel_size(m)} GPUs per replica "
                  f"over gpuPool.gpusPerNode {cfg.gpu_pool.gpus_per_node}: **{plural(shape.nodes, 'node')} per replica, "
                  f"{shape.gpus_per_pod} GPUs per pod**. {plural(shape.replicas, 'replica')} x {plural(shape.nodes, 'node')} "
                  f"x {shape.gpus_per_pod} GPUs = **{shape.gpus} GPUs in {plural(shape.pods, 'pod')}**"
                  + (f"; gpuPool.nodeCount {node_count}: its groups hold {shape.pods} of those nodes" if node_count else ""))
    leader = orchestrator.leader_selector(m)
    who = orchestrator.group_identity(m, namespace)
    worker_args = engine.group_args(shape.nodes, who.rank, engine.group_address(who.leader_address), False)
    workers = ("a vLLM worker runs `--headless`: no HTTP port, so nothing to probe, and no route reaches it"
               if not engine.WORKER_SERVES_HTTP else
               f"an {engine.DISPLAY_NAME} worker serves only a health endpoint on the same port (no OpenAI API), probed "
               "like the leader; no route reaches it")
    refs = _engine_refs(rendered, shape)
    labels = dict(((refs[0][1].get("metadata") or {}).get("labels") or {}) if refs else {})
    # The label the controller puts on every pod of one group, which the group's NetworkPolicy selects on.
    labels[orchestrator.group_label] = "<group>"
    if gang.scheduler in (None, "none"):
        gang_line = ("**none**: gpuPool.gangScheduling.scheduler none, so a group may bind partly and hold its GPUs "
                     "while it waits for the rest")
        gang_need = None
    else:
        gang_line = (f"{gang.scheduler}: the pods' schedulerName is `{gang.pod_scheduler_name}`; "
                     + orchestrator.gang_objects[gang.scheduler].format(**fill))
        gang_need = orchestrator.gang_needs[gang.scheduler]
    placement, affinity_need = _topology(cfg, orchestrator)
    needs = [orchestrator.controller_needs] + [n for n in (gang_need, affinity_need) if n]
    return [
        "", f"### {m.name}", "",
        f"- **Shape**: {shape_line}.",
        f"- **Orchestrator**: {orchestrator.kind} `{m.name}` ({orchestrator.api_version}), "
        f"{plural(shape.replicas, 'group')}: " + orchestrator.group_creates.format(**fill) + ".",
        f"- **Leader and workers**: the leader (rank 0) serves the OpenAI API; the route's Service selects leaders "
        f"only ({', '.join(f'`{k}={v}`' for k, v in leader.items())}). The "
        + ("worker (rank 1) joins" if shape.nodes == 2 else f"workers (ranks 1 to {shape.nodes - 1}) join")
        + f" it with `{' '.join(worker_args)}`, the rank from `{who.rank_env}` and the leader's address "
        f"`{who.leader_address}` injected by the controller; {workers}. Probes of the engine: {_probes(refs)}.",
        f"- **Gang scheduling**: {gang_line}.",
        f"- **Failure domain**: {orchestrator.group_restart}.",
        f"- **Group network**: {_network(cfg, rendered, labels)}",
        f"- **Topology domain**: {placement}.",
        f"- **Startup budget**: {_startup(m, shape)}.",
        "- **The cluster must have**: " + "; ".join(needs) + ".",
    ]


def section(rendered: Rendered) -> list[str]:
    cfg = rendered.config
    shapes = group_shapes(cfg)
    if not shapes:
        return []
    lines = ["", "## Models spanning nodes", "",
             "A replica of each model below is a group of pods, one per node, that its orchestrator creates, "
             f"schedules and restarts as one; only the group's leader serves ({TOPOLOGIES_DOC})."]
    namespace = rendered.outputs.get("namespace") or "<namespace>"
    for m in cfg.models:
        if m.name in shapes:
            lines += _model_lines(cfg, rendered, m, shapes[m.name], namespace)
    return lines


def group_pods_words(shape: GroupShape, pods: int, role: str | None) -> str:
    """The workload table's pod count of one template of a group workload: the leaders, the workers, or (one
    template for every rank) all of them, with the groups they make."""
    groups = plural(shape.replicas, "group")
    if role == "leader":
        return f"{pods} (one leader per group, {groups})"
    if role == "worker":
        return f"{pods} ({plural(shape.nodes - 1, 'worker')} per group, {groups})"
    return f"{pods} ({groups} x {plural(shape.nodes, 'pod')})"
