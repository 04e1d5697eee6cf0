"""Offline render: `python -m render --stack dev` writes build/<stack>/ without a cluster or cloud.

Exit codes: 0 rendered, 2 invalid stack configuration or an object the Kubernetes API server would
refuse (nothing written). A refusal also removes what an earlier render left in the output directory
(only the files a render writes there), so no stale plan.md is mistaken for this configuration's.

`--strict` (`make render STRICT=1`, the PR workflow) also refuses a stack file that lacks a secret the
configuration requires, one line per key with the command that sets it; without it those secrets are
masked stand-ins and plan.md lists them.

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
    parser.add_argument("--strict", action="store_true",
                        help="exit 2 when a secret the configuration requires is not in the stack file")
    args = parser.parse_args(argv)
    out_dir = args.out or args.project_dir / "build" / args.stack
    rc = render_stack(args, out_dir)
    if rc == 2:
        remove_stale(out_dir, args.previous)
    return rc


# Every file a render writes into its output directory (render/output.py write, and changes.md):
# a refused render removes these and nothing else.
OUTPUT_FILES = ("kubernetes.yaml", "resources.json", "outputs.json", "plan.md", "changes.md")


def remove_stale(out_dir: Path, previous: Path | None) -> None:
    """Remove the output files an earlier render left in out_dir, then out_dir itself if that left it
    empty (a directory holding anything else is someone's, whatever --out names). An out_dir that is
    the --previous render is the input of this run, not its output: it stays."""
    if not out_dir.is_dir():
        return
    if previous is not None and previous.resolve() == out_dir.resolve():
        print(f"note: {out_dir} kept: it is the --previous render", file=sys.stderr)
        return
    removed = [p for p in (out_dir / name for name in OUTPUT_FILES) if p.is_file() and not p.is_symlink()]
    for path in removed:
        path.unlink()
    if removed and not any(out_dir.iterdir()):
        out_dir.rmdir()
    if removed:
        print(f"removed the earlier render's {', '.join(p.name for p in removed)} from {out_dir}", file=sys.stderr)


def render_stack(args: argparse.Namespace, out_dir: Path) -> int:
    """Render into out_dir; 0, or 2 after printing why (nothing written)."""
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
    if args.strict and rendered.missing_secrets:
        print(missing_secrets_report(stack_file_name(args.stack), rendered.missing_secrets), file=sys.stderr)
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
    written = output.write(rendered, out_dir)
    if changes is not None:
        (out_dir / "changes.md").write_text(changes, encoding="utf-8")
        written.append(out_dir / "changes.md")
    elif (out_dir / "changes.md").is_file():
        # An earlier --previous run's update plan does not describe this render.
        (out_dir / "changes.md").unlink()
    elapsed = (time.perf_counter() - started) * 1000
    print(f"rendered stack {args.stack}: {len(rendered.resources)} resources in {elapsed:.0f} ms")
    for path in written:
        print(f"  {path.relative_to(args.project_dir) if path.is_relative_to(args.project_dir) else path}")
    return 0


def missing_secrets_report(stack_file: str, keys: list[str]) -> str:
    """The --strict refusal: one line per missing secret, key and command, never a value."""
    from config_model.stack import secret_command
    from stacks.loader import NAMESPACE

    lines = [f"{stack_file}: {NAMESPACE}:{key}: is a required secret and is not set; set it with "
             f"`{secret_command(key, NAMESPACE)}`" for key in keys]
    count = len(keys)
    return "\n".join([f"missing secrets ({count} secret{'s' if count != 1 else ''}, --strict):", *lines])


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
    unchecked = sorted({f"{o['kind']}: {why}" for o in objects
                        if (why := apivalidation.module_crds.source_checked(o)) is not None})
    for line in unchecked:
        print(f"note: no CRD here for {line}", file=sys.stderr)
    problems = apivalidation.validate(objects, index)
    return apivalidation.report(problems) if problems else ""


if __name__ == "__main__":
    sys.exit(main())
