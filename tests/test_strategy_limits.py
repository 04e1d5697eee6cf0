"""The consumers' limits on AIBrix's strategy path (components/strategy_limits.py): the EnvoyPatchPolicy
is valid against Envoy Gateway v1.2.8's CRD, applied after AIBrix's own, and the routes it adds take
exactly the strategy-routed requests of each consumer, each with its bucket, the stack's timeout and
unsent-only retries. Patch application and route selection are ports (tests/upstream_envoy_gateway.py,
tests/upstream_envoy.py); make e2e runs the same objects through the real translator (egctl v1.2.8)."""

from __future__ import annotations

import copy

import pytest
import upstream_aibrix as aibrix
import upstream_envoy as envoy
import upstream_envoy_gateway as eg
from conftest import k8s_objects, render_stack
from crd_schemas import crd_index, raw_crd_index, validate_custom_resource
from test_gateway_policies import LIMITS, NOTEBOOKS, SEARCH, routes_objects

import apivalidation
from apivalidation import cel_rules
from components import gateway_policies as gp
from components import strategy_limits as sl
from config_model import Gateway
from policy.routing_rules import gateway_never_resends_generations
from policy.unknowns import UNKNOWN

EPP = "EnvoyPatchPolicy"
# A request as the plugin forwards it on the target-pod branch (gateway_req_body.go HandleRequestBody).
PLUGIN_HEADERS = {"routing-strategy": "prefix-cache", "target-pod": "10.0.3.7:8000", "content-length": "42"}


def patch_policies(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] == EPP]


def gateway_routes(served: tuple[str, ...] = ("alpha", "beta")) -> dict:
    """The Gateway's RouteConfiguration before any patch: an xDS route per HTTPRoute of ours (path
    prefix and the `model` header) and AIBrix's reserved route that runs the plugin (/v1 prefixes)."""
    routes = [{"name": f"httproute/aibrix-system/{m}-api-ns/rule/0/match/0",
               "match": {"prefix": "/v1", "headers": [{"name": "model", "string_match": {"exact": m}}]},
               "route": {"cluster": f"httproute/aibrix-system/{m}-api-ns/rule/0"}} for m in served]
    routes.append({"name": "httproute/aibrix-system/aibrix-reserved-router/rule/0/match/0",
                   "match": {"prefix": "/v1"}, "route": {"cluster": "httproute/aibrix-system/aibrix-reserved-router/rule/0"}})
    return {"name": sl.route_configuration(Gateway()), "virtual_hosts": [{"name": "aibrix-eg/*", "routes": routes}]}


def patched(*policies: dict, aibrix_priority: int = aibrix.ORIGINAL_ROUTE_PATCH_PRIORITY) -> tuple[dict, list[str]]:
    rc = gateway_routes()
    errors = eg.apply_route_patches(rc, [(aibrix_priority, [copy.deepcopy(aibrix.ORIGINAL_ROUTE_PATCH)])]
                                    + [eg.priority_and_patches(p) for p in policies])
    return rc, errors


def bucket(route: dict) -> int | None:
    """The requests per minute the route's local rate limit lets through, after checking that it is
    one: a bucket of that many tokens refilled whole every 60 s (Envoy's TokenBucket: max_tokens is the
    burst, tokens_per_fill added every fill_interval), enabled and enforced for every request."""
    rl = (route.get("typed_per_filter_config") or {}).get(sl.LOCAL_RATE_LIMIT_FILTER)
    if rl is None:
        return None
    assert rl["@type"] == sl.LOCAL_RATE_LIMIT_TYPE and rl["stat_prefix"] == sl.LOCAL_RATE_LIMIT_STAT_PREFIX
    tb = rl["token_bucket"]
    assert set(tb) == {"max_tokens", "tokens_per_fill", "fill_interval"}, tb
    assert tb["fill_interval"] == "60s", tb  # a protobuf Duration in JSON: seconds with an `s`
    assert isinstance(tb["max_tokens"], int) and tb["max_tokens"] == tb["tokens_per_fill"] > 0, tb
    always = {"default_value": {"numerator": 100, "denominator": "HUNDRED"}}
    assert rl["filter_enabled"] == always and rl["filter_enforced"] == always, rl
    return tb["max_tokens"]


