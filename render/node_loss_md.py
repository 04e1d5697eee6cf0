"""plan.md's "When a GPU node is lost or drained": whether the pool has a node to spare for the pods of a lost
or drained node, and what `kubectl drain` may evict of each model, read off the rendered objects.

What happens is the cluster's, proven by e2e/test_nodes.py (issue 30): a deleted node's pods are deleted by the
controller-manager's pod garbage collector once the node has been missing for 40 s, checked every 20 s (kubernetes
v1.37.2 pkg/controller/podgc/gc_controller.go quarantineTime, gcCheckPeriod); the workload's controller then makes
new pods, which bind only where a node of the pool has the GPUs free, and stay Pending otherwise. `kubectl drain`
evicts through the PodDisruptionBudget (components/operations.py disruption_budget) and retries a refused eviction
every 5 s until its --timeout.
"""

from __future__ import annotations

from policy.workloads import pod_gpus, pod_templates
from render import multinode_md
from render.manifest_facts import as_scaled, autoscalers
from render.runtime import Rendered
from render.serialize import kubernetes_objects

MODEL_LABEL = "llm-serving.io/model"


def _gpu_pods(rendered: Rendered, grown: bool) -> dict[str, list[int]]:
    """model -> the GPUs of each of its pods, at steady state or (grown) with every autoscaler at maxReplicas."""
    scaled = autoscalers(rendered)
    out: dict[str, list[int]] = {}
    for obj in kubernetes_objects(rendered):
        kind = obj.get("kind", "")
        if kind == "DaemonSet":
            continue
        for ref in pod_templates(kind, as_scaled(obj, scaled) if grown else obj):
            gpus = pod_gpus(ref.template)
            if isinstance(gpus, int) and gpus > 0 and isinstance(ref.replicas, int):
                model = ((ref.template.get("metadata") or {}).get("labels") or {}).get(MODEL_LABEL, obj["metadata"]["name"])
                out.setdefault(model, []).extend([gpus] * ref.replicas)
    return out


def nodes_held(pods: list[int], gpus_per_node: int) -> int:
    """Nodes the pods fill, first fit by size (what the scheduler can at best pack them into: a pod never spans
    nodes); the pool's nodes are alike (gpuPool.gpusPerNode)."""
    free: list[int] = []
    for gpus in sorted(pods, reverse=True):
        i = next((i for i, f in enumerate(free) if f >= gpus), None)
        if i is None:
            free.append(gpus_per_node - gpus)
        else:
            free[i] -= gpus
    return len(free)


def _budgets(rendered: Rendered) -> dict[str, dict]:
    return {(pdb["spec"].get("selector") or {}).get("matchLabels", {}).get(MODEL_LABEL): pdb["spec"]
            for pdb in kubernetes_objects(rendered) if pdb.get("kind") == "PodDisruptionBudget"}


def _drain(pods: int, budget: dict | None, shape) -> str:
    if budget is None:
        return "no PodDisruptionBudget (operations.disruptionBudget off): drain evicts all of them at once"
    allowed = budget["maxUnavailable"] if "maxUnavailable" in budget else pods - budget["minAvailable"]
    refused = ("drain's eviction of the next is refused (\"Cannot evict pod as it would violate the pod's disruption "
               "budget\", retried every 5 s until drain's --timeout)")
    if shape is not None and shape.nodes > 1:
        # One pod evicted takes its group down (components/operations.py disruption_budget): the budget counts pods.
        if shape.replicas == 1:
            return ("**nothing held**: the first pod drain evicts takes the model's one group down, and it stops "
                    "serving until the group binds again and finishes its cold start")
        return (f"one group at a time: a pod evicted takes its group of {shape.nodes} down, and until it is back "
                f"{refused}, so at least {shape.replicas - 1} of {shape.replicas} groups keep serving")
    if pods <= allowed:
        return (f"**nothing held**: the budget lets {allowed} go and the model has {pods}, so drain evicts it and the "
                "model stops serving until a new pod binds elsewhere and finishes its cold start")
    held = pods - allowed
    return f"{allowed} at a time; while one is not Ready again, {refused}, so at least {held} {'keeps' if held == 1 else 'keep'} serving"


def section(rendered: Rendered) -> list[str]:
    cfg = rendered.config
    if cfg is None:
        return []
    steady, grown = _gpu_pods(rendered, False), _gpu_pods(rendered, True)
    if not any(steady.values()) or not any(grown.values()):
        # No GPU pod to lose (every model at replicas 0): a model with none is listed with no pods.
        return []
    per_node, count = cfg.gpu_pool.gpus_per_node, cfg.gpu_pool.node_count
    held = nodes_held([g for pods in steady.values() for g in pods], per_node)
    most = nodes_held([g for pods in grown.values() for g in pods], per_node)
    largest = max(g for pods in grown.values() for g in pods)
    holds = f"this stack's GPU pods fill {held} of its nodes" + (
        f", {most} with every autoscaler at maxReplicas" if most != held else "")
    if count is None:
        verdict = (f"gpuPool.nodeCount is unset, so whether the pool has a node to spare is not known here; {holds} "
                   f"(gpuPool.gpusPerNode {per_node}). Set it to have this plan say.")
    elif count - most >= 1:
        verdict = (f"**{count - most} spare node{'s' if count - most > 1 else ''}**: gpuPool.nodeCount {count}, {holds}. "
                   f"The pods of up to {count - most} lost or drained node{'s' if count - most > 1 else ''} come back "
                   "on a spare; beyond that they stay Pending until a node returns.")
    else:
        verdict = (f"**No spare node**: gpuPool.nodeCount {count}, {holds}. The pods of a lost or drained node stay "
                   "Pending (FailedScheduling, Insufficient nvidia.com/gpu) until the node or another returns; their "
                   "model serves on its other pods meanwhile, and not at all if it had only those.")
    lines = ["", "## When a GPU node is lost or drained", "", verdict, "",
             "A deleted node's pods are deleted by the pod garbage collector 40-60 s after the node object goes (its "
             "40 s quarantine, checked every 20 s), and their controller makes new ones; a pod needs "
             f"{largest} free GPUs on one node to bind. A node that only stops reporting keeps its pods, which "
             "tolerate its not-ready and unreachable taints for 300 s (the DefaultTolerationSeconds admission plugin); "
             "then the taint-eviction controller deletes them and their controller makes new ones. `kubectl drain` "
             "per model:", "",
             "| Model | GPU pods | kubectl drain |", "|---|---|---|"]
    budgets, shapes = _budgets(rendered), multinode_md.group_shapes(cfg)
    for model, pods in sorted(steady.items()):
        count = f"{len(pods)}" + (f" (up to {len(grown[model])})" if len(grown.get(model, pods)) != len(pods) else "")
        lines.append(f"| {model} | {count} | {_drain(len(pods), budgets.get(model), shapes.get(model))} |")
    return lines

