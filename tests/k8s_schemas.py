"""kubernetes-validate's strict schemas with the parsed schemas cached.

`kubernetes_validate.validate` re-reads its large definitions file on every call (about 0.2 s);
this module resolves the same files the same way, once per version, so every object of every
stack can be checked against two Kubernetes versions in a second.
"""

from __future__ import annotations

import functools
import re

import jsonschema
from kubernetes_validate import utils
from referencing import Registry, Resource


class SchemaNotFound(Exception):
    pass


@functools.lru_cache(maxsize=None)
def _registry(schema_dir: str, version: str) -> Registry:
    defs = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", version)
    return Resource.from_contents(defs) @ Registry()


@functools.lru_cache(maxsize=None)
def _validator(version: str, api_version: str, kind: str) -> jsonschema.Validator:
    resolved = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(version)][-1]
    schema_dir = f"v{resolved}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", version)
    except FileNotFoundError:
        raise SchemaNotFound(f"{api_version} {kind}") from None
    registry = Resource.from_contents(schema) @ _registry(schema_dir, version)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def is_builtin(obj: dict, version: str) -> bool:
    try:
        _validator(version, obj["apiVersion"], obj["kind"])
    except SchemaNotFound:
        return False
    return True


def strict_errors(obj: dict, version: str) -> list[str]:
    """Strict (unknown fields refused) schema errors of a built-in object; empty when valid."""
    validator = _validator(version, obj["apiVersion"], obj["kind"])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]
