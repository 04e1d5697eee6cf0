"""Without ../shared, schema tests fail under CI=true and only skip on a developer machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import PROJECT_DIR

SELECT = ["tests/test_schema.py", "-k", "crd_index_covers", "-p", "no:cacheprovider", "-q"]


def lone_copy(tmp_path):
    """The repo alone in a folder with no shared/ beside it."""
    dest = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=PROJECT_DIR,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if not (PROJECT_DIR / name).is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_DIR / name, target)
    return dest


def run(repo, ci: str | None):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", *SELECT], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)


def test_missing_shared_fails_in_ci_and_skips_elsewhere(tmp_path):
    repo = lone_copy(tmp_path)
    assert not (repo.parent / "shared").exists()
    in_ci = run(repo, "true")
    assert in_ci.returncode == 1 and "is missing; CI runs with ../shared beside the repo" in in_ci.stdout
    local = run(repo, None)
    assert local.returncode == 0 and "1 skipped" in local.stdout


def test_the_program_virtualenv_answers_the_pulumi_cli_pip_toolchain():
    # Pulumi.yaml runs the program with `toolchain: pip` in .venv; the CLI lists the virtualenv's packages
    # with `python -m pip list --format json` to find the program's plugins (pulumi/pulumi v3.259.0
    # sdk/python/toolchain/pip.go ListPackages). A virtualenv without pip (uv's default) breaks `pulumi up`.
    import json

    listed = subprocess.run([sys.executable, "-m", "pip", "list", "--format", "json"], capture_output=True,
                            text=True, timeout=60, check=True).stdout
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    assert {"pulumi", "pulumi-kubernetes", "pulumi-aws", "pulumi-policy"} <= names
