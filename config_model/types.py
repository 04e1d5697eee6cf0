"""Name, text and URL types of the stack config, and the base every section derives from.

Single-field rules (types, ranges, patterns) live with the types; rules that relate several fields
live in stacks/rules/ so that every broken rule is reported at once. This package imports nothing
of the program's own but policy/'s stdlib-only rules: components take their arguments from it and
stacks/ composes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from policy import k8s_names

# A DNS-1123 label and a non-empty label value, the length folded into the pattern (policy/k8s_names.py).
DNS_LABEL = k8s_names.DNS1123_LABEL_PATTERN
LABEL_VALUE = k8s_names.LABEL_VALUE_PATTERN
# Pattern -> what it allows, in words, for error messages (stacks/loader.py).
PATTERN_MEANING: dict[str, str] = {}


def text(pattern: str, meaning: str) -> Any:
    """A string type constrained by `pattern`, whose error message says `meaning`."""
    PATTERN_MEANING[pattern] = meaning
    return Annotated[str, StringConstraints(pattern=pattern)]


DnsLabel = text(DNS_LABEL, "a DNS label: 1-63 lowercase letters, digits or '-', alphanumeric at both ends")
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


# The error type of a credential found in a plain field: stacks/loader.py never prints its value.
CREDENTIAL_ERROR = "credential_in_plain_field"
# Any userinfo in a URL (RFC 3986 section 3.2.1): user:password@ or a bare token@.
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@")


def _no_userinfo(value: Any) -> Any:
    """Plain config is stored and shown in plaintext (stack file, state, `pulumi config`): a URL
    carrying credentials would leak them, so it is refused before its pattern is even checked."""
    if isinstance(value, str) and _USERINFO.match(value.strip()):
        raise PydanticCustomError(CREDENTIAL_ERROR, "must not carry credentials (userinfo before '@'): plain "
                                  "config reaches the stack file and the state unencrypted; give the bare host and "
                                  "keep keys in secret config")
    return value


def _path_not_contents(value: Any) -> Any:
    """A kubeconfig pasted here instead of into the secret would sit in plaintext in the stack file."""
    if isinstance(value, str) and ("\n" in value or "\r" in value or value.lstrip().startswith("{") or re.search(
            r"apiVersion|\bclusters\b\W*:|\busers\b\W*:|-data\W*:|\btoken\W*:", value)):
        raise PydanticCustomError(CREDENTIAL_ERROR, "must be a path to a kubeconfig file, not its contents: set "
                                  "the contents with pulumi config set --secret llm-serving:kubeconfig instead")
    return value


KubeconfigPath = Annotated[str, BeforeValidator(_path_not_contents)]

# An object URL where a key prefix belongs: s3://bucket/models/x would become the key prefix
# "s3://bucket/models/x" inside the bucket, and the read-only IAM policy would name bucket/s3://...
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/+([^/]*)/?(.*)$")


def _key_not_url(value: Any) -> Any:
    found = _URL_SCHEME.match(value) if isinstance(value, str) else None
    if found:
        scheme, authority, key = found.groups()
        key = key.strip("/")
        # Echo only what cannot carry a credential (no userinfo, no query).
        plain = "@" not in authority and re.fullmatch(r"[A-Za-z0-9._/-]+", key)
        hint = f"write {key!r}" if plain else "write the key prefix inside the bucket"
        raise PydanticCustomError("object_key_url", f"must be the key prefix inside the bucket, not a URL "
                                  f"({scheme.lower()}://...): {hint}; the bucket is objectStore.bucketName")
    return value


def key_prefix(base: Any) -> Any:
    """An object key prefix type (`base` checks its shape), never a URL."""
    return Annotated[base, BeforeValidator(_key_not_url)]


def url_text(pattern: str, meaning: str) -> Any:
    """A URL string type: `pattern` as in text(), and never any userinfo."""
    return Annotated[text(pattern, meaning), BeforeValidator(_no_userinfo)]


# json_schema_extra key of a field whose default is a figure of the field report's one deployment
# (DeepSeek-V4-Flash on 8 x H20) rather than something derived from what the stack file declares:
# plan.md's "Defaults this stack inherits" lists every such field a stack leaves unset
# (config_model/inherited.py).
FIELD_REPORT = "fieldReport"


def field_report(section: str) -> dict[str, str]:
    """Mark a Field as falling back to the field report: `Field(0.88, json_schema_extra=field_report("5"))`."""
    return {FIELD_REPORT: section}


def stack_key(field_name: str) -> str:
    """snake_case attribute -> camelCase stack-file key, keeping the units spelled GiB and MiB (MiBps)."""
    return re.sub(r"([GM])ib(?=[A-Z]|ps|$)", r"\1iB", to_camel(field_name))


@dataclass(frozen=True)
class Inherited:
    """A setting that fell back to a figure of the field report's one deployment (config_model/inherited.py
    gathers them for plan.md). Here, not there, so that a module the gathering lists can build one
    without importing it back."""

    path: str        # stack-file path, e.g. models[0].vllm.gpuMemoryUtilization
    value: Any       # the value it took
    section: str     # where in the field report the figure comes from
    basis: str = ""  # how the value follows from the figure, when it is not the figure itself


class Model(BaseModel):
    """Base for every config section: camelCase keys, unknown keys refused, immutable."""

    # strict: the Pulumi CLI reads stack files as YAML 1.2, where `off` and "8" are text; lax
    # validation would turn them back into false and 8 (and true into 1).
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=stack_key,
        populate_by_name=True,
        validate_default=True,
    )


def is_ip_host(url: str) -> bool:
    """True when the URL's host is an IP literal: a Pod IP changes on every re-creation (field report 10)."""
    import ipaddress
    from urllib.parse import urlsplit
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
