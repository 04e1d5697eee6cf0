"""Issue 20, other teams as consumers: networkPolicy.clients is admitted to the path the exported
per-model URL names and nowhere else (evaluated with networking.k8s.io/v1 semantics, tests/netpol.py,
on the rendered objects of each topology); the per-model outputs of every stack and topology, under
keys no revision changes; the API key only ever a secret; bad clients refused with the field named."""

from __future__ import annotations

import copy
import functools
import json

import pytest
import upstream_aibrix as aibrix
from conftest import PROJECT_DIR, STACKS, k8s_objects, render_stack
from netpol import Pod, allowed
from test_gpu_accounting import stack_models
from test_network_monitoring import ENVOY, PLUGIN, pods_of, rendered_topologies, serving_ports
from test_pd import stack as pd_stack
from variants import dev_config, pair_file, render, variant_file

from apivalidation.objectmeta import Check, label_selector
from components.network import client_policy_name
from policy.workloads import pod_templates
from render import stackfile
from render.output import kubernetes_yaml, outputs_json, plan_md, resources_json
from stacks.loader import ConfigError

NS = "llm-serving-dev"  # Pulumi.dev.yaml, the base of every variant
CLIENTS = {"namespaces": ["team-search"],
           "namespaceSelectors": [{"matchLabels": {"llm-access": "granted"}},
                                  {"matchExpressions": [{"key": "team", "operator": "In", "values": ["notebooks"]}]}]}
# Pods of namespaces the clients above admit (by name, by each selector), and of namespaces they do not.
ADMITTED = [Pod("team-search", {"app": "search-api"}),
            Pod("team-x", {"app": "x"}, namespace_labels={"llm-access": "granted"}),
            Pod("data-notebooks", {"app": "jupyter"}, namespace_labels={"team": "notebooks"})]
REFUSED = [Pod("team-other", {"app": "search-api"}),
           Pod("team-y", {"app": "y"}, namespace_labels={"llm-access": "denied"}),
           Pod("team-z", {"app": "z"}, namespace_labels={"team": "search"}),
           # Our own labels do not make a pod of another namespace a client.
           Pod("default", {"app.kubernetes.io/part-of": "llm-serving"}, namespace_labels={"team": "other"})]
GATEWAY_URL = f"http://{aibrix.ENVOY_GATEWAY_SERVICE_AIBRIX_DEFAULT}.envoy-gateway-system.svc.cluster.local/v1"


def _with_gateway(sf: stackfile.StackFile, enabled: bool, clients: dict | None) -> stackfile.StackFile:
    sf = copy.deepcopy(sf)
    if not enabled:
        sf.config["llm-serving:gateway"] = json.dumps({"enabled": False})
    if clients is not None:
        sf.config["llm-serving:networkPolicy"] = json.dumps({"clients": clients})
    return sf


# The topologies that run without the gateway (RayClusterFleet P/D and hybrid need it: config rule).
DIRECT = ["vllm-deployment", "vllm-stormservice", "sglang-rolebasedgroup", "pd-same-pod"]


@functools.lru_cache(maxsize=None)
def direct(name: str, clients: bool):
    """A topology without the gateway, with or without clients."""
    return render(_with_gateway(_topology_file(name), False, CLIENTS if clients else None))


def _policies(r) -> list[dict]:
    return [o for o in k8s_objects(r) if o["kind"] == "NetworkPolicy"]


def _services(r) -> list[dict]:
    return [o for o in k8s_objects(r) if o["kind"] == "Service"]


def _model_services(r) -> list[dict]:
    """The ClusterIP Services in front of engine pods: one per model (the load test's headless one aside)."""
    engines = [p for p in pods_of(k8s_objects(r)) if p.labels.get("app.kubernetes.io/component") == "engine"]
    return [s for s in _services(r) if s["spec"].get("clusterIP") != "None" and any(_selected(s, p) for p in engines)]


def _selected(svc: dict, pod: Pod) -> bool:
    sel = svc["spec"].get("selector") or {}
    return bool(sel) and svc["metadata"]["namespace"] == pod.namespace and all(pod.labels.get(k) == v for k, v in sel.items())


# ---- the NetworkPolicies ----

