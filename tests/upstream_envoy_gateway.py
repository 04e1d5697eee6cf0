"""Envoy Gateway behaviour the NetworkPolicies depend on, at the version AIBrix v0.7.0 installs:
v1.2.8 (aibrix config/dependency/envoy-gateway/kustomization.yaml at v0.7.0 pulls
github.com/envoyproxy/gateway/releases/download/v1.2.8/install.yaml). Re-check when AIBrix bumps it.
Read with `git -C <mirror of envoyproxy/gateway> show v1.2.8:<path>`. Re-check on a bump: `git -C
<mirror> diff v1.2.8 <new tag> --` each path below.

The proxy Service of a Gateway is envoy-<ns>-<name>-<sha256("<ns>/<name>")[:8]>, the readable part cut
to 48 characters (internal/infrastructure/kubernetes/proxy/resource.go ExpectedResourceHashedName ->
internal/utils/misc.go GetHashedName(name, 48)); components/ops_commands.py gateway_endpoint computes it
and tests/test_operations.py checks it against the name AIBrix's own scripts use."""

from __future__ import annotations

import copy
import re

TAG = "v1.2.8"

# Compared with the Envoy Gateway AIBrix's bundle brings (components/platform.py AIBRIX_BUNDLED) by
# tests/test_upstream_releases.py.
PORTED_FROM = {
    "repo": "envoyproxy/gateway", "release": TAG, "component": "envoy-gateway",
    "files": ("internal/infrastructure/kubernetes/proxy/resource.go", "internal/utils/misc.go",
              "internal/envoygateway/config/config.go",
              "internal/infrastructure/kubernetes/proxy/resource_provider.go",
              "internal/infrastructure/kubernetes/infra.go", "api/v1alpha1/envoygateway_types.go",
              "internal/gatewayapi/helpers.go", "internal/gatewayapi/translator.go",
              "internal/gatewayapi/backendtrafficpolicy.go", "internal/xds/translator/local_ratelimit.go",
              "internal/xds/translator/route.go", "internal/utils/ratelimit/unit.go", "api/v1alpha1/retry_types.go",
              "api/v1alpha1/ratelimit_types.go", "internal/gatewayapi/envoypatchpolicy.go",
              "internal/xds/translator/jsonpatch.go", "internal/utils/jsonpatch/patch.go",
              "internal/utils/jsonpatch/jsonpathtopointer.go", "internal/gatewayapi/listener.go",
              "api/v1alpha1/envoyproxy_helpers.go"),
}

# internal/envoygateway/config/config.go: DefaultNamespace = "envoy-gateway-system", overridable by
# ENVOY_GATEWAY_NAMESPACE, which install.yaml sets from the controller pod's own namespace.
CONTROLLER_NAMESPACE = "envoy-gateway-system"

# internal/infrastructure/kubernetes/proxy/resource_provider.go: NewResourceRender(ns, ...) renders
# every proxy Deployment into the controller's namespace (infra.go passes cfg.Namespace). The
# GatewayNamespace deploy mode (proxies beside their Gateway) exists only from v1.3.0
# (api/v1alpha1/envoygateway_types.go KubernetesDeployModeTypeGatewayNamespace), and AIBrix's
# EnvoyGateway config (config/dependency/envoy-gateway/envoy_gateway_patch.yaml) sets no deploy mode.
PROXIES_RUN_IN_GATEWAY_NAMESPACE = False


def proxy_pod_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    """Labels of a Gateway's proxy pods: internal/infrastructure/kubernetes/proxy/resource.go
    EnvoyAppLabel (app.kubernetes.io/name=envoy, component=proxy, managed-by=envoy-gateway) plus
    internal/gatewayapi/helpers.go OwnerLabels (translator.go OwningGatewayNamespaceLabel,
    OwningGatewayNameLabel)."""
    return {
        "app.kubernetes.io/name": "envoy",
        "app.kubernetes.io/component": "proxy",
        "app.kubernetes.io/managed-by": "envoy-gateway",
        "gateway.envoyproxy.io/owning-gateway-namespace": gateway_namespace,
        "gateway.envoyproxy.io/owning-gateway-name": gateway_name,
    }


def proxy_container_port(listener_port: int, use_listener_port_as_container_port: bool | None = None) -> int:
    """The port a Gateway listener's connections reach the proxy pod on (what a NetworkPolicy sees after the
    proxy Service's translation): internal/gatewayapi/listener.go servicePortToContainerPort adds
    wellKnownPortShift (10000, translator.go) to a port below minEphemeralPort (1024) unless the EnvoyProxy's
    provider.kubernetes.useListenerPortAsContainerPort is true (api/v1alpha1/envoyproxy_helpers.go
    NeedToSwitchPorts). AIBrix v0.7.0's EnvoyProxy (config/gateway/gateway.yaml) does not set it."""
    if use_listener_port_as_container_port:
        return listener_port
    return listener_port + 10000 if listener_port < 1024 else listener_port


