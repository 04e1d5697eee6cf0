"""Validate custom resources offline against the upstream CRDs in ../shared/crds.

kubernetes-validate knows only built-in kinds; for a CR we use the CRD's openAPIV3Schema with a
JSON-schema validator. It does not run CEL rules (x-kubernetes-validations) or fill defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import jsonschema

import apivalidation


def strict(schema: object) -> object:
    """The API server prunes fields a structural schema does not declare, silently. Refuse them
    instead: every object schema that lists properties gets additionalProperties false, unless it
    preserves unknown fields or already says what extra keys may hold."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


class CrdIndex(Mapping):
    """(apiVersion, kind) -> openAPIV3Schema (through `transform`) of every served version of every CRD under a
    directory, a kind's files parsed when the kind is first asked for: the same files the render's
    validation parses for it (apivalidation.cel_rules.load_crds; tests/test_validation_loading.py
    holds that choice to a load of the whole directory). Loading all 20 MB took each test worker
    seconds for the two or three kinds it checks."""

    def __init__(self, crds_dir: Path, transform: Callable[[dict], dict] = lambda schema: schema):
        self._dir, self._transform = crds_dir, transform
        self._schemas: dict[tuple[str, str], dict] = {}
        self._kinds: set[str] = set()
        self._complete = False

    def _load(self, kind: str) -> None:
        if kind not in self._kinds and not self._complete:
            for key, schema in self._raw(frozenset({kind})).items():
                if key[1] == kind:
                    self._schemas[key] = self._transform(schema)
            self._kinds.add(kind)

    def _raw(self, kinds: frozenset[str] | None) -> dict[tuple[str, str], dict]:
        """The directory's CRDs and those of kinds read from their Go module, as the render gets them."""
        return apivalidation.crd_index(str(self._dir), kinds)

    def __getitem__(self, key: tuple[str, str]) -> dict:
        self._load(key[1])
        return self._schemas[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        if not self._complete:
            self._schemas = {key: self._transform(schema) for key, schema in self._raw(None).items()}
            self._complete = True
        return iter(self._schemas)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def validate_custom_resource(obj: dict, index: dict[tuple[str, str], dict]) -> list[str]:
    schema = index.get((obj.get("apiVersion"), obj.get("kind")))
    if schema is None:
        return [f"no CRD serves {obj.get('apiVersion')} {obj.get('kind')}"]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]


@functools.lru_cache(maxsize=None)
def _index_at(path: str, strict_schemas: bool) -> CrdIndex:
    return CrdIndex(Path(path), strict) if strict_schemas else CrdIndex(Path(path))


def crd_index() -> CrdIndex:
    """The strict index of ../shared/crds, one per test session (fails in CI when it is missing)."""
    from conftest import shared_dir
    return _index_at(str(shared_dir("crds")), True)


def raw_crd_index() -> CrdIndex:
    """The CRDs' schemas as written, for apivalidation's CEL and range checks (what the render gets
    from apivalidation.crd_index for the kinds it renders)."""
    from conftest import shared_dir
    return _index_at(str(shared_dir("crds")), False)
