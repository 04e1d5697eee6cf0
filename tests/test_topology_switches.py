"""A topology name is switched on in at most three production files (issue 19): everything else asks
components/topologies (`topology_of(model)`), so adding a topology is one module there plus its name in
config_model/serving.py's Literal, not an edit in every file that compares names.

A switch is a topology name compared with something (`==`, `!=`, `in (...)`), a key of a dict literal,
a dict lookup by it (`X["pd"]`) or a `match` case. Defining a name (`name = "pd"`, the Literal, a call
argument) is no switch."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from components.topologies import TOPOLOGIES
from config_model import ServedModel

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPOLOGY_NAMES = frozenset(typing.get_args(ServedModel.model_fields["topology"].annotation))
PRODUCTION = ("components", "policy", "config_model", "stacks", "render")
MOST_FILES = 3


def _names(node: ast.AST | None) -> set[str]:
    """Topology names a node spells: a string constant, or the constants of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & TOPOLOGY_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def switches(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, name) of every switch on a topology name in the source."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            spelled = set().union(*(_names(n) for n in (node.left, *node.comparators)))
        elif isinstance(node, ast.Dict):
            spelled = set().union(*(_names(k) for k in node.keys)) if node.keys else set()
        elif isinstance(node, ast.Subscript):
            spelled = _names(node.slice) if isinstance(node.slice, ast.Constant) else set()
        elif isinstance(node, ast.MatchValue):
            spelled = _names(node.value)
        else:
            continue
        found += [(node.lineno, name) for name in sorted(spelled)]
    return found


def switching_files() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for package in PRODUCTION:
        for path in sorted((PROJECT_DIR / package).rglob("*.py")):
            rel = path.relative_to(PROJECT_DIR).as_posix()
            found = switches(path.read_text(), rel)
            if found:
                out[rel] = found
    return out


def test_a_topology_name_is_switched_on_in_at_most_three_production_files():
    """Today: config_model/derived.py (a leaf, it cannot ask components/topologies; stacks/rules could pass
    it the topology's derived names) and components/scripts/route_evidence.py (shipped into the smoke Job's
    container without the package: its routes are the --route argument components/topologies gives)."""
    found = switching_files()
    assert len(found) <= MOST_FILES, found


def test_the_count_sees_every_form_of_a_switch_and_no_definition():
    source = '''
from typing import Literal
kind: Literal["combined", "pd"] = "pd"
name = "hybrid"
f("pd-same-pod")
if m.topology == "pd": pass
if m.topology in ("combined", "other"): pass
if "hybrid" != t: pass
notes = {"pd-same-pod": 1, "x": 2}
note = NOTES["combined"]
match m.topology:
    case "hybrid":
        pass
'''
    assert sorted(switches(source)) == [(6, "pd"), (7, "combined"), (8, "hybrid"), (9, "pd-same-pod"),
                                        (10, "combined"), (12, "hybrid")]


def test_every_topology_of_the_config_has_its_module():
    assert set(TOPOLOGIES) == TOPOLOGY_NAMES
    for name, topology in TOPOLOGIES.items():
        assert topology.name == name
        assert topology.model_workload or topology.fleets, name
