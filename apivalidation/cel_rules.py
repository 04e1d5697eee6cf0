"""Evaluate the CRDs' `x-kubernetes-validations` CEL rules against our custom resources, as the
API server does on create (kubernetes/kubernetes v1.37,
staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go, Validate):

- defaults first: the server defaults a CR from its structural schema before validating
  (.../pkg/apiserver/schema/defaulting/algorithm.go, Default), and the Gateway API rules rely on it
  (`size(self.group) == 0 && self.kind == 'Service'` reads defaulted fields);
- each rule at the schema node that carries it, with `self` that node's value; rules on array
  items and map values run once per element;
- property names escaped as the server does (staging/src/k8s.io/apiserver/pkg/cel/escaping.go,
  Escape: `namespace` is `__namespace__`, `-` is `__dash__` ...);
- transition rules (those reading `oldSelf`) are skipped: on create there is no old object, and
  the server skips them too (validation.go: `if compiled.UsesOldSelf && oldObj == nil`);
- an evaluation error refuses the object, as it does in the server;
- CEL cost limits are not applied: the CRDs were admitted with their static cost estimates, and
  our objects are orders of magnitude below the per-call runtime limit.

The CEL implementation is common-expression-language (a binding of the Rust `cel` crate): it
compares int and double across types, as cel-go does with Kubernetes' CrossTypeNumericComparisons,
where cel-python refuses `2 > 1.5`. Neither ships Kubernetes' CEL libraries; the one function the
CRDs in ../shared/crds use beyond standard CEL, the strings extension's `split`, is defined here,
and a rule calling any other unknown function fails to evaluate and so refuses the object.
"""

from __future__ import annotations

import copy
import functools
import importlib.machinery
import importlib.util
import re
import sys
from pathlib import Path
from typing import Iterator

import yaml

from apivalidation import collection


def _load_cel():
    """The `cel` extension module, without the package's command-line tool. The package's __init__
    (common-expression-language 0.10.0, pinned) runs `from . import cli, stdlib` before
    `from .cel import *`, and cel/cli.py imports typer, rich, prompt_toolkit and pygments: 0.3 s of a
    render for a tool never used. The extension (cel/cel.<abi>.so) is loaded alone instead and
    registered as cel.cel, the name the package's own import gives it, so a later `import cel` reuses
    it. If the layout differs (another release), the package is imported as usual."""
    if "cel" in sys.modules:
        return sys.modules["cel"]
    if "cel.cel" not in sys.modules:
        package = importlib.util.find_spec("cel")
        where = [Path(d) / f"cel{suffix}" for d in (package.submodule_search_locations or [])
                 for suffix in importlib.machinery.EXTENSION_SUFFIXES]
        found = next((p for p in where if p.is_file()), None)
        if found is None:
            import cel
            return cel
        spec = importlib.util.spec_from_file_location("cel.cel", found)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["cel.cel"] = module
    return sys.modules["cel.cel"]


cel = _load_cel()

# Both KubeRay directories define rayclusters.ray.io; AIBrix v0.7.0 installs v1.2.1 (SOURCES.md).
SKIP_DIRS = {"v1.7.0"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# apiserver/pkg/cel/escaping.go: celReservedSymbols, and the characters Escape rewrites.
RESERVED = {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
            "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"), ("/", "__slash__"))


def escape(name: str) -> str:
    """escaping.go Escape, for property names of object schemas (map keys are never escaped)."""
    if name in RESERVED:
        return f"__{name}__"
    for old, new in _ESCAPES:
        name = name.replace(old, new)
    return name


def _split(text: str, sep: str, limit: int = -1) -> list[str]:
    """cel-go ext/strings.go split: limit 0 gives [], a negative limit splits all, n keeps n parts."""
    if limit == 0:
        return []
    return text.split(sep) if limit < 0 else text.split(sep, limit - 1)


FUNCTIONS = {"split": _split}


# How far into a CRD file its spec.names.kind is looked for: controller-gen writes group and names
# first, within the first 400 bytes of every file in ../shared/crds.
_HEAD_BYTES = 8192
_NAMES_KIND = re.compile(rb"\n  names:\n(?:    .*\n)*?    kind: (\S+)\n")


