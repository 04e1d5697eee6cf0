"""The routing layers a stack chooses with `gateway.routingLayer` (components/routing_layers/base.py)."""

from __future__ import annotations

from components.routing_layers import aibrix, inference_pool
from components.routing_layers.base import Attached, RoutingLayer

ROUTING_LAYERS: dict[str, RoutingLayer] = {layer.name: layer for layer in (aibrix.LAYER, inference_pool.LAYER)}

__all__ = ["ROUTING_LAYERS", "Attached", "RoutingLayer", "routing_layer"]


def routing_layer(name: str) -> RoutingLayer:
    return ROUTING_LAYERS[name]
