"""Egress: every pod of the namespace is denied egress by default (components/network.py writes the
default-deny and the mirrors of the P/D and group ingress rules); this module works out, from the
stack, what each pod of this program may connect to, and nothing more:

| pod | may reach |
|---|---|
| every pod of this stack but the pre-pull holds | the cluster's DNS pods, UDP and TCP (networkPolicy.egress.dns) |
| sync Job | the object store: its endpoint's port on its address, or on every address but link-local and metadata ones; EKS Pod Identity's agent with that credential mode only |
| image mirror Job (images.mirror.kind registry) | the registries and the mirror: TCP 443 and the mirror's port, every address but link-local and metadata ones |
| smoke, warm-up, load-test Jobs of a model | its endpoint as the Job reaches it: the gateway's Envoy proxy pods on their container port, or, without the gateway, the pods the model's Service selects on its target port; the smoke Job (P/D routes) and the load test also that model's engine pods on the metrics ports they read by pod IP |
| OpenWebUI | the endpoint it is given: the primary model's Service's pods on its target port, or the external endpoint (every address but link-local and metadata ones, on its port, and the gateway's proxies) |
| engines | nothing but DNS, their P/D roleset and their multi-node group (network.py) |
| pre-pull holds (no part-of label) | nothing, not even DNS |

"Every address" leaves out the link-local and metadata ranges, and networkPolicy.egress.clusterCidrs (the
mirror's own port excepted: the mirror is usually internal). The engine pods' model-gate init container
needs nothing, but a policy selects pods, not containers: it shares the engine's allowances (DNS).

A NetworkPolicy sees a connection to a Service after kube-proxy (or the CNI) has translated it: the
destination is a pod and its container port, never the Service's address and port. So every peer here is
a pod selector with the container port, named as the destination pod names it where it has a name.

Why link-local and metadata addresses are always left out of the IP blocks: 169.254.169.254 and
[fd00:ec2::254] are the cloud instance metadata service (node credentials on EC2), 169.254.170.23 and
[fd00:ec2::23] EKS Pod Identity's agent (Amazon EKS User Guide, "Set up the Amazon EKS Pod Identity
Agent"): no object store or registry is there. The sync Job never asks the metadata service
(AWS_EC2_METADATA_DISABLED, components/sync_job.py), and asks the agent only with podIdentity."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from components.base import PART_OF
from components.combined import served_model_selector, serving_selector
from components.gateway import RouteBackend
from components.network import (
    ENVOY_PROXY_LABELS,
    MODEL_LABEL,
    OWNING_GATEWAY_NAME,
    OWNING_GATEWAY_NAMESPACE,
    SERVING_PORTS,
    EgressArgs,
    EgressGrant,
    peer,
    tcp_ports,
)
from components.openwebui import NAME as OPEN_WEBUI
from components.operations import engine_metric_ports, smoke_route
from components.routing_layers import through_known_proxies
from components.topologies import topology_of
from config_model import ServedModel, StackConfig, derived

COMPONENT = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"

# Envoy Gateway v1.2.8 internal/gatewayapi/listener.go servicePortToContainerPort: a listener port below
# 1024 (translator.go minEphemeralPort) listens in the proxy container on port + 10000 (wellKnownPortShift)
# unless the GatewayClass's EnvoyProxy sets useListenerPortAsContainerPort, which AIBrix v0.7.0's
# (config/gateway/gateway.yaml aibrix-custom-proxy-config) does not; its Gateway's one listener is port 80,
# the port components/ops_commands.py gateway_endpoint's URL implies (tests/upstream_envoy_gateway.py).
GATEWAY_LISTENER_PORT = 80
WELL_KNOWN_PORT_SHIFT = 10000


def proxy_container_port(listener_port: int = GATEWAY_LISTENER_PORT) -> int:
    return listener_port + WELL_KNOWN_PORT_SHIFT if listener_port < 1024 else listener_port


# Never an object store's or a registry's address (module docstring).
LINK_LOCAL_AND_METADATA = ("169.254.0.0/16", "fe80::/10", "fd00:ec2::/64")
EVERY_ADDRESS = ("0.0.0.0/0", "::/0")
# EKS Pod Identity: the SDK fetches credentials from AWS_CONTAINER_CREDENTIALS_FULL_URI,
# http://169.254.170.23/v1/credentials (IPv6 [fd00:ec2::23]), port 80 (Amazon EKS User Guide).
POD_IDENTITY_AGENT = ("169.254.170.23/32", "fd00:ec2::23/128")
POD_IDENTITY_PORT = 80
HTTPS = 443
# The API server's endpoint port behind the `kubernetes` Service: 443 on EKS and GKE, 6443 on kubeadm clusters.
API_SERVER_PORTS = (443, 6443)

OPERATION_KINDS = ("smoke", "warmup", "loadtest")   # components/operations.py _job labels(..., kind)


def ip_blocks(cidrs: tuple[str, ...] | list[str], excluded: tuple[str, ...] | list[str] = ()) -> list[dict]:
    """One ipBlock peer per CIDR, each with the link-local and metadata ranges and `excluded` (the
    cluster's) that lie inside it excepted (an except must be a strict subset of its cidr: ValidateIPBlock)."""
    peers = []
    for cidr in cidrs:
        net = ipaddress.ip_network(cidr)
        out = [e for e in dict.fromkeys((*LINK_LOCAL_AND_METADATA, *excluded))
               if (x := ipaddress.ip_network(e)).version == net.version and x.subnet_of(net) and x.prefixlen > net.prefixlen]
        peers.append({"ipBlock": {"cidr": cidr, **({"except": out} if out else {})}})
    return peers


def anywhere(cfg: StackConfig) -> list[dict]:
    """Every address but link-local, metadata and the cluster's own (networkPolicy.egress.clusterCidrs)."""
    return ip_blocks(EVERY_ADDRESS, cfg.network_policy.egress.cluster_cidrs)


def own_pods(labels: dict) -> dict:
    return {"podSelector": {"matchLabels": dict(labels)}}


def url_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (HTTPS if parts.scheme == "https" else 80)


def object_store_rules(cfg: StackConfig) -> tuple[dict, ...]:
    store, egress = cfg.object_store, cfg.network_policy.egress
    port = url_port(store.endpoint) if store.endpoint else HTTPS
    if egress.object_store_cidrs is not None:
        to = ip_blocks(egress.object_store_cidrs)
    else:
        try:
            to = ip_blocks([str(ipaddress.ip_network(store.host))]) if store.host else anywhere(cfg)
        except ValueError:   # a name: resolved by the Job, unknown to the policy
            to = anywhere(cfg)
    # Static keys and IRSA need the store (IRSA also STS, on the same port, inside every address);
    # Pod Identity also the node's agent, and only then.
    rules = [{"to": to, "ports": tcp_ports(port)}]
    identity = store.workload_identity
    if identity is not None and identity.kind == "podIdentity":
        rules.append({"to": [{"ipBlock": {"cidr": c}} for c in POD_IDENTITY_AGENT], "ports": tcp_ports(POD_IDENTITY_PORT)})
    return tuple(rules)


def mirror_rules(cfg: StackConfig) -> tuple[dict, ...]:
    """skopeo copies from the upstream registries (HTTPS, outside the cluster) into the mirror, an internal
    registry on its host's port, which may sit inside the cluster's ranges."""
    host = cfg.images.mirror.registry.host if cfg.images.mirror.registry else ""
    port = int(host.rsplit(":", 1)[1]) if ":" in host else HTTPS
    return ({"to": anywhere(cfg), "ports": tcp_ports(HTTPS)}, {"to": ip_blocks(EVERY_ADDRESS), "ports": tcp_ports(port)})


def picker_grant(cfg: StackConfig) -> EgressGrant:
    """The endpoint pickers: the API server (their pool and its pods), the engines' serving and metrics ports."""
    from components.endpoint_picker import COMPONENT as PICKER
    cidrs = cfg.network_policy.egress.api_server_cidrs
    return EgressGrant("llm-serving-endpoint-picker-egress", {"matchLabels": {COMPONENT: PICKER, PART_OF_LABEL: PART_OF}}, (
        {"to": ip_blocks(cidrs or EVERY_ADDRESS), "ports": tcp_ports(*API_SERVER_PORTS)},
        {"to": [own_pods({COMPONENT: "engine", PART_OF_LABEL: PART_OF})], "ports": tcp_ports(*SERVING_PORTS)}))


def gateway_proxies(cfg: StackConfig) -> dict:
    return peer(cfg.gateway.proxy_namespace, {**ENVOY_PROXY_LABELS, OWNING_GATEWAY_NAMESPACE: cfg.gateway.namespace,
                                                 OWNING_GATEWAY_NAME: cfg.gateway.name})


def service_rule(b: RouteBackend) -> dict:
    """A model's Service as the connection arrives: its pods, on its target port."""
    return {"to": [own_pods(b.selector)], "ports": tcp_ports(b.target_port)}


def operations_grants(cfg: StackConfig, models: list[ServedModel], backends: dict[str, RouteBackend]) -> list[EgressGrant]:
    ops, via_gateway = cfg.operations, through_known_proxies(cfg.gateway)
    kinds = [k for k, on in zip(OPERATION_KINDS, (ops.smoke.enabled, ops.warmup.enabled, ops.load_test.enabled)) if on]
    grants = []
    for m in models if kinds else []:
        jobs = {"matchLabels": {PART_OF_LABEL: PART_OF, MODEL_LABEL: m.name}}
        endpoint = ({"to": [gateway_proxies(cfg)], "ports": tcp_ports(proxy_container_port())} if via_gateway
                    else service_rule(backends[m.served_model_name]))
        grants.append(EgressGrant(derived.bounded(f"llm-serving-operations-{m.name}"),
                                  {**jobs, "matchExpressions": [{"key": COMPONENT, "operator": "In", "values": kinds}]},
                                  (endpoint,)))
        # By pod IP, no Service in between: the smoke Job reads the P/D pair's /metrics (route_evidence.py),
        # the load test every serving engine's before each round (its headless Service).
        readers: dict[str, tuple[dict, tuple[int, ...]]] = {}
        route = smoke_route(m, via_gateway)
        # Through the gateway a topology that moves KV is proven by its pair's NIXL counters.
        if ops.smoke.enabled and via_gateway and topology_of(m).transfers_kv:
            readers["smoke"] = (served_model_selector(m), (route.prefill_port, route.decode_port))
        if ops.load_test.enabled:
            readers["loadtest"] = (serving_selector(m), engine_metric_ports(m))
        for kind, (selector, ports) in readers.items():
            grants.append(EgressGrant(derived.bounded(f"llm-serving-{kind}-metrics-{m.name}"),
                                      {"matchLabels": {**jobs["matchLabels"], COMPONENT: kind}},
                                      ({"to": [own_pods(selector)], "ports": tcp_ports(*sorted(set(ports)))},)))
    return grants


def open_webui_grant(cfg: StackConfig, backends: dict[str, RouteBackend]) -> EgressGrant:
    external = cfg.gateway.external_endpoint if cfg.gateway.enabled else None
    if external and not through_known_proxies(cfg.gateway):
        rules: tuple[dict, ...] = ({"to": anywhere(cfg), "ports": tcp_ports(url_port(external))},)
    elif external:
        # Reached by name: out to the load balancer, or (where kube-proxy short-cuts a load balancer's IP
        # to the Service's endpoints) straight to the proxies on their container port.
        rules = ({"to": anywhere(cfg), "ports": tcp_ports(url_port(external))},
                 {"to": [gateway_proxies(cfg)], "ports": tcp_ports(proxy_container_port())})
    else:
        rules = (service_rule(backends[cfg.models[0].served_model_name]),)
    return EgressGrant("llm-serving-open-webui-egress",
                       {"matchLabels": {"app.kubernetes.io/name": OPEN_WEBUI, COMPONENT: "ui", PART_OF_LABEL: PART_OF}}, rules)


def egress_args(cfg: StackConfig, models: list[ServedModel], backends: list[RouteBackend]) -> EgressArgs | None:
    """What each pod of the stack may reach; None when networkPolicy.egress is off."""
    egress = cfg.network_policy.egress
    if not egress.enabled:
        return None
    by_name = {b.served_model_name: b for b in backends}
    grants = [EgressGrant("llm-serving-model-sync-egress",
                          {"matchLabels": {COMPONENT: "model-sync", PART_OF_LABEL: PART_OF}}, object_store_rules(cfg))]
    if cfg.images.mirror.kind == "registry":
        grants.append(EgressGrant("llm-serving-image-mirror-egress",
                                  {"matchLabels": {COMPONENT: "image-mirror", PART_OF_LABEL: PART_OF}}, mirror_rules(cfg)))
    grants += operations_grants(cfg, models, by_name)
    if cfg.operations.open_webui.enabled:
        grants.append(open_webui_grant(cfg, by_name))
    if cfg.gateway.inference_pools:
        grants.append(picker_grant(cfg))
    return EgressArgs(egress.dns.namespace, dict(egress.dns.pod_labels), egress.dns.port, tuple(grants))
