"""The README stays true to the code: its config reference is the generated one."""

from __future__ import annotations

import re

from conftest import PROJECT_DIR

from config_model import SECRET_KEYS
from tools.config_reference import reference

README = (PROJECT_DIR / "README.md").read_text(encoding="utf-8")


def test_config_reference_is_current():
    block = re.search(r"<!-- config-reference:start -->\n(.*?)\n<!-- config-reference:end -->", README, re.S)
    assert block, "config reference markers missing"
    assert block.group(1) == reference(), "run: .venv/bin/python tools/config_reference.py and paste into README.md"


def test_readme_shows_how_to_set_every_secret():
    for key in SECRET_KEYS:
        assert f"pulumi config set --secret llm-serving:{key}" in README


def test_readme_names_the_two_commands_ci_runs():
    assert "make render" in README and "make test" in README
    assert "make test" in (PROJECT_DIR / ".ci" / "run").read_text()
