"""The gateway's side of issue 21: per model route one BackendTrafficPolicy (components/gateway_policies.py)
with the consumers' rate limits and retries only where no request reached an engine; the request
timeout and the drain agree end to end. Every policy is checked against the Envoy Gateway v1.2.8 CRDs
(schema and CEL), the API-server rules, and a port of v1.2.8's translator (tests/upstream_envoy_gateway.py)."""

from __future__ import annotations

import copy
import importlib.util
import sys

import pytest
import test_aibrix_routing as routing_variants
import upstream_aibrix as aibrix
import upstream_envoy_gateway as eg
import upstream_sglang as sglang_releases
from conftest import k8s_objects, render_stack
from crd_schemas import crd_index, raw_crd_index, validate_custom_resource
from engine_containers import engine_packages
from test_aibrix_routing import accepted_routes, engine_pods, served_models
from test_config import problems, raw_config
from variants import render, variant_file

import apivalidation
from apivalidation import cel_rules
from components import gateway_policies as gp
from components.gateway import ModelRoutes, ModelRoutesArgs, RouteBackend
from config_model import Gateway
from config_model.operations import AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS
from policy.routing_rules import UNSENT_RETRY_TRIGGERS
from policy.workloads import pod_templates
from render.runtime import record
from stacks.rules.operations import DRAIN_MARGIN_SECONDS

BTP = "BackendTrafficPolicy"
SEARCH = gp.ConsumerLimit("search", "search.", 600)
NOTEBOOKS = gp.ConsumerLimit("notebooks", "notebooks.", 60)
LIMITS = gp.RateLimits(consumers=(SEARCH, NOTEBOOKS), default_requests_per_minute=30)


def full_index():
    return raw_crd_index()


def routes_objects(limits: gp.RateLimits, gateway: Gateway | None = None) -> list[dict]:
    backends = [RouteBackend(served_model_name=n, service_name=f"{n}-api", selector={"app": n}, port=8000,
                             target_port="engine", service_labels={}) for n in ("alpha", "beta")]

    def program():
        ModelRoutes("routes", ModelRoutesArgs(namespace="ns", gateway=gateway or Gateway(), backends=backends,
                                              rate_limits=limits))
        return {}
    return k8s_objects(record("test", program))


def assert_valid(obj: dict) -> None:
    """Strict schema (unknown fields refused), CEL and API-server rules, and v1.2.8's translator."""
    assert validate_custom_resource(obj, crd_index()) == [], obj
    assert cel_rules.check(obj, full_index()) == [], obj
    assert apivalidation.validate([obj], full_index()) == [], obj
    if "rateLimit" in obj["spec"]:
        assert eg.rate_limit_errors(obj["spec"]["rateLimit"]) == [], obj
    assert set(eg.retry_on(obj["spec"]["retry"])) <= eg.RETRY_TRIGGERS


def never_resends_a_generation(spec: dict) -> None:
    """Retries fire only where nothing reached an engine, and never after a per-try timeout; no
    active health check (12.4: an HTTP check on the engines would generate on a timer)."""
    assert set(eg.retry_on(spec["retry"])) <= eg.NOTHING_SENT_TRIGGERS, spec["retry"]
    assert "perRetry" not in spec["retry"]
    assert "healthCheck" not in spec and "timeout" not in spec


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_shipped_route_has_one_valid_policy_that_only_retries_unsent_requests(stack):
    objs = k8s_objects(render_stack(stack))
    routes = [o for o in objs if o["kind"] == "HTTPRoute"]
    policies = [o for o in objs if o["kind"] == BTP]
    assert routes and len(policies) == len(routes)
    # Each route is governed by its own policy (the translator's attachment, oldest first).
    assert eg.attached_policies(policies, routes) == {
        (r["metadata"]["namespace"], r["metadata"]["name"]): r["metadata"]["name"] for r in routes}
    for p in policies:
        assert_valid(p)
        never_resends_a_generation(p["spec"])
        # No consumer and no default in the shipped stacks: no rate-limit section at all.
        assert "rateLimit" not in p["spec"]


