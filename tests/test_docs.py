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
    assert block.group(1) == reference(), "run: .venv/bin/python tools/config_reference.py --write"


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


def _section(heading: str) -> str:
    """README text from `heading` (a `## ` line) to the next `## ` heading."""
    start = README.index(f"\n{heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else len(README)]


def _names(listed: str) -> set[str]:
    return set(re.findall(r"`([a-z-]+)`", listed))


def _policies():
    from policy import pack, resource_rules

    names = ([p.name for p in resource_rules.RESOURCE_POLICIES] + list(pack.BLOCKING_RESOURCE_CHECKS)
             + list(pack.STACK_CHECKS))
    return set(names), set(pack.MANDATORY)


def test_readme_names_every_policy_of_the_pack():
    """Merged features add policies (daemonsets-no-gpu, offload-memory, ...): the Policies section names
    each, so a reader can map a preview violation to its rule."""
    names, _ = _policies()
    missing = sorted(n for n in names if f"`{n}`" not in _section("## Policies"))
    assert not missing, f"README.md '## Policies' does not name: {missing}"


def test_readme_advisory_and_prod_lists_match_the_pack():
    """'The rest advise: ...' is exactly the pack's non-mandatory policies, and the prod sentence names
    exactly those advisory policies policy/config.prod.json leaves advisory."""
    import json

    names, mandatory = _policies()
    advisory = names - mandatory
    listed = re.search(r"The rest advise: ((?:`[a-z-]+`(?:,\s+)?)+)\.", README)
    assert listed and _names(listed.group(1)) == advisory, \
        f"README 'The rest advise:' should list {sorted(advisory)}"
    prod = json.loads((PROJECT_DIR / "policy" / "config.prod.json").read_text())
    made_mandatory = {k for k, v in prod.items() if v == "mandatory"}
    left = re.search(r"prod makes every advisory rule mandatory(?:\s+but\s+((?:`[a-z-]+`(?:,\s+|\s+and\s+)?)+))?", README)
    assert left, "README: the sentence on what policy/config.prod.json makes mandatory is missing"
    assert _names(left.group(1) or "") == advisory - made_mandatory, \
        f"README: prod leaves {sorted(advisory - made_mandatory)} advisory (policy/config.prod.json)"


def test_layout_names_every_directory_tool_and_script():
    """The Layout block lists every top-level directory, tool and script the program ships."""
    layout = _section("## Layout")
    dirs = [p.name for p in PROJECT_DIR.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name not in ("build", "__pycache__")] + [".github"]
    files = [p.name for d in ("tools", "components/scripts") for p in (PROJECT_DIR / d).iterdir()
             if p.is_file() and p.suffix in (".py", ".sh") and p.name != "__init__.py"]
    missing = sorted(n for n in dirs + files if n not in layout)
    assert not missing, f"README.md '## Layout' does not name: {missing}"


def test_every_path_the_readme_names_exists():
    """A module renamed or split by a merge (policy/rules.py became resource_rules and stack_rules)
    leaves the README pointing at it; every repository path it names must exist."""
    named = set(re.findall(r"(?<![\w/.-])((?:tests|tools|components|policy|stacks|render|config_model|apivalidation"
                           r"|docs|examples|\.github|\.ci)/[\w./-]*\w)(?!\w|\.?[<*])", README))
    made_by_commands = {"policy/venv", "policy/venv/bin/pip"}
    missing = sorted(p for p in named - made_by_commands if not (PROJECT_DIR / p).exists())
    assert not missing, f"README.md names paths that do not exist: {missing}"
