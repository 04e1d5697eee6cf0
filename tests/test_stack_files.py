"""A stack file nobody listed: a copy of the project with one more `Pulumi.mine.yaml` (dev's content in
another namespace, environment prod, no policy config of its own) is found by the discovery every
check uses (tools/stacks.py), previewed with its environment's policy config, and passes `make check`
(tools/check_stack.py: the render, the policy pack through its server, checkov). The committed stacks
are not touched: the fourth stack lives only in the copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import PROJECT_DIR, REFUSED, STACKS
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
    assert stacks.names(project) == [*stacks.names(PROJECT_DIR), "mine"]
    assert set(stacks.names(PROJECT_DIR)) == set(STACKS) | set(REFUSED)
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


# ---- a user's refused stack file: render-all and make test go on past it and name it ----

def refused_text(stack: str) -> str:
    """Pulumi.<stack>.yaml of the copy, refused by the render: a namespace Kubernetes cannot name."""
    text = (PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()
    assert text.count("llm-serving:namespace: ") == 1
    return text.replace("llm-serving:namespace: ", "llm-serving:namespace: Not_A_Label-", 1)


def project_with_users(tmp_path: Path) -> Path:
    """The copy with two user stack files: `aaa` (refused, sorted before every shipped stack, as the
    Makefile's wildcard used to render it first) and `mine` (dev's content, accepted)."""
    project = project_with_mine(tmp_path)
    (project / "Pulumi.aaa.yaml").write_text(refused_text("dev"))
    return project


def test_render_all_renders_every_stack_past_a_refused_one_and_names_it(tmp_path, capsys):
    project = project_with_users(tmp_path)
    assert stacks.main(["--project-dir", str(project), "render-all"]) == 2
    err = capsys.readouterr().err
    for stack in (*stacks.SHIPPED, "mine"):
        assert (project / "build" / stack / "plan.md").is_file(), stack
    assert not (project / "build" / "aaa").exists()
    assert "Pulumi.aaa.yaml: llm-serving:namespace = 'Not_A_Label-llm-serving-dev'" in err
    total = len(stacks.names(project))
    assert err.rstrip().splitlines()[-1] == (
        f"render-all: {total - 1} of {total} stacks rendered; refused: aaa (Pulumi.aaa.yaml); the lines above say "
        "why (`make check STACK=<name>` checks one)")
    # A shipped stack refused is named as one; the others still render.
    (project / "Pulumi.aaa.yaml").unlink()
    (project / "Pulumi.staging.yaml").write_text(refused_text("staging"))
    assert stacks.main(["--project-dir", str(project), "render-all"]) == 2
    assert err != (err := capsys.readouterr().err)
    assert "refused: staging (Pulumi.staging.yaml, a shipped stack);" in err.rstrip().splitlines()[-1]
    assert not (project / "build" / "staging").exists() and (project / "build" / "prod" / "plan.md").is_file()


def test_render_all_exits_0_when_every_stack_renders(tmp_path, capsys):
    project = tmp_path / "one"
    project.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copy(PROJECT_DIR / "Pulumi.dev.yaml", project / "Pulumi.mine.yaml")
    assert stacks.main(["--project-dir", str(project), "render-all"]) == 0
    assert "refused" not in capsys.readouterr().err and (project / "build" / "mine" / "plan.md").is_file()


def test_make_render_all_runs_it():
    makefile = (PROJECT_DIR / "Makefile").read_text()
    recipe = makefile.split("\nrender-all:", 1)[1].split("\n\n", 1)[0]
    assert "tools/stacks.py render-all $(RENDER_FLAGS)" in recipe and "for s in" not in recipe, recipe


def test_make_test_checks_the_shipped_and_accepted_stacks_and_names_the_refused_one(tmp_path):
    """tests/conftest.py STACKS and REFUSED: a user's refused stack is left out of every test that takes
    STACKS and named at the end of the run; a refused shipped stack stays in, and fails those tests."""
    project = project_with_users(tmp_path)
    checked, refused = stacks.covered(project)
    # (Beside any stack file of the repo's own the copy took, as the repo's conftest splits them.)
    assert checked == [s for s in stacks.names(project) if s not in refused] and "mine" in checked
    assert "aaa" in refused and set(refused) <= set(REFUSED) | {"aaa"} and set(stacks.SHIPPED) <= set(checked)
    assert refused["aaa"].startswith("invalid stack configuration (1 problem):\n"
                                     "Pulumi.aaa.yaml: llm-serving:namespace = 'Not_A_Label-llm-serving-dev': ")
    (project / "Pulumi.dev.yaml").write_text(refused_text("dev"))
    assert stacks.covered(project)[0] == checked


def test_the_run_ends_naming_each_refused_stack_file(monkeypatch):
    import conftest

    class Reporter:
        def __init__(self):
            self.lines: list[str] = []

        def section(self, title, sep="="):
            self.lines.append(f"-- {title}")

        def write_line(self, line):
            self.lines.append(line)

    quiet = Reporter()
    monkeypatch.setattr(conftest, "REFUSED", {})
    conftest.pytest_terminal_summary(quiet)
    assert quiet.lines == []
    monkeypatch.setattr(conftest, "REFUSED", {"aaa": "invalid stack configuration (1 problem):\nPulumi.aaa.yaml: x"})
    told = Reporter()
    conftest.pytest_terminal_summary(told)
    assert told.lines == ["-- stack files make test did not check",
                          "Pulumi.aaa.yaml: refused by the render (`make check STACK=aaa`):",
                          "  invalid stack configuration (1 problem):", "  Pulumi.aaa.yaml: x"]
