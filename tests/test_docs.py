"""The README and docs/ stay true to the code: the generated reference pages are current, every link
and path they name exists, every make target they name is in the Makefile, and the README stays short."""

from __future__ import annotations

import re

from conftest import PROJECT_DIR

from config_model import SECRET_KEYS
from tools import gen_docs

README = (PROJECT_DIR / "README.md").read_text(encoding="utf-8")
DOCS = sorted((PROJECT_DIR / "docs").rglob("*.md"))
PAGES = [PROJECT_DIR / "README.md", *DOCS]
POLICIES_DOC = (PROJECT_DIR / "docs" / "policies.md").read_text(encoding="utf-8")


def _text(path) -> str:
    return path.read_text(encoding="utf-8")


def test_generated_docs_are_current():
    """docs/config-reference.md and docs/policies.md hold what tools/gen_docs.py makes of the code now."""
    stale = [rel for rel in gen_docs.GENERATED
             if gen_docs.regenerate(rel, _text(PROJECT_DIR / rel)) != _text(PROJECT_DIR / rel)]
    assert not stale, f"{stale} differ from the code: run make docs"


def test_config_reference_has_a_row_per_field_and_secret():
    """Each key of the models (nested sections and list items included) and each secret has its row."""
    from pydantic import BaseModel

    from config_model import StackConfig

    def keys(model: type[BaseModel], prefix: str):
        for name, field in model.model_fields.items():
            key = prefix + (field.alias or name)
            yield key
            sub = gen_docs._section_of(field.annotation)
            if sub is not None:
                yield from keys(sub, key + ("[]." if "list" in str(field.annotation) else "."))

    doc = _text(PROJECT_DIR / "docs" / "config-reference.md")
    missing = [k for k in keys(StackConfig, "") if f"| `{k}` |" not in doc]
    missing += [k for k in SECRET_KEYS if f"| `{k}` | `pulumi config set --secret llm-serving:{k} <value>` |" not in doc
                and f"| `{k}` | `pulumi config set --secret --path 'llm-serving:{k}.<name>' <secret>` |" not in doc]
    assert not missing, missing


def test_the_generator_reads_whatever_the_model_says():
    """A field another change adds reaches the reference with its type, bounds, default and description."""
    from typing import Literal

    from pydantic import Field

    from config_model.types import Model

    class Section(Model):
        size_gib: int = Field(3, ge=1, le=9, description="A size | in GiB.")
        kind: Literal["a", "b"] | None = Field(None, description="Which.")

    class Top(Model):
        parts: list[Section] = Field(default_factory=list, description="Parts.")

    rows = gen_docs.config_rows(Top, "")
    assert rows == ["| `parts` | list of sections | `[]` | Parts. |",
                    "| `parts[].sizeGiB` | integer (>= 1; <= 9) | `3` | A size / in GiB. |",
                    "| `parts[].kind` | one of `a`, `b` | unset | Which. |"]


def test_policy_levels_resolve_as_the_cli_resolves_them():
    """pulumi/pulumi v3.259.0 pkg/resource/analyzer/config.go: the pack's level, then `all`, then each
    policy's entry, a string or an object's enforcementLevel; `environments` is no policy."""
    defaults = {"a": "advisory", "b": "mandatory", "c": "advisory"}
    assert gen_docs.resolve_levels(defaults, {}) == defaults
    assert gen_docs.resolve_levels(defaults, {"all": "mandatory", "c": {"enforcementLevel": "disabled"},
                                              "environments": ["x"]}) == \
        {"a": "mandatory", "b": "mandatory", "c": "disabled"}
    assert gen_docs.resolve_levels(defaults, {"b": {"someProperty": 1}}) == defaults


