"""Issue 31: gateway.implementation under routingLayer inferencePool (components/gateway_implementations/).
Each implementation rendered once: its proxy pods, as each implementation's own source labels them (written
here from the source, not asked of the registry), reach the engines' serving port and the picker's ext_proc
port and nothing else, through the NetworkPolicies as the API server reads them (tests/netpol.py); proxies
of another label scheme or of another Gateway do not. Istio's DestinationRule sends TLS to the picker's
Service, NGF's ProxySettingsPolicy carries the route's timeout, the Envoy AI Gateway's BackendTrafficPolicy
each consumer's limit; each is checked against its CRD where one is readable here (Istio's from istio.io/api,
Envoy Gateway's at v1.2.8 in ../shared/crds and at v1.8.1 from its module) and NGF's against its types
(tests/upstream_nginx_gateway_fabric.py: its module is not served, ../shared holds no NGF CRD). What an
implementation cannot carry is refused under its field, with its reason."""

from __future__ import annotations

import functools
import typing

import jsonschema
import pydantic
import pytest
import upstream_envoy_gateway as eg
import upstream_nginx_gateway_fabric as ngf
from conftest import k8s_objects
from crd_schemas import crd_index, raw_crd_index, strict, validate_custom_resource
from netpol import Pod, allowed
from test_inference_pool import EPP_FIXTURE, named, of_kind, pod_of
from variants import CONSUMERS, consumers_file, dev_config, render, variant_file

import apivalidation
from apivalidation import cel_rules, module_crds
from components import gateway_implementations as gi
from components import gateway_policies as gp
from config_model import Gateway
from config_model.types import DnsLabel
from policy import endpoint_picker as epp
from stacks.loader import ConfigError

NS = "llm-serving-dev"
GW_NS, GW_NAME = "gateways", "inference-gw"
TIMEOUT = 150       # gateway.requestTimeoutSeconds of every render here: not the default 120 (the dev
                    # model's terminationGraceSeconds 180 allows up to 150)
DEFAULT_RPM = 30

# Each implementation's proxy pods for Gateway gateways/inference-gw, as its source labels them.
PROXIES = {
    # istio 1.30.1 manifests/charts/istio-control/istio-discovery/files/kube-gateway.yaml (pod template).
    "istio": Pod(GW_NS, {"gateway.networking.k8s.io/gateway-name": GW_NAME,
                         "gateway.networking.k8s.io/gateway-class-name": "istio",
                         "gateway.istio.io/managed": "istio.io-gateway-controller", "sidecar.istio.io/inject": "false",
                         "service.istio.io/canonical-name": f"{GW_NAME}-istio",
                         "service.istio.io/canonical-revision": "latest"}),
    # NGF v2.6.0 internal/controller/provisioner/objects.go buildLabelsAndAnnotations (instance and managed-by
    # from the NGF release, here "ngf"; name = the nginx resource name).
    "nginxGatewayFabric": Pod(GW_NS, {"app.kubernetes.io/instance": "ngf", "app.kubernetes.io/managed-by": "ngf-nginx",
                                      "app.kubernetes.io/name": f"{GW_NAME}-nginx",
                                      "gateway.networking.k8s.io/gateway-name": GW_NAME}),
    # agentgateway v1.0.0 controller/pkg/kgateway/helm/agentgateway/templates/deployment.yaml with _helpers.tpl.
    "agentgateway": Pod(GW_NS, {"app.kubernetes.io/name": GW_NAME, "app.kubernetes.io/instance": GW_NAME,
                                "gateway.networking.k8s.io/gateway-name": GW_NAME,
                                "gateway.networking.k8s.io/gateway-class-name": "agentgateway"}),
    # Envoy Gateway (v1.2.8 port; the same labels and namespace at v1.8.1, envoy_ai_gateway.py).
    "envoyAiGateway": Pod(eg.CONTROLLER_NAMESPACE, eg.proxy_pod_labels(GW_NS, GW_NAME)),
}
GATEWAY_NAME_SCHEME = {"istio", "nginxGatewayFabric", "agentgateway"}   # GEP-1762's label in the Gateway's namespace


