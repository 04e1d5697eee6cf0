"""The policy pack on gateway.routingLayer inferencePool (issue 31; tests/pool_stacks.py): every pool render passes
through the real policy server (tests/policy_server.py) in preview and in `pulumi up`, and each way of breaking a
pool, its picker, the picker's probes or a route to it is refused by its rule with a message naming the object
and what is wrong (in process, the same rule functions the server runs; tests/test_pack.py FAILING breaks each
through the server). The controllers' labels the pool rules match selectors against are the ones the program
writes its leader Services with (components/orchestrators/)."""

from __future__ import annotations

import copy
import functools
from typing import Callable, Iterator

import pytest
from conftest import stack_resources
from policy_server import PackServer, operation, serving
from pool_stacks import POOL_STACKS, RULE_STACKS, pool_render, pool_stack

from policy import endpoint_picker as epp
from policy import rules, workloads
from policy.stack_rules import StackResource

pytestmark = pytest.mark.xdist_group("pack-pool")

NS = "llm-serving-dev"


@pytest.fixture(scope="module")
def server() -> Iterator[PackServer]:
    yield from serving()


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
@pytest.mark.parametrize("name", list(POOL_STACKS))
def test_every_pool_render_passes_through_the_server(server, name, preview):
    report = server.run(operation(pool_render(name, preview), server.fresh_stack("pool"), stack_file=pool_stack(name),
                                  policy_config="dev"))
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.violations() == [], [(d.policy, d.level, d.message) for d in report.violations()]
    if not preview:
        assert report.skipped() == []
    assert {"inference-pool-pods", "inference-pool-picker", "inference-pool-routes", "endpoint-picker-probes"} <= {
        name for name, level in report.levels.items() if level == "mandatory"}


@pytest.mark.parametrize("name", list(RULE_STACKS))
def test_a_stormservice_group_passes_the_pool_rules(name):
    """A StormService group (its one template for every rank, pod-group-index 0 the leader) in process: the pool
    rules read it as they read the groups that go through the server."""
    resources = list(_resources(name))
    assert [m for rule in STACK_RULES for m in rule(resources)] == []
    assert [m for r in resources for m in rules.endpoint_picker_probes_grpc(r.type, r.props)] == []


# ---- each rule, each way of breaking what it reads ----

@functools.lru_cache(maxsize=None)
def _resources(name: str) -> tuple[StackResource, ...]:
    return tuple(stack_resources(pool_render(name)))


def broken(name: str, kind: str, change: Callable[[dict], None], match: Callable[[dict], bool] = lambda p: True,
           drop: bool = False) -> list[StackResource]:
    """The render's resources, each of `kind` that `match`es changed (a copy), or dropped."""
    out = []
    for r in _resources(name):
        props = r.props
        if props.get("kind") == kind and match(props):
            if drop:
                continue
            props = copy.deepcopy(props)
            change(props)
        out.append(StackResource(r.type, r.name, props, r.options, r.provider, r.custom, r.parent))
    return out


def pool_spec(p: dict) -> dict:
    return p["spec"]


def picker_pod(p: dict) -> dict:
    return p["spec"]["template"]


def is_picker(p: dict) -> bool:
    return p["metadata"]["name"].endswith("-pool-epp")


def picker(p: dict) -> dict:
    return picker_pod(p)["spec"]["containers"][0]


def set_flag(c: dict, flag: str, value: str) -> None:
    c["args"][c["args"].index(flag) + 1] = value


def selector(p: dict) -> dict:
    return p["spec"]["selector"]["matchLabels"]


POOL = f"InferencePool {NS}/deepseek-v4-flash-pool"
R1_POOL = f"InferencePool {NS}/deepseek-r1-pool"
LWS = "pool-r1-leaderworkerset-vllm"
RBG = "pool-r1-rolebasedgroup-sglang"
VLLM = "pool-vllm-deployment"

