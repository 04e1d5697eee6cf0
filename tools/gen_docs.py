"""Generate the reference parts of docs/ from the code, so they never drift from it.

    .venv/bin/python tools/gen_docs.py           # rewrite the generated blocks (make docs)
    .venv/bin/python tools/gen_docs.py --check   # list stale files and exit 1, write nothing

- docs/config-reference.md: every stack-file key from the pydantic models of config_model/ (type,
  bounds, default, the Field description), and the secret keys of config_model.SECRET_KEYS.
- docs/policies.md: every policy of the pack (policy/pack.py policies(): name, kind, description,
  the pack's enforcement level) and its level per stack, as the CLI resolves policy/config.<stack>.json.

Each file is prose written by hand around blocks between `<!-- generated:NAME:start -->` and
`<!-- generated:NAME:end -->`; only the blocks are replaced. Everything is read at run time (the
models' fields, the pack's policy list, the config files), so a new field, policy or stack shows up on
the next run; tests/test_docs.py fails while a committed file differs from what this generates.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import types
import typing
from pathlib import Path

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from config_model import PATTERN_MEANING, SECRET_KEYS, StackConfig  # noqa: E402
from config_model.consumers import SECRET_KEY as CONSUMER_KEYS  # noqa: E402
from stacks.consumer_keys import set_command  # noqa: E402


def _cell(text: str) -> str:
    """Table-cell safe: a '|' would end the cell, a newline the row."""
    return " ".join(text.replace("|", "/").split())


# ---- config reference -------------------------------------------------------------------------------

def _section_of(annotation) -> type[BaseModel] | None:
    """The config section a field holds, through Optional[...] and list[...]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section_of(arg)
        if found:
            return found
    return None


_BOUNDS = ((annotated_types.Ge, "ge", ">="), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "<="),
           (annotated_types.Lt, "lt", "<"))


def _bounds(metadata) -> list[str]:
    """Numeric bounds and lengths from a field's or type's metadata (Field(ge=...), min_length=...)."""
    out = []
    for item in metadata:
        for kind, attr, sign in _BOUNDS:
            if isinstance(item, kind):
                out.append(f"{sign} {getattr(item, attr)}")
        if isinstance(item, annotated_types.MinLen) and item.min_length > 1:
            out.append(f"at least {item.min_length}")
        if isinstance(item, annotated_types.MaxLen):
            out.append(f"at most {item.max_length}")
        for attr, word in (("min_length", "at least"), ("max_length", "at most")):
            value = getattr(item, attr, None) if type(item).__name__ == "StringConstraints" else None
            if value and not (attr == "min_length" and value == 1):
                out.append(f"{word} {value} characters")
    return out


def _rule_names(validator) -> list[str]:
    """The rule functions a config_model.names.checked() type runs (the closure of its check)."""
    for cell in getattr(validator, "__closure__", None) or ():
        rules = cell.cell_contents
        if isinstance(rules, tuple) and all(callable(r) for r in rules):
            return [RULE_WORDS.get(r.__name__.strip("_"), r.__name__.strip("_").replace("_", " ")) for r in rules]
    return []


# What the rule functions of config_model/k8s.py and names.py allow, in words; a rule not listed here
# shows its function name.
RULE_WORDS = {
    "kubelet_expansions": "no `$(` or `$$`", "dns1035_label": "a DNS-1035 label", "label_key": "a label key",
    "dns1123_subdomain": "a DNS-1123 subdomain", "label_value": "a label value", "non_empty": "not empty",
    "not_on_every_node": "not a label every node carries", "extended_resource_name": "an extended resource name",
    "mount_path": "a normalized absolute path", "gateway_path": "an HTTPRoute path prefix",
}


def _extras(items) -> list[str]:
    """What Annotated metadata says a value must be: a pattern's meaning, checked() rules, bounds."""
    extra = []
    for item in items:
        pattern = getattr(item, "pattern", None)
        if pattern:
            extra.append(PATTERN_MEANING.get(pattern, f"matching `{pattern}`"))
        func = getattr(item, "func", None)
        if func is not None:
            extra += _rule_names(func)
        extra += _bounds([item] + list(getattr(item, "metadata", None) or []))
    return extra


def _type(annotation) -> str:
    """A reader's name for a field's type: base type, allowed values, pattern meaning, bounds."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        base, extra = _type(args[0]), _extras(args[1:])
        return f"{base} ({'; '.join(extra)})" if extra else base
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        return " or ".join(_type(a) for a in kept)
    if origin is list:
        item = _type(args[0]) if args else "values"
        return "list of sections" if item == "section" else f"list of {item}"
    if origin is dict:
        return f"map of {_type(args[0])} to {_type(args[1])}" if args else "map"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    names = {str: "text", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _plain(value):
    """A default as the stack file would spell it (JSON is valid YAML flow style)."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see below"
    elif field.default is PydanticUndefined or field.default is None:
        return "unset"
    else:
        value = field.default
    value = _plain(value)
    if isinstance(value, (dict, list)):
        return f"`{json.dumps(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _field_type(field) -> str:
    shown = _type(field.annotation)
    extra = _extras(field.metadata)
    return f"{shown} ({'; '.join(extra)})" if extra else shown


