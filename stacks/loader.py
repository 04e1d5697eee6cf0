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
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ValidationError

from config_model import (
    CREDENTIAL_ERROR,
    PATTERN_MEANING,
    SECRET_KEYS,
    StackConfig,
    required_secret_keys,
    secret_command,
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


def _members(annotation: Any) -> list[Any]:
    """The types an annotation admits, with Annotated, Optional and unions taken apart."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [annotation]


def known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys a stack file may write at `loc` (a path of keys and list indexes from the top)."""
    at: list[Any] = [StackConfig]
    for part in loc:
        found = []
        for a in (m for t in at for m in _members(t)):
            origin, args = typing.get_origin(a), typing.get_args(a)
            if isinstance(part, int) and origin is list:
                found.append(args[0])
            elif isinstance(part, str) and origin is dict:
                found.append(args[1])
            elif isinstance(part, str) and isinstance(a, type) and issubclass(a, BaseModel):
                found += [f.annotation for name, f in a.model_fields.items() if (f.alias or name) == part]
        at = found
    return sorted({f.alias or name for t in at for m in _members(t) if isinstance(m, type) and issubclass(m, BaseModel)
                   for name, f in m.model_fields.items()})


def _unknown_key(loc: tuple[Any, ...]) -> str:
    """Why an unknown key is refused, with the known key it most likely misspells (its value is never
    shown: a misspelled key may hold a secret)."""
    key = str(loc[-1])
    plain = known_keys(loc[:-1])
    secrets = list(SECRET_KEYS) if len(loc) == 1 else []
    close = difflib.get_close_matches(key, plain + secrets, n=1, cutoff=0.6)
    if close and close[0] in secrets:
        return (f"is not a known setting; did you mean the secret {close[0]}? Set it with "
                f"{secret_command(close[0], NAMESPACE)} and remove this key (pulumi config rm {NAMESPACE}:{key})")
    if close:
        return f"is not a known setting; did you mean {close[0]}?"
    return "is not a known setting (check the spelling against the README config reference)"


class TextGivenNumber(Problem):
    """A text field given a number or boolean: the Pulumi CLI reads an unquoted 0731 as the number 473
    (go-yaml v3 resolve.go: ParseInt base 0, a leading 0 is octal), 1.30 as 1.3 and true as a boolean.
    `written`, when the stack file could be read, is the value as the file spells it."""


def text_given_number(path: str, value: Any, written: str | None = None) -> Problem:
    kind = "a boolean" if isinstance(value, bool) else "a number"
    shown = json.dumps(value)
    if written is not None and written != shown:
        why = f"the Pulumi CLI reads the unquoted {written} as {kind}, {shown} (YAML as the CLI reads it)"
    else:
        why = f"the Pulumi CLI reads an unquoted {shown} as {kind} (YAML as the CLI reads it)"
    if written is not None:
        fix = f'write it quoted: "{written}"'
    elif isinstance(value, bool):
        fix = f'write it quoted: "{shown}"'
    elif isinstance(value, int):
        octal = f"0{value:o}"
        fix = (f'write it quoted as meant: "{octal}" if the file has {octal} (unquoted, a leading 0 makes it '
               f'octal), else "{value}"' if value > 7 else f'write it quoted: "{value}"')
    else:
        fix = (f'write it quoted with the digits meant: "{shown}", or "{shown}0" if the file has {shown}0 '
               "(unquoted, trailing zeros are lost)")
    return TextGivenNumber(path, value, f"must be text, and {why}; {fix}")


_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[('[^']*'|\"[^\"]*\")\]")


def written(source: str, path: str, value: Any) -> str | None:
    """The plain scalar at `path` (as _path spells it) under `config:` of a stack file's text, as the
    file writes it, if the CLI reads it as `value` (render/yaml12.py, go-yaml's resolve); else None
    (not there, quoted, behind a merge key, or the program's value came from elsewhere: `up --config`)."""
    import ast

    import yaml

    from render.yaml12 import resolve

    try:
        parts = [k or (int(i) if i else ast.literal_eval(q)) for k, i, q in _PATH_PART.findall(path)]
        node = yaml.compose(source)
    except (yaml.YAMLError, ValueError, SyntaxError):
        return None
    for depth, part in enumerate(["config", *parts]):
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            continue
        names = (f"{NAMESPACE}:{part}", str(part)) if depth == 1 else (str(part),)
        found = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value in names] \
            if isinstance(node, yaml.MappingNode) else []
        if not found:
            return None
        node = found[0]
    if not isinstance(node, yaml.ScalarNode) or node.style is not None:
        return None
    read = resolve(node.value)[1]
    return node.value if isinstance(read, bool) == isinstance(value, bool) and read == value else None


def spelled(err: ConfigError, source: str | None) -> ConfigError:
    """err with each text-given-a-number problem quoting the value as the stack file writes it."""
    if source is None or not any(isinstance(p, TextGivenNumber) for p in err.problems):
        return err
    return ConfigError(err.stack_file, [text_given_number(p.path, p.value, written(source, p.path, p.value))
                                        if isinstance(p, TextGivenNumber) else p for p in err.problems])


def _problems_from_validation(err: ValidationError) -> list[Problem]:
    problems = []
    for e in err.errors(include_url=False):
        allowed = e["msg"].removeprefix("Value error, ")
        value = None if e["type"] == "missing" else e.get("input")
        if e["type"] == "extra_forbidden":
            # A misspelled key may hold a secret (`pulumi config set --secret llm-serving:apikey`).
            allowed, value = _unknown_key(tuple(e["loc"])), HIDDEN
        elif e["type"] == "string_type" and isinstance(value, (bool, int, float)):
            problems.append(text_given_number(_path(e["loc"]), value))
            continue
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
             require_secrets: bool = True, refused: list[Problem] | None = None,
             secret_checks: Callable[[StackConfig], list[Problem]] | None = None) -> StackConfig:
    """Validate raw config values (camelCase keys without the namespace). `present_secrets`: each secret key found
    -> stored as a secret?; `refused`: found while decoding; `secret_checks`: of secret values. Raises ConfigError."""
    stack_file = stack_file_name(stack)
    problems: list[Problem] = list(refused or [])
    for key, is_secret in sorted(present_secrets.items()):
        if not is_secret:
            problems.append(Problem(key, "(plaintext)", f"must be stored encrypted: {secret_command(key, NAMESPACE)}"))
    # A refused key is left out of `raw`; "is required" on top of the refusal would only confuse.
    roots = {p.path for p in problems}
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        found = [p for p in _problems_from_validation(err) if re.split(r"[.\[]", p.path)[0] not in roots]
        raise ConfigError(stack_file, problems + found) from None
    problems += rules.check(cfg, stack) + (secret_checks(cfg) if secret_checks else [])
    for key in required_secret_keys(cfg) if require_secrets else []:
        if key not in present_secrets:
            problems.append(Problem(key, None, f"is required ({SECRET_KEYS[key]}); set it with "
                                    f"{secret_command(key, NAMESPACE)}"))
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
    """A key stored with --secret that is no secret setting. A plain setting may be set without
    --secret; an unknown key is never advised into plaintext: it may be a misspelled secret."""
    stored = "holds a value stored with --secret (directly or with --path inside it)"
    secrets = f"secret settings: {', '.join(SECRET_KEYS)}"
    if key in _FIELD_KINDS:
        return Problem(key, HIDDEN, f"{stored}, but is a plain setting: the program would use it in plaintext and it "
                       f"would reach the state unencrypted; it holds no credential, so set it without --secret "
                       f"(credentials go in the {secrets})")
    close = difflib.get_close_matches(key, list(SECRET_KEYS) + list(_FIELD_KINDS), n=1, cutoff=0.6)
    remove = f"pulumi config rm {NAMESPACE}:{key}"
    if close and close[0] in SECRET_KEYS:
        return Problem(key, HIDDEN, f"{stored}, but is not a known setting; did you mean the secret {close[0]}? Set it "
                       f"with {secret_command(close[0], NAMESPACE)} and remove this key ({remove})")
    hint = f"; did you mean {close[0]}? Remove it" if close else ": remove it"
    return Problem(key, HIDDEN, f"{stored}, but is not a known setting{hint} ({remove}); {secrets}")


