"""networkPolicy.clients: what the API server would refuse in a selector, and what would admit
more than the stack file says (an empty selector selects every namespace) or say one thing twice;
networkPolicy.egress set where it would restrict nothing."""

from __future__ import annotations

import json
from typing import Iterator

from config_model import StackConfig
from config_model.clients import NAMESPACE_NAME_LABEL, NamespaceSelector
from stacks.rules.problem import Problem

AT = "networkPolicy.clients"


def clients(cfg: StackConfig) -> Iterator[Problem]:
    c = cfg.network_policy.clients
    if c.declared and not cfg.network_policy.enabled:
        yield Problem(f"{AT}", "(set)", "needs networkPolicy.enabled: true; without the NetworkPolicies every pod of "
                      "the cluster reaches the engines, so naming the clients would admit nothing and restrict nothing")
    seen: dict[str, int] = {}
    for i, ns in enumerate(c.namespaces):
        if ns in seen:
            yield Problem(f"{AT}.namespaces[{i}]", ns, f"is listed twice (also namespaces[{seen[ns]}])")
        seen.setdefault(ns, i)
    selectors: dict[str, int] = {}
    for i, sel in enumerate(c.namespace_selectors):
        at = f"{AT}.namespaceSelectors[{i}]"
        yield from selector(at, sel)
        key = json.dumps(_canonical(sel.as_selector()), sort_keys=True)
        if key in selectors:
            yield Problem(at, sel.as_selector(), f"is the same selector as namespaceSelectors[{selectors[key]}]")
        selectors.setdefault(key, i)
        name = sel.match_labels.get(NAMESPACE_NAME_LABEL)
        if name is not None and len(sel.match_labels) == 1 and not sel.match_expressions and name in seen:
            yield Problem(f"{at}.matchLabels", sel.match_labels,
                          f"selects namespace {name!r} by name, already listed as namespaces[{seen[name]}]")


def egress(cfg: StackConfig) -> Iterator[Problem]:
    """networkPolicy.egress set while the NetworkPolicies are off would restrict nothing."""
    if cfg.network_policy.egress.model_fields_set and not cfg.network_policy.enabled:
        yield Problem("networkPolicy.egress", "(set)", "needs networkPolicy.enabled: true; without the NetworkPolicies "
                      "no pod's egress is restricted, so these settings would change nothing")


def selector(at: str, sel: NamespaceSelector) -> Iterator[Problem]:
    """What the API server refuses in a namespace selector, and an empty one (it admits every namespace)."""
    if not sel.match_labels and not sel.match_expressions:
        yield Problem(at, "{}", "must have matchLabels or matchExpressions: an empty selector admits every "
                      "namespace of the cluster; name the namespaces instead")
    for j, e in enumerate(sel.match_expressions):
        # k8s.io/apimachinery pkg/apis/meta/v1/validation/validation.go ValidateLabelSelectorRequirement.
        if e.operator in ("In", "NotIn") and not e.values:
            yield Problem(f"{at}.matchExpressions[{j}].values", [], f"must be set when operator is {e.operator!r}")
        elif e.operator in ("Exists", "DoesNotExist") and e.values:
            yield Problem(f"{at}.matchExpressions[{j}].values", e.values,
                          f"must be empty when operator is {e.operator!r}")
        elif len(set(e.values)) != len(e.values):
            yield Problem(f"{at}.matchExpressions[{j}].values", e.values, "lists a value twice")


def _canonical(selector: dict) -> dict:
    """The same requirements in another order are the same selector."""
    exprs = sorted((e["key"], e["operator"], sorted(e.get("values", []))) for e in selector.get("matchExpressions", []))
    return {"matchLabels": selector.get("matchLabels", {}), "matchExpressions": exprs}
