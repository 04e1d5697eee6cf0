"""The AIBrix v0.7.0 gateway (field report 10, 11): per served model an HTTPRoute on AIBrix's Envoy
Gateway v1.2.8 matching the header `model`, its BackendTrafficPolicy (components/gateway_policies.py),
the stack's EnvoyPatchPolicy for the strategy-routed requests (components/strategy_limits.py), and one
ReferenceGrant letting the gateway namespace's routes reach the Services here. The AIBrix plugin picks
the pod itself (components/routing.py); these objects only carry a request to the model's Service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from components import gateway_policies, strategy_limits
from components.routing_layers.base import REFERENCE_GRANT, gateway_labels, reference_grant, route_name
from config_model import Gateway

if TYPE_CHECKING:
    from components.base import Component
    from components.gateway import ModelRoutesArgs, RouteBackend
    from components.network import NetworkArgs

NAME = "aibrix"


def route_spec(gateway: Gateway, backend: RouteBackend, namespace: str) -> dict:
    """Every routed path, each AND the header `model` = served name (AIBrix matches on `model`)."""
    return {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                        "name": gateway.name, "namespace": gateway.namespace}],
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": path},
                         "headers": [{"type": "Exact", "name": "model", "value": backend.served_model_name}]}
                        for path in gateway.paths],
            "backendRefs": [{"group": "", "kind": "Service", "name": backend.service_name,
                             "namespace": namespace, "port": backend.port}],
            "timeouts": {"request": f"{gateway.request_timeout_seconds}s"},
        }],
    }


class AibrixLayer:
    name = NAME
    # Its Envoy Gateway's proxies are known (labels, Service, container port: components/network_egress.py,
    # ops_commands.py), so the exports and the day-2 Jobs go through the gateway.
    policy_suffix = ""   # components/network.py engine_ingress_name
    knows_proxies = True

    def proxy_namespace(self, gateway: Gateway) -> str:
        return gateway.proxy_namespace

    def proxy_labels(self, gateway: Gateway) -> dict[str, str]:
        """None to pass: aibrix_gateway_ingress selects Envoy Gateway's own labels and the owning Gateway's."""
        return {}

    def gateway_ingress(self, args: NetworkArgs) -> list[dict]:
        from components.network import aibrix_gateway_ingress
        return aibrix_gateway_ingress(args)

    def policies(self, args: NetworkArgs) -> dict[str, dict]:
        return {}

    def attach(self, owner: Component, name: str, args: ModelRoutesArgs,
               services: list[pulumi.Resource]) -> None:
        ns, gw = args.namespace, args.gateway
        grant = reference_grant(owner, f"{name}-reference-grant", REFERENCE_GRANT, ns, gw.namespace,
                                {"group": "", "kind": "Service"})
        policies = []
        for b, svc in zip(args.backends, services):
            route = route_name(b.service_name, ns)
            route_labels = gateway_labels(route, ns)
            http_route = k8s.apiextensions.CustomResource(
                f"{name}-{b.service_name}-route", api_version="gateway.networking.k8s.io/v1", kind="HTTPRoute",
                metadata={"name": route, "namespace": gw.namespace, "labels": route_labels},
                spec=route_spec(gw, b, ns),
                opts=owner.child_opts(depends_on=[grant, svc]))
            # Its own object, so adding, changing or removing a limit touches no route and no pod.
            policies.append(k8s.apiextensions.CustomResource(
                f"{name}-{b.service_name}-traffic", api_version=gateway_policies.API_VERSION,
                kind=gateway_policies.KIND,
                metadata={"name": route, "namespace": gw.namespace, "labels": route_labels},
                spec=gateway_policies.backend_traffic_policy_spec(route, args.rate_limits),
                opts=owner.child_opts(depends_on=[http_route])))
        patch = strategy_limits.patch_policy_spec(gw, ns, args.rate_limits)
        if patch is not None and policies:
            # After the route policies: Envoy Gateway puts the local rate limit filter on the
            # listener only while a route of it has a local limit (local_ratelimit.go patchHCM).
            k8s.apiextensions.CustomResource(
                f"{name}-strategy-limits", api_version=gateway_policies.API_VERSION, kind=strategy_limits.KIND,
                metadata={"name": strategy_limits.policy_name(ns), "namespace": gw.namespace,
                          "labels": gateway_labels(strategy_limits.policy_name(ns), ns)},
                spec=patch, opts=owner.child_opts(depends_on=policies))


LAYER = AibrixLayer()
