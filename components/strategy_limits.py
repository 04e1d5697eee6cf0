"""The consumers' rate limits on the path every model here takes: AIBrix's strategy-routed requests.

The AIBrix v0.7.0 plugin picks the pod of every model of these stacks (components/routing.py) and
Envoy then sends the request on AIBrix's own route `original_route`, which AIBrix's EnvoyPatchPolicy
aibrix-epp puts at the head of the Gateway's RouteConfiguration (config/gateway/gateway.yaml: any
request carrying a `routing-strategy` header, cluster `original_destination_cluster`, pod from the
`target-pod` header, 120 s, no limit; tests/upstream_aibrix.py ORIGINAL_ROUTE). No HTTPRoute or
BackendTrafficPolicy of ours reaches a request there: Envoy re-selects the route after the plugin's
body response, and the local rate limit filter (after ext_proc in Envoy Gateway v1.2.8's order,
internal/xds/translator/httpfilters.go) reads the route it ends on.

So each stack adds, with one EnvoyPatchPolicy of its own beside AIBrix's, routes that match exactly
what original_route matches and also the consumer's bearer prefix, and send the request where
original_route sends it, with the consumer's token bucket, the stack's request timeout and the
unsent-only retries of components/gateway_policies.py:
- one route per consumer, added at the head of the virtual host's routes (every stack's consumer
  routes before every default route, whatever order Envoy Gateway applies the stacks' policies in);
- with `gateway.defaultRequestsPerMinute`, a default route added just before original_route (found by
  name, jsonPath), taking every strategy-routed request no consumer route took. It is gateway-wide:
  it also takes such requests for models of other stacks on the same Gateway (docs/gateway-and-network.md).
Priority 1: Envoy Gateway v1.2.8 applies a Gateway's EnvoyPatchPolicies in ascending priority
(internal/gatewayapi/envoypatchpolicy.go), and AIBrix's has the default 0, so original_route exists
when ours are applied. Each route keeps AIBrix's ext_proc filter config, which enables the plugin on
it (Envoy Gateway adds ext_proc filters disabled and enables them per route): a request that arrives
with its own `routing-strategy` header is matched to these routes before the plugin runs.

One bucket per consumer per Envoy replica for all strategy-routed models (the route knows no model:
the plugin's request carries routing-strategy and target-pod, no model header, gateway_req_body.go).
The per-route policies of gateway_policies.py keep the per-model limits on the `model`-header path.
"""

from __future__ import annotations

from components.gateway_policies import NUM_RETRIES, RETRY_TRIGGERS, RateLimits, consumer_header_regex
from config_model import derived
from config_model.operations import Gateway

# Same API group and version as the BackendTrafficPolicies (gateway_policies.API_VERSION).
KIND = "EnvoyPatchPolicy"
# Applied after AIBrix's aibrix-epp (priority 0).
PRIORITY = 1

# AIBrix v0.7.0 config/gateway/gateway.yaml (Gateway listener `http`) and
# config/gateway/gateway-plugin/gateway-plugin.yaml (EnvoyExtensionPolicy gateway-plugins-extension-policy,
# aibrix- after config/default's namePrefix): the names its EnvoyPatchPolicy patches and copies.
LISTENER = "http"
ORIGINAL_ROUTE = "original_route"
ORIGINAL_CLUSTER = "original_destination_cluster"
ROUTING_STRATEGY_HEADER = "routing-strategy"
EXTENSION_POLICY = "aibrix-gateway-plugins-extension-policy"
ROUTE_CONFIGURATION_TYPE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
# Envoy Gateway v1.2.8 internal/xds/translator/local_ratelimit.go: the filter's name and stat prefix.
LOCAL_RATE_LIMIT_FILTER = "envoy.filters.http.local_ratelimit"
LOCAL_RATE_LIMIT_TYPE = "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"
LOCAL_RATE_LIMIT_STAT_PREFIX = "http_local_rate_limiter"


def route_configuration(gateway: Gateway) -> str:
    """Envoy Gateway's name of the listener's RouteConfiguration: <namespace>/<gateway>/<listener>."""
    return f"{gateway.namespace}/{gateway.name}/{LISTENER}"


def ext_proc_filter(gateway: Gateway) -> str:
    """The per-route name Envoy Gateway gives the plugin's ext_proc filter, as aibrix-epp spells it."""
    return f"envoy.filters.http.ext_proc/envoyextensionpolicy/{gateway.namespace}/{EXTENSION_POLICY}/extproc/0"


def policy_name(namespace: str) -> str:
    return derived.bounded(f"{namespace}-strategy-limits")


def route_name(namespace: str, which: str) -> str:
    """Envoy route names (in the proxy's stats and config dump): the stack's namespace and the bucket."""
    return f"llm-serving/{namespace}/{which}"


def _token_bucket(requests_per_minute: int) -> dict:
    """One route-level bucket, as Envoy Gateway writes the default bucket of a local limit."""
    always = {"default_value": {"numerator": 100, "denominator": "HUNDRED"}}
    return {"@type": LOCAL_RATE_LIMIT_TYPE, "stat_prefix": LOCAL_RATE_LIMIT_STAT_PREFIX,
            "token_bucket": {"max_tokens": requests_per_minute, "tokens_per_fill": requests_per_minute,
                             "fill_interval": "60s"},
            "filter_enabled": always, "filter_enforced": always}


def _route(gateway: Gateway, name: str, requests_per_minute: int, authorization_regex: str | None) -> dict:
    headers = [{"name": ROUTING_STRATEGY_HEADER, "string_match": {"safe_regex": {"regex": ".*"}}}]
    if authorization_regex is not None:
        headers.append({"name": "authorization", "string_match": {"safe_regex": {"regex": authorization_regex}}})
    return {
        "name": name,
        "match": {"prefix": "/", "headers": headers},
        "route": {"cluster": ORIGINAL_CLUSTER, "timeout": f"{gateway.request_timeout_seconds}s",
                  "retry_policy": {"retry_on": ",".join(RETRY_TRIGGERS), "num_retries": NUM_RETRIES}},
        "typed_per_filter_config": {
            ext_proc_filter(gateway): {"@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "config": {}},
            LOCAL_RATE_LIMIT_FILTER: _token_bucket(requests_per_minute),
        },
    }


def patch_policy_spec(gateway: Gateway, namespace: str, limits: RateLimits) -> dict | None:
    """The EnvoyPatchPolicy's spec, or None when the stack sets no limit."""
    if not limits.enabled:
        return None
    target = {"type": ROUTE_CONFIGURATION_TYPE, "name": route_configuration(gateway)}
    patches = [{**target, "operation": {"op": "add", "path": "/virtual_hosts/0/routes/0",
                                        "value": _route(gateway, route_name(namespace, f"consumer/{c.name}"),
                                                        c.requests_per_minute, consumer_header_regex(c.key_prefix))}}
               for c in reversed(limits.consumers)]
    if limits.default_requests_per_minute is not None:
        patches.append({**target, "operation": {
            "op": "add", "jsonPath": f"$.virtual_hosts[0].routes[?(@.name=='{ORIGINAL_ROUTE}')]",
            "value": _route(gateway, route_name(namespace, "default"), limits.default_requests_per_minute, None)}})
    return {"type": "JSONPatch", "priority": PRIORITY,
            "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway.name},
            "jsonPatches": patches}
