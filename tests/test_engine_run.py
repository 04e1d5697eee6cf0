"""The program's real entry point (__main__.py) run the way `pulumi preview` and `pulumi up` run it:
config read from the stack files as the CLI reads them and handed over as the Python language host
hands it over, against a fake engine that answers like pulumi/pulumi v3.259.0's resource monitor
(tests/engine_host.py cites the sources). Issue 9, "What done looks like", second bullet.

Secrets are known canary strings; a canary may appear only inside a secret-signature value."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest
from cli_config import ConfigReadError, read_config
from conftest import PROJECT_DIR, STACKS, render_stack
from engine_host import (
    DEFAULT_PROVIDER_DENIED,
    DUPLICATE_URN,
    ROOT_STACK_TYPE,
    RunResult,
    contains_unknown,
    is_secret,
    run_program,
    short,
)

from render import runtime, stackfile
from stacks import loader

# make test runs --dist loadgroup: one worker takes the whole file, so the six program runs of the session fixture, once.
pytestmark = pytest.mark.xdist_group("engine-run")


VENV = PROJECT_DIR / ".venv"
MODES = ("preview", "up")


def canary(key: str, path: str = "") -> str:
    name = key.split(":", 1)[-1] + (f"-{path}" if path else "")
    return f"canary-{name}-7f3a"


def engine_config(stack: str, stack_text: str | None = None) -> tuple[str, dict[str, str], list[str]]:
    """The CLI's config for a stack, with every secret the stack needs but lacks supplied as a
    canary (as `pulumi config set --secret` would add it)."""
    project, config, secret_keys = read_config(PROJECT_DIR, stack, canary, stack_text)
    for key in render_stack(stack).missing_secrets:
        full = f"{loader.NAMESPACE}:{key}"
        config[full] = canary(full)
        secret_keys.append(full)
    return project, config, secret_keys


@pytest.fixture(scope="session")
def engine_runs() -> dict[tuple[str, str], RunResult]:
    """All six runs once per session, in parallel (each is a separate program process). The configs
    are made first, on this thread: the render behind missing_secrets needs the main event loop."""
    configs = {s: engine_config(s) for s in STACKS}
    keys = [(s, m) for s in STACKS for m in MODES]

    def run(key: tuple[str, str]) -> RunResult:
        stack, mode = key
        project, config, secret_keys = configs[stack]
        return run_program(PROJECT_DIR, VENV, project, stack, config, secret_keys, dry_run=mode == "preview")

    with ThreadPoolExecutor(max_workers=len(keys)) as pool:
        return dict(zip(keys, pool.map(run, keys)))


@pytest.fixture(params=MODES)
def mode(request) -> str:
    return request.param


@pytest.fixture
def run(engine_runs, stack, mode) -> RunResult:
    return engine_runs[(stack, mode)]


def _explain(result: RunResult) -> str:
    logs = "\n".join(f"{e.severity}: {e.message}" for e in result.logs if e.severity != "DEBUG")
    return f"exit {result.exit_code}\nengine errors: {result.engine_errors}\nlogs:\n{logs}\nstderr:\n{result.stderr[-3000:]}"


def test_program_exits_0(run):
    assert run.exit_code == 0 and not run.engine_errors, _explain(run)


def test_no_duplicate_urn(run):
    urns = [r.urn for r in run.resources]
    assert not [e for e in run.engine_errors if e.startswith("Duplicate resource URN")], _explain(run)
    assert len(urns) == len(set(urns))


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string outside a secret-signature value, with where it was found."""
    if is_secret(value):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, f"{where}.<key>")
            yield from _strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


def _forms(secret: str) -> list[str]:
    """The canary and the part of its base64 text that does not depend on neighbouring bytes (a
    Kubernetes Secret's `data`), at each of the three byte alignments."""
    forms = [secret]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + secret.encode()).decode()
        forms.append(encoded[4 if pad else 0:-4])
    return forms


