"""The pack directory is first on sys.path when the language host starts the pack, so none of its
modules may shadow a standard-library or installed top-level module (issue 9, item 1).

The Python language host runs `python -u -m pulumi.policy <engine-address> <pack-dir>` with the pack
directory as working directory (pulumi/pulumi v3.259.0, sdk/python/cmd/pulumi-language-python/main.go
RunPlugin); `-m` puts that directory first on sys.path, and pulumi/policy/__main__.py then runs the
directory with runpy.run_path, which inserts it again. A `policy/inspect.py` therefore replaced the
standard `inspect` that grpc imports, and the pack died before a rule ran."""

from __future__ import annotations

import pkgutil
import site
import sys
from pathlib import Path

from conftest import PROJECT_DIR

PACK_DIR = PROJECT_DIR / "policy"


def installed_top_level() -> set[str]:
    paths = [p for p in site.getsitepackages() if Path(p).is_dir()]
    return {m.name for m in pkgutil.iter_modules(paths)}


def shadowing(pack_dir: Path) -> list[str]:
    """Modules of pack_dir whose top-level name is also the standard library's or an installed one's."""
    taken = set(sys.stdlib_module_names) | installed_top_level()
    names = {p.stem for p in pack_dir.glob("*.py")} | {p.name for p in pack_dir.iterdir()
                                                        if p.is_dir() and (p / "__init__.py").exists()}
    return sorted((names - {"__init__", "__main__"}) & taken)


def test_no_pack_module_shadows_a_standard_or_installed_module():
    assert shadowing(PACK_DIR) == []


def test_the_check_finds_the_module_that_broke_the_pack(tmp_path):
    for name in ("inspect.py", "rules.py", "grpc.py"):
        (tmp_path / name).write_text("")
    assert shadowing(tmp_path) == ["grpc", "inspect"]
