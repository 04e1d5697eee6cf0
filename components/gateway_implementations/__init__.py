"""The Gateway's implementation under `gateway.routingLayer inferencePool` (`gateway.implementation`):
each has one module here, and the rest of the program asks this registry what differs between them.

What differs, each fact read at the implementation's release and cited in its module:
- where its proxy pods run and which labels they carry for a Gateway (the NetworkPolicies admit them
  to the engines' serving port and to the endpoint picker's ext_proc port, components/network.py);
- what it needs to reach the picker over TLS (the picker serves ext_proc with a self-signed
  certificate, GIE v1.5.0 internal/tls/tls.go; policy/endpoint_picker.py keeps --secure-serving on);
- how it takes the route's request timeout, and whether a per-consumer rate limit can be expressed
  in its policy API (stacks/rules/routing.py refuses the consumers' limits where not, with its reason).

Every implementation here has a GIE conformance report against InferencePool v1 except the Envoy AI
Gateway (GIE conformance/reports, read at conformance module v1.6.0; docs/gateway-and-network.md has
the table). GKE's Gateway is not one of them: its load balancer is Google Cloud's, with no proxy pods a
NetworkPolicy could select (the engines would have to admit Google's proxy-only subnet and health-check
ranges, which this program does not know), and its only GIE reports are for v1alpha2 (GIE v0.5.0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from components.gateway_implementations import agentgateway, envoy_ai_gateway, istio, nginx_gateway_fabric
from components.gateway_implementations.base import GATEWAY_NAME_LABEL, ExtraObject, Implementation, PoolRoute

if TYPE_CHECKING:
    from config_model import Gateway

__all__ = ["GATEWAY_NAME_LABEL", "IMPLEMENTATIONS", "ExtraObject", "Implementation", "PoolRoute", "implementation",
           "implementation_of", "proxy_labels", "proxy_namespace"]

IMPLEMENTATIONS: dict[str, Implementation] = {
    i.name: i for i in (istio.IMPLEMENTATION, nginx_gateway_fabric.IMPLEMENTATION, agentgateway.IMPLEMENTATION,
                        envoy_ai_gateway.IMPLEMENTATION)}


def implementation(name: str) -> Implementation:
    return IMPLEMENTATIONS[name]


def implementation_of(gateway: Gateway) -> Implementation:
    """The stack's Gateway's implementation (gateway.implementation; the rules require it with inferencePool)."""
    if gateway.implementation is None:
        raise ValueError("gateway.implementation is unset")
    return IMPLEMENTATIONS[gateway.implementation]


def proxy_namespace(gateway: Gateway) -> str:
    """Where the Gateway's proxy pods run: gateway.proxyNamespace when the stack sets it (an installation
    that moved them), else the implementation's own place for them."""
    impl = implementation_of(gateway)
    if "proxy_namespace" in gateway.model_fields_set:
        return gateway.proxy_namespace
    if impl.proxies_in_gateway_namespace:
        return gateway.namespace
    assert impl.controller_namespace is not None
    return impl.controller_namespace


def proxy_labels(gateway: Gateway) -> dict[str, str]:
    """The labels its proxy pods carry: gateway.proxyPodLabels when the stack sets them (the user's
    override), else the implementation's."""
    if gateway.proxy_pod_labels:
        return dict(gateway.proxy_pod_labels)
    return implementation_of(gateway).proxy_labels(gateway.namespace, gateway.name)
