"""How the Pulumi CLI turns Pulumi.yaml and Pulumi.<stack>.yaml into the PULUMI_CONFIG strings a
program receives, modelled independently of render/stackfile.py so the engine-style run
(tests/test_engine_run.py) can check the render's reading against it."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

# --- How the CLI turns Pulumi.yaml and Pulumi.<stack>.yaml into PULUMI_CONFIG (v3.259.0) ---
# sdk/go/common/workspace/loaders.go LoadProjectStack reads the file with gopkg.in/yaml.v3 (via
# sdk/go/common/encoding/marshal.go) into `any`; config/value.go + object.go keep each top-level key as
# an object; pkg/workspace/config.go mergeConfig applies Pulumi.yaml values and validates types;
# config/map.go Decrypt hands the program plaintext.marshalText() of each key: a string as is,
# anything else (numbers and booleans too) as encoding/json text with secure leaves decrypted; a key
# is secret (SecureKeys) when any leaf under it is `secure:`.


class ConfigReadError(ValueError):
    """What the CLI refuses before the program runs."""


_PLAIN = "!plain-scalar"
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
# gopkg.in/yaml.v3 resolve.go resolveMap: the only plain words that are not strings.
_WORDS: dict[str, Any] = {**{w: True for w in ("true", "True", "TRUE")}, **{w: False for w in ("false", "False", "FALSE")},
                          **{w: None for w in ("", "~", "null", "Null", "NULL")},
                          **{w: math.nan for w in (".nan", ".NaN", ".NAN")},
                          **{w: math.inf for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
                          **{w: -math.inf for w in ("-.inf", "-.Inf", "-.INF")}}


class _Loader(yaml.SafeLoader):
    """PyYAML's parser with no YAML 1.1 resolution: plain scalars are resolved by _go_resolve."""

    yaml_implicit_resolvers: dict = {}

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return super().resolve(kind, value, implicit)


def _go_parse_int(s: str) -> int | None:
    """strconv.ParseInt(s, 0, 64), then ParseUint(s, 0, 64): base prefixes 0x, 0o, 0b, and a leading 0
    for octal."""
    sign, body = (-1, s[1:]) if s[:1] == "-" else (1, s[1:]) if s[:1] == "+" else (1, s)
    base, digits = 10, body
    if body[:2].lower() in ("0x", "0o", "0b"):
        base, digits = {"x": 16, "o": 8, "b": 2}[body[1].lower()], body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits = 8, body[1:]
    try:
        value = sign * int(digits, base) if digits and digits.isalnum() else None
    except ValueError:
        return None
    if value is None or not (-(2 ** 63) <= value < 2 ** 64) or (value >= 2 ** 63 and s[:1] == "+"):
        return None
    return value


def _go_resolve(text: str) -> Any:
    """gopkg.in/yaml.v3 resolve.go resolve() for a plain scalar decoded into interface{}."""
    if text in _WORDS:
        return _WORDS[text]
    if text[:1] == "." and re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text):
        return float(text)
    if text[:1] and text[0] in "+-0123456789":
        if re.match(r"^[0-9]{4}-", text):
            date = re.fullmatch(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})", text)
            if date:
                y, m, d = (int(g) for g in date.groups())
                try:
                    datetime.date(y, m, d)
                except ValueError:
                    return text
                # config/object.go unmarshalObject: a time.Time becomes its String().
                return f"{y:04d}-{m:02d}-{d:02d} 00:00:00 +0000 UTC"
            if re.match(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[Tt ]", text):
                raise ConfigReadError(f"{text}: YAML timestamps with a time are not modelled by this reader")
        plain = text.replace("_", "")
        as_int = _go_parse_int(plain)
        if as_int is not None:
            return as_int
        if _FLOAT.match(plain):
            return float(plain)
    return text


def _go_float(value: float) -> str:
    """encoding/json floatEncoder: 'f' format for 1e-6 <= |x| < 1e21, else 'e' with e-07 -> e-7."""
    if math.isnan(value) or math.isinf(value):
        raise ConfigReadError(f"json: unsupported value: {value}")
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        return format(decimal.Decimal(repr(value)).normalize(), "f")
    text = repr(value)
    return re.sub(r"e([-+])0(\d)$", r"e\1\2", text)


def _go_key(value: Any) -> str:
    """fmt %v of a non-string map key (config/object.go unmarshalObject for map[any]any); floats
    as JSON text, which differs from %v only for exponents below -4."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    return _go_float(value) if isinstance(value, float) else str(value)


def go_json(value: Any) -> str:
    """encoding/json Marshal: compact, map keys sorted, <, > and & escaped as \\u003c..., Go float text."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    text = json.dumps(str(value), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


class _Decoder:
    """yaml.v3 decode.go: duplicate keys are refused, merge keys applied, excessive aliasing refused."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.decode_count = self.alias_count = self.alias_depth = 0

    def value(self, node: yaml.Node) -> Any:
        again = id(node) in self.seen   # PyYAML shares an anchored node wherever it is aliased
        self.seen.add(id(node))
        self.alias_depth += again
        try:
            self.decode_count += 1
            self.alias_count += self.alias_depth > 0
            if self.alias_count > 100 and self.decode_count > 1000 and \
                    self.alias_count / self.decode_count > self._allowed_ratio():
                raise ConfigReadError("yaml: document contains excessive aliasing")
            return self._decode(node)
        finally:
            self.alias_depth -= again

    def _allowed_ratio(self) -> float:
        low, high = 400_000, 4_000_000
        if self.decode_count <= low:
            return 0.99
        if self.decode_count >= high:
            return 0.10
        return 0.99 - 0.89 * (self.decode_count - low) / (high - low)

    def _decode(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _PLAIN:
                return _go_resolve(node.value)
            if node.tag == "tag:yaml.org,2002:str":
                return node.value
            raise ConfigReadError(f"line {node.start_mark.line + 1}: tag {node.tag} is not modelled by this reader")
        if isinstance(node, yaml.SequenceNode):
            return [self.value(n) for n in node.value]
        errors = [f"line {k2.start_mark.line + 1}: mapping key {json.dumps(k2.value)} already defined at line "
                  f"{k1.start_mark.line + 1}"
                  for i, (k1, _) in enumerate(node.value) for k2, _ in node.value[i + 1:]
                  if isinstance(k1, yaml.ScalarNode) and isinstance(k2, yaml.ScalarNode) and k1.value == k2.value]
        if errors:
            raise ConfigReadError("yaml: unmarshal errors:\n  " + "\n  ".join(errors))
        out: dict[str, Any] = {}
        merges: list[yaml.Node] = []
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == "<<" and k.tag == _PLAIN:
                merges.extend(v.value if isinstance(v, yaml.SequenceNode) else [v])
                continue
            key = self.value(k)
            out[key if isinstance(key, str) else _go_key(key)] = self.value(v)
        for m in merges:
            for key, value in self.value(m).items():
                out.setdefault(key, value)
        return out


def load_yaml(text: str) -> Any:
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigReadError(f"invalid YAML file: {exc}") from None
    return None if node is None else _Decoder().value(node)


def _secure_leaf(value: Any) -> bool:
    """config/object.go isSecureValue: a map of exactly one `secure` string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("secure"), str)


