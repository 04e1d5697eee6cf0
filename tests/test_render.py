"""The offline render as users run it: files, determinism, secrets, exit codes, exports."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml
from conftest import PROJECT_DIR, STACKS, render_stack
from test_exports import documented_keys

from render import output, runtime, stackfile

EXPORT_KEYS = documented_keys()  # docs/exports.md is the one list


def run_cli(*args: str, seed: str = "0", cwd: Path = PROJECT_DIR) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run([sys.executable, "-m", "render", *args], cwd=PROJECT_DIR, env=env,
                          capture_output=True, text=True, timeout=120)


def bad_project(tmp_path: Path, text: str) -> Path:
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    return tmp_path


def test_bad_config_exits_2_with_the_messages_and_writes_nothing(tmp_path):
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    project = bad_project(tmp_path, dev.replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: 4")
                          .replace("startupBudgetSeconds: 1800", "startupBudgetSeconds: 300"))
    out = tmp_path / "build"
    proc = run_cli("--stack", "bad", "--project-dir", str(project), "--out", str(out))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "Pulumi.bad.yaml: llm-serving:gpuBudget = 4: the workloads need 8 GPUs" in proc.stderr
    assert "Pulumi.bad.yaml: llm-serving:models[0].startupBudgetSeconds = 300: must be at least 720" in proc.stderr
    assert not out.exists()


def test_unknown_stack_exits_2(tmp_path):
    proc = run_cli("--stack", "nope", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "Pulumi.nope.yaml" in proc.stderr


def test_encrypted_values_are_masked_never_decrypted(tmp_path):
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    cipher = "v1:c2VjcmV0LWNpcGhlcnRleHQ="
    secrets = "".join(f"  llm-serving:{k}:\n    secure: {cipher}\n"
                      for k in ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey"))
    project = bad_project(tmp_path, dev + secrets)
    sf = stackfile.read(project, "bad")
    stand_in = sf.config["llm-serving:apiKey"]
    assert stand_in == stackfile.placeholder(cipher) and cipher not in stand_in and "llm-serving:apiKey" in sf.secret_keys
    rendered = runtime.render(sf)
    assert rendered.missing_secrets == []
    text = output.kubernetes_yaml(rendered) + output.resources_json(rendered) + output.plan_md(rendered)
    assert cipher not in text and stand_in not in text and "Every required secret is set" in text


@pytest.mark.parametrize("stack", STACKS)
def test_exports_are_the_pinned_contract(stack):
    outputs = render_stack(stack).outputs
    assert set(outputs) == EXPORT_KEYS
    assert outputs["gpuTotal"] <= outputs["gpuBudget"]
    assert "@sha256:" in outputs["engineImage"]
    assert outputs["endpoints"][outputs["servedModelName"]] == outputs["endpoint"]


def test_manifests_keep_integers_as_integers():
    docs = list(yaml.safe_load_all(output.kubernetes_yaml(render_stack("prod"))))
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2 and isinstance(dep["spec"]["replicas"], int)
    assert isinstance(dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], int)
    assert "replicas: 2.0" not in output.kubernetes_yaml(render_stack("prod"))


def test_plan_reads_as_a_review():
    plan = output.plan_md(render_stack("prod"))
    assert "GPUs at peak, rollouts included: **16 of budget 16**" in plan
    assert "| Deployment | deepseek-v4-flash | 2 (autoscaled 1-2) | 0 | 8 | 16 |" in plan
    assert "engine: startup=tcpSocket, readiness=tcpSocket, liveness=tcpSocket" in plan
    assert f"ro/ro ({render_stack('prod').outputs['modelClaimName']})" in plan
    assert "`aws:s3/bucket:Bucket` model-store-bucket | True | True |" in plan


def test_main_program_refuses_bad_config_without_registering():
    sf = stackfile.read(PROJECT_DIR, "dev")
    sf.config["llm-serving:gpuBudget"] = "4"
    raised = []

    def program():
        with pytest.raises(pulumi.RunError, match="Pulumi.dev.yaml: llm-serving:gpuBudget = 4") as err:
            runpy.run_path(str(PROJECT_DIR / "__main__.py"))
        raised.append(err.value)
        return {}

    assert runtime.record("dev", program, sf.config, sf.secret_keys).resources == []
    assert raised


def test_main_program_refuses_what_the_render_refuses_with_the_same_lines(tmp_path, capsys):
    """Under `pulumi up` the same config problem is a RunError carrying the render's lines."""
    from render.__main__ import main as render_main

    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    text = dev.replace("maxNumSeqs: 64", "maxNumSeqs: 64\n        maxModelLen: 4096")
    project = bad_project(tmp_path, text)
    assert render_main(["--stack", "bad", "--project-dir", str(project), "--out", str(tmp_path / "out")]) == 2
    render_lines = capsys.readouterr().err.splitlines()[1:]
    assert render_lines and all("maxModelLen" in line for line in render_lines)
    sf = stackfile.read(project, "bad")
    for key in ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey"):
        sf.config[f"llm-serving:{key}"] = "x"
        sf.secret_keys.append(f"llm-serving:{key}")
    raised = []

    def program():
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(PROJECT_DIR / "__main__.py"))
        raised.append(err.value)
        return {}

    assert runtime.record("bad", program, sf.config, sf.secret_keys).resources == []
    assert str(raised[0]).splitlines()[1:] == render_lines


