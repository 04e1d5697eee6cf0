"""The pull-request workflows other teams copy: structure checked here (actionlint is not installable
offline: its PyPI package downloads a binary at build time), YAML lint in test_scan."""

from __future__ import annotations

import json
import os
import re
import subprocess

import yaml
from conftest import PROJECT_DIR, shared_dir

from policy import pack

WORKFLOWS = PROJECT_DIR / ".github" / "workflows"
STACKS = sorted(p.name.split(".")[1] for p in PROJECT_DIR.glob("Pulumi.*.yaml"))


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(workflow: dict) -> list[dict]:
    return [s for job in workflow["jobs"].values() for s in job["steps"]]


def test_every_action_is_pinned_and_permissions_are_explicit():
    for path in WORKFLOWS.glob("*.yml"):
        wf = yaml.safe_load(path.read_text())
        assert "permissions" in wf, path.name
        for step in steps(wf):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+|[0-9a-f]{40})", step["uses"]), step["uses"]
        for job in wf["jobs"].values():
            assert job.get("timeout-minutes"), path.name


def test_ci_runs_the_readme_commands_and_publishes_the_plans():
    wf = load("ci.yml")
    runs = "\n".join(s.get("run", "") for s in steps(wf))
    assert "make test" in runs and "make render-all" in runs and "GITHUB_STEP_SUMMARY" in runs
    upload = next(s for s in steps(wf) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "build/*/plan.md"
    assert "tools/fetch_crds.sh" in runs


def test_preview_runs_every_stack_with_the_policy_pack_and_comments():
    wf = load("preview.yml")
    job = wf["jobs"]["preview"]
    assert sorted(job["strategy"]["matrix"]["stack"]) == STACKS
    action = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "preview" and action["with"]["comment-on-pr"] is True
    assert action["with"]["policyPacks"] == "policy"
    assert "secrets.PULUMI_ACCESS_TOKEN" in action["env"]["PULUMI_ACCESS_TOKEN"]
    assert wf["permissions"]["pull-requests"] == "write"


def test_policy_configs_name_real_policies_and_levels():
    names = {p.name for p in pack.policies()}
    for stack in STACKS:
        config = json.loads((PROJECT_DIR / "policy" / f"config.{stack}.json").read_text())
        for key, level in config.items():
            assert key == "all" or key in names, key
            assert level in ("advisory", "mandatory", "disabled", "remediate"), level


def test_fetched_crds_are_the_ones_the_tests_use():
    crds = shared_dir("crds")
    for line in (PROJECT_DIR / "tests" / "crd_sources.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            directory, url = line.split()
            assert (crds / directory / url.rsplit("/", 1)[1]).is_file(), url
            assert re.search(r"/v\d+\.\d+\.\d+/", url), url


def test_changes_renders_base_and_head_and_comments_the_update_plan():
    wf = load("preview.yml")
    job = wf["jobs"]["changes"]
    assert sorted(job["strategy"]["matrix"]["stack"]) == STACKS
    checkouts = {s["with"]["path"]: s["with"]["ref"] for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")}
    assert checkouts == {"base": "${{ github.event.pull_request.base.sha }}",
                         "head": "${{ github.event.pull_request.head.sha }}"}
    runs = {s.get("id", s.get("name")): s.get("run", "") for s in job["steps"]}
    # The CRDs land in ../shared beside both checkouts ($GITHUB_WORKSPACE/shared), where the render looks.
    assert "head/tools/fetch_crds.sh ../shared/crds" in runs["Fetch the pinned upstream CRDs"]
    assert '-m render --stack "$STACK" --out "build/$STACK"' in runs["base"] and "cd base" in runs["base"]
    head = runs["head"]
    assert '--previous "../base/build/$STACK"' in head and "cd head" in head
    assert 'cat "build/$STACK/changes.md"' in head and "cat changes.err" in head and "> ../comment.md" in head
    for run in (runs["base"], runs["head"]):
        assert "make -C" in run and ".venv/.requirements-installed" in run
    comment = next(s for s in job["steps"] if s.get("uses", "").startswith("marocchino/sticky-pull-request-comment@"))
    # Inputs of marocchino/sticky-pull-request-comment v2 (action.yml): header keeps one comment per stack.
    assert comment["with"] == {"header": "changes-${{ matrix.stack }}", "path": "comment.md"}
    assert "if" not in comment  # posted whether or not the update can succeed
    fail = job["steps"][-1]
    assert fail["if"] == "steps.head.outputs.rc != '0'" and fail["run"] == "exit 1"
    assert wf["permissions"]["pull-requests"] == "write"


def test_the_changes_step_script_posts_the_plan_or_the_refusal(tmp_path):
    """The head step's shell, run with a stand-in render: exit 0 puts changes.md in the comment, exit 2
    the refusal lines, and the step itself never fails before the comment is posted."""
    script = next(s for s in load("preview.yml")["jobs"]["changes"]["steps"] if s.get("id") == "head")["run"]
    script = script.replace("make -C head .venv/.requirements-installed", "true")
    for rc, expect in ((0, "the plan itself"), (2, "the refusal line")):
        head = tmp_path / str(rc) / "head"
        (head / ".venv" / "bin").mkdir(parents=True)
        fake = head / ".venv" / "bin" / "python"
        fake.write_text("#!/bin/sh\nmkdir -p build/dev\necho 'the plan itself' > build/dev/changes.md\n"
                        f"echo 'the refusal line' >&2\nexit {rc}\n")
        fake.chmod(0o755)
        env = {**os.environ, "STACK": "dev", "BASE_SHA": "a" * 40, "HEAD_SHA": "b" * 40,
               "GITHUB_STEP_SUMMARY": str(tmp_path / f"summary{rc}"), "GITHUB_OUTPUT": str(tmp_path / f"out{rc}")}
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=head.parent, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        comment = (head.parent / "comment.md").read_text()
        assert comment.startswith("## Update plan: stack dev (base aaaaaaa -> head bbbbbbb)") and expect in comment
        assert (tmp_path / f"out{rc}").read_text() == f"rc={rc}\n"