def _decrypt(value: Any, key: str, path: str, plaintext_of) -> tuple[Any, bool]:
    if _secure_leaf(value):
        return plaintext_of(key, path), True
    if isinstance(value, dict):
        pairs = {k: _decrypt(v, key, f"{path}.{k}" if path else k, plaintext_of) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_decrypt(v, key, f"{path}[{i}]", plaintext_of) for i, v in enumerate(value)]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def _text(value: Any) -> str:
    """config/plaintext.go marshalText."""
    return value if isinstance(value, str) else go_json(value)


def _type_ok(type_name: str, items: dict | None, content: Any) -> bool:
    """sdk/go/common/workspace/project.go ValidateConfigValue."""
    if type_name == "string":
        return isinstance(content, str)
    if type_name == "integer":
        if isinstance(content, bool):
            return False
        if isinstance(content, int) or (isinstance(content, float) and content == int(content)):
            return True
        return isinstance(content, str) and re.fullmatch(r"[-+]?[0-9]+", content) is not None
    if type_name == "boolean":
        return content in ("true", "false") or isinstance(content, bool)
    if type_name == "object":
        return isinstance(content, dict)
    return isinstance(content, list) and items is not None and \
        all(_type_ok(items["type"], items.get("items"), c) for c in content)


def read_config(project_dir: Path, stack: str, plaintext_of, stack_text: str | None = None
                ) -> tuple[str, dict[str, str], list[str]]:
    """(project name, PULUMI_CONFIG map, PULUMI_CONFIG_SECRET_KEYS) for a stack, as `pulumi preview`
    hands them to the language host. plaintext_of(key, path) decrypts a `secure:` value."""
    project = load_yaml((project_dir / "Pulumi.yaml").read_text()) or {}
    name = project["name"]
    doc = load_yaml(stack_text if stack_text is not None else (project_dir / f"Pulumi.{stack}.yaml").read_text()) or {}

    def qualify(key: str) -> str:
        return key if ":" in key else f"{name}:{key}"

    config: dict[str, str] = {}
    secret_keys: list[str] = []
    raw: dict[str, Any] = {}
    for key, value in (doc.get("config") or {}).items():
        full = qualify(key)
        raw[full] = value
        plain, secure = _decrypt(value, full, "", plaintext_of)
        config[full] = _text(plain)
        if secure:
            secret_keys.append(full)
    missing = []
    for key, spec in sorted((project.get("config") or {}).items()):
        if not isinstance(spec, dict):
            raise ConfigReadError(f"Pulumi.yaml config {key}: only the object form is modelled by this reader")
        full = qualify(key)
        if full not in config:
            if "default" in spec or "value" in spec:
                value = spec.get("default", spec.get("value"))
                # pkg/workspace/config.go createConfigValue: string/int/bool as %v, else JSON.
                config[full] = ("true" if value else "false") if isinstance(value, bool) else \
                    value if isinstance(value, str) else str(value) if isinstance(value, int) else go_json(value)
            elif full.split(":")[0] == name:
                missing.append(key)
            continue
        if spec.get("secret") and full not in secret_keys:
            raise ConfigReadError(f"Stack '{stack}' with configuration key '{key}' must be encrypted as it's secret")
        if "type" in spec:
            content = raw[full] if isinstance(raw[full], (dict, list)) else config[full]
            if not _type_ok(spec["type"], spec.get("items"), content):
                type_name = f"List<{spec['items']['type']}>" if spec["type"] == "array" else spec["type"]
                raise ConfigReadError(f"Stack '{stack}' with configuration key '{key}' must be of type '{type_name}'")
    if missing:
        listed = ", ".join(f"'{k}'" for k in missing)
        raise ConfigReadError(f"Stack '{stack}' is missing configuration value{'s' if len(missing) > 1 else ''} {listed}")
    return name, config, secret_keys


# sdk/python/cmd/pulumi-language-python-exec (v3.259.0), step for step for a run: config from the
# environment into the runtime, Settings from argv, chdir, an event loop with parallel*4 workers,
# run_in_stack(runpy.run_path), RunError -> log.error + exit 1, any other exception -> log.error
# with the traceback cut to the user's frames + exit 32. Left out: the fallbacks for SDKs older than
# the pinned one and the "no __main__.py" ImportError message.
