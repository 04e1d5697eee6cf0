"""Read a stack file the way the Pulumi CLI hands it to the program, without decrypting anything.

Values set with `pulumi config set --secret` are stored as `{secure: <ciphertext>}`; the offline
render never has the key, so they become the mask and are marked secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MASK = "[secret]"
PROJECT = "llm-serving"


@dataclass
class StackFile:
    stack: str
    path: Path
    config: dict[str, str] = field(default_factory=dict)
    secret_keys: list[str] = field(default_factory=list)


def _mask(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return MASK, True
        pairs = {k: _mask(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_mask(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def _as_config_text(value: Any) -> str:
    """Scalars reach the program as text, objects and lists as JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _qualify(key: str) -> str:
    return key if ":" in key else f"{PROJECT}:{key}"


def read(project_dir: Path, stack: str) -> StackFile:
    """Project defaults from Pulumi.yaml, overridden by Pulumi.<stack>.yaml."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path.name}: no such stack file in {project_dir}")
    result = StackFile(stack=stack, path=path)
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()) or {}
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and ("value" in spec or "default" in spec):
            result.config[_qualify(key)] = _as_config_text(spec.get("value", spec.get("default")))
    stack_doc = yaml.safe_load(path.read_text()) or {}
    for key, raw in (stack_doc.get("config") or {}).items():
        value, secret = _mask(raw)
        full = _qualify(key)
        result.config[full] = _as_config_text(value)
        if secret:
            result.secret_keys.append(full)
    return result
