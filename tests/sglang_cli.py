"""The option strings `sglang serve` declares, read from an installed SGLang's source.

ServerArgs cannot be imported here (sglang.srt.server_args imports torch through
sglang.srt.utils.common), so its flag list is taken from the same source the parser is built from,
the way the pinned version builds it (tests/upstream_sglang.py names the files):
- every annotated field `name: A[T, "help" | Arg(...)]` becomes `--name-with-dashes` (or Arg's
  cli_name) plus Arg's aliases, unless Arg(no_cli=True); a bool field without an action is a
  store_true flag (sglang/srt/arg_groups/arg_utils.py, add_cli_args_from_dataclass);
- every parser.add_argument("--…") of ServerArgs.add_cli_args, with its action when it is a
  store_true / store_false / a Deprecated*Store{True,Const}Action.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

_FLAG_ACTIONS = ("store_true", "store_false", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                 "StoreTrueAction", "BooleanOptionalAction")


def _call_name(node: ast.AST) -> str:
    return ast.unparse(node.func) if isinstance(node, ast.Call) else ""


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_flag(action: ast.AST | None) -> bool:
    return action is not None and any(a in ast.unparse(action) for a in _FLAG_ACTIONS)


def _field_options(tree: ast.AST) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Subscript) and ast.unparse(node.annotation.value) == "A"):
            continue
        parts = node.annotation.slice.elts if isinstance(node.annotation.slice, ast.Tuple) else [node.annotation.slice]
        if len(parts) < 2:
            continue
        meta = parts[1]
        arg = meta if _call_name(meta) == "Arg" else None
        if arg is None and not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            continue
        if arg is not None and isinstance(_keyword(arg, "no_cli"), ast.Constant) and _keyword(arg, "no_cli").value:
            continue
        cli_name = _keyword(arg, "cli_name") if arg is not None else None
        names = [cli_name.value if isinstance(cli_name, ast.Constant) else "--" + node.target.id.replace("_", "-")]
        aliases = _keyword(arg, "aliases") if arg is not None else None
        if isinstance(aliases, ast.List):
            names += [a.value for a in aliases.elts if isinstance(a, ast.Constant)]
        action = _keyword(arg, "action") if arg is not None else None
        takes_value = not (_is_flag(action) or (action is None and ast.unparse(parts[0]) == "bool"))
        for n in names:
            out[n] = takes_value
    return out


def _add_argument_options(tree: ast.AST) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        takes_value = not _is_flag(_keyword(node, "action"))
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                out[a.value] = takes_value
    return out


def serve_options(package_root: Path, field_sources: tuple[str, ...], add_argument_sources: tuple[str, ...]) -> dict[str, bool]:
    """{option string: takes a value} for one installed SGLang."""
    out: dict[str, bool] = {}
    for pattern in field_sources:
        for path in sorted(package_root.glob(pattern)):
            out.update(_field_options(ast.parse(path.read_text())))
    for pattern in add_argument_sources:
        for path in sorted(package_root.glob(pattern)):
            out.update(_add_argument_options(ast.parse(path.read_text())))
    return out


class Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # argparse would print and exit 2, as `sglang serve` does
        raise Refused(message)


def parser(options: dict[str, bool]) -> argparse.ArgumentParser:
    """argparse.ArgumentParser(prog="sglang serve") as prepare_server_args makes it: allow_abbrev on."""
    p = _Parser(prog="sglang serve", add_help=False)
    for i, (option, takes_value) in enumerate(sorted(options.items())):
        if takes_value:
            p.add_argument(option, dest=f"o{i}")
        else:
            p.add_argument(option, dest=f"o{i}", action="store_true")
    return p