def picked(rc: dict, authorization: str | None, headers: dict[str, str] = PLUGIN_HEADERS) -> dict:
    h = dict(headers, **({"Authorization": authorization} if authorization is not None else {}))
    route = envoy.select_route(rc, "/v1/chat/completions", h)
    assert route is not None
    return route


def test_shipped_stacks_render_no_patch_policy():
    for stack in ("dev", "staging", "prod"):
        assert patch_policies(k8s_objects(render_stack(stack))) == []


def test_one_valid_policy_per_stack_after_aibrix_own():
    objs = routes_objects(LIMITS)
    (p,) = patch_policies(objs)
    assert validate_custom_resource(p, crd_index()) == [], p
    assert cel_rules.check(p, raw_crd_index()) == [], p
    assert apivalidation.validate([p], raw_crd_index()) == [], p
    assert p["metadata"]["namespace"] == Gateway().namespace
    assert p["metadata"]["labels"]["llm-serving.io/namespace"] == "ns"
    assert p["spec"]["targetRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": Gateway().name}
    assert p["spec"]["priority"] > aibrix.ORIGINAL_ROUTE_PATCH_PRIORITY
    assert {j["name"] for j in p["spec"]["jsonPatches"]} == {aibrix.ORIGINAL_ROUTE_PATCH["name"]}
    assert gateway_never_resends_generations("kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyPatchPolicy", p) == []
    # No limit set: no policy (nothing to add to AIBrix's route).
    assert patch_policies(routes_objects(gp.RateLimits())) == []


def test_each_consumer_strategy_routed_request_takes_its_own_bucket():
    (p,) = patch_policies(routes_objects(LIMITS))
    rc, errors = patched(p)
    assert errors == []
    original = next(r for r in rc["virtual_hosts"][0]["routes"] if r["name"] == aibrix.ORIGINAL_ROUTE["name"])
    for auth, consumer in (("Bearer search.k3y", SEARCH), ("BEARER search.k3y", SEARCH),
                           ("bearer notebooks.0xdead", NOTEBOOKS)):
        route = picked(rc, auth)
        assert route["name"] == sl.route_name("ns", f"consumer/{consumer.name}"), auth
        assert bucket(route) == consumer.requests_per_minute
        assert route["route"]["timeout"] == f"{Gateway().request_timeout_seconds}s"
        # Sent where AIBrix's route sends it, with the plugin still enabled on it.
        assert route["route"]["cluster"] == original["route"]["cluster"]
        assert route["typed_per_filter_config"][sl.ext_proc_filter(Gateway())] == \
            original["typed_per_filter_config"][sl.ext_proc_filter(Gateway())]
        assert set(route["route"]["retry_policy"]["retry_on"].split(",")) <= eg.NOTHING_SENT_TRIGGERS
    for other in ("Bearer searchx.k", "Bearer sk-shared", "Bearer  search.k", "xBearer search.k", None):
        route = picked(rc, other)
        assert route["name"] == sl.route_name("ns", "default"), other
        assert bucket(route) == LIMITS.default_requests_per_minute


def test_without_a_default_other_requests_keep_aibrix_route():
    (p,) = patch_policies(routes_objects(gp.RateLimits(consumers=(SEARCH,))))
    rc, errors = patched(p)
    assert errors == []
    assert picked(rc, "Bearer sk-shared")["name"] == aibrix.ORIGINAL_ROUTE["name"]
    assert picked(rc, None)["name"] == aibrix.ORIGINAL_ROUTE["name"]
    assert bucket(picked(rc, "Bearer search.k")) == SEARCH.requests_per_minute


def test_requests_off_the_strategy_path_are_untouched():
    """A request naming the model in the `model` header (no routing-strategy) still ends on our HTTPRoute,
    governed by its BackendTrafficPolicy; one the plugin has not seen yet matches its reserved route."""
    (p,) = patch_policies(routes_objects(LIMITS))
    rc, _ = patched(p)
    assert picked(rc, "Bearer search.k", {"model": "alpha"})["name"].startswith("httproute/aibrix-system/alpha-api")
    assert picked(rc, "Bearer search.k", {})["name"].endswith("aibrix-reserved-router/rule/0/match/0")


