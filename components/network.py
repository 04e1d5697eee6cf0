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

A model spanning nodes (issue 29) runs groups of pods, a leader and workers (components/group.py). Both
engines need every TCP port between the pods of a group: vLLM 0.33.0's torch.distributed rendezvous on
--master-port, and its leader->worker and worker->leader message queues bind OS-assigned ports (vllm/
v1/executor/multiproc_executor.py, vllm/distributed/device_communicators/shm_broadcast.py MessageQueue:
`bind(f"tcp://{connect_ip}:0")`); SGLang 0.5.23's --dist-init-addr port, its broadcaster on get_open_port()
and NCCL/Gloo's own ephemeral ports. So the pods of one model's groups (the orchestrator's group label:
Orchestrator.group_label) reach each other on every TCP port, and no one else gains anything: only the
leaders (Orchestrator.leader_selector) take the engine ingress above, and a worker takes Prometheus' scrape
of its metrics port besides its group (a vLLM worker runs --headless with no port; an SGLang worker serves
a placeholder /metrics and /health on its port: sglang/srt/utils/common.py launch_dummy_health_check_server,
with its node's scheduler metrics, labelled pp_rank). With egress denied by default, the same two rules are
mirrored as egress: a group's pods reach each other on every TCP port, a roleset's sides each other.

Egress (networkPolicy.egress, on by default) is denied to every pod of the namespace; DNS is allowed to
this stack's pods (app.kubernetes.io/part-of, which the pre-pull holds do not carry), and each other
allowance, worked out from the stack in components/network_egress.py, is a policy of its own.

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
from components.combined import group_leader_selector, served_model_selector
from components.orchestrators import orchestrator_of
from components.routing_layers import routing_layer
from config_model import ServedModel, derived

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
MODEL_LABEL = "llm-serving.io/model"
DEFAULT_DENY_EGRESS = "llm-serving-default-deny-egress"


@dataclass(frozen=True)
class ModelGroups:
    """The pods of a model spanning nodes: every pod of its groups, and its leaders, as label selectors."""
    model: str
    members: dict
    leaders: dict


def model_groups(m: ServedModel) -> ModelGroups:
    """Its engine pods that carry the label the controller puts on every pod of a group (an LWS's group-key,
    an RBG's role-instance-name, a StormService PodSet's podset-name: the leader and the workers alike, the
    one template of a StormService included); its leaders by the labels only they carry."""
    members = {"matchLabels": served_model_selector(m),
               "matchExpressions": [{"key": orchestrator_of(m).group_label, "operator": "Exists"}]}
    return ModelGroups(m.name, members, {"matchLabels": group_leader_selector(m)})


def group_policy_name(model: str) -> str:
    return derived.bounded(f"llm-serving-group-{model}")


def leaders_policy_name(model: str) -> str:
    return derived.bounded(f"llm-serving-leaders-{model}")


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
    groups: list[ModelGroups] = field(default_factory=list)     # the models spanning nodes
    egress: EgressArgs | None = None                            # None: egress not restricted
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)   # policy name -> its scanner exceptions
    routing_layer: str = "aibrix"                               # gateway.routingLayer (components/routing_layers)
    gateway_proxy_labels: dict[str, str] = field(default_factory=dict)   # other layers: the Gateway's proxy pods
    pools: tuple[str, ...] = ()                                 # inferencePool layer: the pools, one picker each


@dataclass(frozen=True)
class EgressGrant:
    """One NetworkPolicy: the pods it selects in the namespace may open the connections its rules allow."""
    name: str
    pods: dict
    rules: tuple[dict, ...]


@dataclass(frozen=True)
class EgressArgs:
    """The cluster's DNS pods (namespace, labels, container port) and every other allowance."""
    dns_namespace: str
    dns_labels: dict
    dns_port: int
    grants: tuple[EgressGrant, ...] = ()


@dataclass(frozen=True)
class ClientTarget:
    """A Service clients call directly: the pods it selects and its target port's name."""
    service_name: str
    selector: dict[str, str]
    port: str


def client_policy_name(service_name: str) -> str:
    return derived.bounded(f"llm-serving-clients-{service_name}")


def tcp_ports(*ports: int | str) -> list[dict]:
    return [{"protocol": "TCP", "port": p} for p in dict.fromkeys(ports)]


def peer(namespace: str, labels: dict[str, str]) -> dict:
    # One peer: both selectors in one element select those pods in that namespace only.
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "podSelector": {"matchLabels": dict(labels)}}


def aibrix_gateway_ingress(args: NetworkArgs) -> list[dict]:
    """The AIBrix layer: Envoy Gateway's proxies of our Gateway, and AIBrix's plugin."""
    proxies = {**ENVOY_PROXY_LABELS, OWNING_GATEWAY_NAMESPACE: args.gateway_namespace,
               OWNING_GATEWAY_NAME: args.gateway_name}
    return [{"from": [peer(args.gateway_proxy_namespace, proxies)], "ports": tcp_ports(*SERVING_PORTS)},
            {"from": [peer(args.gateway_namespace, AIBRIX_GATEWAY_PLUGIN_LABELS)],
             "ports": tcp_ports(*SERVING_PORTS, *METRICS_PORTS)}]


def engine_ingress_name(args: NetworkArgs, base: str) -> str:
    """A policy admitting the gateway to the engines is named by the routing layer it admits: switching
    layers creates the new layer's policy and deletes the old one only at the end of the `pulumi up`, with
    the old route, so the old gateway reaches the engines as long as its route exists (policies add up)."""
    return derived.bounded(base + routing_layer(args.routing_layer).policy_suffix)


