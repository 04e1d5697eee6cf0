"""Read a stack file the way the Pulumi CLI hands it to the program, without decrypting anything.

The CLI (pulumi/pulumi sdk/go/common/workspace/loaders.go LoadProjectStackBytes, tag v3.259.0; our
SDK pin is 3.272.0) reads stack files with go-yaml v3 (YAML 1.2 scalars, duplicate keys refused), mirrored by
render/yaml12.py. Each top-level value then reaches the program as text
(sdk/go/common/resource/config/plaintext.go marshalText): strings as they are, everything else as
JSON text. Values set with `pulumi config set --secret` are `{secure: <ciphertext>}`; the offline
render never has the key, so they become a masked stand-in derived from the ciphertext (placeholder)
and their key is listed as secret, as `Map.SecureKeys()` lists every key with a secure value
anywhere inside it (config/map.go).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from render import yaml12
from stacks.loader import ConfigError, FileProblem

MASK = "[secret]"
PROJECT = "llm-serving"


def placeholder(ciphertext: str) -> str:
    """What the offline render hands the program for a secure value: the mask and a digest of the
    ciphertext. `pulumi config set --secret` writes a new ciphertext for a new value, so a rotation
    gives the program a new stand-in and every tag derived from it changes offline as it will under
    `pulumi up` (components/secrets.py content_tag), while neither the ciphertext nor this stand-in
    reaches the rendered files (secret values are masked there; a tag is a digest of the stand-in).
    Offline errs on one side: setting the same value again is a new ciphertext, so it shows as a
    rotation here although the real tags, from the value, stay."""
    digest = hashlib.sha256(f"llm-serving offline stand-in\0{ciphertext}".encode()).hexdigest()[:16]
    return f"[secret {digest}]"


@dataclass
class StackFile:
    stack: str
    path: Path
    config: dict[str, str] = field(default_factory=dict)
    secret_keys: list[str] = field(default_factory=list)


class _Refused(Exception):
    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path, self.message = path, message


def _go_float(f: float) -> int | float:
    """What the program decodes from Go's json.Marshal(float64): a whole number below 1e21 is
    printed without a fraction (encoding/json floatEncoder uses 'f' there), so it arrives as an int."""
    if f.is_integer() and abs(f) < 1e21:
        return int(Decimal(repr(f)))
    return f


def _plain(value: Any, path: str) -> tuple[Any, bool]:
    """(JSON-ready value with ciphertexts masked, whether a secure value is inside); config/object.go
    unmarshalObject and isSecureValue: only a one-key map {secure: <string>} is a secret."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("secure"), str):
            return placeholder(value["secure"]), True
        pairs = {k: _plain(v, f"{path}.{k}") for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return [v for v, _ in items], any(s for _, s in items)
    if isinstance(value, float):
        if not math.isfinite(value):
            # Go's json.Marshal refuses NaN and Inf, so the CLI cannot pass the value at all.
            raise _Refused(path, "is not a finite number (.nan and .inf cannot be passed to the program by the Pulumi CLI)")
        return _go_float(value), False
    return value, False


def _as_config_text(value: Any) -> str:
    """Strings reach the program as they are, everything else as (Go-style, compact) JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _qualify(key: str) -> str:
    """loaders.go stackConfigNamespacedWithProject: a key without ':' belongs to the project."""
    return key if ":" in key else f"{PROJECT}:{key}"


def _config_section(doc: Any, name: str) -> dict:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise _Refused("", "must be a YAML mapping (project.go SimplifyMarshalledProject: expected an object)")
    section = doc.get("config")
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _Refused("config", "must be a mapping of configuration keys")
    return section


def _display(path: tuple[Any, ...]) -> str:
    """('config', 'objectStore', 'region') -> llm-serving:objectStore.region, as `pulumi config --path` spells it."""
    if path[:1] == ("config",) and len(path) > 1:
        path = (_qualify(str(path[1])),) + path[2:]
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _problem(line: int | None, path: tuple[Any, ...] | str, message: str) -> FileProblem:
    return FileProblem(path=path if isinstance(path, str) else _display(path), value=line, allowed=message)


def _load(path: Path) -> Any:
    try:
        return yaml12.load(path.read_bytes())
    except yaml12.YamlErrors as err:
        raise ConfigError(path.name, [_problem(p.line, p.path, p.message) for p in err.problems]) from None


def _project_defaults(project_dir: Path) -> dict[str, str]:
    """pkg/workspace/config.go createConfigValue: a project value or default is `%v` text for a
    string, int or bool and JSON otherwise."""
    path = project_dir / "Pulumi.yaml"
    out: dict[str, str] = {}
    try:
        section = _config_section(_load(path), path.name)
        for key, spec in section.items():
            if isinstance(spec, dict) and ("value" in spec or "default" in spec):
                value, _ = _plain(spec["default"] if "default" in spec else spec["value"], key)
                out[_qualify(key)] = _as_config_text(value)
    except _Refused as err:
        raise ConfigError(path.name, [_problem(None, err.path, err.message)]) from None
    return out


def read(project_dir: Path, stack: str) -> StackFile:
    """Project defaults from Pulumi.yaml, overridden by Pulumi.<stack>.yaml.

    Raises ConfigError (one problem per line, never a value) for what the CLI would refuse."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path.name}: no such stack file in {project_dir}")
    result = StackFile(stack=stack, path=path)
    result.config.update(_project_defaults(project_dir))
    problems: list[FileProblem] = []
    try:
        section = _config_section(_load(path), path.name)
    except _Refused as err:
        raise ConfigError(path.name, [_problem(None, err.path, err.message)]) from None
    spelled: dict[str, str] = {}
    for key, raw in section.items():
        full = _qualify(key)
        namespace_and_name = full.split(":")
        if isinstance(key, yaml12.GoKey) or not (
                len(namespace_and_name) == 2 or len(namespace_and_name) == 3 and namespace_and_name[1] == "config"):
            # config/key.go ParseKey: `<namespace>:<name>` (or the old `<namespace>:config:<name>`).
            problems.append(_problem(None, ("config", key), "is not a configuration key of the form <namespace>:<name>"))
            continue
        if len(namespace_and_name) == 3:
            full = f"{namespace_and_name[0]}:{namespace_and_name[2]}"
        if full in spelled:
            # Both spellings become one key in a Go map: which value wins is random (loaders.go).
            problems.append(_problem(None, full, f"is set twice, as {spelled[full]!r} and {key!r}; keep one"))
            continue
        spelled[full] = key
        if raw is None:
            # The CLI only warns and passes the text "null" (loaders.go checkForEmptyConfig).
            problems.append(_problem(None, full, "has no value; give one or delete the key"))
            continue
        try:
            value, secret = _plain(raw, full)
        except _Refused as err:
            problems.append(_problem(None, err.path, err.message))
            continue
        result.config[full] = _as_config_text(value)
        if secret:
            result.secret_keys.append(full)
    if problems:
        raise ConfigError(path.name, problems)
    return result
