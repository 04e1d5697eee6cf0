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
from importlib import resources

import jsonschema
from kubernetes_validate import utils
from referencing import Registry, Resource

LIMITS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
FORMATS = jsonschema.FormatChecker(formats=())
for _name, (_lo, _hi) in LIMITS.items():
    FORMATS.checks(_name)(lambda v, lo=_lo, hi=_hi: not isinstance(v, int) or isinstance(v, bool) or lo <= v <= hi)


@functools.cache
def _version() -> str:
    return [v for v in utils.all_versions() if v.startswith("1.37")][-1]


def _schema_path(api_version: str, kind: str) -> str:
    """kubernetes_validate.validate's schema file name for a kind (utils.validate)."""
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"kubernetes-json-schema/v{_version()}-local/{kind.lower()}-{group}.json"


@functools.cache
def is_builtin_kind(api_version: str, kind: str) -> bool:
    """Whether kubernetes-validate has a schema file for the kind; nothing is parsed to answer."""
    return resources.files("kubernetes_validate").joinpath(_schema_path(api_version, kind)).is_file()


@functools.cache
def _definitions() -> Resource:
    """The 1.8 MB of shared definitions every built-in kind's schema refers to: parsed once per
    process (kubernetes_validate.validate parses it again for every object), and only when a
    built-in object is checked."""
    return Resource.from_contents(utils.schema_contents(f"kubernetes-json-schema/v{_version()}-local/_definitions.json",
                                                        _version()))


@functools.cache
def _builtin_validator(api_version: str, kind: str):
    """kubernetes_validate.validate's schema lookup (utils.validate), with our format checker;
    built the first time an object of the kind is checked."""
    if not is_builtin_kind(api_version, kind):
        return None
    schema = utils.schema_contents(_schema_path(api_version, kind), _version())
    registry = _definitions() @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry, format_checker=FORMATS)


def is_builtin(obj: dict) -> bool:
    """A kind kubernetes-validate has a schema for: the API server's own, not a CRD's."""
    return is_builtin_kind(obj.get("apiVersion", ""), obj.get("kind", ""))


def check(obj: dict, crd_schema: dict | None) -> list[tuple[str, object, str]]:
    if crd_schema is not None:
        validator = jsonschema.Draft7Validator(crd_schema, format_checker=FORMATS)
    else:
        validator = _builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""))
    if validator is None:
        return []
    return [(".".join(str(p) for p in err.absolute_path), err.instance,
             f"overflows {err.validator_value} (Go type of the field; a create refuses it, server-side apply "
             "wraps it around)")
            for err in validator.iter_errors(obj) if err.validator == "format"]