def test_main_program_exports_under_mocks():
    sf = stackfile.read(PROJECT_DIR, "dev")
    for key in ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey"):
        sf.config[f"llm-serving:{key}"] = "x"
        sf.secret_keys.append(f"llm-serving:{key}")
    exported = {}
    original = pulumi.export

    def program():
        pulumi.export = lambda k, v: exported.__setitem__(k, v)
        try:
            runpy.run_path(str(PROJECT_DIR / "__main__.py"))
        finally:
            pulumi.export = original
        return exported

    rendered = runtime.record("dev", program, sf.config, sf.secret_keys)
    assert set(rendered.outputs) == EXPORT_KEYS
    assert len(rendered.resources) == len(render_stack("dev").resources)


KNOWN_SECRETS = {"apiKey": "sk-live-canary-4711", "objectStoreAccessKeyId": "AKIDCANARY4711",
                 "objectStoreSecretAccessKey": "cos-secret-canary-4711", "cephUserKey": "AQDcephcanary4711==",
                 "registryDockerConfigJson": '{"auths":{"registry.staging.internal:5000":{"auth":"cmVnOmNhbmFyeTQ3MTE="}}}',
                 "kubeconfig": "apiVersion: v1\nkind: Config # kube-canary-4711"}


@pytest.mark.parametrize("stack", STACKS)
def test_known_secret_values_never_leave_as_plaintext(stack, tmp_path):
    """Every secret set with a known value: none of it appears in any rendered file or the CLI output."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    # The render never decrypts: feed it the plaintext through the runtime, as `pulumi up` would.
    sf = stackfile.read(PROJECT_DIR, stack)
    for key, value in KNOWN_SECRETS.items():
        sf.config[f"llm-serving:{key}"] = value
        sf.secret_keys.append(f"llm-serving:{key}")
    rendered = runtime.render(sf)
    written = output.write(rendered, tmp_path / "out")
    text = "".join(p.read_text() for p in written)
    for value in KNOWN_SECRETS.values():
        for fragment in (value, "canary4711", "canary-4711", "cmVnOmNhbmFyeTQ3MTE="):
            if fragment in value:
                assert fragment not in text, (stack, fragment)
    # Kubernetes Secrets take their data only from secret Outputs: every value arrives masked.
    for r in rendered.resources:
        if r.type == "kubernetes:core/v1:Secret":
            assert r.inputs["stringData"] and set(r.inputs["stringData"].values()) == {stackfile.MASK}, r.name


def test_cli_output_carries_no_secret(tmp_path):
    project = bad_project(tmp_path, (PROJECT_DIR / "Pulumi.staging.yaml").read_text() + "".join(
        f"  llm-serving:{k}:\n    secure: v1:canary4711{k}\n" for k in ("apiKey", "registryDockerConfigJson")))
    proc = run_cli("--stack", "bad", "--project-dir", str(project), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0
    assert "canary4711" not in proc.stdout + proc.stderr
    assert not any("canary4711" in p.read_text() for p in (tmp_path / "out").iterdir())


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_renders_byte_identically(stack, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_cli("--stack", stack, "--out", str(a), seed="3").returncode == 0
    assert run_cli("--stack", stack, "--out", str(b), seed="4").returncode == 0
    for name in ("kubernetes.yaml", "resources.json", "outputs.json", "plan.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("stack", STACKS)
def test_plan_matches_the_committed_snapshot(stack):
    """A pull request that changes what a stack deploys shows it as a diff of tests/snapshots/.
    After reviewing the change: `make snapshots`."""
    snapshot = PROJECT_DIR / "tests" / "snapshots" / f"{stack}.plan.md"
    if not snapshot.is_file():
        pytest.fail(f"{snapshot.relative_to(PROJECT_DIR)} is missing: a new stack's plan is reviewed like any "
                    f"change: run `make snapshots`, read the file and commit it with Pulumi.{stack}.yaml")
    assert output.plan_md(render_stack(stack)) == snapshot.read_text(encoding="utf-8")


SECRETS = ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey")


def test_strict_refuses_missing_secrets_one_line_each_and_passes_once_they_are_set(tmp_path, capsys):
    from render.__main__ import main as render_main

    missing = render_stack("dev").missing_secrets
    assert missing  # the committed dev stack holds no secret: every required one is missing
    out = tmp_path / "out"
    assert render_main(["--stack", "dev", "--strict", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"missing secrets ({len(missing)} secrets, --strict):"
    assert lines[1:] == [f"Pulumi.dev.yaml: llm-serving:{k}: is a required secret and is not set; set it with "
                         f"`pulumi config set --secret llm-serving:{k} <value>`" for k in missing]
    assert not out.exists()
    cipher = "v1:c2VjcmV0LWNpcGhlcnRleHQ="
    (tmp_path / "p").mkdir()
    project = bad_project(tmp_path / "p", (PROJECT_DIR / "Pulumi.dev.yaml").read_text() + "".join(
        f"  llm-serving:{k}:\n    secure: {cipher}\n" for k in SECRETS))
    assert render_main(["--stack", "bad", "--strict", "--project-dir", str(project), "--out", str(out)]) == 0
    assert cipher not in capsys.readouterr().err


def test_a_refused_render_removes_the_stale_output_and_only_that(tmp_path, capsys):
    """build/<stack>/plan.md of an earlier render must not pass for the refused configuration's: the
    render's own files go, anything else in the directory (and so the directory) stays."""
    from render.__main__ import OUTPUT_FILES
    from render.__main__ import main as render_main

    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    project = bad_project(tmp_path, dev)
    (project / "Pulumi.worse.yaml").write_text(dev.replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: 4"))
    mine, own = tmp_path / "mine", project / "build" / "bad"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "resources.json").write_text("[]")
    assert render_main(["--stack", "bad", "--project-dir", str(project), "--out", str(mine), "--previous", str(empty)]) == 0
    assert render_main(["--stack", "bad", "--project-dir", str(project)]) == 0
    written = {p.name for p in mine.iterdir()} - {"notes.txt"}
    assert written == set(OUTPUT_FILES)  # every file a render writes is one it would remove
    assert {p.name for p in own.iterdir()} == set(OUTPUT_FILES) - {"changes.md"}
    capsys.readouterr()
    # --out elsewhere: the files go, the user's file and so the directory stay.
    assert render_main(["--stack", "worse", "--project-dir", str(project), "--out", str(mine)]) == 2
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert "removed the earlier render's" in capsys.readouterr().err
    # The default build/<stack>/ held only the render's files: it goes too. (The stack is refused by
    # name here: a refusal of the stack file `bad` in its own directory.)
    (project / "Pulumi.bad.yaml").write_text(dev.replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: 4"))
    assert render_main(["--stack", "bad", "--project-dir", str(project)]) == 2
    assert not own.exists() and (project / "build").is_dir()
    # An output directory that is the --previous render is this run's input: it stays whole.
    assert render_main(["--stack", "dev", "--out", str(own)]) == 0
    assert render_main(["--stack", "worse", "--project-dir", str(project), "--out", str(own), "--previous", str(own)]) == 2
    assert {p.name for p in own.iterdir()} == set(OUTPUT_FILES) - {"changes.md"}


def test_a_render_without_previous_drops_an_earlier_update_plan(tmp_path):
    from render.__main__ import main as render_main

    out, empty = tmp_path / "out", tmp_path / "empty"
    empty.mkdir()
    (empty / "resources.json").write_text("[]")
    assert render_main(["--stack", "dev", "--out", str(out), "--previous", str(empty)]) == 0
    assert (out / "changes.md").is_file()
    assert render_main(["--stack", "dev", "--out", str(out)]) == 0
    assert not (out / "changes.md").exists()