def test_consumer_limits_render_valid_and_select_by_key_prefix_only():
    objs = routes_objects(LIMITS)
    policies = [o for o in objs if o["kind"] == BTP]
    assert len(policies) == 2
    for p in policies:
        assert_valid(p)
        never_resends_a_generation(p["spec"])
        rl = p["spec"]["rateLimit"]
        assert rl["type"] == "Local"
        rules = rl["local"]["rules"]

        def bucket(headers: dict[str, str]) -> int | None:
            (b,) = eg.local_buckets(rl, headers)
            return None if b is None else rules[b]["limit"]["requests"]
        assert bucket({"Authorization": "Bearer search.k3y"}) == 600
        assert bucket({"authorization": "Bearer notebooks.0xdead"}) == 60
        # Any other key, a look-alike name, a key without the prefix's dot, no key: the default bucket,
        # which is the rule without selectors (30/min), consumed only when no consumer rule matched.
        for other in ({"Authorization": "Bearer searchx.k"}, {"Authorization": "Bearer search"},
                      {"Authorization": "Bearer sk-shared"}, {"Authorization": "xBearer search.k"},
                      {"Authorization": "Bearer  search.k"}, {}):
            assert bucket(other) is None, other
        assert [r["limit"]["requests"] for r in rules if not r.get("clientSelectors")] == [30]
    # The component never sees a key: what it renders is each consumer's public prefix, escaped.
    assert [h["value"] for r in policies[0]["spec"]["rateLimit"]["local"]["rules"]
            for s in r.get("clientSelectors") or [] for h in s["headers"]] == ["^(?i:bearer) search\\..*$",
                                                                              "^(?i:bearer) notebooks\\..*$"]


def test_prefix_metacharacters_are_escaped_and_limits_without_default():
    odd = gp.ConsumerLimit("odd", "a+b.", 5)
    (p, _) = [o for o in routes_objects(gp.RateLimits(consumers=(odd,))) if o["kind"] == BTP]
    assert_valid(p)
    rl = p["spec"]["rateLimit"]
    assert eg.local_buckets(rl, {"Authorization": "Bearer a+b.x"}) == [0]
    assert eg.local_buckets(rl, {"Authorization": "Bearer aab.x"}) == [None]
    # Without gateway.defaultRequestsPerMinute EG's default bucket is 2^32-1 per second: others unlimited.
    assert all(r.get("clientSelectors") for r in rl["local"]["rules"])


def test_default_only_is_one_route_level_bucket():
    (p, _) = [o for o in routes_objects(gp.RateLimits(default_requests_per_minute=100)) if o["kind"] == BTP]
    assert_valid(p)
    assert p["spec"]["rateLimit"] == {"type": "Local", "local": {"rules": [
        {"limit": {"requests": 100, "unit": "Minute"}}]}}
    assert eg.local_buckets(p["spec"]["rateLimit"], {"Authorization": "Bearer anything"}) == [None]


