"""What an implementation is (components/gateway_implementations/__init__.py: the registry)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from components.gateway_policies import RateLimits

if TYPE_CHECKING:
    from config_model import Gateway

# Gateway API's label on the resources of an in-cluster Gateway deployment (GEP-1762), which Istio,
# NGINX Gateway Fabric and agentgateway put on their proxy pods (each module cites where).
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"


@dataclass(frozen=True)
class PoolRoute:
    """One served model as the inferencePool layer routes it: its pool and picker in the stack's
    namespace, its route in the Gateway's namespace."""
    namespace: str             # the stack's: the InferencePool, the picker's Service
    pool: str
    picker_service: str
    picker_port: int           # the picker's ext_proc port on its Service
    route: str                 # the HTTPRoute's name, in gateway.namespace
    gateway: Gateway
    rate_limits: RateLimits


@dataclass(frozen=True)
class ExtraObject:
    """An object an implementation needs beside the pool and the route (components/routing_layers/
    inference_pool.py registers it as a child of the routes' component). `resource` is appended to
    the Pulumi name; `after` is the object it waits for: "picker" or "route"."""
    resource: str
    api_version: str
    kind: str
    name: str
    namespace: str
    spec: dict
    after: str


@dataclass(frozen=True)
class Implementation:
    name: str                  # gateway.implementation
    title: str
    release: str               # the release every fact of its module was read at
    # Its proxies' namespace: the Gateway's own, or (None there) `controller_namespace`.
    proxies_in_gateway_namespace: bool
    # (gateway namespace, gateway name) -> the labels every proxy pod of that Gateway carries.
    proxy_labels: Callable[[str, str], dict[str, str]]
    # The longest Gateway name its proxy pods still carry in their labels (longer: hashed or moved to an
    # annotation). gateway.name is a DNS label (at most 63): tests hold every limit to at least that.
    labelled_name_limit: int
    # None: it carries the consumers' limits (consumer_limits_objects writes them); else why it cannot.
    refuses_consumer_limits: str | None
    controller_namespace: str | None = None
    # Per served model, the objects it needs beside the pool and the route.
    objects: Callable[[PoolRoute], list[ExtraObject]] = field(default=lambda _: [])


