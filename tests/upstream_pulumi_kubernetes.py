"""pulumi-kubernetes await behaviour the stacks depend on (github.com/pulumi/pulumi-kubernetes, tag
v4.32.0, the newest tag in the mirror; requirements.txt pins the SDK 4.34.2): the one place a
maintainer re-checks when bumping pulumi_kubernetes."""

from __future__ import annotations

import json
import re

TAG = "v4.32.0"
# The stacks run the provider release the SDK asks for (requirements.txt pulumi_kubernetes); it is accepted
# unread, for the reason below, and nothing else is (tests/test_upstream_releases.py).
PORTED_FROM = {
    "repo": "pulumi/pulumi-kubernetes", "release": TAG, "component": "pulumi-kubernetes",
    "files": ("provider/pkg/await/service.go", "provider/pkg/await/awaiters.go", "provider/pkg/await/daemonset.go",
              "provider/pkg/await/await.go", "provider/pkg/await/condition/jsonpath.go",
              "provider/pkg/await/condition/kubectl.go", "provider/pkg/jsonpath/jsonpath.go",
              "provider/pkg/metadata/overrides.go", "provider/pkg/metadata/annotations.go"),
    "not_read": {"4.34.2": "the newest tag in the mirror is v4.32.0: the SDK pin's release could not be read here"},
}
DEFAULT_SERVICE_TIMEOUT_SECONDS = 10 * 60   # provider/pkg/await/service.go DefaultServiceTimeoutMins

# provider/pkg/await/awaiters.go `awaiters`: apps/v1 DaemonSet is awaited (daemonsetAwaiter) on create
# and update, until kstatus computes Current (provider/pkg/await/daemonset.go rolloutComplete: every
# scheduled pod updated and ready), for at most _defaultDaemonSetTimeout without customTimeouts.
AWAITED = {"apps/v1/DaemonSet", "apps/v1/Deployment", "apps/v1/StatefulSet", "batch/v1/Job", "v1/Pod"}
DEFAULT_DAEMONSET_TIMEOUT_SECONDS = 10 * 60  # provider/pkg/await/daemonset.go _defaultDaemonSetTimeout


def skips_await(annotations: dict[str, str]) -> bool:
    """provider/pkg/metadata/overrides.go SkipAwaitLogic: IsAnnotationTrue(pulumi.com/skipAwait), the
    value exactly "true" (annotations.go AnnotationTrue). await.go newLegacyReadyCondition then gives
    the built-in awaiters (DaemonSet's among them) condition.NewImmediate: create and update return
    as soon as the API server has the object."""
    return annotations.get("pulumi.com/skipAwait") == "true"


def awaited(api_version: str, kind: str, annotations: dict[str, str]) -> bool:
    return f"{api_version}/{kind}" in AWAITED and not skips_await(annotations)


def _select(obj, path: str) -> list:
    """The subset of RFC 9535 JSONPath (github.com/theory/jsonpath, which provider/pkg/jsonpath uses)
    that our expressions use: dotted names and one filter `[?@.key=='value']`."""
    nodes = [obj]
    for part in re.findall(r"\.([A-Za-z0-9_]+)|\[\?@\.([A-Za-z0-9_]+)==['\"]([^'\"]*)['\"]\]", path):
        name, key, value = part
        nxt = []
        for n in nodes:
            if name:
                if isinstance(n, dict) and name in n:
                    nxt.append(n[name])
            elif isinstance(n, list):
                nxt += [x for x in n if isinstance(x, dict) and x.get(key) == value]
        nodes = nxt
    return nodes


def _generation_current(obj: dict, condition: dict | None = None) -> bool:
    generation = (obj.get("metadata") or {}).get("generation")
    if generation is None:
        return True
    observed = (condition or {}).get("observedGeneration", (obj.get("status") or {}).get("observedGeneration"))
    return observed is None or observed >= generation


def satisfied(expr: str, obj: dict) -> bool:
    """One waitFor expression against an object as the awaiter sees it:
    - jsonpath= (provider/pkg/await/condition/jsonpath.go Satisfied): false while
      status.observedGeneration < metadata.generation; else the first selected value printed equals
      the value (provider/pkg/jsonpath/jsonpath.go Matches); nothing selected never matches;
    - condition= (condition/kubectl.go checkCondition): the condition of that type, its (or the
      status') observedGeneration current, status equal case-insensitively (default True)."""
    if expr.startswith("jsonpath="):
        body = expr[len("jsonpath="):].replace("==", "\0")
        path, _, value = body.partition("=")
        path, value = path.replace("\0", "=="), value.replace("\0", "==")
        if not _generation_current(obj):
            return False
        found = _select(obj, path.strip("{}"))
        if not found:
            return False
        if not value:
            return True
        first = found[0]
        return not isinstance(first, (dict, list)) and str(first) == value
    if expr.startswith("condition="):
        cond, _, want = expr[len("condition="):].partition("=")
        for c in (obj.get("status") or {}).get("conditions") or []:
            if str(c.get("type", "")).lower() == cond.lower():
                if not _generation_current(obj, c):
                    return False
                return str(c.get("status", "")).lower() == (want or "True").lower()
        return False
    raise ValueError(f'expected a "jsonpath=" or "condition=" prefix, got {expr!r}')


def ready(annotation: str, obj: dict) -> bool:
    """provider/pkg/metadata/overrides.go ReadyCondition: a JSON array of expressions is an AND,
    anything else one expression."""
    try:
        exprs = json.loads(annotation)
        if not isinstance(exprs, list):
            exprs = [annotation]
    except json.JSONDecodeError:
        exprs = [annotation]
    return all(satisfied(e, obj) for e in exprs)
