"""Items 3, 4 and 9 of issue 10: a fresh cluster gets the AIBrix CRDs; the NetworkPolicies let
through exactly the flows serving and monitoring need (evaluated with networking.k8s.io/v1
semantics, tests/netpol.py, on the rendered objects of every topology); every alert parses and
uses only metric and label names the pinned engines and exporters export."""

from __future__ import annotations

import functools

import prometheus_client
import promql_parser
import pytest
import upstream_aibrix as aibrix
import upstream_dcgm_exporter as dcgm
import upstream_envoy_gateway as envoy_gateway
import upstream_prometheus_operator as prom_operator
import upstream_sglang as sglang
import upstream_vllm as vllm
from conftest import k8s_objects, render_stack
from engine_containers import engine_packages
from netpol import Pod, allowed, ingress_allowed
from test_pd import rendered as rendered_pd
from test_topologies import rendered_pair

from components.monitoring import alert_rules
from components.platform import manifest_urls
from config_model import Gateway, Monitoring, Platform
from policy.workloads import containers, pod_templates
from tools import engine_metrics

NS = "llm-serving-dev"  # Pulumi.dev.yaml, the base of every variant


def test_peer_namespaces_default_to_where_upstream_runs_the_peers():
    # Envoy Gateway v1.2.8 (AIBrix v0.7.0's dependency bundle) runs proxies in its own namespace.
    assert not envoy_gateway.PROXIES_RUN_IN_GATEWAY_NAMESPACE
    assert Gateway().proxy_namespace == envoy_gateway.CONTROLLER_NAMESPACE
    assert Gateway().name == aibrix.GATEWAY_NAME and Gateway().namespace == aibrix.AIBRIX_NAMESPACE
    assert Monitoring().prometheus_namespace == "monitoring"   # kube-prometheus' namespace


# ---- item 3: CRDs ----

def test_platform_applies_the_three_aibrix_release_assets_in_upstream_order():
    tag = Platform().aibrix_version
    urls = list(manifest_urls(Platform()).values())
    assert urls[:3] == [aibrix.RELEASE_URL.format(tag=tag) + a.format(tag=tag) for a in aibrix.RELEASE_ASSETS]


