"""The packages depend one way: the policy pack stands alone (it runs in the Pulumi policy host, which
has none of the rest), config_model builds only on it, components build from config_model, stacks/
loads and composes both. Components used to import their argument types from stacks/, which imports
the components: any change to the config then risked an import cycle, and a component could reach
into loading or rules.

config_model may import policy (issue 19): each rule is written once, in a stdlib-only module of the
pack's directory (the name and label rules in policy/k8s_names.py), and the config refuses a value by
the same rule the pack and the render's API-server check apply. policy stays the leaf: it imports
nothing of ours, so the pack still runs alone."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
OURS = ("config_model", "components", "stacks", "render", "policy", "tools")
# package -> packages of ours it must never import
FORBIDDEN = {
    "config_model": {"components", "stacks", "render", "tools"},
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
    """The config model lives in config_model/; stacks/ reads, checks and composes it, exports the
    outputs contract (exports.py), checks the secret values it may look at (consumer_keys.py), and plans
    how an update takes over from the stack's last deployment (transitions.py); the cross-field rules are a package of their own (rules/), split by what they
    are about."""
    stacks = PROJECT_DIR / "stacks"
    assert {p.name for p in stacks.glob("*.py")} == {"__init__.py", "loader.py", "program.py", "exports.py",
                                                     "transitions.py", "consumer_keys.py"}
    assert {p.name for p in (stacks / "rules").glob("*.py")} == {"__init__.py", "problem.py", "models.py",
                                                                 "capacity.py", "storage.py", "operations.py",
                                                                 "network.py", "passthrough.py", "consumers.py",
                                                                 "hardware.py", "parsers.py", "multinode.py",
                                                                 "routing.py"}


def test_the_walk_sees_nested_and_dotted_imports(tmp_path):
    """The check itself: an import of stacks inside a function, or of a submodule, is found."""
    f = tmp_path / "m.py"
    f.write_text("import json\ndef f():\n    from stacks.config import X\n    import stacks.rules\n"
                 "from . import sibling\n")
    assert imported_packages(f) == {(3, "stacks"), (4, "stacks")}


def test_what_config_model_imports_of_policy_is_standard_library_only():
    """The policy modules config_model imports run in every process that loads a stack: they may
    import only the standard library (and each other), never pulumi_policy or a package of ours."""
    allowed = set(sys.stdlib_module_names) | {"policy"}
    used = {f"{node.module}" for path in (PROJECT_DIR / "config_model").rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
            and node.level == 0 and (node.module or "").split(".")[0] == "policy"}
    used |= {f"policy.{a.name}" for path in (PROJECT_DIR / "config_model").rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
             and node.module == "policy" for a in node.names}
    modules = {m for m in used if (PROJECT_DIR / (m.replace(".", "/") + ".py")).is_file()}
    assert "policy.k8s_names" in modules
    for module in modules:
        path = PROJECT_DIR / (module.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            assert {n.split(".")[0] for n in names} <= allowed, (module, names)