POOL_PODS = [
    ("no pod", VLLM, "InferencePool", lambda p: selector(p).update({"llm-serving.io/model": "other"}),
     f"{POOL}: selector {{'app.kubernetes.io/component': 'engine', 'llm-serving.io/model': 'other'}} selects no pod "
     f"of this stack in {NS}; the gateway would find no endpoint for the model."),
    # Without the controller's leader label the pool takes in the group's workers: vLLM --headless, no API.
    ("lws workers", LWS, "InferencePool", lambda p: selector(p).pop(workloads.LWS_WORKER_INDEX_LABEL),
     f"{R1_POOL}: selects a group's worker pods (LeaderWorkerSet {NS}/deepseek-r1 pods at "
     "spec.leaderWorkerTemplate.workerTemplate); only the leader serves the model"),
    ("rbg workers", RBG, "InferencePool", lambda p: selector(p).update({workloads.RBG_COMPONENT_LABEL: "worker"}),
     f"{R1_POOL}: selects a group's worker pods (RoleBasedGroup {NS}/deepseek-r1 pods at "
     "spec.roles[0].leaderWorkerPattern.template with workerTemplatePatch)"),
    ("stormservice ranks", "pool-r1-stormservice-sglang", "InferencePool",
     lambda p: selector(p).pop(workloads.STORMSERVICE_GROUP_INDEX_LABEL),
     f"{R1_POOL}: selects a group's worker pods (StormService {NS}/deepseek-r1 pods at "
     "spec.template.spec.roles[0].template (ranks 1 and up))"),
    ("picker", VLLM, "InferencePool", lambda p: p["spec"]["selector"].update(matchLabels={
        "app.kubernetes.io/component": "endpoint-picker"}),
     f"{POOL}: selects the endpoint picker's own pods (Deployment {NS}/deepseek-v4-flash-pool-epp pods at spec.template)"),
    ("not an engine", VLLM, "InferencePool", lambda p: p["spec"]["selector"].update(matchLabels={
        "app.kubernetes.io/name": "open-webui"}), f"{POOL}: selects Deployment {NS}/open-webui pods at spec.template, "
     "which run no engine"),
    ("port", VLLM, "InferencePool", lambda p: p["spec"].update(targetPorts=[{"number": 9000}]),
     f"{POOL}: targetPorts 9000 is not a port Deployment {NS}/deepseek-v4-flash pods at spec.template serve on: "
     "container engine serves on 8000 (--port) and declares containerPorts [8000]."),
]

PICKER = [
    ("no service", VLLM, "InferencePool", lambda p: p["spec"]["endpointPickerRef"].update(name="elsewhere"),
     f"{POOL}: endpointPickerRef names Service {NS}/elsewhere, which this stack does not declare"),
    ("no port", VLLM, "InferencePool", lambda p: p["spec"]["endpointPickerRef"].update(port={"number": epp.HEALTH_PORT}),
     f"{POOL}: endpointPickerRef port 9003 is not a port of Service {NS}/deepseek-v4-flash-pool-epp (its ports: "
     "[9002, 9090])."),
    # The metrics port: a Service port the picker has, but not ext_proc.
    ("metrics port", VLLM, "InferencePool", lambda p: p["spec"]["endpointPickerRef"].update(port={"number": epp.METRICS_PORT}),
     f"{POOL}: Service {NS}/deepseek-v4-flash-pool-epp selects Deployment {NS}/deepseek-v4-flash-pool-epp pods at "
     "spec.template on targetPort 'metrics', not the picker's ext_proc port 9002 (--grpc-port)."),
    ("other pool", VLLM, "Deployment", lambda p: set_flag(picker(p), "--pool-name", "qwen-pool"),
     f"{POOL}: Service {NS}/deepseek-v4-flash-pool-epp selects Deployment {NS}/deepseek-v4-flash-pool-epp pods at "
     f"spec.template, whose picker serves pool {NS}/qwen-pool (--pool-namespace/--pool-name); it would pick the "
     "endpoints of another pool."),
    ("other namespace", VLLM, "Deployment", lambda p: set_flag(picker(p), "--pool-namespace", "default"),
     "whose picker serves pool default/deepseek-v4-flash-pool"),
    ("engines behind", VLLM, "Service", lambda p: p["spec"].update(selector={"app.kubernetes.io/component": "engine"}),
     f"{POOL}: Service {NS}/deepseek-v4-flash-pool-epp selects Deployment {NS}/deepseek-v4-flash pods at spec.template, "
     "which run no endpoint picker (no --pool-name)."),
]

ROUTES = [
    ("no grant", VLLM, "ReferenceGrant", None,
     f"HTTPRoute gateways/deepseek-v4-flash-pool-{NS}: backendRef InferencePool {NS}/deepseek-v4-flash-pool: no "
     f"ReferenceGrant of this stack in {NS} allows HTTPRoutes from gateways to it"),
    ("grant to services", VLLM, "ReferenceGrant", lambda p: p["spec"].update(to=[{"group": "", "kind": "Service"}]),
     "no ReferenceGrant of this stack"),
    ("no pool", VLLM, "HTTPRoute", lambda p: [b.update(name="qwen-pool") for r in p["spec"]["rules"]
                                              for b in r["backendRefs"]],
     f"backendRef InferencePool {NS}/qwen-pool is not a pool of this stack"),
    ("alpha group", VLLM, "HTTPRoute", lambda p: [b.update(group="inference.networking.x-k8s.io")
                                                  for r in p["spec"]["rules"] for b in r["backendRefs"]],
     "has group 'inference.networking.x-k8s.io'; the stack's pools and their pickers are inference.networking.k8s.io."),
]

