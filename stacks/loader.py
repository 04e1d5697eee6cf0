"""Read the `llm-serving:` keys of a stack, validate them and report every problem at once.

A problem message names the stack file, the dotted field path, the bad value and what is allowed,
for example:

    Pulumi.dev.yaml: llm-serving:gpuBudget = 4: the workloads need 8 GPUs at peak, ...

No message ever carries the value of a secret, of a key stored with --secret, of an unknown key
(a misspelled secret), or anything shaped like a credential: Pulumi masks secret values in its
output only where they appear verbatim, and repr() of a multi-line value escapes that masking.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import types
import typing
from enum import Enum
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from config_model import (
    CREDENTIAL_ERROR,
    PATTERN_MEANING,
    SECRET_KEYS,
    StackConfig,
    required_secret_keys,
)
from stacks import rules
from stacks.rules import Problem

NAMESPACE = "llm-serving"


class Hidden:
    """Stands in for a value that must not be printed."""

    def __str__(self) -> str:
        return "(value not shown)"

    __repr__ = __str__


HIDDEN = Hidden()

# Shapes of credentials, found anywhere in a value: private keys, kubeconfig and Docker auth
# documents, URL userinfo, JWTs, AWS/Tencent key ids, Ceph keys, provider token prefixes, and
# `password=`-style assignments. Digests and image references must stay printable.
_TOKEN = (r"-----BEGIN|[A-Za-z][\w+.-]*://[^/\s@]*@|\beyJ[\w-]{8,}|\b(AKIA|ASIA|AKID)[A-Za-z0-9]{8,}"
          r"|\bAQ[A-Za-z0-9+/]{20,}={0,2}|\b(sk|pk|rk)-[\w-]{8,}|\b(ghp|gho|ghs|github_pat|glpat|xox[abps])[-_][\w-]{8,}")
_CREDENTIAL = re.compile(_TOKEN + r"|apiVersion|client-key-data|certificate-authority-data|\"auths?\""
                         r"|(password|passwd|secret|token)\W{0,3}[:=]", re.I)
# What may be cut out of a message text (which quotes other config values) without garbling it.
_CREDENTIAL_TOKEN = re.compile(_TOKEN, re.I)


def looks_secret(value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str) if isinstance(value, (dict, list)) else None
    return text is not None and ("\n" in text or "\r" in text or bool(_CREDENTIAL.search(text)))


def _scrub(problem: Problem) -> Problem:
    value = HIDDEN if looks_secret(problem.value) else problem.value
    allowed = _CREDENTIAL_TOKEN.sub("(not shown)", problem.allowed) if isinstance(problem.allowed, str) else problem.allowed
    if value is problem.value and allowed == problem.allowed:
        return problem
    return dataclasses.replace(problem, value=value, allowed=allowed)


class FileProblem(Problem):
    """A problem with the stack file itself (YAML, duplicate keys): `value` is the line, if known;
    `path` the key as the CLI names it. Never carries a config value."""

    def render(self, stack_file: str) -> str:
        where = f"{stack_file}:{self.value}" if self.value else stack_file
        return f"{where}: {self.path}: {self.allowed}" if self.path else f"{where}: {self.allowed}"


class ConfigError(Exception):
    """A stack file that cannot be deployed. str() is one line per problem, no traceback needed.
    Every problem is scrubbed here, so no caller can print a credential-shaped value."""

    def __init__(self, stack_file: str, problems: list[Problem]):
        self.stack_file = stack_file
        self.problems = [_scrub(p) for p in problems]
        super().__init__("\n".join(p.render(stack_file) for p in self.problems))

    def report(self) -> str:
        """The whole refusal as both entry points print it: a count, then one line per problem."""
        count = len(self.problems)
        return f"invalid stack configuration ({count} problem{'s' if count != 1 else ''}):\n{self}"


def stack_file_name(stack: str) -> str:
    return f"Pulumi.{stack}.yaml"


def _path(loc: tuple[Any, ...]) -> str:
    """('models', 0, 'vllm') -> models[0].vllm; a key that is not a plain name is quoted: images[':']."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(part)):
            out += ("." if out else "") + str(part)
        else:
            out += f"[{str(part)!r}]"
    return out


def _problems_from_validation(err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors(include_url=False):
        allowed = e["msg"].removeprefix("Value error, ")
        value = None if e["type"] == "missing" else e.get("input")
        if e["type"] == "extra_forbidden":
            # A misspelled key may hold a secret (`pulumi config set --secret llm-serving:apikey`).
            allowed, value = "is not a known setting (check the spelling against the README config reference)", HIDDEN
        elif e["type"] == CREDENTIAL_ERROR:
            value = HIDDEN
        elif e["type"] == "missing":
            allowed = "is required"
        elif e["type"] == "bool_type":
            allowed = ("must be true or false: the Pulumi CLI reads stack files as YAML 1.2, where only true and "
                       "false are booleans ('off', 'yes' and 'on' are text)")
        elif e["type"] == "string_pattern_mismatch":
            pattern = e["ctx"]["pattern"]
            allowed = f"must be {PATTERN_MEANING[pattern]}" if pattern in PATTERN_MEANING else f"must match {pattern}"
        if isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True)
        loc = e["loc"]
        if loc and loc[-1] == "[key]":
            # pydantic's marker for a refused dict key: the key is the path's last part and the value.
            loc, allowed = loc[:-1], f"the key {allowed}"
        problems.append(Problem(_path(loc), value, allowed))
    return problems


