"""Issue 31: gateway.routingLayer inferencePool. Over the rendered objects: each served model's
InferencePool selects exactly the pods its Service selects, on the engine container's own port; its
endpointPickerRef names the picker's Service on a port that Service has; the picker runs the args and
the config of policy/endpoint_picker.py for the model's engine; the HTTPRoute on the stack's Gateway
sends the model's requests to the pool, allowed by a ReferenceGrant; the Gateway's proxies reach the
engines and the picker, the picker the engines and the API server, through the NetworkPolicies as the
API server's semantics read them (tests/netpol.py). Switching layers changes no engine pod template
(no rollout, no GPU) and names every object that moves apart from the one it replaces, so both exist
until the old one is deleted at the end of the `pulumi up`. What the layer cannot carry is refused
under its field."""

from __future__ import annotations

import functools
import json

import pytest
import variants
import yaml
from conftest import k8s_objects
from netpol import Address, Pod, allowed
from variants import dev_config, model, render, variant_file

from policy import endpoint_picker as epp
from policy.workloads import containers, pod_templates
from stacks.loader import ConfigError

GATEWAY = {"routingLayer": "inferencePool", "implementation": "istio", "namespace": "gateways", "name": "inference-gw"}
# A test fixture, not a published image: the digest of epp:v1.5.0 was not found here (docs say how to pin it).
EPP_FIXTURE = {"upstream": "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0", "digest": "sha256:" + "7" * 64}
NS = "llm-serving-dev"   # the dev stack file's namespace
PROXY = Pod("gateways", {"gateway.networking.k8s.io/gateway-name": "inference-gw"})
ENVOY = Pod("envoy-gateway-system", {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                                     "app.kubernetes.io/managed-by": "envoy-gateway",
                                     "gateway.envoyproxy.io/owning-gateway-namespace": "aibrix-system",
                                     "gateway.envoyproxy.io/owning-gateway-name": "aibrix-eg"})


def images(**extra) -> dict:
    return {**dev_config()["images"], "endpointPicker": EPP_FIXTURE, **extra}


def gateway(**extra) -> dict:
    return {**(dev_config().get("gateway") or {}), **GATEWAY, **extra}


@functools.lru_cache(maxsize=None)
def objects(layer: str = "inferencePool", engine: str = "vllm") -> tuple:
    sf = variants.sglang_stack() if engine == "sglang" else variant_file()
    with_layer(sf, layer)
    return tuple(k8s_objects(render(sf)))


def with_layer(sf, layer: str = "inferencePool"):
    """The stack file with the endpoint picker image and, for inferencePool, the layer on a Gateway of its own."""
    imgs = json.loads(sf.config["llm-serving:images"])
    sf.config["llm-serving:images"] = json.dumps({**imgs, "endpointPicker": EPP_FIXTURE})
    if layer == "inferencePool":
        sf.config["llm-serving:gateway"] = json.dumps(gateway())
    return sf


def of_kind(objs, kind: str) -> list[dict]:
    return [o for o in objs if o.get("kind") == kind]


def named(objs, kind: str, name: str) -> dict:
    (out,) = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    return out


