"""Image references and mirrors: parsing, ECR pull-through caches, the registry copy Job."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import k8s_objects, render_stack

from components.image_refs import (
    copy_list,
    lifecycle_policy,
    parse_upstream,
    registry_repository,
)
from config_model import ImageRef, Images, Mirror, RegistryMirror
from policy.workloads import containers, pod_templates

SCRIPTS = Path(__file__).resolve().parent.parent / "components" / "scripts"
D = "sha256:" + "a" * 64


@pytest.mark.parametrize("upstream,registry,repository,tag", [
    ("vllm/vllm-openai:v0.26.0-cu129", "docker.io", "vllm/vllm-openai", "v0.26.0-cu129"),
    ("python:3.12-slim", "docker.io", "library/python", "3.12-slim"),
    ("amazon/aws-cli", "docker.io", "amazon/aws-cli", None),
    ("quay.io/skopeo/stable", "quay.io", "skopeo/stable", None),
    ("registry.internal:5000/llm/vllm:v1", "registry.internal:5000", "llm/vllm", "v1"),
    ("nvcr.io/nvidia/vllm:26.01", "nvcr.io", "nvidia/vllm", "26.01"),
])
def test_parse_upstream(upstream, registry, repository, tag):
    up = parse_upstream(upstream)
    assert (up.registry, up.repository, up.tag) == (registry, repository, tag)


def test_every_pod_of_every_stack_pulls_by_digest_from_its_mirror():
    expected_prefix = {"dev": "", "staging": "registry.staging.internal:5000/llm-serving/",
                       "prod": "000000000000.dkr.ecr.us-west-2.amazonaws.com/llm-serving-"}
    for stack, prefix in expected_prefix.items():
        for obj in k8s_objects(render_stack(stack)):
            for ref in pod_templates(obj["kind"], obj):
                for _, c in containers(ref.template):
                    assert "@sha256:" in c["image"]
                    if not obj["metadata"]["name"].startswith("image-mirror-"):
                        assert c["image"].startswith(prefix), (stack, c["image"])


def test_exports_name_each_workloads_images():
    out = render_stack("staging").outputs
    images = out["workloadImages"]
    # Engines by workload name; the sync Job by its directory, a key no revision changes (contract 2).
    assert set(images) == {"deepseek-v4-flash", "deepseek-v4-flash-dspark", "sync/DeepSeek-V4-Flash-0731"}
    assert images["deepseek-v4-flash"]["engine"] == out["engineImage"]
    assert all("@sha256:" in ref for refs in images.values() for ref in refs.values())


def test_ecr_mirror_caches_through_docker_hub_with_its_credential_and_keeps_a_lifecycle():
    r = render_stack("prod")
    (rule,) = [x for x in r.resources if x.type == "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"]
    assert rule.inputs["upstreamRegistryUrl"] == "registry-1.docker.io"
    assert rule.inputs["ecrRepositoryPrefix"] == "llm-serving-docker-hub"
    assert rule.inputs["credentialArn"].startswith("arn:aws:secretsmanager:")
    repos = {x.inputs["name"] for x in r.resources if x.type == "aws:ecr/repository:Repository"}
    assert repos == {"llm-serving-docker-hub/vllm/vllm-openai", "llm-serving-docker-hub/amazon/aws-cli",
                     "llm-serving-docker-hub/library/python"}
    policies = [x for x in r.resources if x.type == "aws:ecr/lifecyclePolicy:LifecyclePolicy"]
    assert len(policies) == 3
    assert json.loads(policies[0].inputs["policy"]) == json.loads(lifecycle_policy(30))
    assert r.outputs["engineImage"] == ("000000000000.dkr.ecr.us-west-2.amazonaws.com/llm-serving-docker-hub/"
                                        "vllm/vllm-openai@sha256:3c5c53248febaa72823a4b7e51aafa1cd2b65d860392e3930414da4d3864f541")


def test_registry_mirror_copies_by_digest_on_a_cpu_node_before_any_pod_pulls():
    r = render_stack("staging")
    job = next(o for o in k8s_objects(r) if o["metadata"]["name"].startswith("image-mirror-"))
    pod = job["spec"]["template"]["spec"]
    (copy,) = pod["containers"]
    assert copy["image"].startswith("quay.io/skopeo/stable@sha256:")
    assert "nvidia.com/gpu" not in json.dumps(copy["resources"])
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    plan = next(e["value"] for e in copy["env"] if e["name"] == "IMAGE_LIST")
    assert ("docker.io/vllm/vllm-openai@sha256:3c5c53248febaa72823a4b7e51aafa1cd2b65d860392e3930414da4d3864f541 "
            "registry.staging.internal:5000/llm-serving/docker.io/vllm/vllm-openai:v0.26.0-cu129 "
            "sha256:3c5c53248febaa72823a4b7e51aafa1cd2b65d860392e3930414da4d3864f541") in plan.splitlines()
    # Engines and sync Jobs wait for the copy and pull with the registry secret.
    engine = next(x for x in r.resources if x.name == "deepseek-v4-flash-stormservice")
    assert any(d.endswith(job_name_of(r)) for d in engine.options["dependsOn"])
    for obj in k8s_objects(r):
        for ref in pod_templates(obj["kind"], obj):
            if obj is not job:
                assert ref.template["spec"]["imagePullSecrets"] == [{"name": "llm-serving-registry"}]
    secret = next(o for o in k8s_objects(r) if o["metadata"]["name"] == "llm-serving-registry")
    assert secret["type"] == "kubernetes.io/dockerconfigjson" and secret["stringData"] == {".dockerconfigjson": "[secret]"}


def job_name_of(r) -> str:
    return next(x.name for x in r.resources if x.type == "kubernetes:batch/v1:Job" and x.name.startswith("images-"))


def test_copy_list_is_stable_and_complete():
    images = Images(vllm=ImageRef(upstream="vllm/vllm-openai:v1", digest=D),
                    model_sync=ImageRef(upstream="amazon/aws-cli", digest=D),
                    model_verify=ImageRef(upstream="python:3.12-slim", digest=D),
                    mirror=Mirror(kind="registry", registry=RegistryMirror(
                        host="reg:5000", copy_image=ImageRef(upstream="quay.io/skopeo/stable", digest=D))))
    lines = copy_list(images.named(), images.mirror.registry).splitlines()
    assert lines == [f"docker.io/amazon/aws-cli@{D} reg:5000/llm-serving/docker.io/amazon/aws-cli:pinned {D}",
                     f"docker.io/library/python@{D} reg:5000/llm-serving/docker.io/library/python:3.12-slim {D}",
                     f"docker.io/vllm/vllm-openai@{D} reg:5000/llm-serving/docker.io/vllm/vllm-openai:v1 {D}"]
    assert registry_repository(images.vllm, images.mirror.registry) == "reg:5000/llm-serving/docker.io/vllm/vllm-openai"


# ---- mirror_images.sh with a stand-in skopeo ----

FAKE_SKOPEO = """#!/bin/sh
echo "$*" >> "$SKOPEO_LOG"
case "$1" in
  copy) exit 0;;
  inspect) case "$*" in *"$MISSING_DIGEST"*) exit 1;; esac; exit 0;;
