"""plan.md for a model spanning nodes (issue 29): the "Models spanning nodes" section, the Rollouts by whole
groups, the workload table's pods and the time to serving over every GPU of every group, for DeepSeek-R1 on
2 x 8 H20 on each orchestrator x engine pair (tests/multinode_stacks.py). One render per pair, each pair
with other settings (RDMA or TCP, replicas, gang, network policies), so every branch is rendered once.
Every expected figure is worked out here from the stack config or read off the rendered objects; the
shipped stacks have no such model and their plans stay as snapshotted."""

from __future__ import annotations

import copy
import functools
import re

import pytest
from conftest import PROJECT_DIR
from multinode_stacks import GROUP_PAIRS, RDMA_NETWORK, r1_config
from variants import render, variant_file

from components.orchestrators import ORCHESTRATORS
from components.time_to_serving import IMAGE_PULL_SECONDS
from policy.workloads import containers, pod_templates
from render.multinode_md import _topology
from render.output import kubernetes_objects, plan_md

SECTION = "## Models spanning nodes"
# Per pair: the network, the replicas, the gang scheduler and whether the NetworkPolicies are rendered.
VARIANTS = {
    ("leaderworkerset", "vllm"): {"network": RDMA_NETWORK, "replicas": 2},
    ("leaderworkerset", "sglang"): {"network": None, "replicas": 1, "gang": "none"},
    ("stormservice", "sglang"): {"network": {"socketInterface": "eth0"}, "replicas": 1, "netpol": False},
    ("rolebasedgroup", "sglang"): {"network": {"rdma": {"resourceName": "rdma/hca", "count": 2},
                                               "topologyKey": "rack"}, "replicas": 2},
}
assert set(VARIANTS) == set(GROUP_PAIRS)


def config(pair) -> dict:
    v = VARIANTS[pair]
    cfg = r1_config(*pair, network=v["network"], replicas=v["replicas"])
    per_node = 8   # gpuPool.gpusPerNode unset: 8
    section = cfg["models"][0][pair[1]]
    gpus = v["replicas"] * section["tensorParallelSize"] * section["pipelineParallelSize"]
    cfg["gpuBudget"] = gpus
    if "gang" in v:
        cfg["gpuPool"]["gangScheduling"] = {"scheduler": v["gang"]}
    if v.get("netpol") is False:
        cfg["networkPolicy"] = {"enabled": False}
    assert gpus % per_node == 0
    return cfg


@functools.cache
def rendered(pair):
    cfg = config(pair)
    r = render(variant_file("r1", **copy.deepcopy(cfg)))
    return cfg, r, plan_md(r)


def expected(cfg: dict) -> dict:
    m, pool = cfg["models"][0], cfg["gpuPool"]
    section = m[m["engine"]]
    per_node = pool.get("gpusPerNode", 8)
    nodes = section["tensorParallelSize"] * section["pipelineParallelSize"] // per_node
    return {"replicas": m["replicas"], "nodes": nodes, "gpn": per_node, "pods": m["replicas"] * nodes,
            "gpus": m["replicas"] * nodes * per_node, "size": m["sizeGiB"]}


def model_section(text: str) -> str:
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + 1)]


def bullet(text: str, name: str) -> str:
    return next(line for line in model_section(text).splitlines() if line.startswith(f"- **{name}**"))


def workload(r, kind: str) -> dict:
    return next(o for o in kubernetes_objects(r) if o["kind"] == kind and o["metadata"]["name"] == "deepseek-r1")


