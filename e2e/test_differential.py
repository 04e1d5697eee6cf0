"""Differential (issue 17): every Kubernetes object of every render, and of the hostile stack files and
refused objects the unit tests keep, goes to the real kube-apiserver as a server-side dry run; the
server's verdict must be apivalidation's (the render's refusal rule, render/__main__.py api_problems).

The objects and apivalidation's verdicts come from e2e/differential_cases.py (its docstring lists them).
Namespaced objects need their namespace: the cluster-scoped objects are dry-run first (a Namespace as a
create), then each namespace is created for real, then the namespaced objects are dry-run, and the
namespaces this test created are deleted at the end. Each object is one apply patch with dryRun=All on
one keep-alive connection (e2e/dryrun.py), what `kubectl apply --server-side --dry-run=server` sends;
the server's Status names every field it refuses.

For each object: accepted by both, refused by both (the fields compared), or a disagreement, which
fails the test with the object, the fields and both messages. Where the server accepts what
apivalidation refuses on purpose, the rule is in DELIBERATELY_STRICTER with the reason, and each of
those must still be met by some case, so the list stays exactly the cases that need it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from dryrun import Api, Verdict
from harness import KUBECONFIG, ROOT, log

# apivalidation's rules that this server (kube-apiserver v1.37.2, under server-side apply) does not apply, on
# purpose: an offline problem of one of these that the server does not name is agreement. Each is a rule of
# apivalidation, matched by the rule marker its message ends with (or, for the last, by where it applies).
DELIBERATELY_STRICTER = {
    "kubelet expansion (expansion.Expand)":
        "the server accepts any text in command, args and env values; the kubelet later expands $(NAME) inside "
        "them, or leaves an undefined reference as text, so a stack-file value would change in the pod "
        "(apivalidation/podspec.py _expansions)",
    "env var names (V core ValidateEnv)":
        "the strict IsEnvVarName of the clusters we support back to 1.29; since 1.34 the server takes any printable "
        "ASCII but '=' (IsRelaxedEnvVarName), so this 1.37 server accepts `1BAD`",
    "Service names (V core ValidateServiceName = NameIsDNS1035Label)":
        "the DNS-1035 label of the clusters we support back to 1.29; a 1.37 server takes any DNS-1123 label "
        "(RelaxedServiceNameValidation), so it accepts `1-model`",
    "int overflow (Go type of the field; a create refuses it, server-side apply wraps it around)":
        "a create refuses it (encoding/json into the int32 field), but server-side apply, which pulumi-kubernetes "
        "sends, converts the unstructured object and wraps the number around (2**40 becomes 0): accepted, and not "
        "the value written (apivalidation/ranges.py)",
    "custom-resource pod templates":
        "apivalidation applies the core pod rules to the pod templates inside custom resources; the server "
        "validates those pods only when the operator creates them (V core ValidatePodCreate), after `pulumi up` "
        "has returned, and the CRD's schema does not carry the core rules",
}
BUILTIN_KINDS = {"Namespace", "Secret", "ConfigMap", "PersistentVolume", "PersistentVolumeClaim", "ServiceAccount",
                 "Job", "Deployment", "StatefulSet", "DaemonSet", "Service", "NetworkPolicy", "PodDisruptionBudget"}


def stricter_rule(problem: dict, obj: dict) -> str | None:
    """The DELIBERATELY_STRICTER entry that covers this offline problem, if any."""
    rule = problem["rule"]
    for name in DELIBERATELY_STRICTER:
        marker = name[name.index("("):] if "(" in name else None
        if marker and rule.endswith(marker):
            return name
    if (obj.get("kind") not in BUILTIN_KINDS and ".template" in problem["field"]
            and "CRD x-kubernetes-validations" not in rule and "Go type of the field" not in rule):
        return "custom-resource pod templates"
    return None


@pytest.fixture(scope="module")
def cases() -> dict:
    """e2e/differential_cases.py's two halves, side by side (one core each)."""
    procs = [subprocess.Popen([sys.executable, str(ROOT / "e2e" / "differential_cases.py"), part], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for part in ("renders", "hostile")]
    halves = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-4000:]
        halves.append(json.loads(out))
    renders, hostile = halves
    return {"renders": renders["renders"] + hostile["renders"], "hostile": hostile["hostile"],
            "unit_test_failures": renders["unit_test_failures"],
            "seconds": max(renders["seconds"], hostile["seconds"])}


