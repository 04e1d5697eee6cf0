"""Issue 30: an independent scanner over every render. kube-score v1.20.0 (.e2e/bin/kube-score,
e2e/tools/kube-score, `make e2e-tools`) scores what the shipped stacks and the variants of the unit tests
render; no cluster, only the binary (about 20 ms a render; the renders take the time).

What it reads and does not (kube-score v1.20.0, github.com/zegl/kube-score):
- parser/parse.go decodes Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, NetworkPolicy, Ingress,
  Service, PodDisruptionBudget and HorizontalPodAutoscaler; every other kind (StormService, RoleBasedGroup,
  LeaderWorkerSet, RayClusterFleet, ...) is dropped, so the engine pods of custom resources are scored by
  nobody here: the pack rule ephemeral-storage (policy/ephemeral_storage.py) holds them to the same rule.
- `-o json` gives each check's id, its grade (1 CRITICAL, 5 WARNING, 7 and 10 OK) and whether the object's
  `kube-score/ignore` annotation skipped it (`skipped`; a skipped check keeps its grade).
  `--disable-ignore-checks-annotations` scores as if no object had one.
- `--kubernetes-version` only feeds stable-version; v1.37 is the control plane e2e/tools/kubernetes builds.

The gate: no CRITICAL that is not skipped; every ignored id has its reason beside it and every reason its id
(components/scanner_exceptions.py writes both), container-resources never among them (it implies the
ephemeral-storage check: scorecard/scorecard.go impliedIgnoreAnnotations); no kube-score annotation on a
kind kube-score does not read; and each ignored id still fires on its object without the annotations, so
an exception the program no longer needs fails here until it is removed. Warnings are not gated (a pod
without an egress policy would be one: score/networkpolicy reports it as WARNING).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("E2E_BIN", ROOT / ".e2e" / "bin"))
KUBE_SCORE = BIN / "kube-score"
KUBERNETES_VERSION = "v1.37"
IGNORE = "kube-score/ignore"
REASON = "llm-serving.io/kube-score-skip"
NEVER_IGNORED = {"container-resources", "container-ephemeral-storage-request-and-limit"}
CRITICAL, WARNING = 1, 5
PARSED_KINDS = {"Pod", "Job", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "NetworkPolicy", "Ingress",
                "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"}

# The shipped stacks and the variants the unit tests render (tests/variants.py, tests/test_pd.py CASES,
# tests/multinode_stacks.py GROUP_PAIRS): every orchestrator, topology and group form once, and the clients'
# policies of a stack without the gateway (tests/test_consumers.py); on gateway.routingLayer inferencePool
# (tests/pool_stacks.py) the endpoint picker's objects beside a Deployment's engines and a group's leaders.
SHIPPED = ("dev", "staging", "prod")
VARIANTS = ("vllm-stormservice", "sglang-rolebasedgroup", "clients-stormservice", "pd-fleets", "pd-same-pod", "hybrid-stormservice",
            "hybrid-deployment", "r1-leaderworkerset-vllm", "r1-leaderworkerset-sglang", "r1-stormservice-sglang",
            "r1-rolebasedgroup-sglang", "pool-vllm-deployment", "pool-r1-leaderworkerset-vllm")
ALL = SHIPPED + VARIANTS


def _stack_file(name: str):
    """The stack file of one render name, built as the unit tests build it."""
    import multinode_stacks
    import variants

    from render import stackfile
    if name in SHIPPED:
        return stackfile.read(ROOT, name)
    if name.startswith("pool-"):
        import pool_stacks
        return pool_stacks.pool_stack(name)
    if name.startswith("r1-"):
        _, orchestrator, engine = name.split("-")
        return multinode_stacks.r1_stack(orchestrator, engine)
    if name.startswith(("pd-", "hybrid-")):
        topology, orchestrator, budget = {"pd-fleets": ("pd", "rayclusterfleet", 24),
                                          "pd-same-pod": ("pd-same-pod", "deployment", 8),
                                          "hybrid-stormservice": ("hybrid", "stormservice", 32),
                                          "hybrid-deployment": ("hybrid", "deployment", 32)}[name]
        import test_pd
        return test_pd.stack(topology, orchestrator, budget)
    if name == "clients-stormservice":
        # No gateway: other teams' namespaces are admitted to each model's Service pods by a policy of its own.
        m = variants.model(orchestrator="stormservice")
        m.pop("rollout")
        return variants.variant_file(models=[m], gateway={"enabled": False},
                                     networkPolicy={"clients": {"namespaces": ["team-a"]}})
    engine, orchestrator = name.split("-")
    return variants.pair_file(engine, orchestrator)


def _render_main(out: str, names: list[str]) -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from render import output, runtime
    for name in names:
        Path(out, f"{name}.yaml").write_text(output.kubernetes_yaml(runtime.render(_stack_file(name))))


@pytest.fixture(scope="module")
def renders(tmp_path_factory) -> Path:
    """Every render's kubernetes.yaml, in two processes side by side (Pulumi's mock runtime, ~1.6 s a render)."""
    out = tmp_path_factory.mktemp("kube-score")
    halves = [list(ALL[0::2]), list(ALL[1::2])]

    def run(names: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, __file__, "render", str(out), *names], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)

    with ThreadPoolExecutor(2) as pool:
        for done in pool.map(run, halves):
            assert done.returncode == 0, done.stderr[-4000:]
    return out


def score(path: Path, *flags: str) -> list[dict]:
    if not os.access(KUBE_SCORE, os.X_OK):
        pytest.fail(f"{KUBE_SCORE} missing; build it with `make e2e-tools` (e2e/build-tools.sh kube-score)", pytrace=False)
    done = subprocess.run([str(KUBE_SCORE), "score", "-o", "json", "--kubernetes-version", KUBERNETES_VERSION,
                           *flags, str(path)], capture_output=True, text=True, timeout=60)
    # Exit 1: some check not skipped is CRITICAL (the JSON says which); anything else is kube-score failing.
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def key(obj: dict) -> tuple[str, str]:
    return obj["type_meta"]["kind"], obj["object_meta"]["name"]


def fired(obj: dict) -> dict[str, int]:
    """Check id -> grade of each check that did not pass on this object."""
    return {c["check"]["id"]: c["grade"] for c in obj["checks"] if c["grade"] <= WARNING}


def ignored(annotations: dict[str, str]) -> tuple[set[str], dict[str, str]]:
    """(the ids of kube-score/ignore, id -> reason of the numbered reason annotations)."""
    ids = {i.strip() for i in annotations.get(IGNORE, "").split(",") if i.strip()}
    reasons = dict(v.split("=", 1) for k, v in annotations.items() if k.startswith(REASON) and "=" in v)
    return ids, reasons


@pytest.mark.parametrize("name", ALL)
def test_no_unexplained_critical(renders, name):
    found = [f"{kind}/{obj}: {c['check']['id']} ({'; '.join(x['summary'] for x in c['comments'] or [])})"
             for o in score(renders / f"{name}.yaml") for kind, obj in [key(o)]
             for c in o["checks"] if c["grade"] == CRITICAL and not c["skipped"]]
    assert found == []


@pytest.mark.parametrize("name", ALL)
def test_every_exception_has_its_reason_and_is_still_needed(renders, name):
    path = renders / f"{name}.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    unscored = {key(o): fired(o) for o in score(path, "--disable-ignore-checks-annotations")}
    problems = []
    for d in docs:
        meta = d.get("metadata") or {}
        ids, reasons = ignored(meta.get("annotations") or {})
        template = ((d.get("spec") or {}).get("template") or {}).get("metadata") or {}
        where = f"{d['kind']}/{meta.get('name')}"
        if ignored(template.get("annotations") or {}) != (set(), {}):
            problems.append(f"{where}: kube-score exceptions on the pod template; they belong on the object")
        if not ids and not reasons:
            continue
        if d["kind"] not in PARSED_KINDS:
            problems.append(f"{where}: kube-score does not read a {d['kind']}, so its exceptions mean nothing")
        if ids != set(reasons):
            problems.append(f"{where}: ignored {sorted(ids)} but reasons for {sorted(reasons)}")
        if ids & NEVER_IGNORED:
            problems.append(f"{where}: ignores {sorted(ids & NEVER_IGNORED)}, which hides the ephemeral-storage check")
        problems += [f"{where}: the reason of {i} says too little: {r!r}" for i, r in reasons.items() if len(r.split()) < 5]
        still = unscored.get((d["kind"], meta.get("name")), {})
        problems += [f"{where}: {i} is ignored but no longer fires: drop the exception" for i in sorted(ids - set(still))]
    assert problems == []


def test_the_gate_is_not_vacuous(renders, tmp_path):
    """Without the annotations the dev render has CRITICALs, and a container without ephemeral storage is one."""
    assert any(g == CRITICAL for o in score(renders / "dev.yaml", "--disable-ignore-checks-annotations")
               for g in fired(o).values())
    docs = [d for d in yaml.safe_load_all((renders / "dev.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "Job")
    for c in job["spec"]["template"]["spec"]["containers"]:
        for k in ("requests", "limits"):
            c["resources"][k].pop("ephemeral-storage")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    (obj,) = score(tmp_path / "job.yaml")
    assert fired(obj).get("container-ephemeral-storage-request-and-limit") == CRITICAL


if __name__ == "__main__" and sys.argv[1:2] == ["render"]:
    _render_main(sys.argv[2], sys.argv[3:])