def test_the_policy_table_has_every_policy_at_its_level_per_stack():
    import json

    from policy import pack

    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ") for line in POLICIES_DOC.splitlines()
            if line.startswith("| `")}
    stacks = gen_docs.stacks()
    assert {"dev", "staging", "prod"} <= set(stacks)
    for p in pack.policies():
        assert p.name in rows, p.name
        for i, stack in enumerate(stacks):
            config = json.loads((PROJECT_DIR / "policy" / f"config.{stack}.json").read_text())
            entry = config.get(p.name, config.get("all", p.enforcement_level.value))
            assert rows[p.name][3 + i] == entry, (p.name, stack)


def test_readme_is_at_most_500_lines():
    assert len(README.splitlines()) <= 500, "README.md: move reference material to docs/"


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path) -> set[str]:
    text = re.sub(r"```.*?```", "", _text(path), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_relative_link_points_at_an_existing_file_and_heading():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", _text(page), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s):, mailto:
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(PROJECT_DIR)}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.relative_to(PROJECT_DIR)}: {target} (no such heading)")
    assert not broken, broken


def test_every_make_target_the_docs_name_exists():
    """`make X` in a command or code span of the README or docs is a target of the Makefile."""
    makefile = _text(PROJECT_DIR / "Makefile")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))
    code = []
    for page in PAGES:
        text = _text(page)
        code += [(page, c) for c in re.findall(r"```.*?```", text, flags=re.S)]
        code += [(page, c) for c in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))]
    missing = sorted({f"{page.relative_to(PROJECT_DIR)}: make {t}" for page, c in code
                      for t in re.findall(r"(?<![\w-])make ([a-z][\w-]*)", c) if t not in targets})
    assert not missing, missing


def test_readme_says_where_the_field_report_is():
    """By its title, and at the path the tests that read it use (shared_dir("seed") / <file>)."""
    from conftest import SHARED

    assert "## The field report" in README
    named = re.search(r"`\.\./shared/seed/([\w.-]+)`", README)
    assert named, "README: the field report's path under ../shared/seed/ is missing"
    readers = [p.name for p in (PROJECT_DIR / "tests").glob("test_*.py") if f'"{named.group(1)}"' in _text(p)]
    assert readers, f"no test reads {named.group(1)}: the README names the wrong file"
    path = SHARED / "seed" / named.group(1)
    if path.is_file():
        title = path.read_text(encoding="utf-8").splitlines()[0].rstrip("¶").strip()
        assert f'"{title}"' in " ".join(README.split()), title


def test_readme_shows_how_to_set_every_secret():
    for key in SECRET_KEYS:
        # A secret map (consumerKeys) is set member by member, with --path.
        assert (f"pulumi config set --secret llm-serving:{key}" in README
                or f"pulumi config set --secret --path 'llm-serving:{key}." in README), key


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


