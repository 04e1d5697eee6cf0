"""`make check STACK=name`: one stack checked offline the way `make test` checks every stack file.

    python tools/check_stack.py --stack mine [--project-dir DIR] [--strict]

1. The render, as `make render` runs it (python -m render: the config rules, the API server's
   validation, build/<stack>/ written; --strict refuses missing secrets).
2. The policy pack behind its real server (tests/policy_server.py: started as the Python language
   host starts a pack, spoken to as the engine speaks to it), once as `pulumi preview` of a new stack
   registers and once as `pulumi up` does, with the stack's policy config (tools/stacks.py: its own
   policy/config.<stack>.json, else its environment's). Any violation fails, as in tests/test_pack.py.
3. checkov over the rendered manifests, offline (the command tests/test_scan.py runs; the scanner from
   CHECKOV or .venv-scan, which `make check` and `make test` install).

Exit 0 when all pass; 1 with one line per finding; 2 when the render refuses the stack (its lines).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
CHECKOV = os.environ.get("CHECKOV") or str(PROJECT_DIR / ".venv-scan" / "bin" / "checkov")


def checkov_scan(manifests: str, directory: Path, checkov: str = CHECKOV) -> dict:
    """checkov's kubernetes framework over one manifest file, offline (--skip-download: no policy
    download, no platform calls); every exception is an annotation on its object, none is skipped
    here. {"failed_checks": [...], "summary": {...}}."""
    return checkov_scan_many({"manifests": manifests}, directory, checkov)["manifests"]


def checkov_scan_many(manifests: dict[str, str], directory: Path, checkov: str = CHECKOV) -> dict[str, dict]:
    """The same scan over several manifest files in one checkov process (its start-up is most of a
    small scan): name -> {"failed_checks", "summary"} with the passed and failed counts of that
    file alone; parsing errors and the resource count are the whole run's."""
    for name, text in manifests.items():
        (directory / name).mkdir(parents=True, exist_ok=True)
        (directory / name / "kubernetes.yaml").write_text(text, encoding="utf-8")
    proc = subprocess.run([checkov, "-d", str(directory), "--framework", "kubernetes", "--skip-download",
                           "-o", "json"], capture_output=True, text=True, timeout=300)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"checkov exited {proc.returncode} without a JSON report:\n{proc.stderr[-2000:]}") from None
    report = report if isinstance(report, dict) else report[0]

    def of(name: str, outcome: str) -> list[dict]:
        # file_path is relative to the scanned directory, with a leading slash: /<name>/kubernetes.yaml
        return [c for c in report["results"].get(outcome, []) if c["file_path"].split("/")[1:2] == [name]]

    return {name: {"failed_checks": of(name, "failed_checks"),
                   "summary": {**report["summary"], "passed": len(of(name, "passed_checks")),
                               "failed": len(of(name, "failed_checks"))}}
            for name in manifests}


def policy_findings(project_dir: Path, stack: str) -> tuple[list[str], object]:
    """One line per violation or skipped mandatory policy, preview and up, through the pack's server;
    and the up render (for the scan)."""
    sys.path.insert(0, str(PROJECT_DIR / "tests"))
    from policy_server import Operation, PackServer, parse_policy_pack_config, resources_of

    from render import runtime, stackfile
    from tools import stacks

    sf = stackfile.read(project_dir, stack)
    config_path = stacks.policy_config(project_dir, stack)
    policy_config = parse_policy_pack_config(config_path.read_text(encoding="utf-8"))
    findings, rendered = [], None
    with PackServer.start(project_dir / "policy") as server:
        for mode in ("preview", "up"):
            rendered = runtime.render(sf, preview=mode == "preview")
            segment = server.fresh_stack(stack)
            report = server.run(Operation(
                stack=segment, dry_run=mode == "preview", config=dict(sf.config), secret_keys=list(sf.secret_keys),
                policy_config=policy_config, resources=resources_of(rendered, segment),
                stack_order_seed=sum(map(ord, segment))))
            for d in report.violations():
                findings.append(f"{sf.path.name}: policy {d.policy} ({d.level}, {mode}): {d.urn or 'stack'}: "
                                f"{' '.join(d.message.split())}")
            for d in report.skipped_mandatory():
                findings.append(f"{sf.path.name}: policy {d.policy} (mandatory, {mode}) could not run: "
                                f"{' '.join(d.message.split())}")
    print(f"policy pack: {config_path.relative_to(project_dir)}, preview and up: "
          f"{'no violations' if not findings else f'{len(findings)} findings'}")
    return findings, rendered


def checkov_findings(stack: str, rendered, checkov: str = CHECKOV) -> list[str]:
    from render import output

    if not Path(checkov).exists():
        return [f"checkov is missing at {checkov}: `make check` installs it from requirements-scan.txt"]
    with tempfile.TemporaryDirectory() as tmp:
        scan = checkov_scan(output.kubernetes_yaml(rendered), Path(tmp), checkov)
    findings = [f"Pulumi.{stack}.yaml: checkov {c['check_id']} {c['resource']}: {c.get('check_name', '')}"
                for c in scan["failed_checks"]]
    if scan["summary"].get("parsing_errors"):
        findings.append(f"Pulumi.{stack}.yaml: checkov could not parse {scan['summary']['parsing_errors']} manifests")
    print(f"checkov: {scan['summary'].get('passed', 0)} passed, {len(scan['failed_checks'])} failed")
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/check_stack.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--project-dir", type=Path, default=PROJECT_DIR)
    parser.add_argument("--strict", action="store_true", help="missing secrets fail the render")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(PROJECT_DIR))
    from render.__main__ import main as render_main
    from tools import stacks

    rc = render_main(["--stack", args.stack, "--project-dir", str(args.project_dir), *(["--strict"] if args.strict else [])])
    if rc != 0:
        return rc
    try:
        stacks.policy_config(args.project_dir, args.stack)
    except LookupError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    findings, rendered = policy_findings(args.project_dir, args.stack)
    findings += checkov_findings(args.stack, rendered)
    for line in findings:
        print(line, file=sys.stderr)
    print(f"check {args.stack}: {'passed' if not findings else 'FAILED'}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
