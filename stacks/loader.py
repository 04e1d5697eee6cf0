"""Read the `llm-serving:` keys of a stack, validate them and report every problem at once.

A problem message names the stack file, the dotted field path, the bad value and what is allowed,
for example:

    Pulumi.dev.yaml: llm-serving:gpuBudget = 4: the workloads need 8 GPUs at peak, ...
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from pydantic import ValidationError

from stacks import rules
from stacks.config import (
    PATTERN_MEANING,
    SECRET_KEYS,
    StackConfig,
    required_secret_keys,
)
from stacks.rules import Problem

NAMESPACE = "llm-serving"


class ConfigError(Exception):
    """A stack file that cannot be deployed. str() is one line per problem, no traceback needed."""

    def __init__(self, stack_file: str, problems: list[Problem]):
        self.stack_file = stack_file
        self.problems = problems
        super().__init__("\n".join(p.render(stack_file) for p in problems))


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
        if e["type"] == "extra_forbidden":
            allowed = "is not a known setting (check the spelling against the README config reference)"
        elif e["type"] == "missing":
            allowed = "is required"
        elif e["type"] == "string_pattern_mismatch":
            pattern = e["ctx"]["pattern"]
            allowed = f"must be {PATTERN_MEANING[pattern]}" if pattern in PATTERN_MEANING else f"must match {pattern}"
        value = None if e["type"] == "missing" else e.get("input")
        if isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True)
        problems.append(Problem(_path(e["loc"]), value, allowed))
    return problems


def validate(raw: Mapping[str, Any], stack: str, present_secrets: Mapping[str, bool],
             require_secrets: bool = True) -> StackConfig:
    """Validate raw config values (camelCase keys without the namespace).

    `present_secrets` maps each secret key found in the stack to whether it is stored as a secret.
    Raises ConfigError with every problem found.
    """
    stack_file = stack_file_name(stack)
    problems: list[Problem] = []
    for key, is_secret in sorted(present_secrets.items()):
        if not is_secret:
            problems.append(Problem(key, "(plaintext)", f"must be stored encrypted: pulumi config set --secret {NAMESPACE}:{key} <value>"))
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        raise ConfigError(stack_file, problems + _problems_from_validation(err)) from None
    problems += rules.check(cfg)
    for key in required_secret_keys(cfg) if require_secrets else []:
        if key not in present_secrets:
            problems.append(Problem(key, None, f"is required ({SECRET_KEYS[key]}); set it with "
                                    f"pulumi config set --secret {NAMESPACE}:{key} <value>"))
    if problems:
        raise ConfigError(stack_file, problems)
    return cfg


def _decode(value: Any) -> Any:
    """Pulumi hands structured config to the program as JSON text and scalars as plain text."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def from_pulumi(require_secrets: bool = True) -> StackConfig:
    """Validate the config of the running stack (under `pulumi up` or the mock runtime).

    require_secrets=False lets the offline render list missing secrets instead of failing."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    # The language host passes config either through the runtime map or the environment.
    values = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{NAMESPACE}:"
    raw: dict[str, Any] = {}
    present_secrets: dict[str, bool] = {}
    for full_key in values:
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix):]
        if key in SECRET_KEYS:
            present_secrets[key] = runtime_config.is_config_secret(full_key) or (
                full_key in runtime_config.get_config_secret_keys_env())
        else:
            raw[key] = _decode(runtime_config.get_config(full_key))
    return validate(raw, pulumi.get_stack(), present_secrets, require_secrets)