def config_rows(model: type[BaseModel], prefix: str) -> list[str]:
    """One row per field, a section's own fields before its sub-sections' (depth-first)."""
    out, nested = [], []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        out.append(f"| `{key}` | {_cell(_field_type(field))} | {_default(field)} | {_cell(field.description or '')} |")
        sub = _section_of(field.annotation)
        if sub is not None:
            # list[...] or list[...] | None (models[].tolerations)
            is_list = any(typing.get_origin(t) is list for t in (field.annotation, *typing.get_args(field.annotation)))
            nested.append((sub, f"{key}[]." if is_list else f"{key}."))
    for sub, sub_prefix in nested:
        out += config_rows(sub, sub_prefix)
    return out


def config_reference() -> str:
    lines = ["| Key (under `llm-serving:`) | Type | Default | Meaning |", "|---|---|---|---|"]
    lines += config_rows(StackConfig, "")
    return "\n".join(lines)


def secret_keys() -> str:
    lines = ["| Key | Set with | Meaning |", "|---|---|---|"]
    lines += [f"| `{k}` | `{set_command('<name>') if k == CONSUMER_KEYS else f'pulumi config set --secret llm-serving:{k} <value>'}`"
              f" | {_cell(v)} |" for k, v in SECRET_KEYS.items()]
    return "\n".join(lines)


# ---- policies ---------------------------------------------------------------------------------------

LEVELS = ("advisory", "mandatory", "remediate", "disabled")


def stacks() -> list[str]:
    """The stacks with a policy config, policy/config.<stack>.json. Not every stack file: one without a
    config is checked at its environment's levels (tools/stacks.py policy_config_name: that column),
    and a new stack file alone changes no doc."""
    names = {p.name.split(".")[1] for p in (PROJECT_DIR / "policy").glob("config.*.json")}
    order = {"dev": 0, "staging": 1, "prod": 2}
    return sorted(names, key=lambda s: (order.get(s, 3), s))


def _level_of(value) -> str | None:
    """A config entry's enforcement level: a string, or an object's `enforcementLevel`."""
    level = value.get("enforcementLevel") if isinstance(value, dict) else value
    if level is not None and level not in LEVELS:
        raise ValueError(f"{level!r} is not an enforcement level")
    return level


def resolve_levels(defaults: dict[str, str], config: dict) -> dict[str, str]:
    """The level of each policy once the CLI applies a policy pack config file: the pack's level, then
    `all`, then each policy's own entry (pulumi/pulumi v3.259.0 pkg/resource/analyzer/config.go
    parsePolicyPackConfig and applyConfig; `environments` is not a policy)."""
    result = dict(defaults)
    entries = {k: _level_of(v) for k, v in config.items() if k != "environments"}
    if entries.get("all"):
        result = {name: entries["all"] for name in result}
    for name, level in entries.items():
        if name != "all" and level and name in result:
            result[name] = level
    return result


def _policies() -> list[tuple[str, str, str, str]]:
    """(name, kind, description, pack level) of each policy, in the pack's order."""
    from policy import pack

    out = []
    for p in pack.policies():
        kind = "stack" if type(p).__name__ == "StackValidationPolicy" else "resource"
        out.append((p.name, kind, p.description, p.enforcement_level.value))
    return out


def policy_table() -> str:
    policies = _policies()
    defaults = {name: level for name, _, _, level in policies}
    per_stack = {}
    for stack in stacks():
        config = json.loads((PROJECT_DIR / "policy" / f"config.{stack}.json").read_text(encoding="utf-8"))
        per_stack[stack] = resolve_levels(defaults, config)
    header = ["Policy", "Checks", "Pack level"] + [f"`{s}`" for s in per_stack] + ["What it requires"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    checks = {"resource": "each resource, as it is registered", "stack": "the whole stack (in up: after every change)"}
    for name, kind, description, level in policies:
        cells = [f"`{name}`", checks[kind], level] + [per_stack[s][name] for s in per_stack] + [_cell(description)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{len(policies)} policies: {sum(1 for p in policies if p[1] == 'resource')} resource policies, "
              f"{sum(1 for p in policies if p[1] == 'stack')} stack policies."]
    return "\n".join(lines)


# ---- the files --------------------------------------------------------------------------------------

GENERATED = {
    "docs/config-reference.md": {"config-reference": config_reference, "secret-keys": secret_keys},
    "docs/policies.md": {"policy-table": policy_table},
}


def regenerate(relative: str, text: str) -> str:
    """`text` with each generated block of the file `relative` replaced by what the code says now."""
    for block, make in GENERATED[relative].items():
        pattern = re.compile(rf"(<!-- generated:{block}:start -->\n)(?:.*?\n)?(<!-- generated:{block}:end -->)", re.S)
        if len(pattern.findall(text)) != 1:
            raise ValueError(f"{relative}: needs exactly one <!-- generated:{block}:start/end --> pair")
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
    return text


def stale() -> list[str]:
    return [rel for rel in GENERATED
            if regenerate(rel, (PROJECT_DIR / rel).read_text(encoding="utf-8"))
            != (PROJECT_DIR / rel).read_text(encoding="utf-8")]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        old = stale()
        for rel in old:
            print(f"{rel} is stale: run make docs", file=sys.stderr)
        return 1 if old else 0
    for rel in GENERATED:
        path = PROJECT_DIR / rel
        text = path.read_text(encoding="utf-8")
        new = regenerate(rel, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