def validate(raw: Mapping[str, Any], stack: str, present_secrets: Mapping[str, bool],
             require_secrets: bool = True, refused: list[Problem] | None = None) -> StackConfig:
    """Validate raw config values (camelCase keys without the namespace).

    `present_secrets` maps each secret key found in the stack to whether it is stored as a secret;
    `refused` are problems found while decoding. Raises ConfigError with every problem found.
    """
    stack_file = stack_file_name(stack)
    problems: list[Problem] = list(refused or [])
    for key, is_secret in sorted(present_secrets.items()):
        if not is_secret:
            problems.append(Problem(key, "(plaintext)", f"must be stored encrypted: pulumi config set --secret {NAMESPACE}:{key} <value>"))
    # A refused key is left out of `raw`; "is required" on top of the refusal would only confuse.
    roots = {p.path for p in problems}
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        found = [p for p in _problems_from_validation(err) if re.split(r"[.\[]", p.path)[0] not in roots]
        raise ConfigError(stack_file, problems + found) from None
    problems += rules.check(cfg, stack)
    for key in required_secret_keys(cfg) if require_secrets else []:
        if key not in present_secrets:
            problems.append(Problem(key, None, f"is required ({SECRET_KEYS[key]}); set it with "
                                    f"pulumi config set --secret {NAMESPACE}:{key} <value>"))
    if problems:
        raise ConfigError(stack_file, problems)
    return cfg


def _kind(annotation: Any) -> str:
    """How the program must read a top-level value given as text: 'json' for objects and lists,
    'bool', 'int', 'float' strictly, 'text' for strings, enums and literals."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(args[0])
    if origin in (typing.Union, types.UnionType):
        return _kind(args[0]) if len(args) == 1 else "json"
    if origin in (list, dict) or isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "json"
    if annotation is bool or annotation is int or annotation is float:
        return annotation.__name__
    if origin is typing.Literal or isinstance(annotation, type) and issubclass(annotation, (str, Enum)):
        return "text"
    return "json"


_FIELD_KINDS = {(f.alias or name): _kind(f.annotation) for name, f in StackConfig.model_fields.items()}
_JSON_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def decode(key: str, text: Any) -> Any:
    """One top-level value as the program receives it (sdk/go/common/resource/config/plaintext.go
    marshalText, pulumi v3.259.0): a string as it is, anything else as JSON text. Decoded by the
    field's type; text that does not parse strictly stays text, which validation refuses."""
    kind = _FIELD_KINDS.get(key)
    if not isinstance(text, str) or kind in (None, "text"):
        return text
    if kind == "json":
        try:
            return json.loads(text)
        except ValueError:
            return text
    if kind == "bool":
        return {"true": True, "false": False}.get(text, text)
    if kind == "int":
        return int(text) if _JSON_INT.fullmatch(text) else text
    return float(text) if _JSON_NUMBER.fullmatch(text) else text


def _not_a_secret_setting(key: str) -> Problem:
    close = difflib.get_close_matches(key, list(SECRET_KEYS), n=1, cutoff=0.7)
    hint = f"; did you mean {close[0]}?" if close else ""
    return Problem(key, HIDDEN, "holds a value stored with --secret (directly or with --path inside it), but is not "
                   f"a secret setting: the program would use it in plaintext and it would reach the state unencrypted"
                   f"; set it without --secret{hint} (secret settings: {', '.join(SECRET_KEYS)})")


def from_pulumi(require_secrets: bool = True) -> StackConfig:
    """Validate the config of the running stack (under `pulumi up` or the mock runtime).

    require_secrets=False lets the offline render list missing secrets instead of failing."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    # The language host passes config either through the runtime map or the environment
    # (sdk/python/lib/pulumi/runtime/config.py: PULUMI_CONFIG, PULUMI_CONFIG_SECRET_KEYS).
    values = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    prefix = f"{NAMESPACE}:"
    raw: dict[str, Any] = {}
    present_secrets: dict[str, bool] = {}
    refused: list[Problem] = []
    for full_key in sorted(values):
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        is_secret = runtime_config.is_config_secret(full_key) or full_key in secret_keys
        if key in SECRET_KEYS:
            present_secrets[key] = is_secret
        elif is_secret:
            # The CLI marks a key secret when any value inside it is (config/map.go SecureKeys).
            refused.append(_not_a_secret_setting(key))
        else:
            raw[key] = decode(key, runtime_config.get_config(full_key))
    return validate(raw, pulumi.get_stack(), present_secrets, require_secrets, refused)