@pytest.mark.parametrize("name", DIRECT)
def test_without_the_gateway_clients_reach_each_service_on_its_port_and_nothing_else(name):
    r = direct(name, True)
    objs, policies = k8s_objects(r), _policies(r)
    pods = pods_of(objs)
    engines = [p for p in pods if p.labels.get("app.kubernetes.io/component") == "engine"]
    assert engines
    # The other pods' policies are the same with clients as without (the next test).
    for pod in engines:
        behind = [s for s in _model_services(r) if _selected(s, pod)]
        target = {pod.ports[p["targetPort"]] if isinstance(p["targetPort"], str) else p["targetPort"]
                  for s in behind for p in s["spec"]["ports"]}
        # Every engine pod is behind its model's Service, on a port requests use (same-pod: the proxy).
        assert target and target <= serving_ports(pod, objs), pod.labels
        for port in set(pod.ports.values()) | {45678}:
            for client in ADMITTED:
                assert allowed(policies, client, pod, port) == (port in target), (pod.labels, client, port)
            for outsider in REFUSED:
                assert not allowed(policies, outsider, pod, port), (pod.labels, outsider, port)
    # The exported URL names exactly these Services.
    urls = {e["url"] for e in r.outputs["models"].values()}
    assert urls == {f"http://{s['metadata']['name']}.{NS}.svc.cluster.local:{s['spec']['ports'][0]['port']}/v1"
                    for s in _model_services(r)}


@pytest.mark.parametrize("name", DIRECT)
def test_clients_add_one_policy_per_service_and_change_nothing_else(name):
    without, with_clients = direct(name, False), direct(name, True)
    before = {(o["kind"], o["metadata"]["name"]): o for o in k8s_objects(without)}
    after = {(o["kind"], o["metadata"]["name"]): o for o in k8s_objects(with_clients)}
    added = set(after) - set(before)
    assert added == {("NetworkPolicy", client_policy_name(s["metadata"]["name"])) for s in _model_services(with_clients)}
    assert set(before) <= set(after) and all(after[k] == before[k] for k in before)
    # The stack's own flows stay as they were: Prometheus and the stack's Jobs, the plugin nowhere (no gateway).
    policies = _policies(with_clients)
    for pod in (p for p in pods_of(k8s_objects(with_clients)) if p.labels.get("app.kubernetes.io/component") == "engine"):
        for port in pod.ports.values():
            assert not allowed(policies, ENVOY, pod, port) and not allowed(policies, PLUGIN, pod, port)


@pytest.mark.parametrize("name", ["vllm-deployment", "vllm-stormservice", "sglang-rolebasedgroup", "pd", "pd-same-pod",
                                  "hybrid"])
def test_with_the_gateway_clients_go_through_envoy_and_are_admitted_nowhere_directly(name):
    """The exported URL is Envoy's Service in envoy-gateway-system: a policy in this namespace governs
    neither that hop nor who may take it, and the engines already admit Envoy (test_network_monitoring),
    so declaring clients adds nothing here, and above all no direct path past the gateway."""
    base = rendered_topologies()[name]
    r = render(_with_gateway(_topology_file(name), True, CLIENTS))
    assert k8s_objects(r) == k8s_objects(base)
    assert {e["url"] for e in r.outputs["models"].values()} == {GATEWAY_URL}
    policies = _policies(r)
    objs = k8s_objects(r)
    for pod in (p for p in pods_of(objs) if p.labels.get("app.kubernetes.io/component") == "engine"):
        for port in serving_ports(pod, objs) if aibrix.LABEL_NAME in pod.labels else ():
            assert allowed(policies, ENVOY, pod, port), (name, port)
        for port in set(pod.ports.values()):
            for client in ADMITTED + REFUSED:
                assert not allowed(policies, client, pod, port), (name, client, port)


def _topology_file(name: str) -> stackfile.StackFile:
    cases = {"vllm-deployment": lambda: stackfile.read(PROJECT_DIR, "dev"), "vllm-stormservice": lambda: pair_file("vllm", "stormservice"),
             "sglang-rolebasedgroup": lambda: pair_file("sglang", "rolebasedgroup"),
             "pd": lambda: pd_stack("pd", "rayclusterfleet", 24),
             "pd-same-pod": lambda: pd_stack("pd-same-pod", "deployment", 8),
             "hybrid": lambda: pd_stack("hybrid", "stormservice", 32)}
    return cases[name]()


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_declare_no_clients_and_add_no_client_policy(stack):
    names = {o["metadata"]["name"] for o in _policies(render_stack(stack))}
    assert not any(n.startswith("llm-serving-clients-") for n in names)


# ---- the outputs ----

