"""The pull-request workflows other teams copy: structure checked here (actionlint is not installable
offline: its PyPI package downloads a binary at build time), YAML lint in test_scan."""

from __future__ import annotations

import json
import re

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
