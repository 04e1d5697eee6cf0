"""Offline render: `python -m render --stack dev` writes build/<stack>/ without a cluster or cloud.

Exit codes: 0 rendered, 2 invalid stack configuration or an object the Kubernetes API server would
refuse (nothing written).

`--previous DIR` (an earlier render's output directory) also plans the update from that render to this
one (render/changes.py) and writes it as changes.md beside plan.md; when the update cannot succeed it
exits 2 with one line per problem and, like any other refusal, writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m render", description=__doc__)
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument("--project-dir", type=Path, default=PROJECT_DIR, help="directory holding Pulumi.yaml")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default <project>/build/<stack>)")
    parser.add_argument("--previous", type=Path, default=None,
                        help="an earlier render's output directory: also write changes.md, the update from it")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(PROJECT_DIR))
    from components.ops_commands import OpsConfigError
    from render import output, runtime, stackfile
    from stacks.loader import ConfigError, FileProblem, stack_file_name

    started = time.perf_counter()
    previous_state = None
    if args.previous is not None:
        from render import changes
        try:
            previous_state = runtime.previous_state(changes.load(args.previous)[0])
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"error: --previous {args.previous}: not a render's output directory ({err})", file=sys.stderr)
            return 2
    try:
        stack = stackfile.read(args.project_dir, args.stack)
        # The program reads the stack's last deployment (stacks/transitions.py): here, that render.
        rendered = runtime.render(stack, previous=previous_state)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ConfigError as err:
        print(err.report(), file=sys.stderr)
        return 2
    except OpsConfigError as err:
        # A Job builder's refusal that no config rule caught first (components/ops_commands.py);
        # the render has written nothing yet.
        refusal = ConfigError(stack_file_name(args.stack), [FileProblem(path="", value=None, allowed=str(err))])
        print(refusal.report(), file=sys.stderr)
        return 2
    refused = api_problems(rendered)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    changes = None
    if args.previous is not None:
        changes = update_plan(rendered, args.previous, stack_file_name(args.stack))
        if isinstance(changes, int):
            return changes
    out_dir = args.out or args.project_dir / "build" / args.stack
    written = output.write(rendered, out_dir)
    if changes is not None:
        (out_dir / "changes.md").write_text(changes, encoding="utf-8")
        written.append(out_dir / "changes.md")
    elapsed = (time.perf_counter() - started) * 1000
    print(f"rendered stack {args.stack}: {len(rendered.resources)} resources in {elapsed:.0f} ms")
    for path in written:
        print(f"  {path.relative_to(args.project_dir) if path.is_relative_to(args.project_dir) else path}")
    return 0


def update_plan(rendered, previous: Path, stack_file: str) -> str | int:
    """changes.md for the update from the render in `previous`, or 2 after printing its problems (one
    line each, prefixed with the stack file) or why `previous` cannot be read."""
    import json

    from render import changes, changes_md, output

    try:
        old, old_outputs = changes.load(previous)
    except (OSError, ValueError) as err:
        print(f"error: --previous {previous}: not a render's output directory ({err})", file=sys.stderr)
        return 2
    new = json.loads(output.resources_json(rendered))
    plan = changes.plan(old, new, old_outputs, json.loads(output.outputs_json(rendered)), stack=rendered.stack)
    if plan.problems:
        for problem in plan.problems:
            print(f"{stack_file}: update from {previous}: {problem}", file=sys.stderr)
        return 2
    return changes_md.changes_md(plan, str(previous))


def api_problems(rendered) -> str:
    """The report of apivalidation over every Kubernetes object, or '' when the server accepts them
    all. Without the CRD directory the CEL rules cannot run: said on stderr, not silently skipped."""
    import apivalidation
    from render.output import is_kubernetes_object

    objects = [r.inputs for r in rendered.resources if is_kubernetes_object(r)]
    crds = apivalidation.crds_dir()
    index = None
    if crds.is_dir():
        index = apivalidation.crd_index(str(crds), apivalidation.custom_kinds(objects))
    else:
        print(f"warning: {crds} is missing: custom resources not checked against their CRDs' CEL rules "
              "(set LLM_SERVING_CRDS)", file=sys.stderr)
    problems = apivalidation.validate(objects, index)
    return apivalidation.report(problems) if problems else ""


if __name__ == "__main__":
    sys.exit(main())