def _everything(result: RunResult) -> Iterator[tuple[str, str]]:
    for r in result.resources:
        yield from _strings([r.urn, r.name], f"{r.urn} name")
        for part in ("inputs", "options", "outputs", "registered_outputs"):
            yield from _strings(getattr(r, part), f"{r.urn} {part}")
    for i, entry in enumerate(result.logs):
        yield f"log[{i}] {entry.severity}", entry.message
    yield from _strings(result.engine_errors, "engine errors")
    yield "program stdout", result.stdout
    yield "program stderr", result.stderr


def _secret_texts(value: Any) -> Iterator[str]:
    if is_secret(value):
        yield json.dumps(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _secret_texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _secret_texts(v)


def test_no_canary_outside_a_secret(run, stack):
    _, config, secret_keys = engine_config(stack)
    canaries = {config[k] for k in secret_keys}
    leaks = [f"{where}: {form!r} in {text[:200]!r}" for where, text in _everything(run)
             for c in canaries for form in _forms(c) if form in text]
    assert not leaks, "\n".join(leaks)
    # The check above means something only if the secrets reached the engine at all (wrapped).
    wrapped = "\n".join(t for r in run.resources for t in _secret_texts(r.inputs))
    assert {c for c in canaries if c not in wrapped} == set()


def test_a_leaked_canary_is_found(tmp_path: Path):
    """The leak check fails where it should: a secret unwrapped into a plain input is found, the same
    secret kept wrapped is not."""
    (tmp_path / "__main__.py").write_text(
        "import pulumi\n"
        "token = pulumi.Config().require_secret('token')\n"
        "pulumi.ComponentResource('test:index:Thing', 'kept', {'token': token})\n"
        "pulumi.ComponentResource('test:index:Thing', 'leaky', {'token': pulumi.Output.unsecret(token)})\n")
    token = canary("leak:token")
    result = run_program(tmp_path, VENV, "leak", "dev", {"leak:token": token}, ["leak:token"], dry_run=False)
    assert result.exit_code == 0, _explain(result)
    found = [where for where, text in _everything(result) if token in text]
    assert found == ["urn:pulumi:dev::leak::test:index:Thing::leaky inputs.token"]


def test_render_reads_the_config_the_cli_hands_over(stack):
    """The offline render runs on the same config strings as the engine run, or the two are not
    comparable (e.g. a float the CLI hands over as Go JSON text `2`, not `2.0`)."""
    _, config, secret_keys = read_config(PROJECT_DIR, stack, lambda key, path: stackfile.MASK)
    read = stackfile.read(PROJECT_DIR, stack)
    assert read.config == config
    assert sorted(read.secret_keys) == sorted(secret_keys)


def test_up_registers_no_unknown(engine_runs, stack):
    """Under `pulumi up` every provider answer is known, so no input or stack output may be unknown."""
    result = engine_runs[(stack, "up")]
    unknown = [r.urn for r in result.resources if contains_unknown(r.inputs) or contains_unknown(r.registered_outputs)]
    assert not unknown


def _resource_set(items) -> set[tuple[str, str, str]]:
    return {(r.type, r.name, r.parent) for r in items}


def test_same_resources_as_the_render(run, stack):
    engine = {(r.type, r.name, short(r.parent)) for r in run.resources if r.type != ROOT_STACK_TYPE}
    rendered = _resource_set(render_stack(stack).resources)
    assert engine == rendered, f"only under the engine: {sorted(engine - rendered)}\n" \
                               f"only in the render: {sorted(rendered - engine)}"


def test_stack_outputs_as_the_render(run, stack):
    """The stack outputs the engine keeps (RegisterResourceOutputs of the root stack) are the keys
    the render reports: a key the engine never receives is a key consumers never get."""
    outputs = run.stack.registered_outputs or {}
    rendered = render_stack(stack).outputs
    assert set(outputs) == set(rendered), f"rendered but not sent to the engine: {sorted(set(rendered) - set(outputs))}; " \
                                          f"sent but not rendered: {sorted(set(outputs) - set(rendered))}"


def test_duplicate_urn_is_refused_with_the_engine_message(tmp_path: Path):
    (tmp_path / "__main__.py").write_text(
        "import pulumi\n"
        "pulumi.ComponentResource('test:index:Thing', 'same')\n"
        "pulumi.ComponentResource('test:index:Thing', 'same')\n")
    result = run_program(tmp_path, VENV, "dup", "dev", {}, [], dry_run=True, timeout=60)
    urn = "urn:pulumi:dev::dup::test:index:Thing::same"
    assert result.engine_errors == [DUPLICATE_URN.format(urn=urn)], _explain(result)
    assert result.exit_code != 0 and result.failed, _explain(result)
    assert [r.urn for r in result.resources].count(urn) == 1


def test_custom_resource_without_explicit_provider_is_refused(tmp_path: Path):
    """Pulumi.yaml disables default providers; the engine then refuses a custom resource that names
    none (step_generator.go loadResourceProvider, GetDefaultProviderDenied)."""
    (tmp_path / "__main__.py").write_text(
        "import pulumi\npulumi.CustomResource('kubernetes:core/v1:Namespace', 'ns', {})\n")
    config = {"pulumi:disable-default-providers": '["*"]'}
    result = run_program(tmp_path, VENV, "nodefault", "dev", config, [], dry_run=True, timeout=60)
    urn = "urn:pulumi:dev::nodefault::kubernetes:core/v1:Namespace::ns"
    assert result.engine_errors == [DEFAULT_PROVIDER_DENIED.format(pkg="kubernetes", urn=urn)], _explain(result)
    assert result.exit_code != 0


def test_config_error_is_one_message_without_traceback(tmp_path: Path):
    """gpuBudget below what the workloads need: __main__.py raises pulumi.RunError, which the exec
    script logs as one error and exits 1; nothing but the root stack is registered."""
    text = (PROJECT_DIR / "Pulumi.dev.yaml").read_text().replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: 4")
    assert "gpuBudget: 4" in text
    project, config, secret_keys = engine_config("dev", text)
    result = run_program(PROJECT_DIR, VENV, project, "dev", config, secret_keys, dry_run=True, timeout=60)
    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    with pytest.raises(loader.ConfigError) as refused:
        runtime.render(stackfile.read(tmp_path, "dev"))
    errors = [e.message for e in result.logs if e.severity == "ERROR"]
    assert result.exit_code == 1, _explain(result)
    assert errors == [f"invalid stack configuration:\n{refused.value}"], _explain(result)
    assert "gpuBudget" in errors[0]
    assert not [e for e in result.logs if "Traceback" in e.message] and "Traceback" not in result.stderr
    assert [r.type for r in result.resources] == [ROOT_STACK_TYPE]


def test_stack_file_is_read_as_the_cli_reads_it():
    """gopkg.in/yaml.v3 (YAML 1.2 words, Go numbers) and config/map.go Decrypt (Go JSON text for
    anything not a string; a key holding any `secure:` leaf is a secret key)."""
    text = ("config:\n"
            "  llm-serving:flag: off\n"
            "  llm-serving:on: yes\n"
            "  llm-serving:ratio: 2.0\n"
            "  llm-serving:version: 1.10\n"
            "  llm-serving:quoted: \"2024\"\n"
            "  llm-serving:octal: 0o17\n"
            "  llm-serving:nested:\n"
            "    url: https://a.example/?x=<y>&z\n"
            "    token:\n"
            "      secure: v1:abc\n"
            "  llm-serving:environment: dev\n"
            "  llm-serving:namespace: ns\n"
            "  llm-serving:gpuBudget: 8\n")
    _, config, secret_keys = read_config(PROJECT_DIR, "dev", canary, text)
    assert config["llm-serving:flag"] == "off" and config["llm-serving:on"] == "yes"
    assert config["llm-serving:ratio"] == "2" and config["llm-serving:version"] == "1.1"
    assert config["llm-serving:quoted"] == "2024" and config["llm-serving:octal"] == "15"
    assert config["llm-serving:nested"] == \
        '{"token":"canary-nested-token-7f3a","url":"https://a.example/?x=\\u003cy\\u003e\\u0026z"}'
    assert secret_keys == ["llm-serving:nested"]
    assert config["pulumi:disable-default-providers"] == '["*"]'
    with pytest.raises(ConfigReadError, match='line 3: mapping key "llm-serving:a" already defined at line 2'):
        read_config(PROJECT_DIR, "dev", canary, "config:\n  llm-serving:a: 1\n  llm-serving:a: 2\n")
