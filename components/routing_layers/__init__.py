"""The routing layers a stack chooses with `gateway.routingLayer` (components/routing_layers/base.py)."""

from __future__ import annotations

from components.routing_layers import aibrix, inference_pool
from components.routing_layers.base import RoutingLayer
from config_model import Gateway

ROUTING_LAYERS: dict[str, RoutingLayer] = {layer.name: layer for layer in (aibrix.LAYER, inference_pool.LAYER)}

__all__ = ["ROUTING_LAYERS", "RoutingLayer", "routing_layer", "through_known_proxies"]


def routing_layer(name: str) -> RoutingLayer:
    return ROUTING_LAYERS[name]


def through_known_proxies(gateway: Gateway) -> bool:
    """Whether the exported in-cluster URL and the day-2 Jobs go through the gateway's proxies (the layer knows
    their Service and container port); where not, networkPolicy.clients is admitted to each model's Service."""
    return gateway.enabled and routing_layer(gateway.routing_layer).knows_proxies