@pytest.fixture(scope="module")
def api(cluster):
    client = Api(KUBECONFIG)
    yield client
    client.close()


@dataclass
class Outcome:
    group: str
    render: str
    obj: dict
    offline: list[dict]
    server: Verdict
    held: bool = False  # the cluster holds the object: its dry run was an update, not compared

    def where(self) -> str:
        meta = self.obj.get("metadata") or {}
        ns = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        return f"[{self.group}] {self.render}: {self.obj.get('kind')} {ns}{meta.get('name')}"


def _bare(path: str) -> str:
    """A field path without map keys or list indexes: metadata.labels[a/b] and spec.x[0].y compare by shape."""
    return re.sub(r"\[[^\]]*\]", "", path.lstrip("."))


def matches(ours: str, theirs: str) -> bool:
    """The same field, up to map keys and indexes (the server names metadata.labels for a bad label key,
    volumeMounts.subPath without the mount's index). Not a parent and its child: a CEL rule on spec.roles[0]
    says nothing of a field inside it."""
    return _bare(ours) == _bare(theirs)


def compare(o: "Outcome") -> tuple[str, list[str], list[dict], list[dict]]:
    """(verdict, stricter rules used, offline problems the server does not name, server causes apivalidation
    does not name). Verdicts: both-accept, both-refuse, stricter (allowed), disagree."""
    v = o.server
    fields = [c for c in v.causes if c.get("field")]
    used, unexplained = [], []
    for p in o.offline:
        if v.accepted or (fields and not any(matches(p["field"], c["field"]) for c in fields)):
            rule = stricter_rule(p, o.obj)
            if rule is None:
                unexplained.append(p)
            else:
                used.append(rule)
    # A refusal without fields (a decode or server-side-apply error, before validation) names nothing to compare.
    missed = [c for c in fields if not any(matches(p["field"], c["field"]) for p in o.offline)]
    if v.accepted and not o.offline:
        return "both-accept", used, [], []
    if unexplained or missed or (not v.accepted and not o.offline):
        return "disagree", used, unexplained, missed
    if v.accepted:
        return "stricter", used, [], []
    return "both-refuse", used, [], []


def server_text(v: Verdict) -> str:
    if not v.causes:
        return f"HTTP {v.code} {v.reason}: {v.message}"
    return f"HTTP {v.code} {v.reason}: " + "; ".join(f"{c.get('field')}: {c.get('message')}" for c in v.causes)


def offline_text(problems: list[dict]) -> str:
    return "; ".join(f"{p['field']} = {p['value']}: {p['rule']}" for p in problems) or "accepted"


