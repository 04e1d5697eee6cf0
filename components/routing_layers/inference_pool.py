"""The Gateway API Inference Extension (GIE): per served model an InferencePool
(`inference.networking.k8s.io/v1`) over the model's serving pods, its endpoint picker
(components/endpoint_picker.py), and an HTTPRoute on the stack's Gateway whose backend is the pool.
Any gateway that implements the extension (docs/gateway-and-network.md lists them from GIE's own
list) then asks the picker over ext_proc which pod takes each request, scored on the engines' own
queue, KV-cache and prefix-cache signals.

The pool selects exactly the pods the model's `<model>-api` Service selects (leaders only for a
multi-node group, components/group.py), on the engine's serving port: the Service stays, as the
in-cluster endpoint the day-2 Jobs use whatever the layer. The route, like the AIBrix layer's, lives
in the gateway namespace, so one more ReferenceGrant lets it reach the pools here; it has its own name
(`<model>-pool-<namespace>`), so switching a stack from the AIBrix layer creates the new route beside
the old one and Pulumi deletes the old route only after every create of the update.

The route matches each path prefix with the served name either in the header `model` (the AIBrix
layer's route contract) or in `X-Gateway-Model-Name`, the header GIE's body-based router writes from
the request body (GIE v1.5.0 pkg/bbr/plugins/bodyfieldtoheader/body_field_to_header.go ModelHeader):
one rule each, so neither rule exceeds HTTPRoute's 64 matches.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s

from components import gateway_implementations as implementations
from components.base import metadata
from components.endpoint_picker import EndpointPicker, EndpointPickerArgs
from components.orchestrators.base import WAIT_FOR
from components.routing_layers.base import gateway_labels, reference_grant, route_name
from config_model import Gateway, derived
from policy import endpoint_picker as epp

if TYPE_CHECKING:
    from components.base import Component
    from components.gateway import ModelRoutesArgs, RouteBackend
    from components.network import NetworkArgs

NAME = "inferencePool"
EPP_IMAGE_KEY = "endpointPicker"          # images.endpointPicker
# Its own name beside the AIBrix layer's llm-serving-gateway-access: both exist while a stack switches.
POOL_REFERENCE_GRANT = "llm-serving-gateway-pool-access"
MODEL_HEADER = "model"
BODY_ROUTER_HEADER = "X-Gateway-Model-Name"
POOL_SUFFIX = "-pool"
# `pulumi up` waits until the Gateway's controller has accepted the route and resolved its pool: a JSON
# list of expressions, all required; jsonpath because `condition=` reads only .status.conditions and a
# route's are per parent (pulumi-kubernetes provider/pkg/metadata/overrides.go ReadyCondition,
# pkg/jsonpath/jsonpath.go: the first value selected is compared). parents[0]: the route has one
# parentRef and one controller writes it. Ten minutes unless told (pkg/await/await.go); a Gateway that
# cannot route to an InferencePool answers ResolvedRefs False (InvalidKind), and the up fails naming
# the route before anything the switch replaces is deleted: Pulumi deletes a removed resource only after
# every create and update of the update succeeded (pulumi/pulumi v3.276.0 pkg/resource/deploy
# deployment_executor.go performPostSteps).
ROUTE_ACCEPTED = json.dumps([f'jsonpath={{.status.parents[0].conditions[?(@.type=="{c}")].status}}=True'
                             for c in ("Accepted", "ResolvedRefs")])


def pool_name(backend: RouteBackend) -> str:
    """`<model>-pool`, from the Service's `<model>-api` model part (components/gateway.py service_name)."""
    model = backend.service_name.removesuffix("-api")
    return derived.bounded(f"{model}{POOL_SUFFIX}")


def route_spec(gateway: Gateway, backend: RouteBackend, pool: str, namespace: str) -> dict:
    def rule(header: str) -> dict:
        return {
            "matches": [{"path": {"type": "PathPrefix", "value": path},
                         "headers": [{"type": "Exact", "name": header, "value": backend.served_model_name}]}
                        for path in gateway.paths],
            "backendRefs": [{"group": epp.POOL_GROUP, "kind": epp.POOL_KIND, "name": pool, "namespace": namespace}],
            "timeouts": {"request": f"{gateway.request_timeout_seconds}s"},
        }
    return {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                        "name": gateway.name, "namespace": gateway.namespace}],
        "rules": [rule(MODEL_HEADER), rule(BODY_ROUTER_HEADER)],
    }


def picker_policy_name() -> str:
    return "llm-serving-endpoint-picker-ingress"


