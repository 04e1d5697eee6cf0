"""The stacks of a project: every `Pulumi.<name>.yaml` beside `Pulumi.yaml`, and the policy pack config
each one is previewed with. The Makefile, the tests, `make check` and the PR workflow ask here, so a
new stack file is covered everywhere without a list to keep in step.

    python tools/stacks.py list [--json] [--project-dir DIR]
    python tools/stacks.py policy-config STACK [--project-dir DIR]
    python tools/stacks.py [--project-dir DIR] render-all [--strict]

`list` needs only the standard library (the workflow's first job runs it before any virtualenv
exists); `policy-config` reads the stack file (render/stackfile.py) and needs the program's
virtualenv only when the stack has no policy config of its own.

The shipped stacks (dev, staging, prod) are the project's: `make test` fails when one is refused.
Any other stack file is a user's: `make render-all` (`render-all`) renders every stack file, goes on
past a refused one and names it at the end, and `make test` (tests/conftest.py, `covered`) checks each
other stack the render accepts and names, without failing, the ones it refuses; `make check
STACK=<name>` checks one and shows why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

PROJECT_DIR = Path(__file__).resolve().parent.parent
# The shipped stacks first, in the order the README presents them; any other stack after, by name.
SHIPPED = ("dev", "staging", "prod")


def names(project_dir: Path = PROJECT_DIR) -> list[str]:
    """Stack names of the Pulumi.<name>.yaml files in project_dir (the CLI's stack config file,
    pulumi/pulumi v3.259.0 sdk/go/common/workspace/paths.go ProjectStackPath: Pulumi.<stack>.yaml beside
    Pulumi.yaml; this project sets no stackConfigDir)."""
    found = {p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml") if p.is_file()}
    order = {name: i for i, name in enumerate(SHIPPED)}
    return sorted(found, key=lambda s: (order.get(s, len(SHIPPED)), s))


def refusal(stack: str, render: Callable[[], object]) -> str | None:
    """The report a render of `stack` is refused with (its stack file, the config rules: what `python -m
    render` prints before exiting 2), or None when `render()` returns."""
    sys.path.insert(0, str(PROJECT_DIR))
    from components.ops_commands import OpsConfigError
    from stacks.loader import ConfigError, FileProblem, stack_file_name

    try:
        render()
    except FileNotFoundError as err:
        return f"error: {err}"
    except ConfigError as err:
        return err.report()
    except OpsConfigError as err:   # as render/__main__.py reports it
        return ConfigError(stack_file_name(stack), [FileProblem(path="", value=None, allowed=str(err))]).report()
    return None


def covered(project_dir: Path = PROJECT_DIR, render: Callable[[str], object] | None = None
            ) -> tuple[list[str], dict[str, str]]:
    """The stacks `make test` checks, in names() order: every shipped stack (refused, it fails the tests
    that render it), and each other stack file the render accepts; and the other ones it refuses, name
    -> refusal report. `render(stack)` renders one (default: runtime.render of its stack file)."""
    if render is None:
        sys.path.insert(0, str(PROJECT_DIR))
        from render import runtime, stackfile

        def render(stack: str) -> object:
            return runtime.render(stackfile.read(project_dir, stack))

    checked, refused = [], {}
    for stack in names(project_dir):
        why = None if stack in SHIPPED else refusal(stack, lambda stack=stack: render(stack))
        if why is None:
            checked.append(stack)
        else:
            refused[stack] = why
    return checked, refused


def render_all(project_dir: Path = PROJECT_DIR, strict: bool = False) -> int:
    """`make render-all`: every stack file into build/<stack>/ as `python -m render` renders it, going
    on past a refused one; at the end one line names the refused stacks. 0 when every stack rendered;
    2 when any was refused (the shipped stacks rendered all the same), so a script chaining on it stops."""
    sys.path.insert(0, str(PROJECT_DIR))
    from render.__main__ import main as render_main

    refused = []
    for stack in names(project_dir):
        argv = ["--stack", stack, "--project-dir", str(project_dir), *(["--strict"] if strict else [])]
        if render_main(argv) != 0:
            refused.append(stack)
    if not refused:
        return 0
    total = len(names(project_dir))
    which = ", ".join(f"{s} (Pulumi.{s}.yaml{', a shipped stack' if s in SHIPPED else ''})" for s in refused)
    print(f"render-all: {total - len(refused)} of {total} stacks rendered; refused: {which}; the lines above say "
          "why (`make check STACK=<name>` checks one)", file=sys.stderr)
    return 2


def policy_config_name(project_dir: Path, stack: str) -> str:
    """Which policy/config.<name>.json previews `stack`: its own when the repo has one, else the one of
    its `environment` (a new stack is held to the levels of the environment it says it is: a stack
    with environment prod gets prod's mandatory rules). Raises LookupError saying what to add."""
    policy_dir = project_dir / "policy"
    if (policy_dir / f"config.{stack}.json").is_file():
        return stack
    sys.path.insert(0, str(PROJECT_DIR))
    from render import stackfile

    environment = stackfile.read(project_dir, stack).config.get(f"{stackfile.PROJECT}:environment")
    if environment and (policy_dir / f"config.{environment}.json").is_file():
        return environment
    raise LookupError(f"Pulumi.{stack}.yaml: no policy/config.{stack}.json, and its llm-serving:environment "
                      f"({environment or 'unset'}) has no policy/config.<environment>.json either; add "
                      f"policy/config.{stack}.json (`{{}}` keeps the pack's own levels)")


def policy_config(project_dir: Path, stack: str) -> Path:
    return project_dir / "policy" / f"config.{policy_config_name(project_dir, stack)}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/stacks.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project-dir", type=Path, default=PROJECT_DIR)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the stack names, one a line")
    listing.add_argument("--json", action="store_true", help="as one JSON array (a workflow matrix)")
    config = sub.add_parser("policy-config", help="the policy pack config file the stack is previewed with")
    config.add_argument("stack")
    everything = sub.add_parser("render-all", help="render every stack file, going on past a refused one")
    everything.add_argument("--strict", action="store_true", help="as python -m render --strict")
    args = parser.parse_args(argv)
    if args.command == "render-all":
        return render_all(args.project_dir, args.strict)
    if args.command == "list":
        found = names(args.project_dir)
        print(json.dumps(found, separators=(",", ":")) if args.json else "\n".join(found))
        return 0
    sys.path.insert(0, str(PROJECT_DIR))
    from stacks.loader import ConfigError

    try:
        path = policy_config(args.project_dir, args.stack)
    except (LookupError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ConfigError as err:  # a stack file the CLI would refuse: its own report, one line a problem
        print(err.report(), file=sys.stderr)
        return 2
    print(path.relative_to(args.project_dir) if path.is_relative_to(args.project_dir) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