PROBE = [
    ("http", lambda c: c.update(readinessProbe={"httpGet": {"path": "/health", "port": epp.HEALTH_PORT}}),
     f"Deployment {NS}/deepseek-v4-flash-pool-epp: endpoint picker container epp readinessProbe is httpGet; the picker "
     "serves no HTTP health, only grpc on 9003 (--grpc-health-port), so the probe never passes."),
    ("tcp", lambda c: c.update(livenessProbe={"tcpSocket": {"port": epp.HEALTH_PORT}}),
     "epp livenessProbe is not grpc on the health port 9003 (--grpc-health-port)"),
    ("ext_proc port", lambda c: c["readinessProbe"]["grpc"].update(port=epp.GRPC_PORT),
     "epp readinessProbe is not grpc on the health port 9003"),
    ("none", lambda c: c.pop("readinessProbe"), "epp has no readinessProbe; probe grpc port 9003 (--grpc-health-port)."),
]


def _ids(cases) -> list[str]:
    return [c[0] for c in cases]


@pytest.mark.parametrize("case,name,kind,change,expected", POOL_PODS, ids=_ids(POOL_PODS))
def test_a_pool_over_anything_but_its_models_serving_pods_is_refused(case, name, kind, change, expected):
    found = rules.inference_pools_select_serving_pods(broken(name, kind, change))
    assert any(m.startswith(expected) for m in found), found


@pytest.mark.parametrize("case,name,kind,change,expected", PICKER, ids=_ids(PICKER))
def test_a_pool_without_its_own_picker_behind_its_ref_is_refused(case, name, kind, change, expected):
    match = is_picker if kind in ("Deployment", "Service") else (lambda p: True)
    found = rules.inference_pools_have_their_picker(broken(name, kind, change, match))
    assert any(m.startswith(expected) or expected in m for m in found), found


@pytest.mark.parametrize("case,name,kind,change,expected", ROUTES, ids=_ids(ROUTES))
def test_a_route_to_a_pool_it_cannot_reach_is_refused(case, name, kind, change, expected):
    found = rules.routes_reach_inference_pools(broken(name, kind, change or (lambda p: None), drop=change is None))
    assert any(m.startswith(expected) or expected in m for m in found), found


@pytest.mark.parametrize("case,change,expected", PROBE, ids=_ids(PROBE))
def test_a_picker_probed_other_than_by_grpc_on_its_health_port_is_refused(case, change, expected):
    found = [m for r in broken(VLLM, "Deployment", lambda p: change(picker(p)), is_picker)
             for m in rules.endpoint_picker_probes_grpc(r.type, r.props)]
    assert any(m.startswith(expected) or expected in m for m in found), found


def test_the_controllers_leader_labels_are_the_ones_the_program_selects_leaders_by():
    from components.orchestrators import leaderworkerset, rolebasedgroup, stormservice
    assert workloads.LWS_WORKER_INDEX_LABEL == leaderworkerset.WORKER_INDEX_LABEL
    assert workloads.RBG_COMPONENT_LABEL == rolebasedgroup.COMPONENT_LABEL
    assert workloads.STORMSERVICE_GROUP_INDEX_LABEL == stormservice.GROUP_INDEX_LABEL


# ---- preview: an unknown anywhere they read makes the pool rules decide nothing, never refuse or raise ----

STACK_RULES = (rules.inference_pools_select_serving_pods, rules.inference_pools_have_their_picker,
               rules.routes_reach_inference_pools)
READ_KINDS = {"InferencePool", "HTTPRoute", "ReferenceGrant", "Service", "Deployment", "LeaderWorkerSet", "RoleBasedGroup"}
SAMPLE = 400   # of about 1500 to 2500 paths a render; all of them pass too (about 2 s a render)


@pytest.mark.parametrize("name", [VLLM, LWS, RBG])
def test_no_pool_rule_refuses_or_raises_on_an_unknown(name):
    """Each sampled leaf (or subtree) of what the rules read replaced by the value an unknown becomes in the pack
    (policy/unknowns.py UNKNOWN, as plain() makes it): the render passes when known, so it passes with the unknown,
    and nothing raises (a stack policy that raises fails the preview: tests/test_pack.py sweeps the resource rules)."""
    import random

    from test_pack import _paths, _replaced

    from policy.unknowns import UNKNOWN
    resources = list(_resources(name))
    candidates = [(i, path) for i, r in enumerate(resources) if r.props.get("kind") in READ_KINDS
                  for path in _paths(r.props) if path]
    for i, path in random.Random(name).sample(candidates, min(SAMPLE, len(candidates))):
        r = resources[i]
        changed = StackResource(r.type, r.name, _replaced(r.props, path, UNKNOWN), r.options, r.provider, r.custom, r.parent)
        variant = resources[:i] + [changed] + resources[i + 1:]
        for rule in STACK_RULES:
            assert rule(variant) == [], (rule.__name__, r.name, path)
        assert rules.endpoint_picker_probes_grpc(changed.type, changed.props) == [], (r.name, path)