def _section(text: str, heading: str) -> str:
    """`text` from `heading` (a `## ` line) to the next `## ` heading."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def _names(listed: str) -> set[str]:
    return set(re.findall(r"`([a-z-]+)`", listed))


def _policies():
    from policy import pack, resource_rules

    names = ([p.name for p in resource_rules.RESOURCE_POLICIES] + list(pack.BLOCKING_RESOURCE_CHECKS)
             + list(pack.STACK_CHECKS))
    return set(names), set(pack.MANDATORY)


def test_policies_doc_says_what_every_policy_checks():
    """Merged features add policies (daemonsets-no-gpu, offload-memory, ...): the hand-written section
    of docs/policies.md names each, so a reader can map a preview violation to its rule."""
    names, _ = _policies()
    missing = sorted(n for n in names if f"`{n}`" not in _section(POLICIES_DOC, "## What each rule checks"))
    assert not missing, f"docs/policies.md '## What each rule checks' does not name: {missing}"


def test_policies_doc_advisory_and_prod_lists_match_the_pack():
    """'The rest advise: ...' is exactly the pack's non-mandatory policies, and the prod sentence names
    exactly those advisory policies policy/config.prod.json leaves advisory."""
    import json

    names, mandatory = _policies()
    advisory = names - mandatory
    listed = re.search(r"The rest advise: ((?:`[a-z-]+`(?:,\s+)?)+)\.", POLICIES_DOC)
    assert listed and _names(listed.group(1)) == advisory, \
        f"docs/policies.md 'The rest advise:' should list {sorted(advisory)}"
    prod = json.loads((PROJECT_DIR / "policy" / "config.prod.json").read_text())
    made_mandatory = {k for k, v in prod.items() if v == "mandatory"}
    left = re.search(r"prod makes every advisory rule mandatory(?:\s+but\s+((?:`[a-z-]+`(?:,\s+|\s+and\s+)?)+))?",
                     POLICIES_DOC)
    assert left, "docs/policies.md: the sentence on what policy/config.prod.json makes mandatory is missing"
    assert _names(left.group(1) or "") == advisory - made_mandatory, \
        f"docs/policies.md: prod leaves {sorted(advisory - made_mandatory)} advisory (policy/config.prod.json)"


def test_layout_names_every_directory_tool_and_script():
    """docs/layout.md lists every top-level directory, tool and script the program ships."""
    layout = _text(PROJECT_DIR / "docs" / "layout.md")
    dirs = [p.name for p in PROJECT_DIR.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name not in ("build", "__pycache__")] + [".github"]
    files = [p.name for d in ("tools", "components/scripts") for p in (PROJECT_DIR / d).iterdir()
             if p.is_file() and p.suffix in (".py", ".sh") and p.name != "__init__.py"]
    missing = sorted(n for n in dirs + files if n not in layout)
    assert not missing, f"docs/layout.md does not name: {missing}"


def test_every_path_the_docs_name_exists():
    """A module renamed or split by a merge (policy/rules.py became resource_rules and stack_rules)
    leaves the README or a doc pointing at it; every repository path they name must exist."""
    # Made by a command the page gives, or by the reader (the README's own stack); Kubernetes API groups.
    made_by_commands = {"policy/venv", "policy/venv/bin/pip", "policy/config.mine.json"}
    api_groups = re.compile(r"policy/v\d+(?:(?:alpha|beta)\d+)?")
    missing = []
    for page in PAGES:
        named = set(re.findall(r"(?<![\w/.-])((?:tests|tools|components|policy|stacks|render|config_model"
                               r"|apivalidation|docs|examples|e2e|\.github|\.ci)/[\w./-]*\w)(?!\w|\.?[<*])",
                               _text(page)))
        missing += [f"{page.relative_to(PROJECT_DIR)}: {p}" for p in sorted(named - made_by_commands)
                    if not (PROJECT_DIR / p).exists() and not api_groups.fullmatch(p)]
    assert not missing, f"paths that do not exist: {missing}"


def test_the_walkthrough_for_a_model_that_is_not_deepseek_prints_what_it_says(tmp_path, capsys):
    """The README's walkthrough as a newcomer follows it, command by command: its own `cp && sed` line
    run with the real coreutils, its YAML block appended (the `$EDITOR` step), the render `make render`
    runs, then each inspection command (`grep`, `sed`) run as written in the stack's directory. Each
    must print what its comment says: the plan's rows with 4 GPUs per pod, 256Gi memory and a 32Gi
    /dev/shm; vLLM's arguments with TP=4, its context and parser, nothing of DeepSeek's. The objects
    themselves must say the same. A command the test does not know how to run fails it."""
    import shutil
    import subprocess

    import yaml

    from render.__main__ import main as render_main

    walkthrough = _subsection(README, "### Walkthrough: a model that is not DeepSeek")
    block = re.search(r"```yaml\n(.*?)```", walkthrough, re.S).group(1)
    commands = re.search(r"```sh\n(.*?)```", walkthrough, re.S).group(1).splitlines()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(PROJECT_DIR / name, tmp_path / name)
    stack_file = tmp_path / "Pulumi.qwen.yaml"
    printed: dict[str, str] = {}   # inspection command -> its output
    for line in commands:
        command = line.split("  #")[0].strip()
        if command.startswith("cp Pulumi.dev.yaml Pulumi.qwen.yaml"):
            subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
            assert "llm-serving:models:" not in stack_file.read_text()
        elif command == "$EDITOR Pulumi.qwen.yaml":
            stack_file.write_text(stack_file.read_text() + block)
        elif command == "make render STACK=qwen":   # the Makefile's `python -m render --stack $(STACK)`
            code = render_main(["--stack", "qwen", "--project-dir", str(tmp_path)])
            assert code == 0, capsys.readouterr().err
        elif command.split()[0] in ("grep", "sed"):
            run = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert run.returncode == 0 and run.stdout.strip(), f"`{command}` printed nothing: {run.stderr}"
            printed[command] = run.stdout
        elif command != "make check STACK=qwen":   # tests/test_stack_files.py runs make check on a new stack
            raise AssertionError(f"README walkthrough: no check for `{command}`; add one to this test")
    out = tmp_path / "build" / "qwen"
    plan = (out / "plan.md").read_text()
    (from_plan,) = [o for c, o in printed.items() if "build/qwen/plan.md" in c]
    (from_yaml,) = [o for c, o in printed.items() if "build/qwen/kubernetes.yaml" in c]

    # The plan's rows the grep prints, read by their tables' headers (in plan.md).
    def column(header_cell: str, row_start: str) -> str:
        # The row of that header's own table (several tables start their rows alike), printed by the grep.
        lines = plan.splitlines()
        at = next(i for i, x in enumerate(lines) if x.startswith("| ") and f"| {header_cell} |" in x)
        row = next(x for x in lines[at:] if x.startswith(row_start))
        assert row in from_plan.splitlines(), (row, from_plan)
        cells = [c.strip() for c in lines[at].strip("|").split("|")]
        return [c.strip() for c in row.strip("|").split("|")][cells.index(header_cell)]

    assert column("GPUs per pod", "| Deployment | qwen-72b |") == "4"
    assert column("Memory limit", "| Deployment qwen-72b |") == "256Gi"
    assert column("/dev/shm", "| Deployment qwen-72b |") == "32Gi"

    # The arguments the sed prints: the YAML list items from `- serve` to the container's `command:`.
    lines = from_yaml.splitlines()
    assert lines[0].strip() == "- serve" and lines[-1].strip() == "command:", from_yaml
    printed_argv = [yaml.safe_load(x.strip()[2:]) for x in lines[:-1]]
    assert all(isinstance(a, str) for a in printed_argv), printed_argv

    objects = [o for o in yaml.safe_load_all((out / "kubernetes.yaml").read_text()) if o]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "qwen-72b"]
    pod = deployment["spec"]["template"]["spec"]
    (engine,) = [c for c in pod["containers"] if c["name"] == "engine"]
    assert engine["command"] == ["vllm"] and engine["args"] == printed_argv   # the sed printed the whole argv
    argv = printed_argv
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert argv[argv.index("--max-model-len") + 1] == "32768"
    assert argv[argv.index("--tool-call-parser") + 1] == "hermes"
    assert not [a for a in argv if "deepseek" in a.lower()], argv
    assert "--reasoning-parser" not in argv and "--trust-remote-code" not in argv
    limits, requests = engine["resources"]["limits"], engine["resources"]["requests"]
    assert limits["nvidia.com/gpu"] in (4, "4") and requests["cpu"] == "32" and limits["memory"] == "256Gi"
    (shm,) = [v for v in pod["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    assert shm["emptyDir"]["sizeLimit"] == "32Gi"
    assert "qwen-72b" in plan and "DeepSeek" not in plan.split("## ")[1], plan[:2000]


def _subsection(text: str, heading: str) -> str:
    """`text` from `heading` (a `### ` line) to the next heading."""
    start = text.index(f"\n{heading}\n")
    end = re.search(r"\n##+ ", text[start + 1:])
    return text[start:start + 1 + end.start()] if end else text[start:]