def from_pulumi(require_secrets: bool = True, stack_path: Path | None = None) -> StackConfig:
    """Validate the config of the running stack (under `pulumi up` or the mock runtime).

    require_secrets=False lets the offline render list missing secrets instead of failing. The stack file
    (`stack_path`, else Pulumi.<stack>.yaml in the project directory `pulumi up` runs in) only shows spellings."""
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
    path = stack_path or Path(stack_file_name(pulumi.get_stack()))
    refused += _lost_spellings(raw, path)
    from stacks import consumer_keys
    try:
        return validate(raw, pulumi.get_stack(), present_secrets, require_secrets, refused,
                        lambda cfg: consumer_keys.problems(cfg, values, lambda: _read(path), require_secrets))
    except ConfigError as err:
        raise spelled(err, _read(path)) from None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # no file at hand: the messages guess the spelling
        return None


def _lost_spellings(raw: Mapping[str, Any], path: Path) -> list[Problem]:
    """`namespace: 0731` reaches the program as the valid name "473": a top-level text setting whose
    numeric text the stack file writes otherwise lost its spelling on the way (read only then)."""
    numeric = {k: v for k, v in raw.items() if _FIELD_KINDS.get(k) == "text" and isinstance(v, str)
               and _JSON_NUMBER.fullmatch(v)}
    source = _read(path) if numeric else None
    if source is None:
        return []
    return [text_given_number(k, json.loads(v), spelling) for k, v in sorted(numeric.items())
            if (spelling := written(source, k, json.loads(v))) not in (None, v)]