@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_exports_each_model_under_its_name(stack):
    r = render_stack(stack)
    models = stack_models(stackfile.read(PROJECT_DIR, stack))
    out = r.outputs["models"]
    assert list(out) == [m.name for m in models]
    smoke = {x.name: x for x in r.resources if x.type == "kubernetes:batch/v1:Job" and x.name.endswith("-smoke")}
    for m in models:
        e = out[m.name]
        assert (e["servedModelName"], e["engine"], e["topology"]) == (m.served_model_name, m.engine, m.topology)
        assert e["externalUrl"] == r.outputs["externalEndpoint"] and e["externalUrl"].endswith("/v1")
        # The URL the smoke Job proves after each rollout is the URL exported, through the gateway.
        args = smoke[f"ops-{m.name}-smoke"].inputs["spec"]["template"]["spec"]["containers"][0]["args"]
        assert e["url"] == args[args.index("--endpoint") + 1] == GATEWAY_URL
        assert e["engineImage"] in _engine_images(r, m.name)
    first = out[models[0].name]
    assert (first["servedModelName"], first["topology"], first["engineImage"]) == (
        r.outputs["servedModelName"], r.outputs["topology"], r.outputs["engineImage"])


def _engine_images(r, model_name: str) -> set[str]:
    """Images of the engine containers of the model's workloads, as workloadImages lists them."""
    return {ref for key, refs in r.outputs["workloadImages"].items() if key == model_name or
            key.startswith(f"{model_name}-") for c, ref in refs.items() if c != "model-gate"}


@pytest.mark.parametrize("name", ["vllm-deployment", "vllm-stormservice", "sglang-rolebasedgroup", "pd", "pd-same-pod",
                                  "hybrid"])
def test_every_topology_exports_its_model(name):
    r = rendered_topologies()[name]
    (entry,) = r.outputs["models"].values()
    assert entry["topology"] == r.outputs["topology"]
    images = {c["image"] for o in k8s_objects(r) if o["kind"] in ("Deployment", "StormService", "RoleBasedGroup",
                                                                   "RayClusterFleet")
              for ref in _templates(o) for c in ref.template["spec"]["containers"]}
    assert entry["engineImage"] in images
    if name == "pd":   # fleets only: the Ray-enabled image
        assert entry["engineImage"] == r.outputs["vllmRayImage"] != r.outputs["engineImage"]
    assert entry["engine"] == ("sglang" if name.startswith("sglang") else "vllm")


def _templates(obj: dict):
    return pod_templates(obj["kind"], obj)


def test_keys_do_not_change_with_the_revision():
    cfg = dev_config()
    m = copy.deepcopy(cfg["models"][0])
    m["revision"] = "0801"
    before, after = render_stack("dev"), render(variant_file(models=[m]))
    jobs = [{x.inputs["metadata"]["name"] for x in r.resources if x.type == "kubernetes:batch/v1:Job"
             and x.inputs["metadata"]["name"].startswith("sync-")} for r in (before, after)]
    assert jobs[0] and jobs[1] and jobs[0] != jobs[1]   # the Job is new, as it must be (components/sync_job.py job_name)
    assert set(before.outputs["workloadImages"]) == set(after.outputs["workloadImages"])
    assert f"sync/{m['directory']}" in after.outputs["workloadImages"]
    assert set(before.outputs["models"]) == set(after.outputs["models"]) == {m["name"]}


# ---- the API key ----

KEY = "sk-consumer-test-0123456789abcdef"


@pytest.mark.parametrize("stack", STACKS)
def test_the_key_is_a_secret_output_of_every_stack(stack):
    r = render_stack(stack)
    assert "apiKey" in r.secret_outputs
    assert '"apiKey": "[secret]"' in outputs_json(r)


def test_the_key_is_in_no_rendered_file_in_plaintext():
    sf = variant_file()
    sf.config["llm-serving:apiKey"] = KEY     # decrypted, as the CLI hands it to the program
    r = render(sf)
    assert r.outputs["apiKey"] == stackfile.MASK and "apiKey" in r.secret_outputs
    for text in (outputs_json(r), kubernetes_yaml(r), resources_json(r), plan_md(r), repr(r.outputs)):
        assert KEY not in text


# ---- bad input ----

def _refusal(clients: dict | None = None, **network) -> str:
    with pytest.raises(ConfigError) as err:
        render(variant_file(networkPolicy={**network, **({"clients": clients} if clients is not None else {})}))
    return str(err.value)


