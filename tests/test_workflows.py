"""The pull-request workflows other teams copy: structure checked here (actionlint is not installable
offline: its PyPI package downloads a binary at build time), YAML lint in test_scan."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import yaml
from conftest import PROJECT_DIR, shared_dir
from conftest import STACKS as CHECKED

from policy import pack
from tools import stacks

WORKFLOWS = PROJECT_DIR / ".github" / "workflows"
STACKS = stacks.names(PROJECT_DIR)
MATRIX = "${{ fromJSON(needs.stacks.outputs.stacks) }}"


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


def test_every_job_that_renders_has_go_for_the_module_crds():
    """The EnvoyPatchPolicy CRD is read from Envoy Gateway's Go module (apivalidation/module_crds.py):
    the jobs that test or render set Go up before, and the changes job downloads it before either render."""
    ci = steps(load("ci.yml"))
    uses = [s.get("uses", "") for s in ci]
    test = next(i for i, s in enumerate(ci) if "make test" in s.get("run", ""))
    assert any(u.startswith("actions/setup-go@") for u in uses[:test])
    changes = load("preview.yml")["jobs"]["changes"]["steps"]
    base = next(i for i, s in enumerate(changes) if s.get("id") == "base")
    assert any(s.get("uses", "").startswith("actions/setup-go@") for s in changes[:base])
    assert any("module-crds" in s.get("run", "") for s in changes[:base])


def run_step(script: str, cwd, **env) -> dict[str, str]:
    """A step's shell as the runner runs it (bash -e), with GITHUB_OUTPUT; the outputs it set."""
    out = cwd / "github_output"
    out.write_text("")
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env, "GITHUB_OUTPUT": str(out)})
    assert proc.returncode == 0, proc.stderr
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    out.unlink()
    return outputs