def engine_templates(obj: dict) -> list:
    return [ref for ref in pod_templates(obj["kind"], obj)
            if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") == "engine"]


def test_the_shipped_plans_have_no_such_section():
    for stack in ("dev", "staging", "prod"):
        text = (PROJECT_DIR / "tests" / "snapshots" / f"{stack}.plan.md").read_text(encoding="utf-8")
        assert SECTION not in text and "group" not in text.split("## Rollouts")[1].split("\n## ")[0]


@pytest.mark.parametrize("pair", GROUP_PAIRS, ids="-".join)
def test_shape_orchestrator_and_leader(pair):
    cfg, r, text = rendered(pair)
    e, orchestrator = expected(cfg), ORCHESTRATORS[pair[0]]
    shape = bullet(text, "Shape")
    assert f"**{e['nodes']} nodes per replica, {e['gpn']} GPUs per pod**" in shape
    replicas = f"{e['replicas']} replica{'s' if e['replicas'] > 1 else ''}"
    assert f"{replicas} x {e['nodes']} nodes x {e['gpn']} GPUs = **{e['gpus']} GPUs in {e['pods']} pods**" in shape
    assert f"gpuPool.nodeCount {cfg['gpuPool']['nodeCount']}: its groups hold {e['pods']} of those nodes" in shape
    what = {"leaderworkerset": "worker StatefulSet", "stormservice": "one PodSet per group",
            "rolebasedgroup": "one RoleInstance per group"}[pair[0]]
    line = bullet(text, "Orchestrator")
    assert line.startswith(f"- **Orchestrator**: {orchestrator.kind} `deepseek-r1`") and what in line
    assert f"{e['replicas']} group{'s' if e['replicas'] > 1 else ''}:" in line
    # The leader selector is the one the route's Service renders with.
    service = next(o for o in kubernetes_objects(r) if o["kind"] == "Service" and o["metadata"]["name"] == "deepseek-r1-api")
    (key, value), = [(k, v) for k, v in service["spec"]["selector"].items()
                     if k not in ("app.kubernetes.io/component", "llm-serving.io/model")]
    leader = bullet(text, "Leader and workers")
    assert f"selects leaders only (`{key}={value}`)" in leader
    # The workers' argv as rendered: each group flag of the worker pod appears in the plan.
    obj = workload(r, orchestrator.kind)
    worker = engine_templates(obj)[-1].template
    args = next(c for g, c in containers(worker) if c["name"] == "engine")["args"]
    rank = args[args.index("--node-rank") + 1]
    assert f"--nnodes {e['nodes']} --node-rank {rank}" in leader
    if pair[1] == "vllm":
        assert "--headless" in args and "--headless" in leader and "no HTTP port" in leader
        assert "workers: startup=none, readiness=none, liveness=none" in leader
    else:
        assert "health endpoint" in leader and "startup=none" not in leader


@pytest.mark.parametrize("pair", GROUP_PAIRS, ids="-".join)
def test_gang_failure_domain_and_cluster_needs(pair):
    cfg, r, text = rendered(pair)
    e, orchestrator = expected(cfg), ORCHESTRATORS[pair[0]]
    gang, needs = bullet(text, "Gang scheduling"), bullet(text, "The cluster must have")
    scheduler = cfg["gpuPool"]["gangScheduling"]["scheduler"]
    templates = [ref.template for ref in engine_templates(workload(r, orchestrator.kind))]
    names = {t["spec"].get("schedulerName") for t in templates}
    if scheduler == "none":
        assert names == {None}
        assert "**none**" in gang and "a group may bind partly and hold its GPUs" in gang
    else:
        (name,) = names
        assert f"schedulerName is `{name}`" in gang
    if pair[0] == "stormservice":
        role = workload(r, "StormService")["spec"]["template"]["spec"]["roles"][0]
        assert role["schedulingStrategy"]["coschedulingSchedulingStrategy"]["minMember"] == e["nodes"]
        assert f"minMember {e['nodes']}" in gang and "per PodSet" in gang
        assert "PodSet CRD" in needs and "scheduler-plugins v0.31.8" in needs and "Helm chart's rbac.yaml does not" in needs
    if pair[0] == "rolebasedgroup":
        assert workload(r, "RoleBasedGroup")["metadata"]["annotations"]["rbg.workloads.x-k8s.io/group-gang-scheduling"] == "true"
        assert f"minMember replicas x size = {e['pods']}" in gang and "ONE" in gang
        assert "--scheduler-name scheduler-plugins" in needs
    if pair == ("leaderworkerset", "vllm"):
        assert f"minMember {e['nodes']}" in gang and "gangSchedulingManagement.schedulerProvider: volcano" in needs
    if pair[0] == "leaderworkerset":
        assert needs.startswith("- **The cluster must have**: the LeaderWorkerSet v0.10.0 controller and CRD with its webhooks")
    assert bullet(text, "Failure domain") == f"- **Failure domain**: {orchestrator.group_restart}."


@pytest.mark.parametrize("pair", GROUP_PAIRS, ids="-".join)
def test_network_topology_and_startup_budget(pair):
    cfg, r, text = rendered(pair)
    e, net = expected(cfg), cfg["gpuPool"].get("network") or {}
    line, place, needs = bullet(text, "Group network"), bullet(text, "Topology domain"), bullet(text, "The cluster must have")
    obj = workload(r, ORCHESTRATORS[pair[0]].kind)
    for ref in engine_templates(obj):
        c = next(c for g, c in containers(ref.template) if c["name"] == "engine")
        env = {v["name"]: v.get("value") for v in c["env"]}
        held = (c["resources"].get("limits") or {})
        if "rdma" in net:
            assert held[net["rdma"]["resourceName"]] == str(net["rdma"].get("count", 1))
        assert env.get("NCCL_IB_HCA") == net.get("ibHca") and env.get("NCCL_SOCKET_IFNAME") == net.get("socketInterface")
    if "rdma" in net:
        assert f"each pod requests {net['rdma'].get('count', 1)} x `{net['rdma']['resourceName']}` and IPC_LOCK" in line
        assert (f"NCCL_IB_HCA `{net['ibHca']}`" if "ibHca" in net else "NCCL_IB_HCA unset") in line
    else:
        assert "**TCP fallback**: no gpuPool.network.rdma, NCCL runs over TCP sockets" in line
    assert (f"GLOO_SOCKET_IFNAME `{net['socketInterface']}`" if "socketInterface" in net else "GLOO_SOCKET_IFNAME unset") in line
    if VARIANTS[pair].get("netpol") is False:
        assert "no NetworkPolicy selects the engine pods" in line
    else:   # components/network.py's group policy admits the group's pods to each other on every TCP port
        assert "NetworkPolicy `llm-serving-group-deepseek-r1` admits the group's pods to each other on every port" in line
    if "topologyKey" in net:
        assert f"one value of `{net['topologyKey']}`" in place and ORCHESTRATORS[pair[0]].group_label in place
        assert "MatchLabelKeysInPodAffinity" in needs and "Kubernetes 1.31+" in needs
    else:
        assert "anywhere in the pool" in place and "MatchLabelKeysInPodAffinity" not in needs
    # Every pod of the group carries the budget the plan states; it counts the whole model, not a node's share.
    budgets = {ref.template["metadata"]["annotations"]["llm-serving.io/startup-budget-seconds"]
               for ref in engine_templates(obj)}
    (budget,) = budgets
    startup = bullet(text, "Startup budget")
    assert startup.startswith(f"- **Startup budget**: {budget} s") and "covers the slowest node" in startup
    assert f"the whole model ({e['size']:g} GiB), not one node's share of {e['size'] / e['nodes']:g} GiB" in startup


def test_an_old_cluster_is_told_the_affinity_gate_is_off():
    cfg, r, _ = rendered(("rolebasedgroup", "sglang"))
    old = r.config.model_copy(update={"cluster": r.config.cluster.model_copy(update={"kubernetes_version": "1.30"})})
    _, need = _topology(old, ORCHESTRATORS["rolebasedgroup"])
    assert "cluster.kubernetesVersion 1.30 has it as alpha, off" in need
    _, need = _topology(r.config, ORCHESTRATORS["rolebasedgroup"])
    assert "alpha" not in need


def _table_rows(text: str, heading: str, prefix: str) -> list[list[str]]:
    part = text[text.index(heading):]
    part = part[:part.index("\n## ", 1)]
    return [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("pair", GROUP_PAIRS, ids="-".join)
def test_pods_rollouts_and_time_to_serving_count_every_group(pair):
    cfg, r, text = rendered(pair)
    e, kind = expected(cfg), ORCHESTRATORS[pair[0]].kind
    rows = _table_rows(text, "## Workloads", f"| {kind} | deepseek-r1 |")
    assert sum(int(row[2].split()[0]) for row in rows) == e["pods"]
    assert sum(int(row[5]) for row in rows) == e["gpus"]
    if len(rows) > 1:
        assert [re.sub(r"^\d+ ", "", row[2]) for row in rows] == [
            f"(one leader per group, {e['replicas']} group{'s' if e['replicas'] > 1 else ''})",
            f"({e['nodes'] - 1} worker per group, {e['replicas']} group{'s' if e['replicas'] > 1 else ''})"]
    (rollout,) = _table_rows(text, "## Rollouts", f"| {kind} deepseek-r1 |")
    unavailable = 1   # models[].rollout.maxUnavailable unset
    assert rollout[1] == (f"RollingUpdate by whole groups, {unavailable} group ({unavailable * e['nodes']} pods) down "
                          "at a time (maxSurge 0)")
    if e["replicas"] == 1:
        assert rollout[2].startswith("at 1 group: **no group serves**")
    else:
        assert rollout[2].startswith(f"at {e['replicas']} groups: {e['replicas'] - unavailable} of {e['replicas']} "
                                     f"serve, {e['replicas']} waves in a row")
    (tts,) = _table_rows(text, "## Time to first token", "| deepseek-r1 |")
    assert int(tts[2]) == e["gpus"]
    # No cold start is measured for the generic profile: the GPUs wait at least the image pull, every one.
    assert tts[9] == f">= {e['gpus'] * IMAGE_PULL_SECONDS / 60:.0f}"
    assert (f"- GPUs of deepseek-r1, which spans nodes: {e['replicas']} replica{'s' if e['replicas'] > 1 else ''} x "
            f"{e['nodes']} nodes x {e['gpn']} GPUs = {e['gpus']}, every one of them waiting") in text


# ---- the README's and docs/topologies.md's worked example and refusals, against the fixture and the rules ----

def _doc_examples(path) -> list[dict]:
    """The stack-file snippets of the page's multi-node section, as the config they set (llm-serving: dropped)."""
    import yaml

    text = (PROJECT_DIR / path).read_text(encoding="utf-8")
    part = text[text.index("Models larger than one node"):]
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", part, flags=re.S):
        data = yaml.safe_load(block if block.startswith("config:") else "config:\n" + block)
        out.append({k.removeprefix("llm-serving:"): v for k, v in data["config"].items()})
    return out


@pytest.mark.parametrize("path, pairs", [
    ("docs/topologies.md", [(("leaderworkerset", "vllm"), RDMA_NETWORK), (("rolebasedgroup", "sglang"), None)]),
    ("README.md", [(("leaderworkerset", "vllm"), RDMA_NETWORK)]),
])
def test_the_docs_example_is_the_tested_stack(path, pairs):
    """Each snippet sets what tests/multinode_stacks.py r1_config sets, which the tests above render."""
    examples = _doc_examples(path)
    assert len(examples) == len(pairs)
    for example, (pair, network) in zip(examples, pairs):
        cfg = r1_config(*pair, network=network)
        assert set(example) == {"gpuBudget", "gpuPool", "models"}
        assert {k: cfg[k] for k in example} == example


def _refused(mutate, pair=("leaderworkerset", "vllm")) -> list[str]:
    from test_config import SECRETS

    from stacks import loader
    from stacks.loader import ConfigError

    cfg = r1_config(*pair)
    mutate(cfg)
    with pytest.raises(ConfigError) as err:
        loader.validate(cfg, "r1", SECRETS)
    return str(err.value).splitlines()


def _set(path: str, value):
    def mutate(cfg):
        *keys, last = path.split(".")
        node = cfg
        for k in keys:
            node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
        node[last] = value
    return mutate


REFUSALS = [
    (_set("models.0.vllm", {"tensorParallelSize": 12}), "models[0].vllm.tensorParallelSize",
     "a model spanning nodes takes whole nodes, so the product must be a multiple of 8"),
    (_set("models.0.vllm", {"tensorParallelSize": 16, "dataParallelSize": 2}), "models[0].vllm.dataParallelSize",
     "data parallelism across nodes is not offered; raise replicas for more copies of the model"),
    (_set("gpuPool.nodeCount", 1), "gpuPool.nodeCount", "is fewer than the 2 nodes one replica of models[0] (deepseek-r1) spans"),
    (_set("models.0.topology", "pd"), "models[0].topology", "must be 'combined' for a model spanning nodes"),
    (_set("models.0.orchestrator", "stormservice"), "models[0].orchestrator",
     "the group would never be Ready; for vLLM use leaderworkerset"),
    (_set("models.0.orchestrator", "deployment"), "models[0].orchestrator", "a Deployment's pods are independent replicas"),
    (_set("models.0.vllm", {"tensorParallelSize": 8}), "models[0].orchestrator", "runs models that span nodes"),
    (_set("gpuPool.gangScheduling", {}), "gpuPool.gangScheduling.scheduler",
     "is required: models[0] (deepseek-r1) spans 2 nodes per replica"),
    (_set("gpuPool.gangScheduling", {"scheduler": "coscheduling"}), "gpuPool.gangScheduling.scheduler",
     "is not one leaderworkerset creates pod groups for"),
    (_set("models.0.autoscaling", {"enabled": True, "minReplicas": 1, "maxReplicas": 2}), "models[0].autoscaling.enabled",
     "must be false for a model spanning nodes"),
    (_set("models.0.vllm.extraArgs", ["--nnodes", "2"]), "models[0].vllm.extraArgs[0]",
     "the program renders it for a model spanning nodes"),
    (_set("models.0.env", {"NCCL_IB_HCA": "mlx5_0"}), "models[0].env.NCCL_IB_HCA", "is set by the program on the engine containers"),
    (_set("gpuPool.network", {"ibHca": "mlx5_0"}), "gpuPool.network.ibHca", "needs gpuPool.network.rdma"),
    (_set("models.0.name", "deepseek-r1-0528-distill"), "models[0].name",
     "must be at most 21 characters for a StormService spanning nodes", ("stormservice", "sglang")),
]


def test_the_refusals_the_docs_quote_are_the_rules_messages():
    doc = (PROJECT_DIR / "docs" / "topologies.md").read_text(encoding="utf-8")
    refusals = doc[doc.index("### What is refused"):]
    for mutate, field, quote, *pair in REFUSALS:
        assert f'"{quote}"' in refusals, quote
        lines = _refused(mutate, *pair)
        assert any(f"llm-serving:{field} = " in line and quote in line for line in lines), (quote, lines)
