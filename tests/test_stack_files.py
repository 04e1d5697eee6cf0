"""A stack file nobody listed: a copy of the project with one more `Pulumi.mine.yaml` (dev's content in
another namespace, environment prod, no policy config of its own) is found by the discovery every
check uses (tools/stacks.py), previewed with its environment's policy config, and passes `make check`
(tools/check_stack.py: the render, the policy pack through its server, checkov). The committed stacks
are not touched: the fourth stack lives only in the copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import PROJECT_DIR, STACKS
from test_scan import checkov

from tools import check_stack, stacks

DENY_NAMESPACES = '''
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy

from policy.pack import policies as _shipped


def _deny(args, report_violation):
    if args.resource_type == "kubernetes:core/v1:Namespace":
        report_violation("no namespaces in this copy")


def policies():
    return [*_shipped(), ResourceValidationPolicy(name="copy-denies-namespaces", description="Test only.",
                                                  enforcement_level=EnforcementLevel.MANDATORY, validate=_deny)]
'''


def project_with_mine(tmp_path: Path) -> Path:
    """Pulumi.yaml, every stack file and the policy pack, plus Pulumi.mine.yaml."""
    project = tmp_path / "project"
    project.mkdir(parents=True)
    for path in PROJECT_DIR.glob("Pulumi*.yaml"):
        shutil.copy(path, project / path.name)
    shutil.copytree(PROJECT_DIR / "policy", project / "policy", ignore=shutil.ignore_patterns("venv", "__pycache__"))
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    mine = dev.replace("llm-serving:environment: dev", "llm-serving:environment: prod") \
              .replace("llm-serving:namespace: llm-serving-dev", "llm-serving:namespace: team-mine")
    assert mine.count("team-mine") == 1 and "environment: prod" in mine
    (project / "Pulumi.mine.yaml").write_text(mine)
    return project


def test_a_new_stack_file_is_discovered_and_takes_its_environments_policy_config(tmp_path):
    project = project_with_mine(tmp_path)
    assert stacks.names(project) == [*STACKS, "mine"]
    assert stacks.names(PROJECT_DIR) == list(STACKS)
    assert stacks.policy_config_name(project, "mine") == "prod"  # no config.mine.json: its environment's
    (project / "policy" / "config.mine.json").write_text("{}")
    assert stacks.policy_config_name(project, "mine") == "mine"  # its own, once it has one
    for name in ("mine", "prod"):
        (project / "policy" / f"config.{name}.json").unlink()
    with pytest.raises(LookupError, match=r"Pulumi.mine.yaml: no policy/config.mine.json, and its "
                                          r"llm-serving:environment \(prod\) has no policy/config.<environment>.json"):
        stacks.policy_config_name(project, "mine")


def test_make_check_passes_the_new_stack_and_fails_what_its_pack_refuses(tmp_path, capsys):
    checkov()  # the scanner `make check` runs (skipped outside CI without it, as in test_scan)
    project = project_with_mine(tmp_path)
    assert check_stack.main(["--stack", "mine", "--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    assert "policy pack: policy/config.prod.json, preview and up: no violations" in out
    assert "checkov: " in out and ", 0 failed" in out and out.rstrip().endswith("check mine: passed")
    plan = (project / "build" / "mine" / "plan.md").read_text()
    assert "- Namespace: `team-mine`" in plan
    # The check runs the copy's own pack: one that refuses every Namespace fails the stack, by name.
    pack_main = project / "policy" / "__main__.py"
    pack_main.write_text(pack_main.read_text().replace("from policy.pack import policies", "from policy.mine_pack import policies"))
    (project / "policy" / "mine_pack.py").write_text(DENY_NAMESPACES)
    assert check_stack.main(["--stack", "mine", "--project-dir", str(project)]) == 1
    captured = capsys.readouterr()
    assert "Pulumi.mine.yaml: policy copy-denies-namespaces (mandatory, preview):" in captured.err
    assert "no namespaces in this copy" in captured.err and "check mine: FAILED" in captured.out


def test_make_check_stops_at_a_refused_render(tmp_path, capsys):
    project = project_with_mine(tmp_path)
    (project / "Pulumi.mine.yaml").write_text((project / "Pulumi.mine.yaml").read_text()
                                              .replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: 4"))
    assert check_stack.main(["--stack", "mine", "--project-dir", str(project)]) == 2
    assert "Pulumi.mine.yaml: llm-serving:gpuBudget = 4" in capsys.readouterr().err
    # STRICT=1: the valid stack without its secrets stops at the render too.
    project = project_with_mine(tmp_path / "strict")
    assert check_stack.main(["--stack", "mine", "--strict", "--project-dir", str(project)]) == 2
    assert "Pulumi.mine.yaml: llm-serving:apiKey: is a required secret and is not set" in capsys.readouterr().err