def pod_of(objs, selector: dict) -> dict:
    """The one workload pod template whose labels the selector matches."""
    out = [ref.template for o in objs for ref in pod_templates(o["kind"], o)
           if all(ref.template.get("metadata", {}).get("labels", {}).get(k) == v for k, v in selector.items())]
    assert len(out) == 1, (selector, len(out))
    return out[0]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_model_gets_a_pool_over_its_service_pods_and_a_picker_for_its_engine(engine):
    objs = objects(engine=engine)
    (pool,) = of_kind(objs, "InferencePool")
    (service,) = [s for s in of_kind(objs, "Service") if s["metadata"]["name"].endswith("-api")]
    spec = pool["spec"]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1" and pool["metadata"]["namespace"] == NS
    assert spec["selector"]["matchLabels"] == service["spec"]["selector"]
    template = pod_of(objs, spec["selector"]["matchLabels"])
    ports = {p["name"]: p["containerPort"] for _, c in containers(template) for p in c.get("ports", [])}
    assert spec["targetPorts"] == [{"number": ports["engine"]}]
    ref = spec["endpointPickerRef"]
    picker_service = named(objs, "Service", ref["name"])
    assert ref["port"]["number"] in {p["port"] for p in picker_service["spec"]["ports"]}
    deployment = named(objs, "Deployment", ref["name"])
    pod = deployment["spec"]["template"]
    assert all(pod["metadata"]["labels"].get(k) == v for k, v in picker_service["spec"]["selector"].items())
    (container,) = pod["spec"]["containers"]
    config_path = container["args"][container["args"].index("--config-file") + 1]
    assert container["args"] == epp.picker_args(engine, pool["metadata"]["name"], NS, config_path)
    (mount,) = container["volumeMounts"]
    assert config_path.startswith(mount["mountPath"] + "/") and mount["readOnly"] is True
    config_map = named(objs, "ConfigMap", next(v["configMap"]["name"] for v in pod["spec"]["volumes"]
                                               if v["name"] == mount["name"]))
    assert yaml.safe_load(config_map["data"][config_path.rsplit("/", 1)[1]]) == epp.picker_config(engine)
    assert EPP_FIXTURE["digest"] in container["image"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    # Read-only, non-root, nothing but its own namespace's pools and pods.
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and pod["spec"]["securityContext"]["runAsNonRoot"]
    role = named(objs, "Role", ref["name"])
    assert {v for r in role["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    binding = named(objs, "RoleBinding", ref["name"])
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["spec"]["serviceAccountName"], "namespace": NS}]


def test_the_route_sends_the_models_requests_to_its_pool_on_the_stacks_gateway():
    objs = objects()
    (pool,) = of_kind(objs, "InferencePool")
    (route,) = of_kind(objs, "HTTPRoute")
    assert route["metadata"]["namespace"] == "gateways"
    assert route["spec"]["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                            "name": "inference-gw", "namespace": "gateways"}]
    served = dev_config()["models"][0]["servedModelName"]
    for rule in route["spec"]["rules"]:
        assert rule["backendRefs"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                        "name": pool["metadata"]["name"], "namespace": NS}]
        assert {h["value"] for m in rule["matches"] for h in m["headers"]} == {served}
        assert len(rule["matches"]) <= 64
    assert {h["name"] for r in route["spec"]["rules"] for m in r["matches"] for h in m["headers"]} == \
        {"model", "X-Gateway-Model-Name"}
    # `pulumi up` waits for the Gateway to accept the route and resolve the pool (make e2e runs the provider's await).
    waits = json.loads(route["metadata"]["annotations"]["pulumi.com/waitFor"])
    assert waits == [f'jsonpath={{.status.parents[0].conditions[?(@.type=="{c}")].status}}=True'
                     for c in ("Accepted", "ResolvedRefs")]
    (grant,) = of_kind(objs, "ReferenceGrant")
    assert grant["metadata"]["namespace"] == NS
    assert grant["spec"] == {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "gateways"}],
                             "to": [{"group": "inference.networking.k8s.io", "kind": "InferencePool"}]}


def test_the_gateways_proxies_reach_engines_and_picker_and_the_picker_what_it_reads():
    objs = objects()
    policies = of_kind(objs, "NetworkPolicy")
    (pool,) = of_kind(objs, "InferencePool")
    template = pod_of(objs, pool["spec"]["selector"]["matchLabels"])
    engine = Pod(NS, template["metadata"]["labels"], {"engine": pool["spec"]["targetPorts"][0]["number"]})
    picker_pod = named(objs, "Deployment", pool["spec"]["endpointPickerRef"]["name"])["spec"]["template"]
    picker = Pod(NS, picker_pod["metadata"]["labels"], {"grpc": epp.GRPC_PORT, "metrics": epp.METRICS_PORT})
    port = engine.ports["engine"]
    assert allowed(policies, PROXY, engine, port) and allowed(policies, PROXY, picker, epp.GRPC_PORT)
    assert allowed(policies, picker, engine, port)
    assert allowed(policies, picker, Address("192.0.2.1"), 6443) and allowed(policies, picker, Address("192.0.2.1"), 443)
    # Nothing else: the proxies not the picker's metrics, AIBrix's Envoy not the engines, the picker no other port.
    assert not allowed(policies, PROXY, picker, epp.METRICS_PORT)
    assert not allowed(policies, ENVOY, engine, port)
    assert not allowed(policies, picker, Address("192.0.2.1"), 80)