class InferencePoolLayer:
    name = NAME
    # Whose proxies front the pools depends on the implementation the Gateway runs: the exports and the
    # day-2 Jobs use each model's own Service in-cluster, the external endpoint is the gateway's.
    policy_suffix = "-inference-pool"   # components/network.py engine_ingress_name
    knows_proxies = False

    def proxy_namespace(self, gateway: Gateway) -> str:
        """Where the Gateway's implementation runs its proxies (components/gateway_implementations/)."""
        return implementations.proxy_namespace(gateway)

    def proxy_labels(self, gateway: Gateway) -> dict[str, str]:
        return implementations.proxy_labels(gateway)

    def gateway_ingress(self, args: NetworkArgs) -> list[dict]:
        """The Gateway's proxy pods reach the serving port (the pool's targetPort); the pickers already
        reach the engines as pods of this stack (network.py engine_ingress, part-of)."""
        from components.network import SERVING_PORTS, peer, tcp_ports
        return [{"from": [peer(args.gateway_proxy_namespace, args.gateway_proxy_labels)],
                 "ports": tcp_ports(*SERVING_PORTS)}]

    def policies(self, args: NetworkArgs) -> dict[str, dict]:
        """The pickers: the proxies on ext_proc's port, Prometheus on the metrics port."""
        from components.endpoint_picker import COMPONENT
        from components.network import PROMETHEUS_LABELS, peer, tcp_ports
        if not args.pools:
            return {}
        rules = [{"from": [peer(args.gateway_proxy_namespace, args.gateway_proxy_labels)],
                  "ports": tcp_ports(epp.GRPC_PORT)}]
        if args.prometheus_namespace is not None:
            rules.append({"from": [peer(args.prometheus_namespace, PROMETHEUS_LABELS)],
                          "ports": tcp_ports(epp.METRICS_PORT)})
        return {picker_policy_name(): {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": COMPONENT}},
            "policyTypes": ["Ingress"], "ingress": rules}}

    def attach(self, owner: Component, name: str, args: ModelRoutesArgs,
               services: list[pulumi.Resource]) -> None:
        ns, gw = args.namespace, args.gateway
        grant = reference_grant(owner, f"{name}-pool-reference-grant", POOL_REFERENCE_GRANT, ns, gw.namespace,
                                {"group": epp.POOL_GROUP, "kind": epp.POOL_KIND})
        for b in args.backends:
            pool = pool_name(b)
            picker = EndpointPicker(f"{name}-{pool}-picker", EndpointPickerArgs(
                namespace=ns, pool=pool, engine=b.engine, image=args.endpoint_picker_image,
                image_pull_secrets=args.image_pull_secrets), owner.child_opts())
            inference_pool = k8s.apiextensions.CustomResource(
                f"{name}-{pool}", api_version=epp.POOL_API_VERSION, kind=epp.POOL_KIND,
                metadata=metadata(pool, ns, "gateway"),
                spec=epp.pool_spec(b.selector, b.port, picker.service_name), opts=owner.child_opts(depends_on=[picker]))
            route = route_name(pool, ns)
            http_route = k8s.apiextensions.CustomResource(
                f"{name}-{pool}-route", api_version="gateway.networking.k8s.io/v1", kind="HTTPRoute",
                metadata={"name": route, "namespace": gw.namespace, "labels": gateway_labels(route, ns),
                          "annotations": {WAIT_FOR: ROUTE_ACCEPTED}},
                spec=route_spec(gw, b, pool, ns), opts=owner.child_opts(depends_on=[grant, inference_pool]))
            extra_objects(owner, f"{name}-{pool}", implementations.PoolRoute(
                namespace=ns, pool=pool, picker_service=picker.service_name, picker_port=picker.grpc_port,
                route=route, gateway=gw, rate_limits=args.rate_limits), {"picker": picker, "route": http_route})


def extra_objects(owner: Component, name: str, pool_route: implementations.PoolRoute,
                  after: dict[str, pulumi.Resource]) -> None:
    """What the Gateway's implementation needs beside the pool and the route (components/
    gateway_implementations/ says which and why), each after the object it refers to: in the stack's
    namespace with our labels, in the Gateway's with the stack's namespace named, as the route."""
    ns = pool_route.namespace
    for o in implementations.implementation_of(pool_route.gateway).objects(pool_route):
        k8s.apiextensions.CustomResource(
            f"{name}-{o.resource}", api_version=o.api_version, kind=o.kind,
            metadata=(metadata(o.name, o.namespace, "gateway") if o.namespace == ns
                      else {"name": o.name, "namespace": o.namespace, "labels": gateway_labels(o.name, ns)}),
            spec=o.spec, opts=owner.child_opts(depends_on=[after[o.after]]))


LAYER = InferencePoolLayer()
