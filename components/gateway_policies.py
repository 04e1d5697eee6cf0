"""Per model route, one Envoy Gateway BackendTrafficPolicy: the per-consumer rate limits and the
retries. The HTTPRoute (components/gateway.py) keeps the request timeout, its one home.

What it reaches: the requests that end on our HTTPRoute, those naming the model in a `model` header.
A request the AIBrix v0.7.0 plugin routes by strategy (every model here: components/routing.py) is
sent on AIBrix's own Envoy route `original_route` (its EnvoyPatchPolicy aibrix-epp), which no
HTTPRoute or policy of ours reaches (tests/upstream_aibrix.py ORIGINAL_ROUTE, docs/gateway-and-network.md);
the same limits reach those through the routes components/strategy_limits.py adds before it.

Envoy Gateway v1.2.8 is the release AIBrix v0.7.0 installs (tests/upstream_envoy_gateway.py); every
upstream behaviour below is read at that tag (`git show v1.2.8:<path>` of envoyproxy/gateway) and
ported in tests/upstream_envoy_gateway.py, which the tests run against what is rendered here.

Rate limit, local, not global: a global limit needs the rate-limit service configured in the
EnvoyGateway config (internal/gatewayapi/backendtrafficpolicy.go buildGlobalRateLimit refuses it
otherwise: "enable Ratelimit in the EnvoyGateway config"), and AIBrix v0.7.0's
(config/dependency/envoy-gateway/envoy_gateway_patch.yaml) configures none. A local limit counts per
Envoy replica and per xDS route: EG makes one xDS route per HTTPRoute match (one per path prefix),
each with its own token bucket (internal/xds/translator/local_ratelimit.go patchRoute), so a
consumer's N requests per minute hold per model, per path prefix, per proxy replica.

A local limit cannot give each distinct key its own bucket (buildLocalRateLimit refuses `Distinct`
header matches), and a key must never appear in a Kubernetes object. So each consumer is selected by
the public prefix of its bearer token: a RegularExpression match of `Authorization` on
`^(?i:bearer) <escaped prefix>.*$` (the keys' contract: policy/consumers.py key_prefix, a consumer name and a
dot; names are DNS labels, so no prefix is the start of another). Every other request, whatever its
key or none, falls to the route's default bucket: the one rule without clientSelectors, which EG
makes the route-level token bucket with AlwaysConsumeDefaultTokenBucket false, consumed only by a
request that matches no consumer rule (local_ratelimit.go). Unset, EG uses 2^32-1 per second there:
other keys are not limited.

Retries only where the request cannot have reached an engine: `connect-failure` (no connection to
the upstream, nothing sent) and `refused-stream` (HTTP/2 REFUSED_STREAM, which by definition means
the stream was not processed). Never `5xx`, `gateway-error`, `reset` (a reset or disconnect after
the request was sent: the generation may be running) or a per-try timeout (it re-sends a request
whose generation is still running). Without retryOn EG would retry on
`connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes` with 503
(internal/xds/translator/route.go retryDefaultRetryOn), so the triggers are always explicit.

No health check here: EG's active HTTP health check would send a request to the engines on a timer,
and an engine that generates on its health path pollutes every metric (field report 12.4);
passive and TCP checks stay with the pods' own tcpSocket probes (policy `engine-probes-tcp`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy.routing_rules import UNSENT_RETRY_TRIGGERS

API_VERSION = "gateway.envoyproxy.io/v1alpha1"
KIND = "BackendTrafficPolicy"
AUTHORIZATION = "Authorization"
# api/v1alpha1/ratelimit_types.go LocalRateLimit.Rules: +kubebuilder:validation:MaxItems=16.
MAX_LOCAL_RULES = 16
# The local token bucket is a uint32 (local_ratelimit.go: MaxTokens uint32(...)).
MAX_REQUESTS = 2**32 - 1
# The triggers that fire only when nothing reached an engine: the policy pack's, its one home.
RETRY_TRIGGERS = tuple(sorted(UNSENT_RETRY_TRIGGERS))
# api/v1alpha1/retry_types.go NumRetries default; spelled out so the plan shows it.
NUM_RETRIES = 2


@dataclass(frozen=True)
class ConsumerLimit:
    """One consumer's limit at the gateway. key_prefix is public (never the key): the start every
    one of the consumer's keys has."""
    name: str
    key_prefix: str
    requests_per_minute: int


@dataclass(frozen=True)
class RateLimits:
    consumers: tuple[ConsumerLimit, ...] = ()
    default_requests_per_minute: int | None = None   # gateway.defaultRequestsPerMinute

    def __post_init__(self) -> None:
        rules = len(self.consumers) + (self.default_requests_per_minute is not None)
        if rules > MAX_LOCAL_RULES:
            raise ValueError(f"{rules} local rate-limit rules; Envoy Gateway v1.2.8 takes at most {MAX_LOCAL_RULES}")
        prefixes = [c.key_prefix for c in self.consumers]
        for a in prefixes:
            if not a or any(b != a and b.startswith(a) for b in prefixes) or prefixes.count(a) > 1:
                raise ValueError(f"key prefix {a!r} is empty, repeated or the start of another: a request would "
                                 "count against two consumers")
        for v in [c.requests_per_minute for c in self.consumers] + [self.default_requests_per_minute or 1]:
            if not 0 < v <= MAX_REQUESTS:
                raise ValueError(f"a limit of {v} requests per minute is outside 1..{MAX_REQUESTS}")

    @property
    def enabled(self) -> bool:
        return bool(self.consumers) or self.default_requests_per_minute is not None


def consumer_header_regex(key_prefix: str) -> str:
    """RE2 (EG validates with Go's regexp, internal/utils/regex/regex.go): the scheme in any case,
    one space, the prefix with every metacharacter escaped, then the rest of the key. SGLang takes
    the scheme in any case (0.5.23 sglang/srt/utils/auth.py _check_bearer_token: `split(" ", 1)`,
    `parts[0].lower() != "bearer"`; vLLM only `Bearer <key>`), so a case-sensitive scheme would let a
    consumer's own key slip past its rule. Envoy matches a safe_regex against the WHOLE header value
    (envoyproxy/envoy source/common/common/regex.h CompiledGoogleReMatcher::match, RE2 FullMatch),
    so a bare prefix pattern would select nobody."""
    return "^(?i:bearer) " + re.escape(key_prefix) + ".*$"


def rate_limit(limits: RateLimits) -> dict | None:
    if not limits.enabled:
        return None
    rules = []
    if limits.default_requests_per_minute is not None:
        rules.append({"limit": {"requests": limits.default_requests_per_minute, "unit": "Minute"}})
    rules += [{"clientSelectors": [{"headers": [{"type": "RegularExpression", "name": AUTHORIZATION,
                                                 "value": consumer_header_regex(c.key_prefix)}]}],
               "limit": {"requests": c.requests_per_minute, "unit": "Minute"}}
              for c in limits.consumers]
    return {"type": "Local", "local": {"rules": rules}}


def backend_traffic_policy_spec(route: str, limits: RateLimits) -> dict:
    """The policy of one HTTPRoute (same namespace: the target is a local reference)."""
    spec: dict = {
        "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route}],
        "retry": {"numRetries": NUM_RETRIES, "retryOn": {"triggers": list(RETRY_TRIGGERS)}},
    }
    rl = rate_limit(limits)
    if rl is not None:
        spec["rateLimit"] = rl
    return spec
