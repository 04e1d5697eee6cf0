"""The CrossGuard pack: every policy's own `validate` on the rendered stacks (passing) and on
broken resources (failing). The PolicyPack object itself is never built here: that starts a server."""

from __future__ import annotations

import pytest
from conftest import STACKS, render_stack
from pulumi_policy import EnforcementLevel

from policy import pack
from render.crossguard import policy_resources, violations

POLICIES = pack.policies()


def by_name(name: str):
    return next(p for p in POLICIES if p.name == name)


def test_mandatory_names_are_real_policies_and_the_rest_advise():
    names = {p.name for p in POLICIES}
    assert pack.MANDATORY <= names
    for p in POLICIES:
        expected = EnforcementLevel.MANDATORY if p.name in pack.MANDATORY else EnforcementLevel.ADVISORY
        assert p.enforcement_level == expected, p.name


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_passes_on_every_stack(stack):
    resources = policy_resources(render_stack(stack))
    for p in POLICIES:
        found = violations(p, resources)
        assert found == [], (p.name, found)


def engine(props: dict) -> dict:
    return props["spec"]["template"]["spec"]["containers"][0]


def on_deployment(change):
    def mutate(r, props):
        if props.get("kind") == "Deployment" and props["metadata"]["name"] == "deepseek-v4-flash":
            change(props)
    return mutate


@pytest.mark.parametrize("name,change,expected", [
    ("engine-probes-tcp", lambda p: engine(p).update(livenessProbe={"httpGet": {"path": "/health", "port": 8000}}),
     "livenessProbe is not tcpSocket"),
    ("model-read-only", lambda p: engine(p)["volumeMounts"][0].update(readOnly=False), "without readOnly"),
    ("gpu-parallel-size", lambda p: engine(p)["resources"]["requests"].update({"nvidia.com/gpu": "7"}), "requests 7"),
    ("image-digest", lambda p: engine(p).update(image="vllm/vllm-openai:latest"), "not pinned by digest"),
    ("no-privileged", lambda p: engine(p)["securityContext"].update(privileged=True), "privileged false"),
    ("no-host-access", lambda p: p["spec"]["template"]["spec"].update(hostNetwork=True), "hostNetwork is on"),
    ("secret-refs", lambda p: engine(p)["env"].append({"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}),
     "not a secretKeyRef"),
    ("no-router-owned-routes", lambda p: p["metadata"]["labels"].update({"model.aibrix.ai/name": "m"}), "shared HTTPRoute"),
])
def test_mandatory_resource_policies_fail_broken_resources(name, change, expected):
    resources = policy_resources(render_stack("dev"), on_deployment(change))
    found = violations(by_name(name), resources)
    assert any(expected in m for m in found), found
    assert all(m.startswith("Deployment llm-serving-dev/deepseek-v4-flash:") for m in found)


def test_gpu_budget_comes_from_the_stack_facts():
    def shrink(r, props):
        if r.type == pack.STACK_FACTS:
            props["gpuBudget"] = 8
    found = violations(by_name("gpu-budget"), policy_resources(render_stack("prod"), shrink))
    assert found == ["The stack needs 16 GPUs at peak (rollouts included) but its budget is 8; raise llm-serving:gpuBudget or lower replicas."]
    resources = [r for r in policy_resources(render_stack("prod")) if r.resource_type != pack.STACK_FACTS]
    assert "not built by llm-serving" in violations(by_name("gpu-budget"), resources)[0]


def test_weights_bucket_must_stay_protected_and_versioned_outside_dev():
    rendered = render_stack("prod")
    resources = policy_resources(rendered)
    bucket = next(r for r in resources if r.resource_type == "aws:s3/bucket:Bucket")
    bucket.opts.protect = False
    no_versioning = [r for r in resources if r.resource_type != "aws:s3/bucketVersioning:BucketVersioning"]
    found = violations(by_name("data-protected"), no_versioning)
    assert any("must be protected" in m for m in found) and any("versioning enabled" in m for m in found)
