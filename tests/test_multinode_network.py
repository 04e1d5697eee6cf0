"""Issue 29, a model spanning nodes, on each orchestrator x engine that runs groups (tests/multinode_stacks.py
GROUP_PAIRS, two replicas of two nodes each): over the rendered objects and the pods each controller makes of
them (tests/group_pods.py),

- the NetworkPolicies (networking.k8s.io/v1 semantics, tests/netpol.py) let the pods of one model's groups
  reach each other on every TCP port and give no one else anything new: the gateway reaches only a leader's
  engine port, Prometheus scrapes what its PodMonitor selects, another model's pod reaches no worker;
- the disruption budget, run through the Kubernetes disruption controller (tests/upstream_kubernetes.py),
  lets one group go and holds the others while it is down;
- whatever selects engine pods to send them requests or read their idle state selects leaders only, and
  what counts or scrapes every pod keeps the workers.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import upstream_kubernetes as kube
from conftest import k8s_objects, render_stack
from group_pods import GroupPod, group_pods
from multinode_stacks import GROUP_PAIRS, r1_config
from netpol import Pod, allowed, ingress_allowed
from test_network_monitoring import CONTROLLER, ENVOY, IMPOSTOR, OTHER_GATEWAY, PLUGIN, PROMETHEUS, STRAY_PROMETHEUS
from test_operations import crd_scale
from variants import render, variant_file

from components.platform import manifest_urls
from config_model import Platform
from render import plan_md, runtime

REPLICAS = 2
# Ports the group uses that no container declares: vLLM 0.33.0's --master-port default (vllm/config/parallel.py),
# an SGLang --dist-init-addr port, and an OS-assigned one (vLLM's MessageQueue binds tcp://<ip>:0:
# vllm/distributed/device_communicators/shm_broadcast.py; SGLang's broadcaster takes get_open_port()).
GROUP_PORTS = (29501, 20000, 45678)
MODEL = "llm-serving.io/model"


@functools.lru_cache(maxsize=None)
def rendered(orchestrator: str, engine: str, replicas: int = REPLICAS) -> runtime.Rendered:
    cfg = r1_config(orchestrator, engine, replicas=replicas)
    cfg["gpuBudget"] = 16 * replicas
    cfg["operations"] = {**cfg.get("operations", {}), "loadTest": {"enabled": True}}
    return render(variant_file(f"r1-{orchestrator}-{engine}", **cfg))


@functools.lru_cache(maxsize=None)
def objects(orchestrator: str, engine: str, replicas: int = REPLICAS) -> list[dict]:
    return k8s_objects(rendered(orchestrator, engine, replicas))


def pods(objs: list[dict]) -> list[GroupPod]:
    return [p for o in objs for p in group_pods(o)]


def as_peer(p: GroupPod) -> Pod:
    return Pod(p.namespace, p.labels, p.ports)


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def selected(selector: dict[str, str], p: GroupPod) -> bool:
    return selector.items() <= p.labels.items()


def job_pods(objs: list[dict]) -> list[Pod]:
    return [Pod(o["metadata"]["namespace"], o["spec"]["template"]["metadata"]["labels"]) for o in of_kind(objs, "Job")]


PAIRS = [pytest.param(o, e, id=f"{o}-{e}") for o, e in GROUP_PAIRS]


@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_the_controllers_make_leaders_and_workers_of_every_group(orchestrator, engine):
    group = pods(objects(orchestrator, engine))
    assert sorted((p.group, p.leader) for p in group) == [(0, False), (0, True), (1, False), (1, True)]


# ---- NetworkPolicies ----

@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_a_group_reaches_itself_on_every_tcp_port_and_no_one_else_gains_anything(orchestrator, engine):
    objs = objects(orchestrator, engine)
    policies = of_kind(objs, "NetworkPolicy")
    group = pods(objs)
    leaders, workers = [p for p in group if p.leader], [p for p in group if not p.leader]
    (service,) = [s for s in of_kind(objs, "Service") if s["metadata"]["name"].endswith("-api")]
    (monitor,) = of_kind(objs, "PodMonitor")
    for src, dst in itertools.permutations(group, 2):
        for port in (*GROUP_PORTS, *dst.ports.values()):
            assert allowed(policies, as_peer(src), as_peer(dst), port), (src.name, dst.name, port)
        assert not allowed(policies, as_peer(src), as_peer(dst), GROUP_PORTS[0], "UDP")
    # Another model's pods: a copy of this model's own (its group labels included) and the dev stack's engine.
    (dev_engine,) = [o["spec"]["template"] for o in k8s_objects(render_stack("dev")) if o["kind"] == "Deployment"
                     and o["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]
    strangers = [Pod(group[0].namespace, {**p.labels, MODEL: "another-model"}) for p in group]
    strangers.append(Pod(group[0].namespace, dev_engine["metadata"]["labels"]))
    jobs = job_pods(objs)
    assert jobs
    target = service["spec"]["ports"][0]["targetPort"]
    for p in group:
        scraped = {p.ports[e["port"]] for e in monitor["spec"]["podMetricsEndpoints"] if e["port"] in p.ports}
        serving = {p.ports[target]} if p.leader and selected(service["spec"]["selector"], p) else set()
        every = {*GROUP_PORTS, *p.ports.values()}
        # What the leader takes (its ingress); which of this namespace's pods may send is their egress
        # (tests/test_egress.py: a stranger engine may not, the sync Job may not).
        for port in serving:
            for peer in (ENVOY, PLUGIN, *jobs, *strangers):
                assert ingress_allowed(policies, peer, as_peer(p), port), (p.name, peer.labels, port)
        for port in every - serving:
            for peer in (ENVOY, PLUGIN, *jobs, *strangers):
                assert not ingress_allowed(policies, peer, as_peer(p), port), (p.name, peer.labels, port)
        for port in every:
            for peer in (OTHER_GATEWAY, CONTROLLER, STRAY_PROMETHEUS, IMPOSTOR):
                assert not allowed(policies, peer, as_peer(p), port), (p.name, peer.labels, port)
            assert allowed(policies, PROMETHEUS, as_peer(p), port) == (port in scraped), (p.name, port)
    assert serving_leaders(objs, service) == leaders
    assert all(not p.leader for p in workers)


def serving_leaders(objs: list[dict], service: dict) -> list[GroupPod]:
    return [p for p in pods(objs) if selected(service["spec"]["selector"], p)]


def test_monitoring_scrapes_an_sglang_worker_and_finds_no_port_on_a_vllm_worker():
    # vLLM 0.33.0's worker runs --headless, no port; SGLang 0.5.23's serves /metrics on its port.
    for engine, scraped in (("vllm", False), ("sglang", True)):
        objs = objects("leaderworkerset", engine)
        (monitor,) = of_kind(objs, "PodMonitor")
        (worker, _) = [p for p in pods(objs) if not p.leader]
        assert selected(monitor["spec"]["selector"]["matchLabels"], worker)
        assert any(e["port"] in worker.ports for e in monitor["spec"]["podMetricsEndpoints"]) == scraped, engine


def test_shipped_stacks_have_no_group_policies():
    # The engine-ingress policy is a group model's only where the stack has one.
    for stack in ("dev", "staging", "prod"):
        (engines,) = [o for o in k8s_objects(render_stack(stack)) if o["kind"] == "NetworkPolicy"
                      and o["metadata"]["name"] == "llm-serving-engine-ingress"]
        assert "matchExpressions" not in engines["spec"]["podSelector"]


# ---- what selects engine pods ----

@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_requests_and_idle_checks_reach_leaders_and_the_budget_counts_every_pod(orchestrator, engine):
    objs = objects(orchestrator, engine)
    group = pods(objs)
    leaders = [p for p in group if p.leader]
    services = {s["metadata"]["name"]: s for s in of_kind(objs, "Service")}
    # The route's Service (smoke and warm-up reach it through the gateway or directly) and the load test's
    # headless Service of the engines it checks for idle.
    for name in ("deepseek-r1-api", "deepseek-r1-engines"):
        assert [p for p in group if selected(services[name]["spec"]["selector"], p)] == leaders, name
    for route in of_kind(objs, "HTTPRoute"):
        assert {b["name"] for rule in route["spec"]["rules"] for b in rule["backendRefs"]} == {"deepseek-r1-api"}
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    assert [p for p in group if selected(pdb["spec"]["selector"]["matchLabels"], p)] == group


# ---- the disruption budget, group by group ----

def budget_pods(group: list[GroupPod], ready: set[str], deleting: set[str]) -> list[kube.Pod]:
    out = []
    for p in group:
        api, kind, name, replicas = p.owner
        plural, scale = (f"{kind.lower()}s", False) if api == "apps/v1" else crd_scale(api, kind)
        ctrl = kube.Controller(api, kind, name, replicas, plural, scale)
        out.append(kube.Pod(p.name, ctrl, ready=p.name in ready, deleting=p.name in deleting))
    return out


def evictable(spec: dict, group: list[GroupPod], ready: set[str], deleting: set[str]) -> bool:
    """The eviction API's answer (eviction.go checkAndDecrement): allowed while disruptionsAllowed > 0."""
    return kube.sync(spec, budget_pods(group, ready, deleting)).disruptions_allowed > 0