# ---- BackendTrafficPolicy: what v1.2.8's translator accepts and what Envoy then does with it ----
# internal/utils/ratelimit/unit.go UnitToSeconds
UNIT_SECONDS = {"Second": 1, "Minute": 60, "Hour": 3600, "Day": 86400}
# internal/xds/translator/route.go buildRetryOn: the triggers it translates (the CRD enum).
RETRY_TRIGGERS = {"5xx", "gateway-error", "reset", "connect-failure", "retriable-4xx", "refused-stream",
                  "retriable-status-codes", "cancelled", "deadline-exceeded", "internal", "resource-exhausted",
                  "unavailable"}
# route.go retryDefaultRetryOn: what a retry without retryOn.triggers retries on.
DEFAULT_RETRY_ON = ("connect-failure", "refused-stream", "unavailable", "cancelled", "retriable-status-codes")
# Envoy router x-envoy-retry-on: the triggers that fire only when no request byte reached the upstream
# (connect-failure: the connection failed; refused-stream: HTTP/2 REFUSED_STREAM, "not processed").
# Every other one fires on a response or a reset after the request was sent (retry_types.go comments).
NOTHING_SENT_TRIGGERS = {"connect-failure", "refused-stream"}


def _rule_errors(rule: dict) -> list[str]:
    """backendtrafficpolicy.go buildRateLimitRule."""
    out = []
    for sel in rule.get("clientSelectors") or []:
        if not sel.get("headers") and sel.get("sourceCIDR") is None:
            out.append("At least one of the header or sourceCIDR must be specified")
        for h in sel.get("headers") or []:
            t, value = h.get("type"), h.get("value")
            if (t is None or t in ("Exact", "RegularExpression")) and value is not None:
                continue
            if t == "Distinct" and value is None:
                if h.get("invert"):
                    out.append("Invert is not applicable for distinct header match type")
                continue
            out.append("Either the header.Type is not valid or the header is missing a value")
    return out


def rate_limit_errors(rl: dict, global_rate_limit_enabled: bool = False) -> list[str]:
    """backendtrafficpolicy.go buildRateLimit / buildLocalRateLimit / buildGlobalRateLimit: the
    translator's refusals (the route then answers 500: translateBackendTrafficPolicyForRoute sets a
    500 DirectResponse when any IR build failed)."""
    if rl.get("type") == "Global":
        if rl.get("global") is None:
            return ["global configuration empty for rateLimit"]
        if not global_rate_limit_enabled:
            return ["enable Ratelimit in the EnvoyGateway config to configure global rateLimit"]
        return [e for r in rl["global"].get("rules") or [] for e in _rule_errors(r)]
    if rl.get("type") != "Local":
        return [f"invalid rateLimit type: {rl.get('type')}"]
    if rl.get("local") is None:
        return ["local configuration empty for rateLimit"]
    rules = rl["local"].get("rules") or []
    defaults = [r for r in rules if not r.get("clientSelectors")]
    if len(defaults) > 1:
        return ["local rateLimit can not have more than one rule without clientSelectors"]
    default_unit = UNIT_SECONDS[defaults[0]["limit"]["unit"]] if defaults else 1
    out = []
    if any(UNIT_SECONDS[r["limit"]["unit"]] % default_unit for r in rules):
        out.append("local rateLimit rule limit unit must be a multiple of the default limit unit")
    for r in rules:
        if not r.get("clientSelectors"):
            continue
        out += _rule_errors(r)
        for sel in r["clientSelectors"]:
            if (sel.get("sourceCIDR") or {}).get("type") == "Distinct":
                out.append("local rateLimit does not support distinct CIDRMatch")
            if any(h.get("type") == "Distinct" for h in sel.get("headers") or []):
                out.append("local rateLimit does not support distinct HeaderMatch")
    return out


def retry_on(retry: dict) -> tuple[str, ...]:
    """route.go buildRetryPolicy: the x-envoy-retry-on set Envoy receives."""
    triggers = (retry.get("retryOn") or {}).get("triggers")
    return tuple(triggers) if triggers else DEFAULT_RETRY_ON


