"""The CRDs' x-kubernetes-validations rules, evaluated with common-expression-language
(apivalidation/cel_rules.py): every rule of every CRD in ../shared/crds compiles and calls only
functions we have, our custom resources pass, and hostile ones fail with the CRD's message."""

from __future__ import annotations

import copy
import re

import cel
import pytest
import test_pd
from conftest import k8s_objects, render_stack
from crd_schemas import raw_crd_index

from apivalidation import cel_rules

# Standard CEL functions and macros the library implements, plus cel_rules.FUNCTIONS.
STANDARD = {"has", "size", "all", "exists", "exists_one", "filter", "map", "matches", "contains", "startsWith",
            "endsWith", "duration", "timestamp", "int", "uint", "double", "string", "bool", "type", "dyn"}


def full_index():
    return raw_crd_index()


def all_rules() -> list[tuple[str, str]]:
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            found.extend((where, r["rule"]) for r in node.get("x-kubernetes-validations") or [])
            for v in node.values():
                walk(v, where)
        elif isinstance(node, list):
            for v in node:
                walk(v, where)
    for (api_version, kind), schema in full_index().items():
        walk(schema, f"{kind} {api_version}")
    return found


def test_every_crd_rule_compiles_and_uses_only_functions_we_evaluate():
    rules = all_rules()
    assert len(rules) > 150  # Gateway API alone carries over a hundred
    for where, rule in rules:
        cel.compile(rule)
        called = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.sub(r"'[^']*'|\"[^\"]*\"", "", rule)))
        assert called <= STANDARD | set(cel_rules.FUNCTIONS), (where, called - STANDARD, rule)


def route(dev: str = "dev") -> dict:
    return copy.deepcopy(next(o for o in k8s_objects(render_stack(dev)) if o["kind"] == "HTTPRoute"))


def messages(obj: dict) -> list[str]:
    return [f"{f}: {m}" for f, _, m in cel_rules.check(obj, full_index())]


def test_our_custom_resources_pass_every_rule():
    from pool_stacks import pool_renders
    rendered = ([render_stack(s) for s in ("dev", "staging", "prod")] + [test_pd.rendered(*c) for c in test_pd.CASES]
                + list(pool_renders().values()))
    kinds = set()
    for r in rendered:
        for o in k8s_objects(r):
            found = cel_rules.check(o, full_index())
            if found is not None:
                kinds.add(o["kind"])
                assert found == [], (o["kind"], o["metadata"]["name"], found)
    assert {"HTTPRoute", "ReferenceGrant", "StormService", "RayClusterFleet", "PodMonitor", "PrometheusRule",
            "BackendTrafficPolicy", "InferencePool"} <= kinds


@pytest.mark.parametrize("path,message", [
    ("/v1//chat", "must not contain '//'"),
    ("/v1/chat#x", "must not contain '#'"),
    ("v1", "value must be an absolute path"),
    ("/v1/a b", "must only contain valid characters"),
    ("/v1/..", "must not end with '/..'"),
])
def test_httproute_path_rules(path, message):
    r = route()
    r["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": path}}]
    assert any(m.startswith("spec.rules[0].matches[0].path: " + message) for m in messages(r)), messages(r)


def test_defaults_are_applied_before_the_rules():
    """backendRefs[].group/kind and matches[].path default in the CRD; the rule reads them, so
    without defaulting every route would fail with 'no such key'."""
    r = route()
    ref = r["spec"]["rules"][0]["backendRefs"][0]
    ref.pop("group", None), ref.pop("kind", None)
    assert messages(r) == []
    ref.pop("port")
    assert "spec.rules[0].backendRefs[0]: Must have port for Service reference (CRD x-kubernetes-validations)" in messages(r)


def test_escaped_property_names_and_duplicate_parents():
    """The parentRefs rules read `p1.__namespace__` (escaping.go): two refs to one parent need
    distinct section names, and refs in different namespaces are different parents (which only
    holds when `namespace` reaches CEL escaped)."""
    r = route()
    parent = r["spec"]["parentRefs"][0]
    assert "namespace" in parent
    r["spec"]["parentRefs"] = [parent, dict(parent)]
    assert any("sectionName must be unique" in m for m in messages(r)), messages(r)
    r["spec"]["parentRefs"] = [parent, {**parent, "namespace": "other"}]
    assert messages(r) == []
    r["spec"]["parentRefs"] = [{**parent, "sectionName": "a"}, {**parent, "sectionName": "b"}]
    assert messages(r) == []


def test_timeouts_use_cel_durations():
    r = route()
    r["spec"]["rules"][0]["timeouts"] = {"request": "10s", "backendRequest": "1m"}
    assert any("backendRequest timeout cannot be longer" in m for m in messages(r))
    r["spec"]["rules"][0]["timeouts"] = {"request": "1h", "backendRequest": "1m"}
    assert messages(r) == []


def test_rolebasedgroup_rules():
    rbg = {"apiVersion": "workloads.x-k8s.io/v1alpha2", "kind": "RoleBasedGroup", "metadata": {"name": "g", "namespace": "n"},
           "spec": {"roles": [{"name": "server", "standalonePattern": {"template": {"spec": {"containers": []}}},
                               "leaderWorkerPattern": {"size": 2}}]}}
    assert any("standalonePattern and leaderWorkerPattern are mutually exclusive" in m for m in messages(rbg))


def test_transition_rules_are_skipped_on_create_and_unknown_functions_refuse():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
        "b": {"type": "string", "x-kubernetes-validations": [{"rule": "self.lowerAscii() == self"}]},
        "c": {"type": "string", "x-kubernetes-validations": [{"rule": "self.split('/').size() == 2", "message": "one slash"}]},
        "d": {"type": "number", "x-kubernetes-validations": [{"rule": "self > 1.5", "message": "more than 1.5"}]},
    }}}}
    index = {("x.io/v1", "X"): schema}
    obj = {"apiVersion": "x.io/v1", "kind": "X", "spec": {"a": "1", "b": "B", "c": "a/b/c", "d": 1}}
    found = {f: m for f, _, m in cel_rules.check(obj, index)}
    assert "spec.a" not in found
    assert "could not be evaluated" in found["spec.b"]
    assert found["spec.c"].startswith("one slash")
    assert found["spec.d"].startswith("more than 1.5")
    obj["spec"].update(c="a/b", d=2)
    del obj["spec"]["b"]
    assert cel_rules.check(obj, index) == []


def test_escape_follows_the_api_server():
    assert [cel_rules.escape(n) for n in ("namespace", "a-b", "x.y/z", "a__b", "name")] == [
        "__namespace__", "a__dash__b", "x__dot__y__slash__z", "a__underscores__b", "name"]
