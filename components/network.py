"""NetworkPolicies: ingress to this namespace is denied by default; each peer reaches the engine
pods only on the container ports it needs, named as pod_template.py names them (a named port
matches the container port of that name on the selected pod):

- Envoy Gateway's proxy pods of our Gateway (in `gateway.proxyNamespace`: Envoy Gateway v1.2.8,
  which AIBrix v0.7.0 installs, runs every proxy in its own namespace): the serving ports;
- AIBrix's gateway plugin (in `gateway.namespace`): the serving ports (it sends the prefill request
  of a P/D pair itself) and the metrics ports (it reads `model.aibrix.ai/metric-port`);
- Prometheus (in `operations.monitoring.prometheusNamespace`): the metrics ports, same-pod
  prefill and decode included;
- this stack's own pods (smoke, warm-up and load-test Jobs, OpenWebUI): serving and metrics ports;
- AIBrix's controller manager (in `gateway.namespace`, where AIBrix runs), only to the engine pods of
  models with an autoscaler: the metrics ports, since its PodAutoscaler reads /metrics from each pod
  (components/autoscaling.py).

The NIXL side channel and KV transfer (UCX picks its ports) are open only between the prefill and
decode pods of one roleset.

Other teams' namespaces (`networkPolicy.clients`) are admitted only where the exported per-model URL
leads (stacks/exports.py): without the gateway, to each model's Service, that is to the pods it
selects on its target port, by one policy per Service; with the gateway, the URL is the Envoy
proxy's Service in its own namespace, which no policy here governs, and the hop from Envoy to the
engines is admitted above already, so nothing is added (docs/gateway-and-network.md).

Peer labels are upstream's: tests/upstream_envoy_gateway.py, tests/upstream_aibrix.py,
tests/upstream_prometheus_operator.py."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.base import PART_OF, Component, metadata
from config_model import derived

# Container port names: `engine` (combined pods and fleet heads), the same-pod `proxy` in front of
# the same-pod `prefill` and `decode` engines.
SERVING_PORTS = ("engine", "proxy")
METRICS_PORTS = ("engine", "prefill", "decode")

# Envoy Gateway v1.2.8 internal/infrastructure/kubernetes/proxy/resource.go EnvoyAppLabel and the
# owning-gateway labels (internal/gatewayapi/translator.go).
ENVOY_PROXY_LABELS = {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy",
                      "app.kubernetes.io/managed-by": "envoy-gateway"}
OWNING_GATEWAY_NAME = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE = "gateway.envoyproxy.io/owning-gateway-namespace"
# AIBrix v0.7.0 config/gateway/gateway-plugin/gateway-plugin.yaml: the plugin Deployment's pods.
AIBRIX_GATEWAY_PLUGIN_LABELS = {"app": "gateway-plugins"}
# AIBrix v0.7.0 config/manager/manager.yaml: the controller manager's pods, which run the PodAutoscaler
# controller (pkg/controller/controller.go Initialize; --controllers defaults to all).
AIBRIX_CONTROLLER_MANAGER_LABELS = {"control-plane": "controller-manager"}
# Prometheus Operator pkg/prometheus/server/operator.go makeSelectorLabels: every Prometheus pod.
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}


@dataclass(frozen=True)
class NetworkArgs:
    namespace: str
    gateway_namespace: str | None = "aibrix-system"             # Gateway, routes, AIBrix plugin; None: no gateway
    gateway_name: str = "aibrix-eg"
    gateway_proxy_namespace: str = "envoy-gateway-system"
    prometheus_namespace: str | None = "monitoring"             # None: monitoring off
    rolesets: list[str] = field(default_factory=list)
    aibrix_namespace: str = "aibrix-system"                     # where the AIBrix controller manager runs
    autoscaled_models: list[str] = field(default_factory=list)  # model names with a PodAutoscaler
    # networkPolicy.clients as namespaceSelectors, and where they are admitted (no gateway only).
    client_namespaces: list[dict] = field(default_factory=list)
    client_targets: list[ClientTarget] = field(default_factory=list)


@dataclass(frozen=True)
class ClientTarget:
    """A Service clients call directly: the pods it selects and its target port's name."""
    service_name: str
    selector: dict[str, str]
    port: str


