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


def test_the_manifest_recipe_never_hashes_the_manifest_into_itself(tmp_path):
    """The README's recipe, run twice with the real coreutils, as users re-run it after adding a file:
    `sha256sum * > SHA256SUMS` listed the manifest itself on the second run (hashed while the shell
    truncated it), so verification could never pass again."""
    import subprocess
    import sys

    sys.path.insert(0, str(PROJECT_DIR / "components" / "scripts"))
    import verify_model

    line = next(x for x in README.splitlines() if x.startswith("cd DeepSeek-V4-Flash-0731 && "))
    model = tmp_path / "DeepSeek-V4-Flash-0731"
    model.mkdir()
    for name, data in (("config.json", b"{}"), ("model-00001-of-00002.safetensors", b"a" * 1000),
                       ("tokenizer.json", b"t"), (".ready", b"marker")):
        (model / name).write_bytes(data)
    for _ in range(2):
        subprocess.run(["bash", "-c", line], cwd=tmp_path, check=True)
    listed = verify_model.read_manifest(str(model / "SHA256SUMS"))
    assert set(listed) == {"config.json", "model-00001-of-00002.safetensors", "tokenizer.json"}
    assert verify_model.checksum_problems(str(model), workers=2) == []
