"""Per served model: a Service here and an HTTPRoute on the AIBrix gateway, plus one ReferenceGrant.

The Service is `<model>-api`, never the model's own name: the StormService controller syncs a
headless Service named after the StormService (our workload is named after the model), and a
ClusterIP Service of that name that exists first stops it before any RoleSet. No name here may be
one a controller derives for its own objects (stacks/rules/models.py `names_apart` refuses the stack file that
would make one; tests/upstream_*.py port how each controller names them).

AIBrix v0.7.0 builds a `<model>-router` HTTPRoute itself for a Deployment or RayClusterFleet whose
own labels name the model; two fleets sharing that label share the route, and deleting either
deletes it (field report 11.2). It builds none for a StormService (11.1). So workloads here never
carry the model label at their top level, and this component owns every route: one per served
model, in the gateway namespace, pointing at a Service in the model namespace, allowed across
namespaces by a ReferenceGrant (without it the gateway answers 503 RefNotPermitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import gateway_policies
from components.base import Component, metadata
from components.routing_layers import routing_layer
from config_model import Gateway, ServedModel, derived

SERVICE_SUFFIX = "-api"


@dataclass(frozen=True)
class RouteBackend:
    served_model_name: str
    service_name: str
    selector: dict[str, str]     # the pods the Service reaches
    port: int
    target_port: str             # container port name
    service_labels: dict[str, str]
    # The Service awaiter waits for a ready endpoint, 10 minutes unless told (pulumi-kubernetes
    # v4.32.0 provider/pkg/await/service.go DefaultServiceTimeoutMins), on create and update; its
    # pods may be in a 12-23 minute cold start, so it waits as long as their rollout.
    timeouts: pulumi.CustomTimeouts | None = None
    annotations: dict[str, str] = field(default_factory=dict)   # the Service's (scanner exceptions)
    engine: str = ""             # vllm | sglang: what an endpoint picker scores on (routing_layers/inference_pool.py)


def service_name(model: ServedModel) -> str:
    """The served model's Service, the one its route and the in-cluster endpoint point at."""
    return derived.bounded(f"{model.name}{SERVICE_SUFFIX}")


@dataclass(frozen=True)
class ModelRoutesArgs:
    namespace: str
    gateway: Gateway
    backends: list[RouteBackend]
    # Per-consumer limits of every route (components/gateway_policies.py), from the stack's consumers.
    rate_limits: gateway_policies.RateLimits = field(default_factory=gateway_policies.RateLimits)
    # The inferencePool layer's endpoint picker image (images.endpointPicker through the mirror).
    endpoint_picker_image: Any = None
    image_pull_secrets: tuple[str, ...] = ()


class ModelRoutes(Component):
    endpoints: dict[str, str]          # served model name -> in-cluster URL
    external_endpoint: str | None

    def __init__(self, name: str, args: ModelRoutesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gateway:ModelRoutes", name, opts)
        ns, gw = args.namespace, args.gateway
        self.endpoints = {}
        services = []
        for b in args.backends:
            services.append(k8s.core.v1.Service(
                f"{name}-{b.service_name}-service",
                metadata={**metadata(b.service_name, ns, "engine", b.service_labels),
                          **({"annotations": dict(b.annotations)} if b.annotations else {})},
                spec={"type": "ClusterIP", "selector": b.selector,
                      "ports": [{"name": "http", "port": b.port, "targetPort": b.target_port, "protocol": "TCP",
                                 "appProtocol": "http"}]},
                opts=self.child_opts(custom_timeouts=b.timeouts)))
            self.endpoints[b.served_model_name] = f"http://{b.service_name}.{ns}.svc.cluster.local:{b.port}/v1"
        self.external_endpoint = None
        if gw.enabled:
            routing_layer(gw.routing_layer).attach(self, name, args, services)
            if gw.external_endpoint:
                self.external_endpoint = f"{gw.external_endpoint}/v1"
        self.register_outputs({"endpoints": self.endpoints})
