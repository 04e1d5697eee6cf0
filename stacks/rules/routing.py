"""gateway.routingLayer: what the chosen layer cannot carry is refused here, with the reason, before
any resource is registered (components/routing_layers/ builds what it can)."""

from __future__ import annotations

from typing import Iterator

from components.routing_layers.inference_pool import INFERENCE_POOL
from components.topologies import topology_of
from config_model import StackConfig
from stacks.rules.problem import Problem

AIBRIX_GATEWAY = ("aibrix-system", "aibrix-eg")


def routing_layer(cfg: StackConfig) -> Iterator[Problem]:
    gw = cfg.gateway
    if not gw.enabled or gw.routing_layer != INFERENCE_POOL:
        return
    if cfg.images.endpoint_picker is None:
        yield Problem("images.endpointPicker", None, "is required by gateway.routingLayer inferencePool: the endpoint "
                      "picker image (registry.k8s.io/gateway-api-inference-extension/epp v1.5.0, pinned by digest)")
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
    for i, c in enumerate(cfg.consumers):
        yield Problem(f"consumers[{i}].requestsPerMinute", c.requests_per_minute, "is not carried by gateway.routingLayer "
                      "inferencePool yet: a per-consumer limit is a policy of the Gateway's own implementation (Envoy "
                      "Gateway's BackendTrafficPolicy, kgateway's TrafficPolicy, ...), none of which this program "
                      "writes for it; keep gateway.routingLayer aibrix for a stack with consumers "
                      "(docs/gateway-and-network.md)")
    if gw.default_requests_per_minute is not None:
        yield Problem("gateway.defaultRequestsPerMinute", gw.default_requests_per_minute, "is not carried by "
                      "gateway.routingLayer inferencePool yet (see consumers): leave it out or keep the aibrix layer")
