"""Envoy Gateway with the Envoy AI Gateway extension v1.1.0, which pins Envoy Gateway v1.8.1 (envoyproxy/
ai-gateway go.mod at v1.1.0). Envoy Gateway alone has no InferencePool backend (v1.9.1's translator knows
only Service, ServiceImport and Backend, and an extension's custom backends: internal/gatewayapi/route.go
processBackendRef); the AI Gateway's extension server adds it. Its only GIE conformance report is for
v1alpha2 (GIE v0.5.1, "latest"), none for InferencePool v1.

Prerequisite: Envoy Gateway installed with `extensionManager.backendResources: [{group:
inference.networking.k8s.io, kind: InferencePool, version: v1}]` (ai-gateway examples/inference-pool/
envoy-gateway-values-addon.yaml at v1.1.0) and the AI Gateway controller as its extension server.

Proxies: Envoy Gateway's own, as components/network.py reads them at v1.2.8 and unchanged at v1.8.1
(internal/infrastructure/kubernetes/proxy/resource.go EnvoyAppLabel; internal/gatewayapi/translator.go
OwningGatewayNameLabel, OwningGatewayNamespaceLabel): in the controller's namespace, envoy-gateway-system
(internal/envoygateway/config/config.go DefaultNamespace), unless the EnvoyGateway config deploys them
beside their Gateway (provider.kubernetes.deploy.type GatewayNamespace): then set gateway.proxyNamespace.

The picker: the extension server builds the ext_proc cluster to `<picker>.<namespace>.svc` with TLS and an
empty validation context, i.e. no verification (internal/extensionserver/inferencepool.go
buildExtProcClusterForInferencePoolEndpointPicker): nothing to add.

Timeouts: the HTTPRoute's rules[].timeouts. Per-consumer limits: carried, by the same BackendTrafficPolicy
the AIBrix layer writes on Envoy Gateway v1.2.8 (components/gateway_policies.py, which says how it selects
a consumer by its key's prefix). Every field it uses is at v1.8.1 with the same meaning, read in
github.com/envoyproxy/gateway@v1.8.1 (module proxy): api/v1alpha1/ratelimit_types.go (`type` is deprecated
there but still accepted; local rules still at most 16; `limit.requests` now a uint32 within 1..2^32-1,
the range RateLimits already holds), internal/gatewayapi/backendtrafficpolicy.go buildLocalRateLimit (the
one rule without clientSelectors is the route's default bucket; a RegularExpression header match is
checked as RE2) and internal/xds/translator/local_ratelimit.go (AlwaysConsumeDefaultTokenBucket false: a
request counts against the default only when it matches no consumer). tests/test_gateway_implementations.py
checks the rendered policy against v1.8.1's CRD.
"""

from __future__ import annotations

from components import gateway_policies
from components.gateway_implementations.base import ExtraObject, Implementation, PoolRoute
from config_model import derived

NAME = "envoyAiGateway"
ENVOY_GATEWAY_RELEASE = "v1.8.1"
# internal/envoygateway/config/config.go DefaultNamespace (v1.8.1), where its proxies run by default.
CONTROLLER_NAMESPACE = "envoy-gateway-system"


def proxy_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    # Imported here: components/network.py imports the routing layers, which import this registry.
    from components.network import ENVOY_PROXY_LABELS, OWNING_GATEWAY_NAME, OWNING_GATEWAY_NAMESPACE
    return {**ENVOY_PROXY_LABELS, OWNING_GATEWAY_NAMESPACE: gateway_namespace, OWNING_GATEWAY_NAME: gateway_name}


def policy_name(route: str) -> str:
    return derived.bounded(f"{route}-traffic")


def objects(p: PoolRoute) -> list[ExtraObject]:
    """The route's BackendTrafficPolicy: retries only where nothing reached an engine, and the consumers'
    limits (gateway_policies.backend_traffic_policy_spec)."""
    return [ExtraObject(
        resource="envoy-traffic", api_version=gateway_policies.API_VERSION, kind=gateway_policies.KIND,
        name=policy_name(p.route), namespace=p.gateway.namespace,
        spec=gateway_policies.backend_traffic_policy_spec(p.route, p.rate_limits), after="route")]


IMPLEMENTATION = Implementation(
    name=NAME, title="Envoy Gateway + Envoy AI Gateway", release=f"AI Gateway v1.1.0, Envoy Gateway {ENVOY_GATEWAY_RELEASE}",
    proxies_in_gateway_namespace=False, controller_namespace=CONTROLLER_NAMESPACE, proxy_labels=proxy_labels,
    # Envoy Gateway labels its proxies with the Gateway's name as is (translator.go OwnerLabels).
    labelled_name_limit=63, refuses_consumer_limits=None, objects=objects)