def _namespace(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("namespace") or "default"


# The namespaces the renders name are the ones the stacks' own scenarios deploy into beside this file
# (prod's llm-serving, dev's llm-serving-dev): one this test created and deletes at its end would take
# a stack's objects with it, and a stack's destroy would end this test's dry runs. So each valid name is
# sent as a namespace of this test's own, valid alike; an invalid one (the hostile stack files') is
# sent as it is, since no stack can have it and the server's refusal of it is what is compared.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _own_namespace(ns: str) -> str:
    import hashlib
    if len(ns) > 63 or not _DNS1123_LABEL.fullmatch(ns):
        return ns
    return "e2e-diff-" + hashlib.sha256(ns.encode()).hexdigest()[:10]


def _in_own_namespace(obj: dict) -> dict:
    meta = obj.get("metadata") or {}
    if not meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": _own_namespace(meta["namespace"])}}


def run_all(api: Api, cases: dict) -> tuple[list[Outcome], list[str]]:
    """Every object's server verdict, and the namespaces created for them. An object the cluster holds
    already (another e2e test's stack still up) is marked: its dry run is an update, which immutability
    rules refuse for reasons no create has, so it is not compared."""
    items = [(r["group"], r["name"], {**c, "object": _in_own_namespace(c["object"])})
             for r in cases["renders"] for c in r["cases"]]
    located = [(g, n, c, api.collection(c["object"])) for g, n, c in items]
    verdicts: dict[int, Verdict] = {}
    held: set[int] = set()

    def send(i: int, obj: dict, fresh: bool) -> None:
        if not fresh and api.exists(obj):
            held.add(i)
        verdicts[i] = api.dry_run(obj)

    # Cluster-scoped first (a Namespace is dry-run as the create it is), then the namespaces for real.
    for i, (_, _, c, where) in enumerate(located):
        if where is None or not where[1]:
            send(i, c["object"], where is None)
    namespaces = sorted({_namespace(c["object"]) for _, _, c, where in located if where is not None and where[1]})
    created = []
    for ns in namespaces:
        try:
            if api.ensure_namespace(ns):
                created.append(ns)
        except RuntimeError as err:  # a name the server refuses: the objects in it are refused below
            log(f"differential: {err}")
    for i, (_, _, c, _) in enumerate(located):
        if i not in verdicts:
            send(i, c["object"], _namespace(c["object"]) in created)
    outcomes = [Outcome(g, n, c["object"], c["offline"], verdicts[i], i in held) for i, (g, n, c, _) in enumerate(located)]
    return outcomes, created


def test_the_api_server_agrees_with_apivalidation_on_every_object(api: Api, cases: dict):
    started = time.monotonic()
    outcomes, created = run_all(api, cases)
    sent = time.monotonic() - started
    try:
        disagreements, used = [], Counter()
        tally: dict[str, Counter] = {}
        held = sorted({o.where().split(": ", 1)[1] for o in outcomes if o.held})
        for o in outcomes:
            t = tally.setdefault(o.render if o.group == "stack" else o.group, Counter())
            t["objects"] += 1
            if o.held:
                t["not compared (in the cluster already)"] += 1
                continue
            verdict, rules, unexplained, missed = compare(o)
            used.update(rules)
            t["refused offline"] += bool(o.offline)
            t["refused by the server"] += not o.server.accepted
            t[verdict] += 1
            if verdict == "disagree":
                lines = [o.where()]
                if not o.offline:
                    lines.append("    apivalidation accepts it")
                if unexplained:
                    lines.append(f"    apivalidation refuses, the server {'accepts it' if o.server.accepted else 'does not name the field'}: "
                                 f"{offline_text(unexplained)}")
                if missed or (not o.server.accepted and not o.offline):
                    lines.append(f"    the server refuses: {server_text(o.server)}")
                    if missed and o.offline:
                        lines.append(f"      (fields apivalidation does not name: {', '.join(c['field'] for c in missed)}; "
                                     f"it names: {offline_text(o.offline)})")
                disagreements.append("\n".join(lines))
        renders = Counter(r["group"] for r in cases["renders"])
        log(f"differential: {len(outcomes)} objects from {dict(renders)} renders and rule tests; hostile stack "
            f"files {cases['hostile']}; built in {cases['seconds']} s, dry-run in {sent:.1f} s")
        for name, t in tally.items():
            log(f"differential: {name}: " + ", ".join(f"{k} {n}" for k, n in t.items()))
        log("differential: objects per variant: " + ", ".join(f"{r['name']} {len(r['cases'])}" for r in cases["renders"]
                                                                if r["group"] == "variant"))
        log(f"differential: deliberately stricter rules met: {dict(used)}")
        if held:
            log(f"differential: not compared, the cluster holds them already (a dry run would be an update): "
                f"{', '.join(held)}")
        for failure in cases.get("unit_test_failures") or []:
            log(f"differential: a rule test's own assertion failed while its objects were taken (make test "
                f"reports it): {failure}")
        assert not disagreements, (f"{len(disagreements)} objects where apivalidation and the API server disagree "
                                   "(the server is right: fix the rule in apivalidation/ and keep the case in tests/):\n"
                                   + "\n".join(disagreements))
        # Only on a full comparison: an object left out above may be the one case that needs an entry.
        stale = [] if held else sorted(set(DELIBERATELY_STRICTER) - set(used))
        assert not stale, f"DELIBERATELY_STRICTER entries no case needs any more (remove them): {stale}"
    finally:
        left = api.delete_namespaces(created)
        assert not left, f"namespaces still there after 60 s: {left}"
