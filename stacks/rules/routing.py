"""gateway.routingLayer: what the chosen layer cannot carry is refused here, with the reason, before
any resource is registered (components/routing_layers/ builds what it can)."""

from __future__ import annotations

from typing import Iterator

from components.gateway_implementations import IMPLEMENTATIONS, implementation_of
from components.topologies import topology_of
from config_model import StackConfig
from config_model.types import is_ip_host
from policy.endpoint_picker import EPP_VERSION
from stacks.rules.problem import Problem

AIBRIX_GATEWAY = ("aibrix-system", "aibrix-eg")


def image_tag(upstream: str) -> str | None:
    """The tag of repository[:tag] (a registry port is not a tag: the part after the last '/')."""
    last = upstream.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def routing_layer(cfg: StackConfig) -> Iterator[Problem]:
    gw = cfg.gateway
    if gw.in_cluster_endpoint and is_ip_host(gw.in_cluster_endpoint):
        yield Problem("gateway.inClusterEndpoint", gw.in_cluster_endpoint, "must be the Gateway Service's DNS name, "
                      "never an IP: a Service's address changes when it is re-created")
    if not gw.inference_pools:
        if gw.in_cluster_endpoint:
            yield Problem("gateway.inClusterEndpoint", gw.in_cluster_endpoint, "applies to gateway.routingLayer "
                          "inferencePool (with the gateway on) only: the aibrix layer exports its Envoy proxy's "
                          "Service itself; leave it out")
        return
    if cfg.images.endpoint_picker is None:
        yield Problem("images.endpointPicker", None, "is required by gateway.routingLayer inferencePool: the endpoint "
                      "picker image (registry.k8s.io/gateway-api-inference-extension/epp v1.5.0, pinned by digest)")
    elif (tag := image_tag(cfg.images.endpoint_picker.upstream)) not in (None, EPP_VERSION):
        yield Problem("images.endpointPicker.upstream", cfg.images.endpoint_picker.upstream, f"must be the endpoint "
                      f"picker of GIE {EPP_VERSION} (tag {EPP_VERSION} or none), not {tag}: its flags, config and RBAC are "
                      "that release's (policy/endpoint_picker.py); v1.6's image is a round-robin picker for conformance "
                      "tests that reads no config")
    if (gw.namespace, gw.name) == AIBRIX_GATEWAY:
        yield Problem("gateway.name", gw.name, "must name a Gateway whose implementation routes to an InferencePool "
                      "(gateway.namespace too): AIBrix's aibrix-eg runs on Envoy Gateway v1.2.8, which has no "
                      "InferencePool backend (docs/gateway-and-network.md lists the implementations)")
    for i, m in enumerate(cfg.models):
        if topology_of(m).transfers_kv:
            yield Problem(f"models[{i}].topology", m.topology, "is not carried by gateway.routingLayer inferencePool: "
                          "the endpoint picker of GIE v1.5.0 has no prefill/decode pairing (its successor in llm-d's "
                          "router has, unreleased here); keep gateway.routingLayer aibrix for a P/D model")
        if m.routing_strategy is not None:
            yield Problem(f"models[{i}].routingStrategy", m.routing_strategy, "does not apply with gateway.routingLayer "
                          "inferencePool: the endpoint picker scores every request on the engines' queue, KV-cache use "
                          "and prefix cache (policy/endpoint_picker.py); leave it out")
    if gw.implementation is None:
        yield Problem("gateway.implementation", None, "is required by gateway.routingLayer inferencePool: what runs "
                      f"gateway.name, one of {', '.join(IMPLEMENTATIONS)} (docs/gateway-and-network.md)")
        return
    impl = implementation_of(gw)
    reason = impl.refuses_consumer_limits
    if reason is None:
        return
    for i, c in enumerate(cfg.consumers):
        yield Problem(f"consumers[{i}].requestsPerMinute", c.requests_per_minute, "is not carried by "
                      f"gateway.implementation {impl.name}: {reason}; remove it, or route through an implementation "
                      "that carries it (docs/gateway-and-network.md)")
    if gw.default_requests_per_minute is not None:
        yield Problem("gateway.defaultRequestsPerMinute", gw.default_requests_per_minute, "is not carried by "
                      f"gateway.implementation {impl.name}: {reason}; leave it out")