@pytest.mark.parametrize("order", ["ours-first", "theirs-first"])
def test_every_stack_consumer_route_precedes_every_default_route(order):
    """Two stacks on one Gateway, their policies applied in either order (equal priority: Envoy Gateway's
    sort.Slice keeps no order): each consumer keeps its own bucket; only then the defaults."""
    ours = patch_policies(routes_objects(LIMITS))[0]
    theirs = copy.deepcopy(ours)
    theirs_limits = gp.RateLimits(consumers=(gp.ConsumerLimit("batch", "batch.", 7),), default_requests_per_minute=3)
    theirs["spec"] = sl.patch_policy_spec(Gateway(), "other", theirs_limits)
    rc, errors = patched(*((ours, theirs) if order == "ours-first" else (theirs, ours)))
    assert errors == []
    names = [r["name"] for r in rc["virtual_hosts"][0]["routes"]]
    consumers = [i for i, n in enumerate(names) if "/consumer/" in n]
    defaults = [i for i, n in enumerate(names) if n.endswith("/default")]
    assert len(consumers) == 3 and len(defaults) == 2
    assert max(consumers) < min(defaults) and max(defaults) < names.index(aibrix.ORIGINAL_ROUTE["name"])
    assert bucket(picked(rc, "Bearer batch.k")) == 7
    assert bucket(picked(rc, "Bearer search.k")) == SEARCH.requests_per_minute


def test_applied_before_aibrix_own_the_default_finds_no_route():
    """The jsonPath needs original_route: a policy applied before AIBrix's fails that patch (reported in
    its status), which is why the priority is above AIBrix's."""
    (p,) = patch_policies(routes_objects(LIMITS))
    _, errors = patched(p, aibrix_priority=sl.PRIORITY + 1)
    assert len(errors) == 1 and "no jsonPointers" in errors[0]


def test_the_pack_rule_refuses_a_patched_route_that_resends():
    (p,) = patch_policies(routes_objects(LIMITS))
    rule = "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyPatchPolicy"
    for retry in ({"retry_on": "5xx,connect-failure"}, {"retry_on": ""},
                  {"retry_on": "connect-failure", "per_try_timeout": "30s"}):
        bad = copy.deepcopy(p)
        bad["spec"]["jsonPatches"][0]["operation"]["value"]["route"]["retry_policy"] = retry
        assert gateway_never_resends_generations(rule, bad), retry


def test_the_pack_rule_decides_nothing_on_a_value_unknown_in_preview():
    """Like every rule, it leaves a value the engine does not know yet to the update (policy/unknowns.py)."""
    (p,) = patch_policies(routes_objects(LIMITS))
    rule = "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyPatchPolicy"
    preview = copy.deepcopy(p)
    preview["spec"]["jsonPatches"][0]["operation"]["value"]["route"]["retry_policy"]["retry_on"] = UNKNOWN
    assert gateway_never_resends_generations(rule, preview) == []


def test_a_custom_timeout_reaches_the_strategy_routes():
    gw = Gateway(request_timeout_seconds=900)
    (p,) = patch_policies(routes_objects(LIMITS, gw))
    assert {j["operation"]["value"]["route"]["timeout"] for j in p["spec"]["jsonPatches"]} == {"900s"}


def test_the_route_selection_port_takes_envoy_gateways_path_prefix_form():
    """Envoy Gateway writes an HTTPRoute PathPrefix as path_separated_prefix (make e2e selects over its
    real output): whole segments only, the query and fragment aside."""
    rc = {"virtual_hosts": [{"routes": [{"name": "chat", "match": {"path_separated_prefix": "/v1/chat"}}]}]}
    for path, hit in (("/v1/chat", True), ("/v1/chat/completions", True), ("/v1/chat?stream=1", True),
                      ("/v1/chat#x", True), ("/v1/chats", False), ("/v1/cha", False), ("/v1", False)):
        assert (envoy.select_route(rc, path, {}) is not None) == hit, path
