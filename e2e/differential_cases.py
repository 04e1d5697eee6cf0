"""The objects of e2e/test_differential.py, each with apivalidation's verdict on it, as JSON on stdout:

    python e2e/differential_cases.py [renders|hostile] > cases.json

(`renders` is the stacks, variants and rule tests' objects, `hostile` the hostile stack files, neither
argument both: e2e/test_differential.py runs the two halves side by side.)

Run in a process of its own (as e2e/stackfiles.py is): it imports the unit tests' helpers
(tests/conftest.py, tests/variants.py, tests/test_pd.py ...), and tests/conftest.py would clash with
e2e/conftest.py under the one module name `conftest`.

Groups, each a list of renders or hand-built cases:
- stack: the committed stacks dev, staging and prod;
- variant: the topology variants the unit tests render (e2e/stackfiles.py VARIANTS, tests/test_pd.py
  CASES, tests/engine_containers.py, the load-test, naming, budget and dashboard variants);
- hostile: stack files with hostile values that the config accepts, drawn as tests/test_hostile_names.py
  and tests/test_bad_input.py draw them (derandomized Hypothesis, so the same files every run); a value
  the config refuses renders nothing and is only counted;
- refused: the objects tests/test_apiserver_rules.py and tests/test_cel_rules.py build to show each
  rule refusing, taken from their own calls (every object a test hands to `problems` or `messages`).

The verdict is the render's: apivalidation.validate over the object with the CRD index (what
render/__main__.py api_problems runs). Secret values the render masks are replaced by stand-ins of
the right shape first, as `pulumi up` sends the decrypted values, never the mask.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# How many hostile stack files each field of tests/test_hostile_names.py gets, and how many stack-file
# edits of tests/test_bad_input.py are drawn: the unit tests' own counts are 3 and 40.
HOSTILE_PER_FIELD = int(os.environ.get("E2E_DIFF_HOSTILE_PER_FIELD", "6"))
YAML_EDITS = int(os.environ.get("E2E_DIFF_YAML_EDITS", "40"))
# What a masked secret stands in for: a Docker config must be JSON (ValidateSecret), the rest is text.
STAND_INS = {".dockerconfigjson": '{"auths": {}}'}
STAND_IN = "e2e-stand-in-value"


def _setup() -> None:
    for p in (ROOT / "tests", ROOT, ROOT / "e2e"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


def unmask(obj: dict) -> dict:
    from render.stackfile import MASK
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
        for part in ("stringData", "data"):
            values = obj.get(part) or {}
            for key, value in values.items():
                if value == MASK:
                    values[key] = STAND_INS.get(key, STAND_IN)
    return obj


class Verdicts:
    def __init__(self) -> None:
        import apivalidation
        self.apivalidation = apivalidation
        self.index = apivalidation.crd_index(str(apivalidation.crds_dir()))

    def case(self, obj: dict, **extra) -> dict:
        obj = unmask(copy.deepcopy(obj))
        problems = self.apivalidation.validate([obj], self.index)
        return {"object": obj, "offline": [{"field": p.field, "value": repr(p.value)[:200], "rule": p.rule}
                                           for p in problems], **extra}


def k8s(rendered) -> list[dict]:
    from render.output import is_kubernetes_object
    return [r.inputs for r in rendered.resources if is_kubernetes_object(r)]


# ---- the committed stacks and the topology variants ----

def stacks(v: Verdicts) -> list[dict]:
    from conftest import render_stack
    return [{"group": "stack", "name": s, "cases": [v.case(o) for o in k8s(render_stack(s))]}
            for s in ("dev", "staging", "prod")]


def variant_files() -> dict[str, object]:
    import engine_containers
    import stackfiles
    import test_naming
    import test_ops_topologies
    import test_pd
    from variants import model, variant_file

    out: dict[str, object] = {f"e2e/{n}": stackfiles._variant(n) for n in stackfiles.VARIANTS}
    out |= {f"test_pd/{t}-{o}": test_pd.stack(t, o, b) for t, o, b in test_pd.CASES}
    out |= {f"engine_containers/{n}": sf for n, sf in engine_containers._variants().items()}
    out |= {f"loadtest/{n}": test_ops_topologies.with_load_test(f()) for n, f in test_ops_topologies.LOAD_TEST_VARIANTS.items()}
    out["test_operations/stormservice-x2"] = test_pd.stack("combined", "stormservice", 16, replicas=2)
    out["test_operations/pd-x2"] = test_pd.stack("pd", "rayclusterfleet", 40, replicas=2)
    hybrid = model(topology="hybrid", orchestrator="stormservice", name="ds", servedModelName="ds")
    hybrid.pop("rollout")
    pd = model(topology="pd", orchestrator="rayclusterfleet", name="ds-pd", servedModelName="ds-pd")
    pd.pop("rollout")
    out["test_naming/hybrid-beside-pd"] = variant_file(images=test_naming.images(), models=[hybrid, pd], gpuBudget=64)
    out["test_aibrix_routing/pd-no-replicas"] = test_pd.stack("pd", "rayclusterfleet", 64, replicas=0)
    ops = copy.deepcopy(_dev_ops())
    ops["monitoring"] = {"dashboards": {"labelKey": "example.com/dashboard", "labelValue": "llm",
                                        "namespace": "monitoring", "folder": "LLM serving"}}
    out["test_dashboards/dashboards-elsewhere"] = variant_file(operations=ops)
    out["test_prepull/off"] = variant_file(operations={"imagePrePull": {"enabled": False}})
    # The same stack file under two names renders once.
    seen, unique = set(), {}
    for name, sf in out.items():
        key = json.dumps(sf.config, sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique[name] = sf
    return unique


def _dev_ops() -> dict:
    from variants import dev_config
    return dev_config()["operations"]


def variants(v: Verdicts) -> list[dict]:
    from variants import render
    return [{"group": "variant", "name": name, "cases": [v.case(o) for o in k8s(render(sf))]}
            for name, sf in variant_files().items()]


# ---- hostile stack files ----

def _draws(strategy, count: int, label: str) -> list:
    """`count` examples of a strategy, the same every run (derandomized, no example database)."""
    from hypothesis import HealthCheck, given, settings
    found: list = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(value):
        if value not in found:
            found.append(value)
    draw.__qualname__ = f"differential.{label}"  # the derandomized seed follows the name: one per field
    draw()
    return found[:count]


def _render_file(project: Path, text: str):
    """The stack file through the render as `python -m render` reads it; None when the config refuses it."""
    from components.ops_commands import OpsConfigError
    from render import runtime, stackfile
    from stacks.loader import ConfigError
    (project / "Pulumi.hostile.yaml").write_text(text)
    try:
        return runtime.render(stackfile.read(project, "hostile"))
    except (ConfigError, OpsConfigError):
        return None


def hostile(v: Verdicts) -> tuple[list[dict], dict]:
    import test_hostile_names as th
    from hypothesis import strategies as st
    counts = {"files": 0, "refused by the config": 0}
    renders = []
    project = Path(tempfile.mkdtemp(prefix="e2e-differential-"))
    try:
        shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
        for field in sorted(th.FIELDS):
            for i, value in enumerate(_draws(th.hostile(field), HOSTILE_PER_FIELD, field)):
                cfg = copy.deepcopy(th.BASE)
                th.FIELDS[field](cfg, value)
                counts["files"] += 1
                rendered = _render_file(project, th.stack_file(cfg))
                if rendered is None:
                    counts["refused by the config"] += 1
                    continue
                renders.append({"group": "hostile", "name": f"test_hostile_names/{field}#{i} {value!r}",
                                "cases": [v.case(o) for o in k8s(rendered)]})
        import test_bad_input as tb
        edits = st.lists(st.tuples(st.sampled_from(tb.VALUE_LINES), st.sampled_from(tb.YAML_SCALARS)), min_size=1, max_size=3)
        for i, change in enumerate(_draws(edits, YAML_EDITS, "yaml-edits")):
            lines = list(tb.DEV_LINES)
            for index, scalar in change:
                lines[index] = f"{lines[index].split(': ', 1)[0]}: {scalar}"
            counts["files"] += 1
            rendered = _render_file(project, "\n".join(lines) + "\n")
            if rendered is None:
                counts["refused by the config"] += 1
                continue
            where = ", ".join(f"line {n + 1} {tb.DEV_LINES[n].split(': ', 1)[0].strip()}: {s!r}" for n, s in change)
            renders.append({"group": "hostile", "name": f"test_bad_input/edit#{i} ({where})",
                            "cases": [v.case(o) for o in k8s(rendered)]})
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return renders, counts


# ---- the objects the rule tests build ----

def _call_with_params(fn) -> list[tuple]:
    """The argument tuples pytest would call `fn` with: () or each row of its parametrize marks."""
    params = list(inspect.signature(fn).parameters)
    if not params:
        return [()]
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
    if len(marks) != 1:
        return []
    names, rows = marks[0].args[:2]
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    if names != params:
        return []
    return [tuple(r) if isinstance(r, (tuple, list)) else (r,) for r in rows]


def refused(v: Verdicts) -> tuple[list[dict], list[str]]:
    """Every object the rule tests hand to their checking helper, as it was at that call; and the tests
    whose own assertions failed on the way (`make test` reports those; the objects seen until then
    still go to the server, and test_apiserver_rules's `refused` does not assert here at all)."""
    import test_apiserver_rules
    import test_cel_rules
    out, failed = [], []
    for module, helper in ((test_apiserver_rules, "problems"), (test_cel_rules, "messages")):
        original = getattr(module, helper)
        original_refused = getattr(module, "refused", None)
        for name, fn in sorted(vars(module).items()):
            if not name.startswith("test_") or not callable(fn):
                continue
            for args in _call_with_params(fn):
                seen: list[dict] = []

                def spy(o, _original=original, _seen=seen):
                    _seen.append(copy.deepcopy(o))
                    return _original(o)

                def refused_spy(o, *fragments, _module=module):
                    _module.problems(o)
                setattr(module, helper, spy)
                if original_refused is not None:
                    setattr(module, "refused", refused_spy)
                try:
                    fn(*args)
                except AssertionError as err:
                    failed.append(f"{module.__name__}::{name}: {str(err)[:300]}")
                finally:
                    setattr(module, helper, original)
                    if original_refused is not None:
                        setattr(module, "refused", original_refused)
                unique = []
                for o in seen:
                    if o not in unique:
                        unique.append(o)
                label = f"{module.__name__}::{name}" + (f"[{'-'.join(str(a)[:20] for a in args)}]" if args else "")
                if unique:
                    out.append({"group": "refused", "name": label,
                                "cases": [v.case(o, call=j) for j, o in enumerate(unique)]})
    return out, failed


def build(part: str = "all") -> dict:
    _setup()
    started = time.monotonic()
    v = Verdicts()
    renders, hostile_counts, failed = [], {"files": 0, "refused by the config": 0}, []
    if part in ("all", "renders"):
        renders += stacks(v) + variants(v)
    if part in ("all", "hostile"):
        hostile_renders, hostile_counts = hostile(v)
        renders += hostile_renders
    if part in ("all", "renders"):
        built, failed = refused(v)
        renders += built
    return {"renders": renders, "hostile": hostile_counts, "unit_test_failures": failed,
            "seconds": round(time.monotonic() - started, 1)}


if __name__ == "__main__":
    json.dump(build(*sys.argv[1:2]), sys.stdout)
