"""What the Kubernetes API server would refuse in the rendered objects, beyond their OpenAPI schema.

`make render` runs this over every object and exits 2 on any problem, writing nothing, so a value
that would fail `pulumi up` half-way fails at the first line instead. Three parts: the server's
hand-written validation (apiserver.py, its value formats, with objectmeta.py, podspec.py and
kinds.py: the modules to re-check per Kubernetes release), ranges.py (integer fields past their Go
type), cel_rules.py (the CRDs' CEL rules). updates.py adds what an update may not change.

Only what the rendered kinds need is loaded, once per process: the CRD files of the custom kinds
rendered, the built-in schemas of the built-in kinds rendered (tests/test_validation_loading.py).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from apivalidation import cel_rules, collection, kinds, module_crds, ranges

# The CRDs, byte-for-byte upstream copies (../shared/crds/SOURCES.md); LLM_SERVING_CRDS overrides.
DEFAULT_CRDS = Path(__file__).resolve().parent.parent.parent / "shared" / "crds"


@dataclass(frozen=True)
class Problem:
    kind: str
    namespace: str
    name: str
    field: str
    value: object
    rule: str

    def line(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        value = repr(self.value)
        value = value if len(value) <= 120 else value[:117] + "..."
        return f"{self.kind} {where}: {self.field} = {value}: {self.rule}"


def crds_dir() -> Path:
    return Path(os.environ.get("LLM_SERVING_CRDS") or DEFAULT_CRDS)


@functools.lru_cache(maxsize=16)
def crd_index(path: str, kinds: frozenset[str] | None = None) -> dict[tuple[str, str], dict]:
    """The CRDs under `path`, and those of the asked kinds that come from a Go module (module_crds)."""
    index = cel_rules.load_crds(Path(path), kinds)
    for kind in sorted(module_crds.MODULE_CRDS if kinds is None else kinds & module_crds.MODULE_CRDS.keys()):
        directory = module_crds.crd_dir(kind)
        if directory.is_dir():
            index.update({key: schema for key, schema in cel_rules.load_crds(directory, frozenset({kind})).items()
                          if key[1] == kind})
    return index


def custom_kinds(objects: list[dict]) -> frozenset[str]:
    return frozenset(o.get("kind", "") for o in objects if not ranges.is_builtin(o))


def validate(objects: list[dict], index: dict[tuple[str, str], dict] | None) -> list[Problem]:
    """Every problem of every object; custom resources are checked against `index` (CEL rules and
    integer ranges) when it is given, and one whose kind no CRD serves is itself a problem."""
    with collection.paused():
        return [p for obj in objects for p in _problems(obj, index)]


def _problems(obj: dict, index: dict[tuple[str, str], dict] | None) -> list[Problem]:
    meta = obj.get("metadata") or {}
    kind, ns, name = obj.get("kind", "?"), meta.get("namespace") or "", meta.get("name") or ""
    found = kinds.check_object(obj)
    custom = not ranges.is_builtin(obj)
    if custom and index is not None:
        cel_found = cel_rules.check(obj, index)
        if cel_found is None and module_crds.source_checked(obj) is not None:
            pass   # no CRD to read here: checked against its upstream types by a test instead
        elif cel_found is None:
            found.append(("apiVersion", obj.get("apiVersion"), module_crds.missing_hint(kind)
                          or "no CRD in the CRD directory serves this kind"))
        else:
            found += cel_found + ranges.check(obj, index[(obj["apiVersion"], kind)])
    elif not custom:
        found += ranges.check(obj, None)
    return [Problem(kind, ns, name, f, v, r) for f, v, r in found]


def report(problems: list[Problem]) -> str:
    lines = [f"objects the Kubernetes API server would refuse ({len(problems)} problems):"]
    return "\n".join(lines + [p.line() for p in problems])
