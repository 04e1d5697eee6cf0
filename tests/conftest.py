"""Shared fixtures: each stack is rendered once per session under the mock runtime."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from policy.rules import StackResource  # noqa: E402
from render import runtime, stackfile  # noqa: E402
from render.output import is_kubernetes_object  # noqa: E402
from tools import stacks  # noqa: E402

_cache: dict[str, runtime.Rendered] = {}


def render_stack(stack: str) -> runtime.Rendered:
    if stack not in _cache:
        _cache[stack] = runtime.render(stackfile.read(PROJECT_DIR, stack))
    return _cache[stack]


# Every stack file in the repo (Pulumi.<name>.yaml), not a list to keep in step: a new stack is
# rendered, validated, scanned and passed through the policy pack by every test that takes STACKS.
# The shipped stacks always (refused, they fail); any other only when the render accepts it: a user's
# refused stack file is named at the end of the run (REFUSED, pytest_terminal_summary), not a failure
# of every test that takes STACKS (tools/stacks.py covered).
_covered, REFUSED = stacks.covered(PROJECT_DIR, render_stack)
STACKS = tuple(_covered)
SHARED = PROJECT_DIR.parent / "shared"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Parts of ../shared a pipeline outside this workplace cannot have (the field report is not public).
OPTIONAL_SHARED = set(filter(None, os.environ.get("LLM_SERVING_OPTIONAL_SHARED", "").split(",")))


def pytest_terminal_summary(terminalreporter) -> None:
    if not REFUSED:
        return
    terminalreporter.section("stack files make test did not check", sep="-")
    for stack, report in REFUSED.items():
        terminalreporter.write_line(f"Pulumi.{stack}.yaml: refused by the render (`make check STACK={stack}`):")
        for line in report.splitlines():
            terminalreporter.write_line(f"  {line}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Make `--dist loadgroup` group again. pytest-xdist 3.8.0 tells its scheduler a test's group by writing
    `<nodeid>@<group>` to `item._nodeid` on the worker (xdist/remote.py pytest_collection_modifyitems), which
    pytest 9.2 no longer reads (Node.nodeid is str(item._id), _pytest/nodes.py): every xdist_group mark was
    ignored and each file's module and session fixtures (checkov, the policy server, the S3 server, the
    program runs) ran once on every worker (pytest-dev/pytest-xdist#1386, fix pending in #1388). xdist's
    own suffixed id is carried over; a no-op once xdist sets the id itself, and outside xdist."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId
    for item in items:
        grouped = getattr(item, "_nodeid", None)
        if grouped and grouped != item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(grouped)


def stack_resources(rendered: runtime.Rendered) -> list[StackResource]:
    return [StackResource(type=r.type, name=r.name, props=r.inputs, options=r.options,
                          provider=r.provider, custom=r.custom, parent=r.parent) for r in rendered.resources]


def k8s_objects(rendered: runtime.Rendered) -> list[dict]:
    return [r.inputs for r in rendered.resources if is_kubernetes_object(r)]


def shared_dir(*parts: str) -> Path:
    """A path under ../shared. Missing in CI is a failure, never a skip: CI must check the schemas."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if IN_CI and parts[0] not in OPTIONAL_SHARED:
            pytest.fail(f"{path} is missing; CI runs with ../shared beside the repo")
        pytest.skip(f"{path} is missing (outside CI only)")
    return path


@pytest.fixture(params=STACKS)
def stack(request) -> str:
    return request.param


@pytest.fixture
def rendered(stack):
    return render_stack(stack)
