"""NGINX Gateway Fabric v2.6.0, the release with GIE v1.5.0's conformance report (partial: skipped
GatewayDestinationEndpointServed and InferencePoolAppProtocol; GIE conformance module reports/v1.5.0/
gateway/nginx-gateway-fabric). Read at nginx/nginx-gateway-fabric tag v2.6.0 (its Go module is not
served by the module proxy; tests/upstream_nginx_gateway_fabric.py ports the types checked here).

Prerequisite: the chart's `nginxGateway.gwAPIInferenceExtension.enable: true` (charts/nginx-gateway-fabric/
values.yaml; flag --gateway-api-inference-extension, cmd/gateway/commands.go).

Proxies: the nginx Deployment is provisioned in the Gateway's namespace (internal/controller/provisioner/
objects.go: `Namespace: gateway.GetNamespace()`), its pods labelled `gateway.networking.k8s.io/gateway-name:
<Gateway name>` (buildLabelsAndAnnotations; internal/framework/controller/labels.go GatewayLabel) unless the
name is longer than MaxServiceNameLen = 63 (internal/framework/controller/resource.go): then the name goes
to an annotation, and no label names the Gateway. gateway.name is a DNS label (at most 63), so it always
carries the label.

The picker: the nginx pod's endpoint-picker-shim container dials it with TLS and skips verification by
default (values.yaml gwAPIInferenceExtension.endpointPicker disableTLS false, skipVerify true): nothing to add.

Timeouts: v2.6.0 ignores an HTTPRoute rule's `timeouts` (internal/controller/state/graph/httproute.go
checkForUnsupportedHTTPFields: the route stays Accepted, with the field reported unsupported). Its own
ProxySettingsPolicy (apis/v1alpha1/proxysettingspolicy_types.go, gateway.nginx.org/v1alpha1, the CRD's
only version: config/crd/bases/gateway.nginx.org_proxysettingspolicies.yaml) sets nginx's proxy_read_timeout
and proxy_send_timeout (internal/controller/nginx/config/policies/proxysettings/generator.go), so each
route gets one with gateway.requestTimeoutSeconds. nginx's read timeout bounds the wait between two reads of
the response, not the whole response: a non-streamed generation sends nothing until it ends, so it is
bounded by it; a streamed one only between its chunks.

Per-consumer limits: refused, see REFUSES_CONSUMER_LIMITS.
"""

from __future__ import annotations

from components.gateway_implementations.base import GATEWAY_NAME_LABEL, ExtraObject, Implementation, PoolRoute
from config_model import derived

NAME = "nginxGatewayFabric"
API_VERSION = "gateway.nginx.org/v1alpha1"
PROXY_SETTINGS_POLICY = "ProxySettingsPolicy"
# internal/framework/controller/resource.go MaxServiceNameLen; objects.go: a longer name is an annotation.
MAX_LABELLED_GATEWAY_NAME = 63
REFUSES_CONSUMER_LIMITS = (
    "NGINX Gateway Fabric v2.6.0's RateLimitPolicy keys each bucket on the whole value of nginx variables "
    "(limit_req_zone key; apis/v1alpha1/ratelimitpolicy_types.go, internal/controller/nginx/config/policies/"
    "ratelimit/generator.go) and applies every rule to every request: it cannot select a consumer by its "
    "key's prefix, so no consumer can have a limit of its own")


def proxy_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    return {GATEWAY_NAME_LABEL: gateway_name}


def duration(seconds: int) -> str:
    """apis/v1alpha1/shared_types.go Duration: `^[0-9]{1,4}(ms|s|m|h)?$` (gateway.requestTimeoutSeconds is
    at most 3600, four digits)."""
    return f"{seconds}s"


def policy_name(route: str) -> str:
    return derived.bounded(f"{route}-proxy-settings")


def objects(p: PoolRoute) -> list[ExtraObject]:
    """The route's ProxySettingsPolicy, beside it in the Gateway's namespace (targetRefs are local)."""
    timeout = duration(p.gateway.request_timeout_seconds)
    return [ExtraObject(
        resource="nginx-proxy-settings", api_version=API_VERSION, kind=PROXY_SETTINGS_POLICY,
        name=policy_name(p.route), namespace=p.gateway.namespace,
        spec={"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": p.route}],
              "timeout": {"read": timeout, "send": timeout}},
        after="route")]


IMPLEMENTATION = Implementation(
    name=NAME, title="NGINX Gateway Fabric", release="v2.6.0", proxies_in_gateway_namespace=True,
    proxy_labels=proxy_labels, labelled_name_limit=MAX_LABELLED_GATEWAY_NAME,
    refuses_consumer_limits=REFUSES_CONSUMER_LIMITS, objects=objects)