def engine_ingress(args: NetworkArgs) -> list[dict]:
    rules = []
    if args.gateway_namespace is not None:
        rules += routing_layer(args.routing_layer).gateway_ingress(args)
    if args.prometheus_namespace is not None:
        rules.append({"from": [peer(args.prometheus_namespace, PROMETHEUS_LABELS)], "ports": tcp_ports(*METRICS_PORTS)})
    rules.append({"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}],
                  "ports": tcp_ports(*SERVING_PORTS, *METRICS_PORTS)})
    return rules


def policies(args: NetworkArgs) -> dict[str, dict]:
    """Name -> NetworkPolicy spec, pure so the rules can be read and tested without Pulumi."""
    engines: dict = {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF}}
    if args.groups:
        # A group's workers take none of it: its leaders have a policy of their own below.
        engines["matchExpressions"] = [{"key": MODEL_LABEL, "operator": "NotIn",
                                        "values": sorted({g.model for g in args.groups})}]
    specs: dict[str, dict] = {
        "llm-serving-default-deny-ingress": {"podSelector": {}, "policyTypes": ["Ingress"]},
        engine_ingress_name(args, "llm-serving-engine-ingress"): {
            "podSelector": engines,
            "policyTypes": ["Ingress"],
            "ingress": engine_ingress(args),
        },
    }
    for g in sorted(args.groups, key=lambda g: g.model):
        specs[engine_ingress_name(args, leaders_policy_name(g.model))] = {"podSelector": g.leaders, "policyTypes": ["Ingress"],
                                               "ingress": engine_ingress(args)}
        # Every TCP port (a port entry with a protocol only) from the pods of the model's own groups.
        group = [{"from": [{"podSelector": g.members}], "ports": [{"protocol": "TCP"}]}]
        if args.prometheus_namespace is not None:
            group.append({"from": [peer(args.prometheus_namespace, PROMETHEUS_LABELS)], "ports": tcp_ports(*METRICS_PORTS)})
        specs[group_policy_name(g.model)] = {"podSelector": g.members, "policyTypes": ["Ingress"], "ingress": group}
        if args.egress is not None:
            specs[group_policy_name(g.model)].update(policyTypes=["Ingress", "Egress"], egress=[
                {"to": [{"podSelector": g.members}], "ports": [{"protocol": "TCP"}]}])
    if args.autoscaled_models:
        # Only the autoscaled models' engines, only their metrics ports: the controller never sends requests.
        specs["llm-serving-autoscaler-metrics"] = {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF},
                            "matchExpressions": [{"key": "llm-serving.io/model", "operator": "In",
                                                  "values": sorted(set(args.autoscaled_models))}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [peer(args.aibrix_namespace, AIBRIX_CONTROLLER_MANAGER_LABELS)],
                         "ports": tcp_ports(*METRICS_PORTS)}]}
    if args.client_namespaces:
        peers = [{"namespaceSelector": sel} for sel in args.client_namespaces]
        for t in args.client_targets:
            # Every pod of those namespaces (no podSelector), to the Service's pods on its target port only.
            specs[client_policy_name(t.service_name)] = {
                "podSelector": {"matchLabels": dict(t.selector)}, "policyTypes": ["Ingress"],
                "ingress": [{"from": peers, "ports": tcp_ports(t.port)}]}
    for roleset in sorted(set(args.rolesets)):
        # NIXL's side channel and UCX's data path between the two sides of one roleset only.
        selector = {"matchLabels": {"roleset-name": roleset}}
        specs[derived.pd_policy_name(roleset)] = {
            "podSelector": selector, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": selector}]}]}
        if args.egress is not None:
            specs[derived.pd_policy_name(roleset)].update(policyTypes=["Ingress", "Egress"],
                                                          egress=[{"to": [{"podSelector": selector}]}])
    if args.gateway_namespace is not None:
        specs.update(routing_layer(args.routing_layer).policies(args))
    if args.egress is not None:
        specs.update(egress_policies(args.egress))
    return specs


def egress_policies(e: EgressArgs) -> dict[str, dict]:
    """Default-deny egress for every pod of the namespace (podSelector {}, no egress rule), DNS for
    this stack's pods, and each grant."""
    dns_ports = [{"protocol": proto, "port": e.dns_port} for proto in ("UDP", "TCP")]
    specs: dict[str, dict] = {
        DEFAULT_DENY_EGRESS: {"podSelector": {}, "policyTypes": ["Egress"]},
        "llm-serving-dns-egress": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}, "policyTypes": ["Egress"],
            "egress": [{"to": [peer(e.dns_namespace, e.dns_labels)], "ports": dns_ports}]},
    }
    for g in e.grants:
        specs[g.name] = {"podSelector": g.pods, "policyTypes": ["Egress"], "egress": [dict(r) for r in g.rules]}
    return specs


class NetworkPolicies(Component):
    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:network:NetworkPolicies", name, opts)
        specs = policies(args)
        # The default deny after every allowance (and deleted before them): a pod already running, a sync Job
        # mid-download, never sees a moment with the deny and without its allowance.
        deny = specs.pop(DEFAULT_DENY_EGRESS, None)
        made = [k8s.networking.v1.NetworkPolicy(
            f"{name}-{policy_name}", metadata=self.metadata(args, policy_name),
            spec=spec, opts=self.child_opts()) for policy_name, spec in specs.items()]
        if deny is not None:
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{DEFAULT_DENY_EGRESS}", metadata=self.metadata(args, DEFAULT_DENY_EGRESS),
                spec=deny, opts=self.child_opts(depends_on=made))
        self.register_outputs({})

    @staticmethod
    def metadata(args: NetworkArgs, policy_name: str) -> dict:
        annotations = args.annotations.get(policy_name)
        return {**metadata(policy_name, args.namespace, "network-policy"), **({"annotations": annotations} if annotations else {})}
