"""What a routing layer is: the objects that put a stack's model Services behind the stack's Gateway.

components/gateway.py builds each model's Service (the in-cluster endpoint, whatever the layer) and
then asks the layer named by `gateway.routingLayer` (components/routing_layers/__init__.py) to attach
the routes. A new layer is a module here and its entry in ROUTING_LAYERS; what the rest of the
program must know of it (which proxies reach the engines, what it refuses) it asks the layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import pulumi
import pulumi_kubernetes as k8s

from components.base import labels, metadata
from config_model import derived

if TYPE_CHECKING:
    from components.base import Component
    from components.gateway import ModelRoutesArgs
    from components.network import NetworkArgs
    from config_model import Gateway


# The one ReferenceGrant per stack namespace that lets the gateway namespace's HTTPRoutes reach it.
REFERENCE_GRANT = "llm-serving-gateway-access"


def reference_grant(owner: Component, resource_name: str, grant: str, namespace: str, routes_namespace: str,
                    to: dict) -> pulumi.Resource:
    """The ReferenceGrant in the stack's namespace letting the HTTPRoutes of the gateway namespace reach `to`
    (a group and kind) here: without it the gateway refuses the cross-namespace backend (RefNotPermitted)."""
    return k8s.apiextensions.CustomResource(
        resource_name, api_version="gateway.networking.k8s.io/v1beta1", kind="ReferenceGrant",
        metadata=metadata(grant, namespace, "gateway"),
        spec={"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": routes_namespace}],
              "to": [to]},
        opts=owner.child_opts())


def route_name(service: str, namespace: str) -> str:
    return derived.bounded(f"{service}-{namespace}")


def gateway_labels(name: str, namespace: str) -> dict[str, str]:
    """Our objects in the gateway's namespace, shared with other stacks: each names the stack's namespace."""
    return {**labels(name, "gateway"), "llm-serving.io/namespace": namespace}


class RoutingLayer(Protocol):
    name: str
    # Whether the program knows the gateway's proxies (their labels, in-cluster Service and container port):
    # then the exported in-cluster URL and the day-2 Jobs go through the gateway, else through each Service.
    knows_proxies: bool
    # Appended to the names of the policies admitting the gateway to the engines (network.py engine_ingress_name).
    policy_suffix: str

    def proxy_namespace(self, gateway: Gateway) -> str:
        """Where the Gateway's proxy pods run (NetworkArgs.gateway_proxy_namespace)."""
        ...

    def proxy_labels(self, gateway: Gateway) -> dict[str, str]:
        """Labels of the Gateway's proxy pods, for the layer's own rules (NetworkArgs.gateway_proxy_labels)."""
        ...

    def gateway_ingress(self, args: NetworkArgs) -> list[dict]:
        """Ingress rules admitting the gateway's pods to the engine pods (components/network.py)."""
        ...

    def policies(self, args: NetworkArgs) -> dict[str, dict]:
        """NetworkPolicies of the layer's own pods, name -> spec."""
        ...

    def attach(self, owner: Component, name: str, args: ModelRoutesArgs,
               services: list[pulumi.Resource]) -> None:
        """Register the layer's objects for every backend of args, as children of owner (whose child
        names start with `name`), after the Services they route to."""
        ...