def _header_matches(h: dict, headers: dict[str, str]) -> bool:
    """One HeaderValueMatch action as local_ratelimit.go buildRouteLocalRateLimits emits it
    (expect_match = not invert) over Envoy's HeaderMatcher: a missing header matches nothing; a
    safe_regex matches the WHOLE value (Envoy CompiledGoogleReMatcher::match, RE2 FullMatch). The
    patterns rendered use only the subset where Python's re and RE2 agree (literals, escapes, ^, .*, $)."""
    value = next((v for k, v in headers.items() if k.lower() == h["name"].lower()), None)
    if value is None:
        matched = False
    elif h.get("type") == "RegularExpression":
        matched = re.fullmatch(h["value"], value) is not None
    else:
        matched = value == h["value"]
    return matched != bool(h.get("invert"))


def local_buckets(rl: dict, headers: dict[str, str]) -> list[int | None]:
    """The token buckets one request consumes on one xDS route (local_ratelimit.go patchRoute):
    the index of each rule all of whose selectors match (a descriptor), else the route default,
    None (AlwaysConsumeDefaultTokenBucket false: the default only when no descriptor matched).
    The default is the rule without clientSelectors, or 2^32-1 per second without one."""
    rules = rl["local"]["rules"]
    matched = [i for i, r in enumerate(rules) if r.get("clientSelectors")
               and all(_header_matches(h, headers) for s in r["clientSelectors"] for h in s.get("headers") or [])]
    return matched or [None]


def attached_policies(policies: list[dict], routes: list[dict]) -> dict[tuple[str, str], str]:
    """backendtrafficpolicy.go resolveBTPolicyRouteTargetRef: a policy reaches an HTTPRoute of its own
    namespace (the target is local); the oldest policy per route wins, later ones are Conflicted.
    (namespace, route) -> the name of the policy that governs it."""
    names = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in routes if r["kind"] == "HTTPRoute"}
    out: dict[tuple[str, str], str] = {}
    for p in policies:
        for ref in p["spec"].get("targetRefs") or [p["spec"].get("targetRef")]:
            key = (p["metadata"]["namespace"], ref["name"])
            if ref["kind"] == "HTTPRoute" and key in names and key not in out:
                out[key] = p["metadata"]["name"]
    return out


# ---- EnvoyPatchPolicy (components/strategy_limits.py; make e2e runs the real translator, egctl) ----

_ROUTE_BY_NAME = re.compile(r"^\$\.virtual_hosts\[(\d+)\]\.routes\[\?\(@\.name ?== ?'([^']*)'\)\]$")


def _pointers(document: dict, json_path: str) -> list[str]:
    """jsonpathtopointer.go ConvertPathToPointers (ohler55/ojg jp) for the one form rendered: the routes of
    a virtual host whose name equals a literal. Any other form is refused here, not guessed."""
    m = _ROUTE_BY_NAME.match(json_path)
    if not m:
        raise NotImplementedError(json_path)
    vh = int(m.group(1))
    routes = document["virtual_hosts"][vh]["routes"]
    return [f"/virtual_hosts/{vh}/routes/{i}" for i, r in enumerate(routes) if r.get("name") == m.group(2)]


def _add(document: dict, pointer: str, value: object) -> None:
    """RFC 6902 add (evanphx/json-patch v5, EnsurePathExistsOnAdd): into an array it inserts before the
    index (or appends at its length); into an object it sets the member."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        index = int(last)
        if not 0 <= index <= len(node):
            raise IndexError(pointer)
        node.insert(index, value)
    else:
        node[last] = value


def priority_and_patches(policy: dict) -> tuple[int, list[dict]]:
    """What envoypatchpolicy.go takes of an EnvoyPatchPolicy: its priority (default 0) and its patches
    (a copy: applying them must not change the object)."""
    return policy["spec"].get("priority", 0), copy.deepcopy(policy["spec"]["jsonPatches"])


def apply_route_patches(route_configuration: dict, policies: list[tuple[int, list[dict]]]) -> list[str]:
    """envoypatchpolicy.go (policies sorted by priority, ascending) and jsonpatch.go/patch.go (each
    patch of the RouteConfiguration of that name, in order; a failing patch is skipped and reported):
    `route_configuration` patched in place; the errors, as the policy's status would carry them."""
    errors = []
    for _, patches in sorted(policies, key=lambda p: p[0]):
        for patch in patches:
            if patch["type"] != "type.googleapis.com/envoy.config.route.v3.RouteConfiguration" \
                    or patch["name"] != route_configuration["name"]:
                continue
            op = patch["operation"]
            assert op["op"] == "add", op
            if op.get("jsonPath"):
                # A path beside a jsonPath is appended to each pointer the jsonPath yields.
                pointers = [p + (op.get("path") or "") for p in _pointers(route_configuration, op["jsonPath"])]
                if not pointers:
                    errors.append(f"no jsonPointers were found while evaluating the jsonPath: '{op['jsonPath']}'")
            else:
                pointers = [op["path"]]
            for pointer in pointers:
                _add(route_configuration, pointer, op["value"])
    return errors