def gateway(implementation: str, **extra) -> dict:
    return {**(dev_config().get("gateway") or {}), "routingLayer": "inferencePool", "implementation": implementation,
            "namespace": GW_NS, "name": GW_NAME, "requestTimeoutSeconds": TIMEOUT, **extra}


def images() -> dict:
    return {**dev_config()["images"], "endpointPicker": EPP_FIXTURE}


@functools.lru_cache(maxsize=None)
def objects(implementation: str) -> tuple:
    if gi.implementation(implementation).refuses_consumer_limits is None:
        sf = consumers_file(images=images(), gateway=gateway(implementation, defaultRequestsPerMinute=DEFAULT_RPM))
    else:
        sf = variant_file(images=images(), gateway=gateway(implementation))
    return tuple(k8s_objects(render(sf)))


def endpoints(objs) -> tuple[Pod, Pod, int]:
    """The model's engine pod and its picker's pod as the NetworkPolicies see them, and the serving port."""
    (pool,) = of_kind(objs, "InferencePool")
    port = pool["spec"]["targetPorts"][0]["number"]
    engine = Pod(NS, pod_of(objs, pool["spec"]["selector"]["matchLabels"])["metadata"]["labels"], {"engine": port})
    picker = named(objs, "Deployment", pool["spec"]["endpointPickerRef"]["name"])["spec"]["template"]
    return engine, Pod(NS, picker["metadata"]["labels"], {"grpc": epp.GRPC_PORT, "grpc-health": epp.HEALTH_PORT,
                                                          "metrics": epp.METRICS_PORT}), port


def test_the_stack_file_offers_exactly_the_registry():
    (offered,) = [a for a in typing.get_args(Gateway.model_fields["implementation"].annotation) if a is not type(None)]
    assert set(typing.get_args(offered)) == set(gi.IMPLEMENTATIONS)


def test_every_gateway_name_keeps_its_label():
    """NGF moves a name past 63 to an annotation, agentgateway hashes it: gateway.name is a DNS label, never longer."""
    names = pydantic.TypeAdapter(DnsLabel)
    longest = max(n for n in range(1, 300) if ok(names, "a" * n))
    assert all(longest <= i.labelled_name_limit for i in gi.IMPLEMENTATIONS.values()), longest


def ok(adapter: pydantic.TypeAdapter, value: str) -> bool:
    try:
        adapter.validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


@pytest.mark.parametrize("implementation", sorted(gi.IMPLEMENTATIONS))
def test_its_proxies_reach_the_serving_port_and_the_pickers_ext_proc_port_only(implementation):
    objs = objects(implementation)
    policies = of_kind(objs, "NetworkPolicy")
    engine, picker, port = endpoints(objs)
    proxy = PROXIES[implementation]
    assert allowed(policies, proxy, engine, port) and allowed(policies, proxy, picker, epp.GRPC_PORT)
    for other in (epp.METRICS_PORT, epp.HEALTH_PORT, 22, 8080):
        assert not allowed(policies, proxy, picker, other), other
    for other in (epp.GRPC_PORT, 22, 5557):
        assert other == port or not allowed(policies, proxy, engine, other), other
    # Another label scheme's proxies, and this implementation's proxies of another Gateway, reach neither ...
    strangers = [p for name, p in PROXIES.items()
                 if (name in GATEWAY_NAME_SCHEME) != (implementation in GATEWAY_NAME_SCHEME)]
    strangers.append(Pod(proxy.namespace, {k: "other-gw" if v == GW_NAME else v for k, v in proxy.labels.items()}))
    # ... and of a Gateway of the same name in another namespace.
    strangers.append(Pod("other-ns" if proxy.namespace == GW_NS else proxy.namespace,
                         {k: "other-ns" if v == GW_NS else v for k, v in proxy.labels.items()}))
    for s in strangers:
        assert not allowed(policies, s, engine, port) and not allowed(policies, s, picker, epp.GRPC_PORT), s