def after_eviction(objs: list[dict], group: list[GroupPod], victim: GroupPod) -> list[tuple[set[str], set[str]]]:
    """(ready, deleting) pod names in each state the model passes through until the victim's group serves again.
    LWS RecreateGroupOnPodRestart deletes the leader with foreground propagation, so every pod of the group
    goes and comes back unready (pod_controller.go handleRestartPolicy); RBG and AIBrix replace the evicted pod
    alone, and the others of its group stay Ready to their probes while the group cannot serve (the smallest
    count of unready pods any of them leaves)."""
    names = {p.name for p in group}
    mates = {p.name for p in group if p.group == victim.group}
    (workload,) = [o for o in objs if o["kind"] in ("LeaderWorkerSet", "RoleBasedGroup", "StormService")]
    recreates_group = (workload["kind"] == "LeaderWorkerSet"
                       and workload["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart")
    if recreates_group:
        return [(names - {victim.name}, {victim.name}), (names - mates, mates), (names - mates, set())]
    return [(names - {victim.name}, {victim.name}), (names - {victim.name}, set())]


@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_the_budget_lets_one_group_go_and_holds_the_others_while_it_is_down(orchestrator, engine):
    objs = objects(orchestrator, engine)
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    spec = {k: v for k, v in pdb["spec"].items() if k != "selector"}
    group = pods(objs)
    everyone = {p.name for p in group}
    for victim in group:
        assert evictable(spec, group, everyone, set()), victim.name
        # Until its group serves again, no other pod may go: not the other group's, not its own group's.
        for ready, deleting in after_eviction(objs, group, victim):
            assert not evictable(spec, group, ready, deleting), (victim.name, ready, deleting)
    # Back to serving, the next group may go.
    assert evictable(spec, group, everyone, set())


@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_one_replica_lets_its_group_go_as_a_one_pod_model_lets_its_pod(orchestrator, engine):
    objs = objects(orchestrator, engine, 1)
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    spec = {k: v for k, v in pdb["spec"].items() if k != "selector"}
    group = pods(objs)
    assert evictable(spec, group, {p.name for p in group}, set())


@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_the_budget_form_is_one_the_disruption_controller_computes_for_group_pods(orchestrator, engine):
    objs = objects(orchestrator, engine)
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    group = pods(objs)
    assert isinstance(pdb["spec"].get("minAvailable"), int) and "maxUnavailable" not in pdb["spec"]
    status = kube.sync({k: v for k, v in pdb["spec"].items() if k != "selector"},
                       budget_pods(group, {p.name for p in group}, set()))
    assert status.sync_failed is None and status.disruptions_allowed == 1
    # maxUnavailable would need the owners' count: an RBG RoleInstance and an AIBrix PodSet have no /scale.
    failed = kube.sync({"maxUnavailable": 1}, budget_pods(group, {p.name for p in group}, set())).sync_failed
    assert (failed is None) == (orchestrator == "leaderworkerset"), failed


# ---- what the cluster needs ----

@pytest.mark.parametrize("orchestrator,engine", PAIRS)
def test_a_leaderworkerset_stack_says_it_needs_lws_and_the_others_do_not(orchestrator, engine):
    r = rendered(orchestrator, engine)
    prerequisites = r.outputs["prerequisites"]
    assert ("lws" in prerequisites) == (orchestrator == "leaderworkerset")
    line = next(x for x in plan_md.plan_md(r).splitlines() if x.startswith("- Cluster prerequisites:"))
    assert ("lws v0.10.0" in line) == (orchestrator == "leaderworkerset"), line
    assert line.endswith("(installed separately; see README)")   # platform.install is false in these stacks
    for stack in ("dev", "staging", "prod"):
        assert "lws" not in render_stack(stack).outputs["prerequisites"]


def test_a_stack_that_installs_the_prerequisites_installs_lws_and_says_so():
    urls = manifest_urls(Platform(install=True))
    assert list(urls)[-1] == "lws" and urls["lws"].endswith("/v0.10.0/manifests.yaml")
    from components.platform import required_versions
    assert required_versions(Platform(install=True))["lws"] == "v0.10.0"
    assert "lws" not in required_versions(Platform())