def test_the_matrices_are_the_stack_files_of_the_head(tmp_path):
    """Both matrices read the stacks job's list, which is every Pulumi.<stack>.yaml of the head: the
    job's own step, run over a copy of the files it reads with one more stack file, lists it too."""
    wf = load("preview.yml")
    job = wf["jobs"]["stacks"]
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert job["outputs"]["stacks"] == "${{ steps.list.outputs.stacks }}"
    for name in ("preview", "changes"):
        assert wf["jobs"][name]["needs"] == "stacks" and wf["jobs"][name]["strategy"]["matrix"]["stack"] == MATRIX
    step = next(s for s in job["steps"] if s.get("id") == "list")
    assert json.loads(run_step(step["run"], PROJECT_DIR)["stacks"]) == STACKS
    shutil.copytree(PROJECT_DIR / "tools", tmp_path / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    for path in PROJECT_DIR.glob("Pulumi*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(PROJECT_DIR / "Pulumi.dev.yaml", tmp_path / "Pulumi.mine.yaml")
    assert json.loads(run_step(step["run"], tmp_path)["stacks"]) == [*STACKS, "mine"]


def test_preview_runs_every_stack_with_the_policy_pack_and_comments():
    wf = load("preview.yml")
    job = wf["jobs"]["preview"]
    action = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "preview" and action["with"]["comment-on-pr"] is True
    assert action["with"]["policyPacks"] == "policy"
    # The policy config is the stack's own or its environment's, as tools/stacks.py picks it.
    assert action["with"]["policyPackConfigs"] == "${{ steps.policy.outputs.config }}"
    policy = next(s for s in job["steps"] if s.get("id") == "policy")
    assert policy["env"]["STACK"] == "${{ matrix.stack }}"
    script = policy["run"].replace(".venv/bin/python", sys.executable)
    for stack in CHECKED:   # every stack file make test checks (a user's refused one is named at the end)
        assert run_step(script, PROJECT_DIR, STACK=stack) == {
            "config": str(stacks.policy_config(PROJECT_DIR, stack).relative_to(PROJECT_DIR))}
    assert "secrets.PULUMI_ACCESS_TOKEN" in action["env"]["PULUMI_ACCESS_TOKEN"]
    assert wf["permissions"]["pull-requests"] == "write"


def test_policy_configs_name_real_policies_and_levels():
    names = {p.name for p in pack.policies()}
    for stack in CHECKED:
        stacks.policy_config(PROJECT_DIR, stack)  # every stack file has one (its own or its environment's)
    for path in (PROJECT_DIR / "policy").glob("config.*.json"):
        config = json.loads(path.read_text())
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
    checkouts = {s["with"]["path"]: s["with"]["ref"] for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")}
    assert checkouts == {"base": "${{ github.event.pull_request.base.sha }}",
                         "head": "${{ github.event.pull_request.head.sha }}"}
    runs = {s.get("id", s.get("name")): s.get("run", "") for s in job["steps"]}
    # The CRDs land in ../shared beside both checkouts ($GITHUB_WORKSPACE/shared), where the render looks.
    assert "head/tools/fetch_crds.sh ../shared/crds" in runs["Fetch the pinned upstream CRDs"]
    assert '-m render --stack "$STACK" --out "build/$STACK"' in runs["base"] and "cd base" in runs["base"]
    head = runs["head"]
    assert '--previous "../base/build/$STACK"' in head and "cd head" in head
    assert '-m render --stack "$STACK" --strict' in head  # a missing secret fails the pull request
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


def test_a_stack_new_in_the_pull_request_is_planned_from_an_empty_render(tmp_path):
    """The base has no Pulumi.<stack>.yaml: its step writes an empty render instead of failing, and the
    head's update from it creates every resource."""
    base_step = next(s for s in load("preview.yml")["jobs"]["changes"]["steps"] if s.get("id") == "base")
    (tmp_path / "base").mkdir()
    run_step(base_step["run"], tmp_path, STACK="mine")
    previous = tmp_path / "base" / "build" / "mine"
    assert json.loads((previous / "resources.json").read_text()) == []
    out = tmp_path / "head"
    proc = subprocess.run([sys.executable, "-m", "render", "--stack", "dev", "--out", str(out), "--previous", str(previous)],
                          cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    created = len(json.loads((out / "resources.json").read_text()))
    assert f"{created} to create; 0 unchanged." in (out / "changes.md").read_text()


def test_deploy_runs_up_after_ci_one_update_per_stack_with_refresh_and_the_pack():
    """deploy.yml: `pulumi up` of every stack of the commit ci.yml passed, refreshed first, with the
    stack's policy config; one update per stack at a time and never cancelled halfway (a cancelled or
    timed-out job leaves the stale lock and pending operations of docs/recovery.md)."""
    wf = load("deploy.yml")
    assert wf[True]["workflow_run"] == {"workflows": ["ci"], "types": ["completed"], "branches": ["main"]}  # `on:` is YAML 1.1 true
    assert load("ci.yml")["name"] == "ci"
    stacks_job, up = wf["jobs"]["stacks"], wf["jobs"]["up"]
    assert "workflow_run.conclusion == 'success'" in stacks_job["if"] and "workflow_run.event == 'push'" in stacks_job["if"]
    for job in (stacks_job, up):
        checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
        assert checkout["with"]["ref"] == "${{ github.event.workflow_run.head_sha }}"
    assert up["needs"] == "stacks" and up["strategy"]["matrix"]["stack"] == MATRIX
    assert up["concurrency"] == {"group": "deploy-${{ matrix.stack }}", "cancel-in-progress": False}
    assert up["environment"] == "${{ matrix.stack }}"
    action = next(s for s in up["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "up" and action["with"]["refresh"] is True
    assert action["with"]["policyPacks"] == "policy"
    assert action["with"]["policyPackConfigs"] == "${{ steps.policy.outputs.config }}"
    preview = load("preview.yml")["jobs"]["preview"]
    assert [s["run"] for s in up["steps"] if s.get("id") == "policy"] == \
        [s["run"] for s in preview["steps"] if s.get("id") == "policy"]


def test_the_deploy_timeout_outlasts_every_await_of_every_stack():
    """The job's timeout is GitHub's own limit for a hosted job (6 hours), and longer than any single
    await (customTimeouts) of a checked stack: the runner never stops an await the stack asked for."""
    from conftest import render_stack
    minutes = load("deploy.yml")["jobs"]["up"]["timeout-minutes"]
    assert minutes == 360
    longest = max(float(t.removesuffix("s")) for stack in CHECKED for r in render_stack(stack).resources
                  for t in (r.options.get("customTimeouts") or {}).values() if t)
    assert longest < minutes * 60, longest


def test_the_preview_refreshes_and_never_shares_the_deploy_group():
    """The pull request's preview shows drift (refresh first), a newer push supersedes it, and its
    concurrency group is its own: GitHub cancels the pending run of a group when another queues, so a
    shared group would let a preview cancel a queued deploy."""
    job = load("preview.yml")["jobs"]["preview"]
    action = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["refresh"] is True
    assert job["concurrency"] == {"group": "preview-${{ github.event.pull_request.number }}-${{ matrix.stack }}",
                                  "cancel-in-progress": True}
    assert not job["concurrency"]["group"].startswith("deploy-")
