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


def test_render_is_byte_identical_across_processes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_cli("--stack", "prod", "--out", str(a), seed="1").returncode == 0
    assert run_cli("--stack", "prod", "--out", str(b), seed="2").returncode == 0
    for name in ("kubernetes.yaml", "resources.json", "outputs.json", "plan.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


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
    assert sf.config["llm-serving:apiKey"] == stackfile.MASK and "llm-serving:apiKey" in sf.secret_keys
    rendered = runtime.render(sf)
    assert rendered.missing_secrets == []
    text = output.kubernetes_yaml(rendered) + output.resources_json(rendered) + output.plan_md(rendered)
    assert cipher not in text and "Every required secret is set" in text


def test_secret_values_never_reach_any_output():
    sf = stackfile.read(PROJECT_DIR, "dev")
    plain = {"apiKey": "sk-live-4242", "objectStoreAccessKeyId": "AKID-4242", "objectStoreSecretAccessKey": "sak-4242",
             "cephUserKey": "AQD-4242", "kubeconfig": "apiVersion: v1 # kube-4242"}
    for key, value in plain.items():
        sf.config[f"llm-serving:{key}"] = value
        sf.secret_keys.append(f"llm-serving:{key}")
    rendered = runtime.render(sf)
    text = (output.kubernetes_yaml(rendered) + output.resources_json(rendered) + output.outputs_json(rendered)
            + output.plan_md(rendered))
    assert "4242" not in text
    provider = next(r for r in rendered.resources if r.type == "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == stackfile.MASK


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
    assert "| Deployment | deepseek-v4-flash | 2 | 0 | 8 | 16 |" in plan
    assert "engine: startup=tcpSocket, readiness=tcpSocket, liveness=tcpSocket" in plan
    assert "ro/ro (model-store)" in plan
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