def test_the_translator_port_refuses_what_v1_2_8_refuses():
    """Why the choices: a distinct bucket per key is refused for a local limit, and a global one
    without a rate-limit service (AIBrix v0.7.0's EnvoyGateway config has none)."""
    distinct = {"type": "Local", "local": {"rules": [
        {"clientSelectors": [{"headers": [{"type": "Distinct", "name": "Authorization"}]}],
         "limit": {"requests": 1, "unit": "Minute"}}]}}
    assert eg.rate_limit_errors(distinct) == ["local rateLimit does not support distinct HeaderMatch"]
    glob = {"type": "Global", "global": {"rules": distinct["local"]["rules"]}}
    assert eg.rate_limit_errors(glob) == ["enable Ratelimit in the EnvoyGateway config to configure global rateLimit"]
    assert eg.rate_limit_errors(glob, global_rate_limit_enabled=True) == []
    two_defaults = {"type": "Local", "local": {"rules": [{"limit": {"requests": 1, "unit": "Minute"}}] * 2}}
    assert eg.rate_limit_errors(two_defaults) == ["local rateLimit can not have more than one rule without clientSelectors"]
    hour_default = gp.rate_limit(LIMITS)
    hour_default["local"]["rules"][0]["limit"]["unit"] = "Hour"
    assert eg.rate_limit_errors(hour_default) == ["local rateLimit rule limit unit must be a multiple of the default limit unit"]
    # And without explicit triggers Envoy would retry a 503 (which an engine sent) and gRPC statuses.
    assert not set(eg.retry_on({})) <= eg.NOTHING_SENT_TRIGGERS
    # The pack's list of unsent-request triggers is the port's, and each is one v1.2.8 translates.
    assert UNSENT_RETRY_TRIGGERS == eg.NOTHING_SENT_TRIGGERS and UNSENT_RETRY_TRIGGERS <= eg.RETRY_TRIGGERS


def test_the_crds_refuse_what_the_component_must_not_render():
    """The CRD bounds the component keeps to: at most 16 local rules; requests a uint32 bucket."""
    (p, _) = [o for o in routes_objects(LIMITS) if o["kind"] == BTP]
    many = copy.deepcopy(p)
    many["spec"]["rateLimit"]["local"]["rules"] *= 6
    assert any("rules" in e for e in validate_custom_resource(many, crd_index()))
    with pytest.raises(ValueError, match="at most 16"):
        gp.RateLimits(consumers=tuple(gp.ConsumerLimit(f"c{i}", f"c{i}.", 1) for i in range(16)),
                      default_requests_per_minute=1)
    assert len(gp.RateLimits(consumers=tuple(gp.ConsumerLimit(f"c{i}", f"c{i}.", 1) for i in range(16))).consumers) == 16
    for bad in ((SEARCH, gp.ConsumerLimit("s", "search.", 1)), (gp.ConsumerLimit("s", "se", 1), SEARCH),
                (gp.ConsumerLimit("z", "z.", 0),), (gp.ConsumerLimit("z", "z.", 2**32),)):
        with pytest.raises(ValueError):
            gp.RateLimits(consumers=bad)


def test_default_limit_config_is_validated_with_the_field_named():
    for value in (0, -5):
        raw = raw_config()
        raw["gateway"] = {**raw.get("gateway", {}), "defaultRequestsPerMinute": value}
        (line,) = problems(raw)
        assert line.startswith(f"Pulumi.dev.yaml: llm-serving:gateway.defaultRequestsPerMinute = {value}: "), line


def test_a_stack_default_limit_reaches_every_route():
    objs = k8s_objects(render(variant_file(gateway={"defaultRequestsPerMinute": 120})))
    policies = [o for o in objs if o["kind"] == BTP]
    assert policies
    for p in policies:
        assert_valid(p)
        assert p["spec"]["rateLimit"]["local"]["rules"] == [{"limit": {"requests": 120, "unit": "Minute"}}]


@pytest.mark.parametrize("timeout", [120, 600])
def test_request_timeout_drain_and_grace_agree_end_to_end(timeout):
    """The HTTPRoute's timeout is the gateway's (Gateway API's wins over a policy's: v1.2.8
    internal/xds/translator/route.go getEffectiveRequestTimeout, and the policy sets none); each
    engine pod's preStop waits that long for in-flight requests, and the grace period covers it plus
    the margin for endpoint removal, so no in-flight request is cut by SIGKILL."""
    models = copy.deepcopy(raw_config()["models"])
    for m in models:
        m["terminationGraceSeconds"] = timeout + DRAIN_MARGIN_SECONDS
    objs = k8s_objects(render(variant_file(gateway={"requestTimeoutSeconds": timeout}, models=models)))
    routes = [o for o in objs if o["kind"] == "HTTPRoute"]
    assert routes and all(r["spec"]["rules"][0]["timeouts"] == {"request": f"{timeout}s"} for r in routes)
    assert all("timeout" not in p["spec"] for p in objs if p["kind"] == BTP)
    engines = 0
    for obj in objs:
        for ref in pod_templates(obj["kind"], obj):
            if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") != "engine":
                continue
            engines += 1
            spec = ref.template["spec"]
            argv = spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
            drain = int(argv[argv.index("--timeout") + 1])
            assert drain == timeout
            assert spec["terminationGracePeriodSeconds"] >= drain + DRAIN_MARGIN_SECONDS
    assert engines
    # One second less of grace is refused, naming the field.
    models[0]["terminationGraceSeconds"] = timeout + DRAIN_MARGIN_SECONDS - 1
    raw = raw_config()
    raw.update(gateway={"requestTimeoutSeconds": timeout}, models=models[:1])
    assert any("models[0].terminationGraceSeconds" in line for line in problems(raw))


