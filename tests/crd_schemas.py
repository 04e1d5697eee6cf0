"""Validate custom resources offline against the upstream CRDs in ../shared/crds.

kubernetes-validate knows only built-in kinds; for a CR we use the CRD's openAPIV3Schema with a
JSON-schema validator. It does not run CEL rules (x-kubernetes-validations) or fill defaults.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jsonschema
import yaml

# Both KubeRay directories define rayclusters.ray.io; AIBrix v0.7.0 installs v1.2.1 (SOURCES.md).
SKIP_DIRS = {"v1.7.0"}
# libyaml parses the multi-megabyte CRDs about ten times faster than the pure-Python loader.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def load_crd_index(crds_dir: Path) -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict openAPIV3Schema for every served version of every CRD."""
    index: dict[tuple[str, str], dict] = {}
    for path in sorted(crds_dir.rglob("*.yaml")):
        if SKIP_DIRS & set(path.relative_to(crds_dir).parts):
            continue
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served", True) and "schema" in version:
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    index[key] = strict(version["schema"]["openAPIV3Schema"])
    return index


def validate_custom_resource(obj: dict, index: dict[tuple[str, str], dict]) -> list[str]:
    schema = index.get((obj.get("apiVersion"), obj.get("kind")))
    if schema is None:
        return [f"no CRD serves {obj.get('apiVersion')} {obj.get('kind')}"]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]


@functools.lru_cache(maxsize=None)
def _index_at(path: str) -> dict[tuple[str, str], dict]:
    return load_crd_index(Path(path))


def crd_index() -> dict[tuple[str, str], dict]:
    """The index of ../shared/crds, loaded once per test session (fails in CI when it is missing)."""
    from conftest import shared_dir
    return _index_at(str(shared_dir("crds")))