def test_the_kubernetes_provider_applies_server_side():
    # Upstream applies every bundle with --server-side; the provider does unless told otherwise.
    (provider,) = [r for r in render_stack("dev").resources if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs.get("enableServerSideApply") in (None, True, "true")


# ---- item 4: NetworkPolicies, evaluated ----

def rendered_topologies() -> dict[str, object]:
    return {"vllm-deployment": render_stack("dev"), "sglang-rolebasedgroup": rendered_pair("sglang", "rolebasedgroup"),
            "vllm-stormservice": rendered_pair("vllm", "stormservice"),
            "pd": rendered_pd("pd", "rayclusterfleet", 24), "pd-same-pod": rendered_pd("pd-same-pod", "deployment", 8),
            "hybrid": rendered_pd("hybrid", "stormservice", 32)}


def pods_of(objs: list[dict]) -> list[Pod]:
    pods = []
    for obj in objs:
        if obj["kind"] not in ("Deployment", "StormService", "RoleBasedGroup", "RayClusterFleet", "Job"):
            continue
        templates = [obj["spec"]["template"]] if obj["kind"] == "Job" else [
            ref.template for ref in pod_templates(obj["kind"], obj)]
        for t in templates:
            ports = {p["name"]: p["containerPort"] for _, c in containers(t) for p in c.get("ports") or [] if "name" in p}
            pods.append(Pod(obj["metadata"]["namespace"], dict(t["metadata"].get("labels") or {}), ports))
    return pods


@functools.lru_cache(maxsize=None)
def topology(name: str) -> tuple[list[dict], list[Pod], list[Pod], dict]:
    objs = k8s_objects(rendered_topologies()[name])
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    pods = pods_of(objs)
    engines = [p for p in pods if p.labels.get("app.kubernetes.io/component") == "engine"]
    monitor = next(o for o in objs if o["kind"] == "PodMonitor")
    return policies, engines, [p for p in pods if p not in engines], monitor


TOPOLOGIES = ["vllm-deployment", "vllm-stormservice", "sglang-rolebasedgroup", "pd", "pd-same-pod", "hybrid"]
ENVOY = Pod(envoy_gateway.CONTROLLER_NAMESPACE, envoy_gateway.proxy_pod_labels(aibrix.AIBRIX_NAMESPACE, aibrix.GATEWAY_NAME))
PLUGIN = Pod(aibrix.AIBRIX_NAMESPACE, aibrix.GATEWAY_PLUGIN_POD_LABELS)
PROMETHEUS = Pod("monitoring", prom_operator.prometheus_pod_labels("k8s"))
# What must stay out: another Gateway's proxy, the AIBrix controller, Prometheus elsewhere, a pod
# of another namespace carrying our labels.
OTHER_GATEWAY = Pod(envoy_gateway.CONTROLLER_NAMESPACE, envoy_gateway.proxy_pod_labels("team-b", "eg"))
CONTROLLER = Pod(aibrix.AIBRIX_NAMESPACE, aibrix.CONTROLLER_MANAGER_POD_LABELS)
STRAY_PROMETHEUS = Pod("default", prom_operator.prometheus_pod_labels("k8s"))
IMPOSTOR = Pod("default", {"app.kubernetes.io/part-of": "llm-serving", "app": "gateway-plugins"})


def serving_ports(pod: Pod, objs: list[dict]) -> set[int]:
    """Where requests arrive: the port AIBrix picks (model.aibrix.ai/port) and the Service's targetPort."""
    ports = {aibrix.model_port(pod.labels)} if aibrix.LABEL_NAME in pod.labels else set()
    for svc in (o for o in objs if o["kind"] == "Service"):
        if svc["metadata"]["namespace"] == pod.namespace and all(
                pod.labels.get(k) == v for k, v in (svc["spec"].get("selector") or {"-": "-"}).items()):
            for p in svc["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                ports.add(pod.ports[target] if isinstance(target, str) else target)
    return ports


def scraped_ports(pod: Pod, monitor: dict) -> set[int]:
    """Ports the PodMonitor scrapes on this pod (a named endpoint port the pod lacks is no target)."""
    if not all(pod.labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items()):
        return set()
    return {pod.ports[e["port"]] for e in monitor["spec"]["podMetricsEndpoints"] if e["port"] in pod.ports}


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_gateway_prometheus_and_the_stack_reach_every_engine_port_they_need(name):
    policies, engines, others, monitor = topology(name)
    objs = k8s_objects(rendered_topologies()[name])
    assert engines
    for pod in engines:
        serving = serving_ports(pod, objs) if aibrix.LABEL_NAME in pod.labels else set()
        for port in serving:
            assert allowed(policies, ENVOY, pod, port), (name, "gateway proxy", port)
            assert allowed(policies, PLUGIN, pod, port), (name, "gateway plugin", port)
        if aibrix.LABEL_NAME in pod.labels:
            assert serving, name
            assert allowed(policies, PLUGIN, pod, aibrix.metric_port(aibrix.Pod("", pod.labels))), (name, "metrics")
        scraped = scraped_ports(pod, monitor)
        assert scraped, (name, pod.labels)
        for port in scraped:
            assert allowed(policies, PROMETHEUS, pod, port), (name, "prometheus", port)
        # The engines take this stack's pods; which of them may send is their egress (tests/test_egress.py).
        for job in (p for p in others if p.labels.get("app.kubernetes.io/part-of") == "llm-serving"):
            for port in serving | scraped:
                assert ingress_allowed(policies, job, pod, port), (name, job.labels, port)
        for intruder in (OTHER_GATEWAY, CONTROLLER, STRAY_PROMETHEUS, IMPOSTOR):
            for port in serving | scraped | set(pod.ports.values()):
                assert not allowed(policies, intruder, pod, port), (name, intruder, port)
        for peer in (ENVOY, PLUGIN, PROMETHEUS):
            for port in set(pod.ports.values()) - serving - scraped - {aibrix.metric_port(aibrix.Pod("", pod.labels))}:
                assert not allowed(policies, peer, pod, port), (name, peer.labels, "unneeded port", port)


def test_same_pod_engines_are_scraped_on_both_ports_but_not_served_on_them():
    policies, (pod,), _, monitor = topology("pd-same-pod")
    assert scraped_ports(pod, monitor) == {8100, 8200}
    assert allowed(policies, PROMETHEUS, pod, 8100) and allowed(policies, PROMETHEUS, pod, 8200)
    assert not allowed(policies, ENVOY, pod, 8100) and not allowed(policies, ENVOY, pod, 8200)


@pytest.mark.parametrize("name", ["pd", "hybrid"])
def test_kv_transfer_flows_only_within_a_roleset(name):
    policies, engines, others, _ = topology(name)
    prefill = next(p for p in engines if p.labels.get("role-name") == "prefill")
    decode = next(p for p in engines if p.labels.get("role-name") == "decode")
    nixl = decode.ports["nixl"]
    for src, dst in ((decode, prefill), (prefill, decode)):
        for port in (dst.ports["nixl"], 45678):   # the side channel, and a port UCX may pick
            assert allowed(policies, src, dst, port), (name, port)
    outsiders = [ENVOY, PLUGIN, PROMETHEUS, *others,
                 Pod(NS, {**decode.labels, "roleset-name": "another-roleset"}, decode.ports)]
    outsiders += [p for p in engines if p.labels.get("roleset-name") != decode.labels["roleset-name"]]
    for src in outsiders:
        assert not allowed(policies, src, decode, nixl), (name, src.labels)


def test_the_evaluator_refuses_what_the_api_does_not_allow():
    pol = [{"metadata": {"namespace": "a"}, "spec": {"podSelector": {}, "ingress": [
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "b"}}}], "ports": [{"port": "web"}]},
        {"from": [{"podSelector": {"matchLabels": {"x": "1"}}}], "ports": [{"port": 9000, "endPort": 9010}]}]}}]
    dst = Pod("a", {}, {"web": 8080})
    assert allowed(pol, Pod("b", {}), dst, 8080) and not allowed(pol, Pod("b", {}), dst, 8081)
    assert not allowed(pol, Pod("c", {}), dst, 8080)
    assert allowed(pol, Pod("a", {"x": "1"}), dst, 9005) and not allowed(pol, Pod("b", {"x": "1"}), dst, 9005)
    assert not allowed(pol, Pod("a", {"x": "1"}), dst, 9005, "UDP")
    assert allowed(pol, Pod("c", {}), Pod("other", {}), 1)   # a pod no policy selects is not isolated
    egress_only = [{"metadata": {"namespace": "a"}, "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}]
    assert allowed(egress_only, Pod("c", {}), dst, 1)


# ---- item 9: alerts over names that exist ----

def exposed_samples(metrics: dict[str, tuple[str, tuple[str, ...], str]]) -> dict[str, set[str]]:
    """Sample name -> label names, as prometheus_client exposes each recorded metric."""
    registry = prometheus_client.CollectorRegistry()
    kinds = {"counter": prometheus_client.Counter, "gauge": prometheus_client.Gauge,
             "histogram": prometheus_client.Histogram}
    labels = {}
    for name, (kind, labelnames, _) in metrics.items():
        if kind in kinds:   # the DCGM exporter is Go: its samples are its names
            kinds[kind](name, "doc", labelnames=labelnames, registry=registry)
        labels[name] = set(labelnames)
    out: dict[str, set[str]] = {n: set(ls) for n, ls in labels.items() if metrics[n][0] not in kinds}
    for family in registry.collect():
        base = family.name[:-len("_total")] if family.name.endswith("_total") else family.name
        for suffix in {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}[family.type]:
            own = labels.get(family.name) or labels.get(base + "_total") or labels[base]
            out[family.name + suffix if family.type != "counter" else base + suffix] = own | (
                {"le"} if suffix == "_bucket" else set())
    return out


EXPORTED = {**exposed_samples({**vllm.METRICS, **vllm.HTTP_METRICS}), **exposed_samples(sglang.METRICS),
            **exposed_samples(dcgm.METRICS)}


@pytest.mark.parametrize("release", range(len(sglang.RELEASES)))
def test_recorded_sglang_metrics_are_defined_in_the_installed_release(release):
    # SGLang's own files, as `make test` installs them (requirements-engines.txt).
    root = engine_packages() / f"sglang=={sglang.RELEASES[release]}"
    metrics, absent = sglang.metrics_at(release)
    assert engine_metrics.problems(metrics, absent, root, release) == []
    bogus = {"sglang:http_requests_5xx": ("counter", (), sglang.METRICS["sglang:token_usage"][2])}
    assert engine_metrics.problems(bogus, ("sglang:token_usage",), root, release) == [
        f"sglang:http_requests_5xx: no counter named so in {sglang.METRICS['sglang:token_usage'][2]} (found None)",
        f"sglang:token_usage: still defined in {sglang.METRICS['sglang:token_usage'][2]}"]


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        elif isinstance(node, promql_parser.MatrixSelector):
            found.append(node.vector_selector)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_every_alert_parses_and_selects_only_exported_names_and_labels():
    target = prom_operator.TARGET_LABELS
    for rule in alert_rules(NS, Monitoring()):
        for sel in selectors(rule["expr"]):
            assert sel.name in EXPORTED, (rule["alert"], sel.name)
            for m in sel.matchers.matchers:
                # A scraped label that collides with a target label arrives prefixed.
                own = EXPORTED[sel.name]
                ok = m.name in own | target or (m.name.startswith(prom_operator.EXPORTED_PREFIX)
                                                and m.name[len(prom_operator.EXPORTED_PREFIX):] in own & target)
                assert ok, (rule["alert"], sel.name, m.name)


def test_exposed_names_follow_prometheus_client():
    # The real naming: a counter gains _total, a histogram _bucket; a gauge stays as named.
    assert {"vllm:nixl_num_failed_transfers_total", "vllm:time_to_first_token_seconds_bucket",
            "vllm:kv_cache_usage_perc", "http_requests_total", "sglang:http_responses_total"} <= set(EXPORTED)
    assert "vllm:nixl_num_failed_transfers" not in EXPORTED and "sglang:http_responses_total_total" not in EXPORTED


def test_alerts_use_what_each_engine_has_and_none_of_what_it_lacks():
    exprs = {r["alert"]: r["expr"] for r in alert_rules(NS, Monitoring())}
    names = {r: {s.name for s in selectors(e)} for r, e in exprs.items()}
    every = set().union(*names.values())
    assert not every & set(vllm.REMOVED)
    assert "http_requests_total" in names["LlmServingRequestFailureRate"]            # vLLM
    assert "sglang:http_responses_total" in names["LlmServingRequestFailureRate"]     # SGLang
    fail = [s for s in selectors(exprs["LlmServingRequestFailureRate"]) if s.name == "http_requests_total"]
    assert any(m.name == "status" and m.value == vllm.HTTP_STATUS_5XX for s in fail for m in s.matchers.matchers)
    assert names["LlmServingKvTransferFailures"] == {"vllm:nixl_num_failed_transfers_total"}
    # GPU memory: the workload's namespace as dcgm-exporter's chart delivers it, and as honorLabels would.
    gpu = {(m.name, m.value) for s in selectors(exprs["LlmServingGpuMemoryHeadroom"]) for m in s.matchers.matchers}
    assert ("exported_namespace", NS) in gpu and ("namespace", NS) in gpu
    assert not dcgm.HELM_HONOR_LABELS_DEFAULT and dcgm.FB_UNIT_MIB and "/ 1024" in exprs["LlmServingGpuMemoryHeadroom"]
