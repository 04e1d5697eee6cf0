"""Issue 21 at the gateway, through the REAL Envoy Gateway translator: what Envoy would be sent.

The stacks' gateway objects (HTTPRoutes, BackendTrafficPolicies, the strategy-path EnvoyPatchPolicy of
components/strategy_limits.py, the backend Services, the ReferenceGrant) and AIBrix v0.7.0's own (its
config/gateway and config/metadata files, read from the AIBrix Go module that e2e/tools/aibrix builds,
with config/default/kustomization.yaml's namePrefix `aibrix-` and namespace aibrix-system) go through
`egctl x translate` of Envoy Gateway v1.2.8 (.e2e/bin/egctl, e2e/tools/envoy-gateway, `make e2e-tools`):
Envoy Gateway's own Gateway API -> IR -> xDS translation, EnvoyPatchPolicies applied in priority order
(internal/gatewayapi/envoypatchpolicy.go) by its JSON patch code (internal/xds/translator/jsonpatch.go).
The tests read the statuses and the final RouteConfiguration, and pick routes in it with the unit
tests' port of Envoy's route selection (tests/upstream_envoy.py, at the Envoy AIBrix runs:
envoyproxy/envoy:v1.33.2, AIBrix's config/gateway/gateway.yaml EnvoyProxy patch), whose model of the
patching (tests/upstream_envoy_gateway.py, tests/upstream_aibrix.py) must agree with what egctl does.
No cluster: only the binary, about half a second a run.

What egctl v1.2.8 cannot do, and what the tests do about it (internal/cmd/egctl/translate.go):
- It prints no Programmed condition of an EnvoyPatchPolicy: the xDS step sets it on a copy it does not
  print. A patch that fails makes the whole translation fail instead (translateGatewayAPIToXds returns
  the error processJSONPatches joins), so exit 0 means no patch failed; a patch whose resource is not
  found is no error there, so every route our patches add is also looked for in the output.
- Its loader reads no ReferenceGrant (internal/gatewayapi/resource/load.go: "TODO: add support for kind
  ReferenceGrant"), so a backendRef across namespaces is RefNotPermitted there. The objects as rendered
  are translated once for the statuses (that condition is the only one allowed to fail); for the xDS
  the grant is honoured by hand (`honour_grants`, Gateway API's ReferenceGrant rule): each backend
  the rendered grant admits is placed beside its route, so the route gets its cluster.
- EnvoyExtensionPolicy fails in egctl ("Wasm: wasm cache is not initialized": no Wasm cache outside the
  controller), so AIBrix's ext_proc filter is missing from the listener and its reserved routes answer
  500. Our routes copy the per-route ext_proc config of original_route, compared as is.
- Services get a dummy ClusterIP only with --add-missing-resources (load.go), used here; every Service
  and Namespace a route needs is given (gateway_objects, aibrix_objects), so none has to be invented.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest
import yaml
from cluster import go_module_dir

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("E2E_BIN", ROOT / ".e2e" / "bin"))
EGCTL = BIN / "egctl"
GATEWAY_NAMESPACE = "aibrix-system"
GATEWAY_IR = f"{GATEWAY_NAMESPACE}/aibrix-eg"          # egctl's key: <namespace>/<gateway>
ROUTE_CONFIGURATION = f"{GATEWAY_IR}/http"
ORIGINAL_ROUTE = "original_route"
LOCAL_RATE_LIMIT = "envoy.filters.http.local_ratelimit"
UNSENT_ONLY = {"connect-failure", "refused-stream"}    # issue 21: retry only what never reached an engine

# Two stacks on the one Gateway, each with its own consumers; the timeout is not AIBrix's 120 s, so a
# route that kept original_route's timeout would show.
TIMEOUT_SECONDS = 150   # within Pulumi.dev.yaml terminationGraceSeconds (180) less the 30 s margin
DEV = {"namespace": "llm-serving-dev", "default": 30,
       "consumers": [{"name": "search", "namespace": "team-search", "requestsPerMinute": 600},
                     {"name": "notebooks", "namespaceSelector": {"matchLabels": {"team": "data"}},
                      "requestsPerMinute": 60}]}
OTHER = {"namespace": "llm-serving-other", "default": 12,
         "consumers": [{"name": "batch", "namespace": "team-batch", "requestsPerMinute": 240}]}


# --- the objects ------------------------------------------------------------------------------------

def _render(stack: dict) -> list[dict]:
    """The dev stack (Pulumi.dev.yaml) with the stack's namespace, consumers (each key a masked stand-in,
    as `pulumi config set --secret --path llm-serving:consumerKeys.<name>` leaves it offline) and
    gateway limits: every Kubernetes object it renders. In a process of its own (Pulumi's mock runtime)."""
    out = subprocess.run([sys.executable, __file__, "render", json.dumps(stack)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


def _render_main(stack: dict) -> None:
    sys.path.insert(0, str(ROOT))
    from render import runtime, stackfile
    from render.output import is_kubernetes_object
    sf = stackfile.read(ROOT, "dev")
    sf.config["llm-serving:namespace"] = stack["namespace"]
    sf.config["llm-serving:consumers"] = json.dumps(stack["consumers"])
    sf.config["llm-serving:consumerKeys"] = json.dumps({c["name"]: f"[secret {c['name']}]" for c in stack["consumers"]})
    sf.secret_keys.append("llm-serving:consumerKeys")
    gateway = json.loads(sf.config["llm-serving:gateway"])
    gateway["requestTimeoutSeconds"] = TIMEOUT_SECONDS
    if stack["default"] is not None:
        gateway["defaultRequestsPerMinute"] = stack["default"]
    sf.config["llm-serving:gateway"] = json.dumps(gateway)
    rendered = runtime.render(sf)
    print(json.dumps([r.inputs for r in rendered.resources if is_kubernetes_object(r)]))


def gateway_objects(stack: dict) -> list[dict]:
    """What of the stack Envoy Gateway reads: everything in the gateway namespace, the Services the
    routes point at, the ReferenceGrants and the Namespaces."""
    objs = _render(stack)
    ours = [o for o in objs if o["metadata"].get("namespace") == GATEWAY_NAMESPACE]
    assert {o["kind"] for o in ours} == {"HTTPRoute", "BackendTrafficPolicy", "EnvoyPatchPolicy"}, ours
    wanted = {(r["namespace"], r["name"]) for o in ours if o["kind"] == "HTTPRoute"
              for rule in o["spec"]["rules"] for r in rule["backendRefs"]}
    backends = [o for o in objs if o["kind"] == "Service"
                and (o["metadata"]["namespace"], o["metadata"]["name"]) in wanted]
    assert len(backends) == len(wanted), wanted
    return ours + backends + [o for o in objs if o["kind"] in ("ReferenceGrant", "Namespace")]


# The kinds egctl v1.2.8 loads (internal/gatewayapi/resource/load.go loadKubernetesYAMLToResources); the
# Deployments of these files are the controllers', not the translator's business.
EGCTL_KINDS = {"GatewayClass", "Gateway", "EnvoyProxy", "ClientTrafficPolicy", "EnvoyPatchPolicy", "Service",
               "HTTPRoute", "EnvoyExtensionPolicy", "Namespace"}


@cache
def aibrix_objects() -> tuple[dict, ...]:
    """AIBrix v0.7.0's gateway objects as `kubectl apply -k config/default` makes them: namePrefix
    `aibrix-` and namespace aibrix-system (config/default/kustomization.yaml; the references inside are
    written already prefixed, e.g. gatewayClassName aibrix-eg). config/namespace holds the Namespace."""
    src = go_module_dir("github.com/vllm-project/aibrix", wrapper="aibrix") / "config"
    kustomization = yaml.safe_load((src / "default" / "kustomization.yaml").read_text())
    assert (kustomization["namePrefix"], kustomization["namespace"]) == ("aibrix-", GATEWAY_NAMESPACE)
    assert {"../gateway", "../metadata", "../namespace"} <= set(kustomization["resources"])
    objs = []
    for path in ("gateway/gateway.yaml", "gateway/gateway-plugin/gateway-plugin.yaml", "metadata/metadata.yaml",
                 "namespace/namespace.yaml"):
        for doc in yaml.safe_load_all((src / path).read_text()):
            if doc and doc["kind"] in EGCTL_KINDS:
                doc["metadata"]["name"] = kustomization["namePrefix"] + doc["metadata"]["name"]
                if doc["kind"] != "Namespace":
                    doc["metadata"]["namespace"] = kustomization["namespace"]
                objs.append(doc)
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"] == [GATEWAY_NAMESPACE]
    return tuple(objs)


def honour_grants(objs: list[dict]) -> list[dict]:
    """What Envoy Gateway does with a ReferenceGrant and egctl cannot (module docstring): a backendRef
    to another namespace that a ReferenceGrant there admits (Gateway API v1beta1 ReferenceGrant: `from`
    names the route's group, kind and namespace; `to` the Service kind, no name or this one) is resolved;
    here by a copy of the Service beside the route. A ref no grant admits is left to be refused."""
    objs = copy.deepcopy(objs)
    grants = [o for o in objs if o["kind"] == "ReferenceGrant"]
    services = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs if o["kind"] == "Service"}

    def admitted(route_ns: str, ref: dict) -> bool:
        return any(g["metadata"]["namespace"] == ref["namespace"]
                   and any(f == {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": route_ns}
                           for f in g["spec"]["from"])
                   and any(t.get("group", "") == "" and t["kind"] == "Service" and t.get("name", ref["name"]) == ref["name"]
                           for t in g["spec"]["to"])
                   for g in grants)
    added = []
    for route in (o for o in objs if o["kind"] == "HTTPRoute"):
        ns = route["metadata"]["namespace"]
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                if ref.get("namespace", ns) != ns and admitted(ns, ref):
                    svc = copy.deepcopy(services[(ref["namespace"], ref["name"])])
                    svc["metadata"]["namespace"] = ns
                    added.append(svc)
                    del ref["namespace"]
    return objs + added


# --- egctl ------------------------------------------------------------------------------------------

def run_egctl(objs: list[dict], tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    if not os.access(EGCTL, os.X_OK):
        pytest.fail(f"{EGCTL} missing; build it with `make e2e-tools` (e2e/build-tools.sh envoy-gateway)", pytrace=False)
    src = tmp_path / f"{name}.yaml"
    src.write_text(yaml.safe_dump_all(objs, sort_keys=False))
    start = time.monotonic()
    # `ir` before `xds`: the IR output carries the resources with their statuses (as `gateway-api` does)
    # and, unlike it, each EnvoyPatchPolicy's status (translate.go translateGatewayAPIToIR).
    done = subprocess.run([str(EGCTL), "x", "translate", "--from", "gateway-api", "--to", "ir,xds", "--output", "json",
                           "--add-missing-resources", "--file", str(src)], capture_output=True, text=True, timeout=120)
    print(f"egctl x translate {name}: {time.monotonic() - start:.2f} s")
    return done


def translate(objs: list[dict], tmp_path: Path, name: str) -> dict:
    done = run_egctl(objs, tmp_path, name)
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout)


def routes(result: dict) -> list[dict]:
    """The virtual host's routes, in order (proto field names)."""
    return route_configuration(result)["virtual_hosts"][0]["routes"]


def http_filters(result: dict) -> list[str]:
    [dump] = [c for c in result["xds"][GATEWAY_IR]["configs"] if c["@type"].endswith(".ListenersConfigDump")]
    [listener] = [d["activeState"]["listener"] for d in dump["dynamicListeners"]]
    [hcm] = listener["defaultFilterChain"]["filters"]
    return [f["name"] for f in hcm["typedConfig"]["httpFilters"]]


def condition(conditions: list[dict], kind: str) -> dict:
    [c] = [c for c in conditions if c["type"] == kind]
    return c


# --- the unit tests' ports, checked here against the real translator --------------------------------
# tests/upstream_envoy.py (Envoy v1.33.2's route selection), tests/upstream_envoy_gateway.py (EG v1.2.8's
# patch application), tests/upstream_aibrix.py (aibrix-epp's route patch): one home each; here they run
# on egctl's output, so a port that drifts from what the translator and AIBrix really do fails here.
sys.path.append(str(ROOT / "tests"))   # after e2e/: the e2e modules keep their names
import upstream_aibrix as aibrix  # noqa: E402
import upstream_envoy as envoy  # noqa: E402
import upstream_envoy_gateway as eg  # noqa: E402


def _snake(key: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), key)


def proto_names(node, keep_keys: bool = False):
    """egctl prints protojson's JSON names (lowerCamelCase); the ports and the patches use the proto
    field names. Map keys (typed_per_filter_config's filter names) and Struct contents (metadata) stay."""
    if isinstance(node, list):
        return [proto_names(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        name = key if keep_keys or key.startswith("@") else _snake(key)
        if name == "filter_metadata":
            out[name] = value
        else:
            out[name] = proto_names(value, keep_keys=name == "typed_per_filter_config")
    return out


def route_configuration(result: dict) -> dict:
    """The listener's RouteConfiguration, in proto field names."""
    [dump] = [c for c in result["xds"][GATEWAY_IR]["configs"] if c["@type"].endswith(".RoutesConfigDump")]
    [config] = [d["routeConfig"] for d in dump["dynamicRouteConfigs"] if d["routeConfig"]["name"] == ROUTE_CONFIGURATION]
    config = proto_names({k: v for k, v in config.items() if k != "@type"})
    [host] = config["virtual_hosts"]
    assert host["domains"] == ["*"]
    return config


def select(rc: dict, path: str, headers: dict[str, str]) -> dict:
    route = envoy.select_route(rc, path, headers)
    assert route is not None, (path, headers)
    return route


def plugin_request(authorization: str | None) -> dict[str, str]:
    """A request as the AIBrix plugin sends it on: its routing-strategy and target-pod headers set."""
    headers = {"routing-strategy": "least-request", "target-pod": "198.18.0.7:8000", "content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    return headers


# --- scenarios --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dev_objects() -> list[dict]:
    return gateway_objects(DEV)


@pytest.fixture(scope="module")
def both_objects(dev_objects) -> list[dict]:
    """Both stacks on the Gateway, with AIBrix's objects, the grants honoured."""
    return [*aibrix_objects(), *honour_grants(dev_objects + gateway_objects(OTHER))]


@pytest.fixture(scope="module")
def both(both_objects, tmp_path_factory) -> dict:
    return translate(both_objects, tmp_path_factory.mktemp("both"), "both-stacks")


def patch_policies(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] == "EnvoyPatchPolicy"]


def our_policy(objs: list[dict]) -> dict:
    [epp] = [o for o in patch_policies(objs) if o["metadata"]["name"] != "aibrix-epp"]
    return epp


def consumer_route(stack: dict, name: str) -> str:
    return f"llm-serving/{stack['namespace']}/consumer/{name}"


def default_route(stack: dict) -> str:
    return f"llm-serving/{stack['namespace']}/default"


def test_as_rendered_every_policy_is_accepted_and_every_patch_applied(dev_objects, tmp_path):
    result = translate([*aibrix_objects(), *dev_objects], tmp_path, "as-rendered")
    ours = {o["metadata"]["name"] for o in dev_objects if o["kind"] == "HTTPRoute"}
    statuses = {r["metadata"]["name"]: r["status"] for r in result["httpRoutes"]}
    for name in ours:
        [parent] = statuses[name]["parents"]
        assert condition(parent["conditions"], "Accepted")["status"] == "True", parent
        refs = condition(parent["conditions"], "ResolvedRefs")
        # egctl loads no ReferenceGrant (module docstring): this, and only this, is refused here.
        assert (refs["status"], refs["reason"]) == ("False", "RefNotPermitted"), refs
    btps = {p["metadata"]["name"]: p for p in result["backendTrafficPolicies"]}
    assert set(btps) == {o["metadata"]["name"] for o in dev_objects if o["kind"] == "BackendTrafficPolicy"}
    for p in btps.values():
        [ancestor] = p["status"]["ancestors"]
        assert condition(ancestor["conditions"], "Accepted")["status"] == "True", p["status"]
    # Both patch policies accepted, applied in priority order: AIBrix's, then ours.
    patches = result["xdsIR"][GATEWAY_IR]["envoyPatchPolicies"]
    assert [p["name"] for p in patches] == ["aibrix-epp", our_policy(dev_objects)["metadata"]["name"]]
    for p in patches:
        [ancestor] = p["status"]["ancestors"]
        assert condition(ancestor["conditions"], "Accepted")["status"] == "True", p
    # Programmed: no patch failed (else egctl exits non-zero, asserted in translate) and each route our
    # patches add is in the RouteConfiguration they name (a resource not found fails no translation).
    jsonpatches = our_policy(dev_objects)["spec"]["jsonPatches"]
    assert {op["name"] for op in jsonpatches} == {ROUTE_CONFIGURATION}
    added = [op["operation"]["value"]["name"] for op in jsonpatches]
    assert sorted(added) == sorted([*(consumer_route(DEV, c["name"]) for c in DEV["consumers"]), default_route(DEV)])
    assert set(added) <= {r["name"] for r in routes(result)}
    # The per-route token buckets take effect only with the filter on the listener (EG adds it while a
    # route of the Gateway has a local limit: internal/xds/translator/local_ratelimit.go patchHCM).
    assert LOCAL_RATE_LIMIT in http_filters(result)


def test_every_consumer_route_precedes_every_default_route_which_precede_original_route(both):
    names = [r["name"] for r in routes(both)]
    consumers = [names.index(consumer_route(s, c["name"])) for s in (DEV, OTHER) for c in s["consumers"]]
    defaults = [names.index(default_route(s)) for s in (DEV, OTHER)]
    assert max(consumers) < min(defaults) and max(defaults) < names.index(ORIGINAL_ROUTE), names[:8]


def _limit(route: dict) -> dict:
    return route["typed_per_filter_config"][LOCAL_RATE_LIMIT]


def test_the_strategy_routes_carry_the_limits_timeout_retries_and_the_plugin_of_original_route(both):
    by_name = {r["name"]: r for r in routes(both)}
    original = by_name[ORIGINAL_ROUTE]
    [ext_proc] = [k for k in original["typed_per_filter_config"] if k.startswith("envoy.filters.http.ext_proc/")]
    expected = {consumer_route(s, c["name"]): c["requestsPerMinute"] for s in (DEV, OTHER) for c in s["consumers"]}
    expected |= {default_route(s): s["default"] for s in (DEV, OTHER)}
    # EG's own route-level bucket (the dev HTTPRoute's BTP default rule) is what each bucket must look like.
    eg_route = next(r for r in routes(both) if r["name"].startswith(f"httproute/{GATEWAY_NAMESPACE}/deepseek-v4-flash-api-llm-serving-dev/"))
    eg_limit = {k: v for k, v in _limit(eg_route).items() if k not in ("token_bucket", "descriptors")}
    assert _limit(eg_route)["token_bucket"] == {"max_tokens": DEV["default"], "tokens_per_fill": DEV["default"],
                                                "fill_interval": "60s"}
    for name, rpm in expected.items():
        route = by_name[name]
        assert _limit(route)["token_bucket"] == {"max_tokens": rpm, "tokens_per_fill": rpm, "fill_interval": "60s"}, name
        # EG also writes always_consume_default_token_bucket false, the default (only descriptors use it).
        assert {k: v for k, v in _limit(route).items() if k != "token_bucket"} == \
            {k: v for k, v in eg_limit.items() if k != "always_consume_default_token_bucket"}, name
        assert route["route"]["timeout"] == f"{TIMEOUT_SECONDS}s"
        assert route["route"]["cluster"] == original["route"]["cluster"]
        retry = route["route"]["retry_policy"]
        assert set(retry["retry_on"].split(",")) == UNSENT_ONLY and set(retry) == {"retry_on", "num_retries"}, retry
        assert route["typed_per_filter_config"][ext_proc] == original["typed_per_filter_config"][ext_proc]


def test_envoy_picks_each_consumers_route_and_the_default_for_any_other_key(both):
    rc = route_configuration(both)

    def picked(authorization: str | None) -> str:
        return select(rc, "/v1/chat/completions", plugin_request(authorization))["name"]
    assert picked("Bearer search.k3y-of-search") == consumer_route(DEV, "search")
    assert picked("BEARER search.k3y-of-search") == consumer_route(DEV, "search")
    assert picked("bearer notebooks.n0tebook-key") == consumer_route(DEV, "notebooks")
    assert picked("Bearer batch.the-batch-key") == consumer_route(OTHER, "batch")
    # A key of no consumer, a name without its dot, another scheme, no key: the first default route.
    first_default = next(r["name"] for r in routes(both) if r["name"] in (default_route(DEV), default_route(OTHER)))
    for other in ("Bearer stranger.key", "Bearer searchkey", "Basic c2VhcmNoLmtleQ==", None):
        assert picked(other) == first_default, other


def test_a_model_header_request_takes_our_httproute_with_the_consumers_descriptors(both):
    route = select(route_configuration(both), "/v1/chat/completions",
                   {"model": "DeepSeek-V4-Flash", "authorization": "Bearer search.k3y"})
    prefix = f"httproute/{GATEWAY_NAMESPACE}/deepseek-v4-flash-api-llm-serving-dev/"
    assert route["name"].startswith(prefix) and route["route"]["cluster"].startswith(prefix), route["name"]
    assert route["route"]["timeout"] == f"{TIMEOUT_SECONDS}s"
    assert set(route["route"]["retry_policy"]["retry_on"].split(",")) == UNSENT_ONLY
    # One header_value_match action per consumer, on its Authorization regex; one descriptor bucket each.
    regexes = [h["string_match"]["safe_regex"]["regex"] for a in route["route"]["rate_limits"]
               for action in a["actions"] for h in action["header_value_match"]["headers"]]
    assert regexes == [rf"^(?i:bearer) {c['name']}\..*$" for c in DEV["consumers"]]
    buckets = [d["token_bucket"]["max_tokens"] for d in _limit(route)["descriptors"]]
    assert buckets == [c["requestsPerMinute"] for c in DEV["consumers"]]


def test_without_a_default_other_keys_take_original_route(tmp_path):
    objs = gateway_objects({**DEV, "default": None})
    assert all("jsonPath" not in p["operation"] for p in our_policy(objs)["spec"]["jsonPatches"])
    rc = route_configuration(translate([*aibrix_objects(), *honour_grants(objs)], tmp_path, "no-default"))
    assert select(rc, "/v1/chat/completions", plugin_request("Bearer search.k3y"))["name"] == consumer_route(DEV, "search")
    for other in ("Bearer stranger.key", None):
        assert select(rc, "/v1/chat/completions", plugin_request(other))["name"] == ORIGINAL_ROUTE


def test_the_unit_tests_ports_agree_with_aibrix_and_the_translator(both_objects, both, tmp_path):
    """tests/upstream_aibrix.py's copy of aibrix-epp's route patch is AIBrix's; tests/upstream_envoy_gateway.py
    apply_route_patches, run on egctl's RouteConfiguration without any patch policy, gives the routes,
    in order, egctl gives with them."""
    [aibrix_epp] = [p for p in patch_policies(both_objects) if p["metadata"]["name"] == "aibrix-epp"]
    [route_patch] = [p for p in aibrix_epp["spec"]["jsonPatches"] if p["type"] == aibrix.ORIGINAL_ROUTE_PATCH["type"]]
    assert route_patch == aibrix.ORIGINAL_ROUTE_PATCH
    assert aibrix_epp["spec"].get("priority", 0) == aibrix.ORIGINAL_ROUTE_PATCH_PRIORITY
    unpatched = route_configuration(translate([o for o in both_objects if o["kind"] != "EnvoyPatchPolicy"],
                                              tmp_path, "both-stacks-unpatched"))
    assert eg.apply_route_patches(unpatched, [eg.priority_and_patches(p) for p in patch_policies(both_objects)]) == []
    assert [r["name"] for r in unpatched["virtual_hosts"][0]["routes"]] == [r["name"] for r in routes(both)]


def test_negative_controls_a_wrong_patch_is_caught(dev_objects, tmp_path):
    """The assertions above are not vacuous: (1) our policy applied BEFORE AIBrix's (priority -1) finds no
    original_route for its jsonPath and the translation fails on it, as Envoy Gateway marks the policy
    Programmed=False (jsonpatch.go, utils/jsonpatch/patch.go); the port reports the same; (2) the default
    route put at the head instead of before original_route takes the consumers' requests."""
    early = copy.deepcopy([*aibrix_objects(), *honour_grants(dev_objects)])
    our_policy(early)["spec"]["priority"] = -1
    done = run_egctl(early, tmp_path, "priority-minus-one")
    assert done.returncode != 0
    [error] = eg.apply_route_patches(routes_of_aibrix_only(), [eg.priority_and_patches(p) for p in patch_policies(early)])
    assert error in done.stderr and f"@.name=='{ORIGINAL_ROUTE}'" in error

    at_head = copy.deepcopy(dev_objects)
    [default] = [p for p in our_policy(at_head)["spec"]["jsonPatches"] if "jsonPath" in p["operation"]]
    default["operation"]["path"] = "/virtual_hosts/0/routes/0"
    del default["operation"]["jsonPath"]
    rc = route_configuration(translate([*aibrix_objects(), *honour_grants(at_head)], tmp_path, "default-at-head"))
    assert select(rc, "/v1/chat/completions", plugin_request("Bearer search.k3y"))["name"] == default_route(DEV)


def routes_of_aibrix_only() -> dict:
    """An empty RouteConfiguration of the listener: what the port patches to reproduce the failure."""
    return {"name": ROUTE_CONFIGURATION, "virtual_hosts": [{"name": f"{ROUTE_CONFIGURATION}/*", "routes": []}]}


def test_egctl_is_the_release_its_wrapper_pins():
    """The binary is the Envoy Gateway the wrapper requires (tests/test_e2e_pins.py: the one AIBrix
    v0.7.0 installs and the EnvoyPatchPolicy CRD is read from), not a stale build of another."""
    pinned = subprocess.run(["go", "list", "-m", "-f", "{{.Version}}", "github.com/envoyproxy/gateway"],
                            cwd=ROOT / "e2e" / "tools" / "envoy-gateway", capture_output=True, text=True, check=True,
                            timeout=120).stdout.strip()
    assert subprocess.run([str(EGCTL), "version", "--remote=false"], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip() == pinned


if __name__ == "__main__" and sys.argv[1:2] == ["render"]:
    _render_main(json.loads(sys.argv[2]))
