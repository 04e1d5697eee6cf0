"""The packages depend one way: config_model is a leaf, components build from it, stacks/ loads and
composes both, and the policy pack stands alone (it runs in the Pulumi policy host, which has neither).
Components used to import their argument types from stacks/, which imports the components: any
change to the config then risked an import cycle, and a component could reach into loading or rules."""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
OURS = ("config_model", "components", "stacks", "render", "policy", "tools")
# package -> packages of ours it must never import
FORBIDDEN = {
    "config_model": {"components", "stacks", "render", "policy", "tools"},
    "components": {"stacks", "render", "tools"},
    "policy": {"config_model", "components", "stacks", "render", "tools"},
}


def imported_packages(path: Path) -> set[tuple[int, str]]:
    """(line, top-level package of ours) for every import in the file, nested ones included: an
    import inside a function runs as surely as one at the top."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in OURS}
    return found


def violations() -> list[str]:
    out = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((PROJECT_DIR / package).rglob("*.py")):
            for line, imported in sorted(imported_packages(path)):
                if imported in forbidden:
                    out.append(f"{path.relative_to(PROJECT_DIR)}:{line} imports {imported}")
    return out


def test_imports_run_one_way():
    assert violations() == []


def test_stacks_holds_only_loading_rules_and_composition():
    """The config model lives in config_model/; stacks/ reads, checks and composes it, and plans how an
    update takes over from the stack's last deployment (transitions.py); the cross-field rules are a
    package of their own (rules/), split by what they are about."""
    stacks = PROJECT_DIR / "stacks"
    assert {p.name for p in stacks.glob("*.py")} == {"__init__.py", "loader.py", "program.py", "transitions.py"}
    assert {p.name for p in (stacks / "rules").glob("*.py")} == {"__init__.py", "problem.py", "models.py",
                                                                 "capacity.py", "storage.py", "operations.py"}


def test_the_walk_sees_nested_and_dotted_imports(tmp_path):
    """The check itself: an import of stacks inside a function, or of a submodule, is found."""
    f = tmp_path / "m.py"
    f.write_text("import json\ndef f():\n    from stacks.config import X\n    import stacks.rules\n"
                 "from . import sibling\n")
    assert imported_packages(f) == {(3, "stacks"), (4, "stacks")}