def test_switching_layers_rolls_no_engine_and_keeps_the_old_route_until_the_end():
    before, after = objects("aibrix"), objects()
    def key(o):
        return (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
    workloads = {"Deployment", "StatefulSet", "StormService", "RoleBasedGroup", "LeaderWorkerSet"}
    engines = {key(o): o for o in before if o["kind"] in workloads and o["metadata"]["labels"].get(
        "app.kubernetes.io/component") == "engine"}
    assert engines
    for k, o in engines.items():
        assert {key(x): x for x in after}[k] == o, f"{k} changes with the routing layer: a rollout"
    # What admits a gateway to the engines and what routes to them: the new objects beside the old ones.
    moved = {k for k in {key(o) for o in before} ^ {key(o) for o in after}
             if k[0] in {"HTTPRoute", "ReferenceGrant", "NetworkPolicy"}}
    old = {k for k in moved if k in {key(o) for o in before}}
    new = moved - old
    assert {k[0] for k in old} == {"HTTPRoute", "ReferenceGrant", "NetworkPolicy"} == {k[0] for k in new}
    assert not {k[1:] for k in old} & {k[1:] for k in new}


@pytest.mark.parametrize("changes,path,message", [
    ({"images": None}, "images.endpointPicker", "is required by gateway.routingLayer inferencePool"),
    ({"gateway": {"routingLayer": "inferencePool"}}, "gateway.name", "has no InferencePool backend"),
    ({"images": {"endpointPicker": {**EPP_FIXTURE, "upstream": "registry.k8s.io/gateway-api-inference-extension/epp:v1.6.2"}}},
     "images.endpointPicker.upstream", "must be the endpoint picker of GIE v1.5.0 (tag v1.5.0 or none), not v1.6.2"),
    ({"models": [model(routingStrategy="least-request")]}, "models[0].routingStrategy", "does not apply"),
    ({"consumers": [{"name": "search", "namespace": "team-search", "requestsPerMinute": 600}]},
     "consumers[0].requestsPerMinute", "is not carried by gateway.implementation istio"),
    ({"gateway": {**GATEWAY, "defaultRequestsPerMinute": 60}}, "gateway.defaultRequestsPerMinute", "is not carried"),
])
def test_what_the_layer_cannot_carry_is_refused_under_its_field(changes, path, message):
    cfg = {"images": images(), "gateway": gateway()}
    for k, v in changes.items():
        if k == "images":
            cfg["images"] = dev_config()["images"] if v is None else images(**v)
        elif k == "gateway":
            cfg["gateway"] = {**(dev_config().get("gateway") or {}), **v}
        else:
            cfg[k] = v
    with pytest.raises(ConfigError) as err:
        render(variant_file(**cfg))
    line = next((x for x in str(err.value).splitlines() if f"llm-serving:{path} = " in x), None)
    assert line is not None and message in line, str(err.value)


@pytest.mark.parametrize("topology,orchestrator,budget", [("pd-same-pod", "deployment", 8), ("pd", "rayclusterfleet", 24),
                                                         ("hybrid", "stormservice", 32)])
def test_a_pd_model_is_refused_with_the_reason(topology, orchestrator, budget):
    import test_pd
    sf = with_layer(test_pd.stack(topology, orchestrator, budget))
    with pytest.raises(ConfigError) as err:
        render(sf)
    assert f"llm-serving:models[0].topology = '{topology}': is not carried by gateway.routingLayer inferencePool" \
        in str(err.value), str(err.value)


def test_the_plan_names_each_pool_its_picker_and_what_it_scores_on():
    from render.plan_md import plan_md
    md = plan_md(render(with_layer(variant_file())))
    routes = md[md.index("## Gateway routes"):md.index("## Network policies")]
    assert "`pulumi up` waits until the Gateway accepts each route and resolves its pool" in routes
    (row,) = [line for line in routes.splitlines() if line.startswith(f"| {NS}/") and "-pool |" in line]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == f"Service deepseek-v4-flash-pool-epp:{epp.GRPC_PORT}"
    assert cells[5] == ", ".join(f"{k} ({w})" for k, w in epp.SCORER_WEIGHTS.items())
    assert set(cells[6].replace("`", "").split(", ")) == set(epp.metric_names("vllm").values())
    assert "Routing strategy per served model" not in routes


def test_changes_md_of_a_switch_says_what_moves_and_that_no_engine_restarts():
    from render import changes, changes_md, output
    before = render(with_layer(variant_file(), "aibrix"))
    after = render(with_layer(variant_file()))
    plan = changes.plan(json.loads(output.resources_json(before)), json.loads(output.resources_json(after)),
                        json.loads(output.outputs_json(before)), json.loads(output.outputs_json(after)), stack="variant")
    assert plan.problems == []
    routes = {(s.action, s.object) for s in plan.changes if s.object.startswith("HTTPRoute ")}
    assert routes == {("create", "HTTPRoute gateways/deepseek-v4-flash-pool-llm-serving-dev"),
                      ("delete", "HTTPRoute aibrix-system/deepseek-v4-flash-api-llm-serving-dev")}
    assert all(not w.restarts for w in plan.workloads) and plan.peak_gpus == 8
    md = changes_md.changes_md(plan, "before")
    moved = md[md.index("## Routes that move"):md.index("## Serving per model")]
    assert "Created in phase 1: HTTPRoute gateways/deepseek-v4-flash-pool-llm-serving-dev" in moved
    assert "waits until the Gateway accepts HTTPRoute gateways/deepseek-v4-flash-pool-llm-serving-dev" in moved
    assert "| DeepSeek-V4-Flash | no downtime | none |" in md


def test_prometheus_scrapes_the_pickers_where_their_policy_lets_it():
    ops = {**(dev_config().get("operations") or {}), "monitoring": {"enabled": True}}
    objs = k8s_objects(render(with_layer(variant_file(operations=ops))))
    monitors = {m["metadata"]["name"]: m["spec"] for m in of_kind(objs, "PodMonitor")}
    spec = monitors["llm-serving-endpoint-pickers"]
    (pool,) = of_kind(objs, "InferencePool")
    pod = named(objs, "Deployment", pool["spec"]["endpointPickerRef"]["name"])["spec"]["template"]
    assert all(pod["metadata"]["labels"].get(k) == v for k, v in spec["selector"]["matchLabels"].items())
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert ports[endpoint["port"]] == epp.METRICS_PORT
    prometheus = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
    assert allowed(of_kind(objs, "NetworkPolicy"), prometheus, Pod(NS, pod["metadata"]["labels"], ports),
                   epp.METRICS_PORT)
    # The engines' own monitor does not select the pickers.
    engines = monitors["llm-serving-engines"]["selector"]["matchLabels"]
    assert not all(pod["metadata"]["labels"].get(k) == v for k, v in engines.items())


def test_prerequisites_name_the_extension_and_aibrix_only_where_a_model_needs_it():
    from test_gpu_accounting import stack_config

    from components.platform import INFERENCE_EXTENSION, required_versions
    plain = render(with_layer(variant_file())).outputs["prerequisites"]
    assert plain[INFERENCE_EXTENSION] == epp.EPP_VERSION and "aibrix" not in plain and "envoyGateway" not in plain
    assert "aibrix" in render(with_layer(variant_file(), "aibrix")).outputs["prerequisites"]
    # A StormService or a PodAutoscaler is AIBrix's, whatever routes to it.
    storm = model(orchestrator="stormservice")
    storm.pop("rollout")
    cfg = stack_config(with_layer(variant_file(models=[storm])))
    assert required_versions(cfg.platform, cfg.models, inference_pool=True)["aibrix"] == "v0.7.0"


def test_the_exports_name_the_models_service_in_cluster_and_the_gateway_outside():
    outputs = render(with_layer(variant_file())).outputs
    (entry,) = outputs["models"].values()
    assert entry["url"] == f"http://deepseek-v4-flash-api.{NS}.svc.cluster.local:8000/v1"
    assert entry["externalUrl"] == dev_config()["gateway"]["externalEndpoint"] + "/v1"


def test_in_cluster_consumers_go_through_the_gateway_when_the_stack_names_its_service():
    sf = with_layer(variant_file())
    sf.config["llm-serving:gateway"] = json.dumps(gateway(inClusterEndpoint="http://inference-gw-istio.gateways.svc.cluster.local"))
    (entry,) = render(sf).outputs["models"].values()
    assert entry["url"] == "http://inference-gw-istio.gateways.svc.cluster.local/v1"


@pytest.mark.parametrize("layer,url,message", [
    ("inferencePool", "http://10.96.0.10", "must be the Gateway Service's DNS name, never an IP"),
    ("aibrix", "http://inference-gw-istio.gateways.svc.cluster.local", "applies to gateway.routingLayer inferencePool"),
])
def test_a_wrong_in_cluster_endpoint_is_refused(layer, url, message):
    sf = with_layer(variant_file(), layer)
    gw = json.loads(sf.config["llm-serving:gateway"])
    sf.config["llm-serving:gateway"] = json.dumps({**gw, "inClusterEndpoint": url})
    with pytest.raises(ConfigError) as err:
        render(sf)
    assert f"llm-serving:gateway.inClusterEndpoint = '{url}': {message}" in str(err.value), str(err.value)
