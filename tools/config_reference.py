"""Print the stack config reference (markdown) from the pydantic model, for the README.

    .venv/bin/python tools/config_reference.py           # print it
    .venv/bin/python tools/config_reference.py --write   # replace the block in README.md

A test keeps the README block equal to this output, so the reference never drifts from the code.
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from config_model import SECRET_KEYS, StackConfig  # noqa: E402


def _model_of(annotation) -> type[BaseModel] | None:
    """The config section a field holds, through Optional[...] and list[...]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found:
            return found
    return None


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "see below"
        if isinstance(value, list) and value and isinstance(value[0], BaseModel):
            return "`" + str([v.model_dump(by_alias=True, exclude_none=True) for v in value]) + "`"
        return f"`{value}`"
    if field.default is PydanticUndefined or field.default is None:
        return "unset"
    value = field.default.value if hasattr(field.default, "value") else field.default
    if isinstance(value, bool):
        value = str(value).lower()
    return f"`{value}`"


def rows(model: type[BaseModel], prefix: str) -> list[str]:
    out, nested = [], []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        out.append(f"| `{key}` | {_default(field)} | {(field.description or '').replace('|', '/')} |")
        sub = _model_of(field.annotation)
        if sub is not None:
            is_list = typing.get_origin(field.annotation) is list
            nested.append((sub, f"{key}[]." if is_list else f"{key}."))
    for sub, sub_prefix in nested:
        out += rows(sub, sub_prefix)
    return out


def reference() -> str:
    lines = ["| Key (under `llm-serving:`) | Default | Meaning |", "|---|---|---|"]
    lines += rows(StackConfig, "")
    lines += ["", "Secrets (always `pulumi config set --secret llm-serving:<key> <value>`):", "",
              "| Key | Meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in SECRET_KEYS.items()]
    return "\n".join(lines)


def write_readme(readme: Path) -> None:
    import re
    text = readme.read_text(encoding="utf-8")
    new = re.sub(r"(<!-- config-reference:start -->\n).*?(\n<!-- config-reference:end -->)",
                 lambda m: m.group(1) + reference() + m.group(2), text, flags=re.S)
    readme.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_readme(Path(__file__).resolve().parent.parent / "README.md")
    else:
        print(reference())