def test_what_the_policies_reach_and_what_they_do_not():
    """Through the plugin, every served model is routed by strategy ("target-pod"), and such a request
    ends on AIBrix's original_route (tests/upstream_aibrix.py ORIGINAL_ROUTE): no HTTPRoute and no
    policy of ours governs it; its timeout is AIBrix's 120 s. A request that names the model in the
    `model` header matches our HTTPRoute before the plugin runs (the plugin's ext_proc is attached to
    AIBrix's reserved route only) and is governed by our route and its policy. The drain covers both."""
    assert AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS == aibrix.ORIGINAL_ROUTE["timeout_seconds"]
    for name in ("dev", "staging", "prod"):
        r = render_stack(name)
        pods, routes = engine_pods(r), accepted_routes(r)
        for model in served_models(r):
            assert aibrix.final_route(aibrix.handle_request_body(model, pods, {}, routes)) == "original_route"
        cfg_timeout = int(next(o for o in k8s_objects(r) if o["kind"] == "HTTPRoute")
                          ["spec"]["rules"][0]["timeouts"]["request"].rstrip("s"))
        for obj in k8s_objects(r):
            for ref in pod_templates(obj["kind"], obj):
                if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") == "engine":
                    argv = ref.template["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
                    assert int(argv[argv.index("--timeout") + 1]) >= max(cfg_timeout, aibrix.ORIGINAL_ROUTE["timeout_seconds"])


def test_a_shorter_route_timeout_still_drains_for_aibrix_own_route():
    objs = k8s_objects(render(variant_file(gateway={"requestTimeoutSeconds": 30})))
    assert {r["spec"]["rules"][0]["timeouts"]["request"] for r in objs if r["kind"] == "HTTPRoute"} == {"30s"}
    drains = {int(c["lifecycle"]["preStop"]["exec"]["command"][-1]) for o in objs for ref in pod_templates(o["kind"], o)
              if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") == "engine"
              for c in ref.template["spec"]["containers"][:1]}
    assert drains == {AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS}


def test_the_pack_rule_refuses_every_resend_and_passes_what_is_rendered():
    from policy.routing_rules import gateway_never_resends_generations as rule
    t = "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy"
    (p, _) = [o for o in routes_objects(LIMITS) if o["kind"] == BTP]
    assert rule(t, p) == []
    for change, words in ((lambda s: s["retry"].pop("retryOn"), "without retryOn.triggers"),
                          (lambda s: s["retry"]["retryOn"].update(triggers=["reset"]), "['reset']"),
                          (lambda s: s["retry"]["retryOn"].update(triggers=["connect-failure", "gateway-error"]),
                           "['gateway-error']"),
                          (lambda s: s["retry"].update(perRetry={"timeout": "10s"}), "perRetry.timeout"),
                          (lambda s: s.update(healthCheck={"active": {"type": "HTTP", "http": {"path": "/health"}}}),
                           "active HTTP health check")):
        bad = copy.deepcopy(p)
        change(bad["spec"])
        assert any(words in v for v in rule(t, bad)), (words, rule(t, bad))
    tcp = copy.deepcopy(p)
    tcp["spec"]["healthCheck"] = {"active": {"type": "TCP", "tcp": {}}}
    assert rule(t, tcp) == []


def test_the_crd_cel_rules_refuse_a_hostile_policy():
    (p, _) = [o for o in routes_objects(LIMITS) if o["kind"] == BTP]
    both = copy.deepcopy(p)
    both["spec"]["targetRef"] = dict(p["spec"]["targetRefs"][0])
    section = copy.deepcopy(p)
    section["spec"]["targetRefs"][0]["sectionName"] = "http"
    kind = copy.deepcopy(p)
    kind["spec"]["targetRefs"][0]["kind"] = "Service"
    for obj, words in ((both, "either targetRef or targetRefs must be used"),
                       (section, "does not yet support the sectionName field"),
                       (kind, "targetRefs[*].kind of Gateway/HTTPRoute")):
        assert any(words in m for _, _, m in cel_rules.check(obj, full_index())), words


@pytest.mark.parametrize("name", routing_variants.VARIANTS)
def test_every_topology_drains_for_the_longest_request_within_its_grace(name):
    """Every engine pod of every topology: its preStop drain waits for the longest request through the
    gateway (route timeout, at least AIBrix's 120 s route) and the grace period covers it plus the margin."""
    r = routing_variants.variant(name)
    objs = k8s_objects(r)
    timeouts = {int(o["spec"]["rules"][0]["timeouts"]["request"].rstrip("s")) for o in objs if o["kind"] == "HTTPRoute"}
    (longest,) = {max(t, AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS) for t in timeouts}
    drains = 0
    for obj in objs:
        for ref in pod_templates(obj["kind"], obj):
            spec = ref.template["spec"]
            for c in spec["containers"]:
                cmd = ((c.get("lifecycle") or {}).get("preStop") or {}).get("exec", {}).get("command") or []
                if any(str(a).endswith("/drain.py") for a in cmd):
                    drains += 1
                    assert int(cmd[cmd.index("--timeout") + 1]) == longest, (name, obj["metadata"]["name"])
                    assert spec["terminationGracePeriodSeconds"] >= longest + DRAIN_MARGIN_SECONDS
    assert drains, name


@pytest.mark.parametrize("release", sglang_releases.RELEASES)
def test_every_header_an_engine_accepts_for_a_consumer_key_counts_against_that_consumer(release):
    """Run SGLang's own bearer check (sglang/srt/utils/auth.py, torch-free, from the installed wheel)
    over header spellings: whatever it accepts for search's key lands in search's bucket, and what
    lands there carries search's prefix. vLLM accepts only `Bearer <key>` (tests/upstream_vllm.py), a
    subset."""
    path = engine_packages() / f"sglang=={release}" / "sglang" / "srt" / "utils" / "auth.py"
    spec = importlib.util.spec_from_file_location(f"sglang_auth_{release.replace('.', '_')}", path)
    auth = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = auth  # its dataclasses look their module up there
    spec.loader.exec_module(auth)
    (p, _) = [o for o in routes_objects(LIMITS) if o["kind"] == BTP]
    rl = p["spec"]["rateLimit"]
    search_rule = next(i for i, r in enumerate(rl["local"]["rules"]) if r["limit"]["requests"] == 600)
    key = "search.5f3c"
    spellings = [f"{scheme}{space}{k}" for scheme in ("Bearer", "bearer", "BEARER", "BeArEr", "Token", "")
                 for space in (" ", "  ", "\t") for k in (key, key + " ", " " + key)]
    accepted = 0
    for header in spellings:
        decision = auth.decide_request_auth(method="POST", path="/v1/chat/completions", authorization_header=header,
                                            api_key=key, admin_api_key=None, auth_level=auth.AuthLevel.NORMAL)
        bucket = eg.local_buckets(rl, {"Authorization": header})
        if decision.allowed:
            accepted += 1
            assert bucket == [search_rule], header
    assert accepted >= 4  # every case of the scheme