def client_policy_name(service_name: str) -> str:
    return derived.bounded(f"llm-serving-clients-{service_name}")


def _ports(names: tuple[str, ...]) -> list[dict]:
    return [{"protocol": "TCP", "port": n} for n in dict.fromkeys(names)]


def _peer(namespace: str, labels: dict[str, str]) -> dict:
    # One peer: both selectors in one element select those pods in that namespace only.
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "podSelector": {"matchLabels": dict(labels)}}


def engine_ingress(args: NetworkArgs) -> list[dict]:
    rules = []
    if args.gateway_namespace is not None:
        proxies = {**ENVOY_PROXY_LABELS, OWNING_GATEWAY_NAMESPACE: args.gateway_namespace,
                   OWNING_GATEWAY_NAME: args.gateway_name}
        rules.append({"from": [_peer(args.gateway_proxy_namespace, proxies)], "ports": _ports(SERVING_PORTS)})
        rules.append({"from": [_peer(args.gateway_namespace, AIBRIX_GATEWAY_PLUGIN_LABELS)],
                      "ports": _ports(SERVING_PORTS + METRICS_PORTS)})
    if args.prometheus_namespace is not None:
        rules.append({"from": [_peer(args.prometheus_namespace, PROMETHEUS_LABELS)], "ports": _ports(METRICS_PORTS)})
    rules.append({"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}],
                  "ports": _ports(SERVING_PORTS + METRICS_PORTS)})
    return rules


def policies(args: NetworkArgs) -> dict[str, dict]:
    """Name -> NetworkPolicy spec, pure so the rules can be read and tested without Pulumi."""
    specs: dict[str, dict] = {
        "llm-serving-default-deny-ingress": {"podSelector": {}, "policyTypes": ["Ingress"]},
        "llm-serving-engine-ingress": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "engine",
                                            "app.kubernetes.io/part-of": PART_OF}},
            "policyTypes": ["Ingress"],
            "ingress": engine_ingress(args),
        },
    }
    if args.autoscaled_models:
        # Only the autoscaled models' engines, only their metrics ports: the controller never sends requests.
        specs["llm-serving-autoscaler-metrics"] = {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF},
                            "matchExpressions": [{"key": "llm-serving.io/model", "operator": "In",
                                                  "values": sorted(set(args.autoscaled_models))}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [_peer(args.aibrix_namespace, AIBRIX_CONTROLLER_MANAGER_LABELS)],
                         "ports": _ports(METRICS_PORTS)}]}
    if args.client_namespaces:
        peers = [{"namespaceSelector": sel} for sel in args.client_namespaces]
        for t in args.client_targets:
            # Every pod of those namespaces (no podSelector), to the Service's pods on its target port only.
            specs[client_policy_name(t.service_name)] = {
                "podSelector": {"matchLabels": dict(t.selector)}, "policyTypes": ["Ingress"],
                "ingress": [{"from": peers, "ports": _ports((t.port,))}]}
    for roleset in sorted(set(args.rolesets)):
        # NIXL's side channel and UCX's data path between the two sides of one roleset only.
        selector = {"matchLabels": {"roleset-name": roleset}}
        specs[derived.pd_policy_name(roleset)] = {
            "podSelector": selector, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": selector}]}]}
    return specs


class NetworkPolicies(Component):
    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:network:NetworkPolicies", name, opts)
        for policy_name, spec in policies(args).items():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy_name}", metadata=metadata(policy_name, args.namespace, "network-policy"),
                spec=spec, opts=self.child_opts())
        self.register_outputs({})
