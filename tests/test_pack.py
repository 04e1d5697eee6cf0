"""The CrossGuard pack: every policy's own `validate` on the rendered stacks (passing) and on
broken resources (failing). The PolicyPack object itself is never built here: that starts a server."""

from __future__ import annotations

import copy

import pytest
from conftest import STACKS, render_stack
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy import pack

POLICIES = pack.policies()


def seconds(value: str) -> float:
    return float(value.rstrip("s")) if value else 0.0


def options(r) -> PolicyResourceOptions:
    t = r.options["customTimeouts"]
    return PolicyResourceOptions(protect=r.options["protect"], ignore_changes=[],
                                 delete_before_replace=r.options["deleteBeforeReplace"], aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(seconds(t.get("create", "")),
                                                                      seconds(t.get("update", "")), 0),
                                 additional_secret_outputs=[], parent=r.parent or None)


def policy_resources(rendered, mutate=None) -> list[PolicyResource]:
    out = []
    for r in rendered.resources:
        props = copy.deepcopy(r.inputs)
        if mutate:
            mutate(r, props)
        out.append(PolicyResource(resource_type=r.type, props=props, urn=r.urn, name=r.name, opts=options(r),
                                  provider=None if not r.provider else type("P", (), {"urn": r.provider})(),
                                  parent=None, dependencies=[], property_dependencies={}))
    return out


def resource_violations(policy: ResourceValidationPolicy, resources: list[PolicyResource]) -> list[str]:
    found: list[str] = []
    for r in resources:
        args = ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, r.provider)
        policy.validate(args, lambda message, urn=None: found.append(message))
    return found


def stack_violations(policy: StackValidationPolicy, resources: list[PolicyResource]) -> list[str]:
    found: list[str] = []
    policy.validate(StackValidationArgs(resources), lambda message, urn=None: found.append(message))
    return found


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
        found = (resource_violations(p, resources) if isinstance(p, ResourceValidationPolicy)
                 else stack_violations(p, resources))
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
    found = resource_violations(by_name(name), resources)
    assert any(expected in m for m in found), found
    assert all(m.startswith("Deployment llm-serving-dev/deepseek-v4-flash:") for m in found)


def test_gpu_budget_comes_from_the_stack_facts():
    def shrink(r, props):
        if r.type == pack.STACK_FACTS:
            props["gpuBudget"] = 8
    found = stack_violations(by_name("gpu-budget"), policy_resources(render_stack("prod"), shrink))
    assert found == ["The stack needs 16 GPUs at peak (rollouts included) but its budget is 8; raise llm-serving:gpuBudget or lower replicas."]
    resources = [r for r in policy_resources(render_stack("prod")) if r.resource_type != pack.STACK_FACTS]
    assert "not built by llm-serving" in stack_violations(by_name("gpu-budget"), resources)[0]


def test_weights_bucket_must_stay_protected_and_versioned_outside_dev():
    rendered = render_stack("prod")
    resources = policy_resources(rendered)
    bucket = next(r for r in resources if r.resource_type == "aws:s3/bucket:Bucket")
    bucket.opts.protect = False
    no_versioning = [r for r in resources if r.resource_type != "aws:s3/bucketVersioning:BucketVersioning"]
    found = stack_violations(by_name("data-protected"), no_versioning)
    assert any("must be protected" in m for m in found) and any("versioning enabled" in m for m in found)