esac
"""


def run_mirror(tmp_path, missing: str = "none"):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "skopeo"
    tool.write_text(FAKE_SKOPEO)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    plan = (f"docker.io/vllm/vllm-openai@{D} reg:5000/m/docker.io/vllm/vllm-openai:v1 {D}\n"
            f"docker.io/library/python@sha256:{'b' * 64} reg:5000/m/docker.io/library/python:3 sha256:{'b' * 64}")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SKOPEO_LOG": str(tmp_path / "log"), "IMAGE_LIST": plan,
           "AUTHFILE": "/auth/.dockerconfigjson", "MISSING_DIGEST": missing}
    proc = subprocess.run(["/bin/sh", str(SCRIPTS / "mirror_images.sh")], env=env, capture_output=True, text=True)
    return proc, (tmp_path / "log").read_text().splitlines()


def test_mirror_script_copies_all_platforms_preserving_digests_then_checks_them(tmp_path):
    proc, calls = run_mirror(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == (f"copy --all --preserve-digests --retry-times 3 --dest-authfile /auth/.dockerconfigjson "
                        f"docker://docker.io/vllm/vllm-openai@{D} docker://reg:5000/m/docker.io/vllm/vllm-openai:v1")
    assert calls[1] == f"inspect --raw --authfile /auth/.dockerconfigjson docker://reg:5000/m/docker.io/vllm/vllm-openai@{D}"
    assert len(calls) == 4


def test_mirror_script_fails_when_a_digest_is_missing_after_the_copy(tmp_path):
    proc, calls = run_mirror(tmp_path, missing="b" * 64)
    assert proc.returncode == 1
    assert "is not at reg:5000/m/docker.io/library/python after the copy" in proc.stderr