def test_proxy_overrides_win_over_the_implementations_defaults():
    base = {"routingLayer": "inferencePool", "implementation": "envoyAiGateway", "namespace": GW_NS, "name": GW_NAME}
    assert gi.proxy_namespace(Gateway.model_validate(base)) == "envoy-gateway-system"
    moved = Gateway.model_validate({**base, "proxyNamespace": GW_NS, "proxyPodLabels": {"app": "mine"}})
    assert gi.proxy_namespace(moved) == GW_NS and gi.proxy_labels(moved) == {"app": "mine"}
    assert gi.proxy_namespace(Gateway.model_validate({**base, "implementation": "istio"})) == GW_NS


def picker_service(objs) -> dict:
    (pool,) = of_kind(objs, "InferencePool")
    return named(objs, "Service", pool["spec"]["endpointPickerRef"]["name"])


def spec_errors(schema: dict, spec: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(spec)]


def test_istio_dials_the_picker_over_tls_by_a_destination_rule_on_its_service():
    objs = objects("istio")
    service = picker_service(objs)
    (rule,) = of_kind(objs, "DestinationRule")
    assert rule["metadata"]["namespace"] == service["metadata"]["namespace"] == NS
    assert rule["spec"]["host"] == f"{service['metadata']['name']}.{NS}.svc.cluster.local"
    assert rule["spec"]["trafficPolicy"]["tls"] == {"mode": "SIMPLE", "insecureSkipVerify": True}
    assert epp.GRPC_PORT in {p["port"] for p in service["spec"]["ports"]}
    # Its CRD, from the istio.io/api module Istio 1.30.1 pins: schema (unknown fields refused), CEL, API server.
    # (Istio's schemas declare only spec and status at the root: the spec is checked against its own.)
    spec_schema = crd_index()[(rule["apiVersion"], rule["kind"])]["properties"]["spec"]
    assert spec_errors(spec_schema, rule["spec"]) == [], rule
    assert apivalidation.validate([rule], raw_crd_index()) == []
    assert spec_errors(spec_schema, {**rule["spec"], "tls": {}})
    assert spec_errors(spec_schema, {**rule["spec"], "trafficPolicy": {"tls": {"mode": "SIMPLE", "skipVerify": True}}})
    # Only Istio writes one.
    assert not [o for i in sorted(set(gi.IMPLEMENTATIONS) - {"istio"}) for o in of_kind(objects(i), "DestinationRule")]


def test_nginx_gateway_fabric_gets_the_routes_timeout_from_a_proxy_settings_policy():
    objs = objects("nginxGatewayFabric")
    routes, policies = of_kind(objs, "HTTPRoute"), of_kind(objs, ngf.KIND)
    assert routes and len(policies) == len(routes)
    for route in routes:
        (policy,) = [p for p in policies if ngf.attaches_to(p, route)]
        assert ngf.errors(policy) == [], policy
        assert policy["spec"]["timeout"] == {"read": f"{TIMEOUT}s", "send": f"{TIMEOUT}s"}
        assert policy["metadata"]["name"] != route["metadata"]["name"]
    # The render has no CRD to check it against and says so; the port refuses what NGF would.
    assert module_crds.source_checked(policies[0]) is not None
    assert ngf.errors({**policies[0], "spec": {**policies[0]["spec"], "timeout": {"read": "36000s"}}})
    assert not of_kind(objects("istio"), ngf.KIND)


def envoy_gateway_v181_index() -> dict:
    module_path, version = module_crds.MODULE_SOURCES["envoy-gateway-ai-gateway"]
    crds = module_crds.module_dir(module_path, version) / "charts/gateway-helm/charts/crds/crds/generated"
    if not crds.is_dir():
        pytest.skip(f"{crds} is missing: run `go mod download {module_path}@{version}` (make does)")
    return cel_rules.load_crds(crds, frozenset({gp.KIND}))