@pytest.mark.parametrize("clients,line", [
    ({"namespaces": ["team-a", "team-a"]},
     "llm-serving:networkPolicy.clients.namespaces[1] = 'team-a': is listed twice (also namespaces[0])"),
    ({"namespaces": ["Team_A"]}, "llm-serving:networkPolicy.clients.namespaces[0] = 'Team_A': must be a DNS label"),
    ({"namespaceSelectors": [{}]}, "llm-serving:networkPolicy.clients.namespaceSelectors[0] = '{}': must have "
     "matchLabels or matchExpressions: an empty selector admits every namespace"),
    ({"namespaceSelectors": [{"matchLabels": {"team": "a"}}, {"matchLabels": {"team": "a"}}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[1] = {\"matchLabels\": {\"team\": \"a\"}}: is the same "
     "selector as namespaceSelectors[0]"),
    ({"namespaceSelectors": [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "In", "values": ["x"]}]},
        {"matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]}, {"key": "a", "operator": "Exists"}]}]},
     "namespaceSelectors[1] = "),
    ({"namespaceSelectors": [{"matchExpressions": [{"key": "team", "operator": "In"}]}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchExpressions[0].values = []: must be set when "
     "operator is 'In'"),
    ({"namespaceSelectors": [{"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchExpressions[0].values = [\"a\"]: must be empty when "
     "operator is 'Exists'"),
    ({"namespaceSelectors": [{"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchExpressions[0].operator = 'Equals'"),
    ({"namespaceSelectors": [{"matchLabels": {"bad key!": "a"}}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchLabels"),
    ({"namespaceSelectors": [{"matchLabels": {"team": "-a"}}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchLabels.team = '-a': must be a label value"),
    ({"namespaces": ["team-a"], "namespaceSelectors": [{"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}]},
     "llm-serving:networkPolicy.clients.namespaceSelectors[0].matchLabels = {\"kubernetes.io/metadata.name\": "
     "\"team-a\"}: selects namespace 'team-a' by name, already listed as namespaces[0]"),
    ({"namespace": ["team-a"]}, "llm-serving:networkPolicy.clients.namespace"),
])
def test_bad_clients_are_refused_with_the_field_named(clients, line):
    message = _refusal(clients)
    assert line in message, message
    assert message.startswith("Pulumi.variant.yaml: llm-serving:networkPolicy.clients")


def test_clients_without_the_network_policies_are_refused():
    message = _refusal({"namespaces": ["team-a"]}, enabled=False)
    assert message == ("Pulumi.variant.yaml: llm-serving:networkPolicy.clients = '(set)': needs networkPolicy.enabled: "
                       "true; without the NetworkPolicies every pod of the cluster reaches the engines, so naming the "
                       "clients would admit nothing and restrict nothing")


@pytest.mark.parametrize("selector", [
    {"matchExpressions": [{"key": "team", "operator": "In", "values": []}]},
    {"matchExpressions": [{"key": "team", "operator": "NotIn"}]},
    {"matchExpressions": [{"key": "team", "operator": "DoesNotExist", "values": ["a"]}]},
    {"matchExpressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]},
    {"matchLabels": {"a/b/c": "x"}},
])
def test_what_the_stack_file_refuses_the_api_server_would_refuse(selector):
    """The same selectors, put in a NetworkPolicy as the program would, fail the render's API-server
    check (apivalidation, ValidateLabelSelectorRequirement): refusing them early loses nothing valid."""
    with pytest.raises(ConfigError):
        render(variant_file(gateway={"enabled": False}, networkPolicy={"clients": {"namespaceSelectors": [selector]}}))
    c = Check()
    label_selector(c, "namespaceSelector", selector)
    assert c.found, selector


def test_valid_selectors_pass_the_api_server_rules_in_every_render():
    sf = _with_gateway(pair_file("vllm", "deployment"), False, {
        "namespaces": ["a", "b"], "namespaceSelectors": [
            {"matchLabels": {"example.com/team": "search", "tier": "prod"}},
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev", "test"]},
                                  {"key": "example.com/llm", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "quarantined", "operator": "DoesNotExist"}], "matchLabels": {"x": "y"}}]})
    r = render(sf)   # raises where apivalidation refuses an object
    (policy,) = [p for p in _policies(r) if p["metadata"]["name"].startswith("llm-serving-clients-")]
    peers = policy["spec"]["ingress"][0]["from"]
    assert len(peers) == 5
    for peer in peers:
        c = Check()
        label_selector(c, "namespaceSelector", peer["namespaceSelector"])
        assert not c.found and set(peer) == {"namespaceSelector"}


def test_the_plan_names_each_client_namespace_and_selector():
    plan = plan_md(direct("vllm-deployment", True))
    policy = client_policy_name("deepseek-v4-flash-api")
    assert f"| {policy} | namespace `team-search` | any pod | engine |" in plan
    assert f"| {policy} | namespaces with `llm-access=granted` | any pod | engine |" in plan
    assert f"| {policy} | namespaces with `team In (notebooks)` | any pod | engine |" in plan