@functools.cache
def _files(crds_dir: Path) -> tuple[tuple[Path, str | None], ...]:
    """(file, the kind its head names, or None) for every CRD file under crds_dir, in sorted order.
    Only each file's first bytes are read: the files are 25 MB in all."""
    out = []
    for path in sorted(crds_dir.rglob("*.yaml")):
        if SKIP_DIRS & set(path.relative_to(crds_dir).parts):
            continue
        with path.open("rb") as f:
            m = _NAMES_KIND.search(f.read(_HEAD_BYTES))
        out.append((path, m.group(1).decode() if m else None))
    return tuple(out)


def _candidates(crds_dir: Path, kinds: frozenset[str] | None) -> list[Path]:
    """The files to parse for `kinds` (all of them without): those whose head names one of them,
    and, for a kind no head names, every file whose text mentions `kind: <kind>` (a file holding
    several CRDs names only its first in the head)."""
    files = _files(crds_dir)
    if kinds is None:
        return [p for p, _ in files]
    chosen = {p for p, kind in files if kind in kinds}
    unnamed = kinds - {kind for _, kind in files}
    if unnamed:
        needles = [f"kind: {k}\n".encode() for k in unnamed]
        chosen |= {p for p, _ in files if p not in chosen and any(n in p.read_bytes() for n in needles)}
    return [p for p, _ in files if p in chosen]


def load_crds(crds_dir: Path, kinds: frozenset[str] | None = None) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> openAPIV3Schema of every served version of every CRD under crds_dir;
    with `kinds`, only the files that define them are parsed (the YAML is megabytes)."""
    index: dict[tuple[str, str], dict] = {}
    with collection.paused():
        for path in _candidates(crds_dir, kinds):
            for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for version in spec["versions"]:
                    if version.get("served", True) and "schema" in version:
                        index[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = \
                            version["schema"]["openAPIV3Schema"]
    return index


def default(value: object, schema: dict) -> object:
    """defaulting/algorithm.go Default: absent properties with a default get a copy of it, recursively."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        for name, item in value.items():
            sub = props.get(name) or (schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None)
            if sub:
                default(item, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])
    return value


def to_cel(value: object, schema: dict) -> object:
    """The value as the server hands it to CEL: objects with escaped property names, `number`
    fields as doubles (a whole number in YAML is still a double there)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else {}
        if props is not None and not extra:
            return {escape(k): to_cel(v, props.get(k) or {}) for k, v in value.items()}
        return {k: to_cel(v, extra) for k, v in value.items()}
    if isinstance(value, list):
        return [to_cel(v, schema.get("items") or {}) for v in value]
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@functools.lru_cache(maxsize=None)
def _compiled(rule: str) -> cel.Program:
    return cel.compile(rule)


def _nodes(value: object, schema: dict, path: str) -> Iterator[tuple[str, object, dict]]:
    """(field path, value, schema) for every value in the object, depth first."""
    yield path, value, schema
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
        for k, v in value.items():
            if k in props:
                yield from _nodes(v, props[k], f"{path}.{k}" if path else k)
            elif extra:
                yield from _nodes(v, extra, f"{path}[{k}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from _nodes(v, schema["items"], f"{path}[{i}]")


def uses_old_self(rule: str) -> bool:
    return re.search(r"\boldSelf\b", rule) is not None


def check(obj: dict, index: dict[tuple[str, str], dict]) -> list[tuple[str, object, str]] | None:
    """(field, value, message) for every rule the object breaks; None when no CRD serves its kind."""
    schema = index.get((obj.get("apiVersion"), obj.get("kind")))
    if schema is None:
        return None
    found = []
    for path, value, node in _nodes(default(copy.deepcopy(obj), schema), schema, ""):
        for rule in node.get("x-kubernetes-validations") or []:
            expr = rule["rule"]
            if uses_old_self(expr):
                continue
            context = cel.Context(variables={"self": to_cel(value, node)}, functions=FUNCTIONS)
            try:
                ok = _compiled(expr).execute(context) is True
                message = rule.get("message") or f"failed rule: {expr}"
            except Exception as err:  # noqa: BLE001 - any evaluation error refuses the object, as upstream
                ok, message = False, f"rule could not be evaluated ({type(err).__name__}: {err}): {expr}"
            if not ok:
                field = path + (f".{rule['fieldPath'].lstrip('.')}" if rule.get("fieldPath") else "")
                found.append((field or "<root>", value, f"{message} (CRD x-kubernetes-validations)"))
    return found