def test_envoy_ai_gateway_carries_each_consumers_limit_on_every_route():
    objs = objects("envoyAiGateway")
    routes, policies = of_kind(objs, "HTTPRoute"), of_kind(objs, gp.KIND)
    assert routes and len(policies) == len(routes)
    assert eg.attached_policies(policies, routes) == {
        (r["metadata"]["namespace"], r["metadata"]["name"]): p["metadata"]["name"]
        for r in routes for p in policies if p["spec"]["targetRefs"][0]["name"] == r["metadata"]["name"]}
    v181 = envoy_gateway_v181_index()
    for p in policies:
        # Envoy Gateway v1.2.8's CRD and translator port (what the AIBrix layer's policies are held to) and
        # v1.8.1's CRD, the release the Envoy AI Gateway v1.1.0 runs on.
        assert validate_custom_resource(p, crd_index()) == [] and apivalidation.validate([p], raw_crd_index()) == []
        assert eg.rate_limit_errors(p["spec"]["rateLimit"]) == []
        schema = v181[(p["apiVersion"], p["kind"])]
        assert [e.message for e in jsonschema.Draft7Validator(strict(schema)).iter_errors(p)] == []
        assert cel_rules.check(p, v181) == []
        rl = p["spec"]["rateLimit"]

        def bucket(headers: dict[str, str]) -> int | None:
            (b,) = eg.local_buckets(rl, headers)
            return None if b is None else rl["local"]["rules"][b]["limit"]["requests"]
        for c in CONSUMERS:
            assert bucket({"Authorization": f"Bearer {c['name']}.k3y"}) == c["requestsPerMinute"]
        assert bucket({"Authorization": "Bearer someone-else"}) is None
        assert [r["limit"]["requests"] for r in rl["local"]["rules"] if not r.get("clientSelectors")] == [DEFAULT_RPM]


@pytest.mark.parametrize("implementation", sorted(n for n, i in gi.IMPLEMENTATIONS.items()
                                                  if i.refuses_consumer_limits is not None))
def test_an_implementation_without_per_consumer_limits_refuses_them_with_its_reason(implementation):
    reason = gi.implementation(implementation).refuses_consumer_limits
    sf = consumers_file(images=images(), gateway=gateway(implementation, defaultRequestsPerMinute=DEFAULT_RPM))
    with pytest.raises(ConfigError) as err:
        render(sf)
    lines = str(err.value).splitlines()
    for path in [f"consumers[{i}].requestsPerMinute" for i in range(len(CONSUMERS))] + ["gateway.defaultRequestsPerMinute"]:
        (line,) = [x for x in lines if f"llm-serving:{path} = " in x]
        assert f"gateway.implementation {implementation}" in line and reason in line, line


@pytest.mark.parametrize("value,message", [
    (None, "is required by gateway.routingLayer inferencePool: what runs gateway.name, one of "
           "istio, nginxGatewayFabric, agentgateway, envoyAiGateway"),
    ("gke", "istio"),
])
def test_the_implementation_is_required_and_gke_is_not_one(value, message):
    gw = gateway("istio")
    gw.pop("implementation") if value is None else gw.update(implementation=value)
    with pytest.raises(ConfigError) as err:
        render(variant_file(images=images(), gateway=gw))
    (line,) = [x for x in str(err.value).splitlines() if "llm-serving:gateway.implementation" in x]
    assert message in line, line


def test_the_aibrix_layer_ignores_the_implementation():
    plain = k8s_objects(render(variant_file(images=images())))
    gw = {**(dev_config().get("gateway") or {}), "implementation": "nginxGatewayFabric"}
    assert k8s_objects(render(variant_file(images=images(), gateway=gw))) == plain
