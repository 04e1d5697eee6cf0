"""Integer fields that overflow their Go type. A create decodes the JSON into Go structs, so a value
past an int32 field's range is refused before any validation function runs (encoding/json: "cannot
unmarshal number ... of type int32"). Server-side apply, which pulumi-kubernetes uses, converts the
unstructured object instead and wraps the value around without a word: 2**40 becomes 0 and 2**31
becomes -2**31, which validation may or may not then refuse (kube-apiserver v1.37.2, seen by
e2e/test_differential.py). Refused here either way: the object the server keeps is not the one
written. jsonschema, which kubernetes-validate uses, ignores `format`. Here the same schemas
(kubernetes-validate's for built-in kinds, the CRD's for custom resources, whose operators decode
them into the same Go types) are checked with a format checker that knows int32 and int64."""

from __future__ import annotations

import functools
import re

import jsonschema
import kubernetes_validate
from kubernetes_validate import utils
from referencing import Registry, Resource

LIMITS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
FORMATS = jsonschema.FormatChecker(formats=())
for _name, (_lo, _hi) in LIMITS.items():
    FORMATS.checks(_name)(lambda v, lo=_lo, hi=_hi: not isinstance(v, int) or isinstance(v, bool) or lo <= v <= hi)


@functools.lru_cache(maxsize=None)
def _builtin_validator(api_version: str, kind: str, version: str):
    """kubernetes_validate.validate's schema lookup (utils.validate), with our format checker."""
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    directory = f"kubernetes-json-schema/v{version}-local"
    try:
        schema = utils.schema_contents(f"{directory}/{kind.lower()}-{group}.json", version)
    except (FileNotFoundError, kubernetes_validate.SchemaNotFoundError):
        return None
    registry = Resource.from_contents(utils.schema_contents(f"{directory}/_definitions.json", version)) @ (
        Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry, format_checker=FORMATS)


def _version() -> str:
    return [v for v in utils.all_versions() if v.startswith("1.37")][-1]


def is_builtin(obj: dict) -> bool:
    """A kind kubernetes-validate has a schema for: the API server's own, not a CRD's."""
    return _builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""), _version()) is not None


def check(obj: dict, crd_schema: dict | None) -> list[tuple[str, object, str]]:
    if crd_schema is not None:
        validator = jsonschema.Draft7Validator(crd_schema, format_checker=FORMATS)
    else:
        validator = _builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""), _version())
    if validator is None:
        return []
    return [(".".join(str(p) for p in err.absolute_path), err.instance,
             f"overflows {err.validator_value} (Go type of the field; a create refuses it, server-side apply "
             "wraps it around)")
            for err in validator.iter_errors(obj) if err.validator == "format"]
