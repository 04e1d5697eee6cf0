"""compileCache.kind claim (issue 28): the stack makes the compile cache's claim instead of asking for one
made by hand. One ReadWriteMany claim of the named class and size, valid as the API server validates a
claim, kept outside dev (retainOnDelete through the retained provider, as the bench results: a cache
survives `pulumi destroy`), made before the engine pods, and mounted writable only by the engine
containers, each at its own keyed directory; nothing else mounts it. SGLang accepts it as its persistent
cache; the rules name what is missing or clashes."""

from __future__ import annotations

import json

import pytest
from conftest import k8s_objects
from engine_containers import _variants
from variants import render, sglang_stack, variant_file

import apivalidation
from components.pod_template import ANN_CACHE_KEY, CACHE_MOUNT
from config_model.infra import COMPILE_CACHE_CLAIM
from policy.workloads import containers, gpu_count, pod_templates
from stacks.loader import ConfigError

CLAIM = {"kind": "claim", "storageClassName": "cephfs", "sizeGiB": 200}
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def with_cache(sf, cache: dict = CLAIM, **config):
    sf.config["llm-serving:compileCache"] = json.dumps(cache)
    for key, value in config.items():
        sf.config[f"llm-serving:{key}"] = value if isinstance(value, str) else json.dumps(value)
    return sf


def claim_resources(rendered, name: str = COMPILE_CACHE_CLAIM) -> list:
    return [r for r in rendered.resources if r.type == PVC and r.inputs["metadata"]["name"] == name]


@pytest.fixture(scope="module")
def renders() -> dict:
    """An SGLang stack (RoleBasedGroup), and vLLM's combined, StormService, same-pod P/D (a proxy sidecar
    beside the two engines) and RayClusterFleet P/D stacks, each with the claim."""
    variants = _variants()
    out = {"sglang": with_cache(sglang_stack())}
    out |= {name: with_cache(variants[name]) for name in ("stormservice", "pd-same-pod", "pd")}
    out["combined"] = with_cache(variant_file())
    return {name: render(sf) for name, sf in out.items()}


def test_one_read_write_many_claim_the_api_server_accepts(renders):
    for name, rendered in renders.items():
        (claim,) = claim_resources(rendered)
        obj = claim.inputs
        assert obj["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "cephfs", "volumeMode": "Filesystem",
                               "resources": {"requests": {"storage": "200Gi"}}}, name
        assert obj["metadata"]["namespace"] == rendered.outputs["namespace"]
        # The claim stays Pending until a pod mounts it where the class binds on first consumer.
        assert obj["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert apivalidation.validate([obj], None) == [], name
        # The dev variants: not kept, the claim goes with the stack.
        assert claim.options["retainOnDelete"] is False and claim.options["protect"] is False


def test_outside_dev_the_claim_is_kept_beyond_destroy_and_adopted_again():
    rendered = render(with_cache(variant_file(), environment="staging"))
    (claim,) = claim_resources(rendered)
    assert claim.options["retainOnDelete"] is True and claim.options["protect"] is False
    assert claim.provider and "retained" in claim.provider, claim.provider
    assert claim.inputs["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    (row,) = [line for line in rendered_plan(rendered).splitlines() if f"`{PVC}` compile-cache-claim |" in line]
    assert row.endswith("| False | True | - | False |"), row   # plan.md: not protected, retained on delete


def rendered_plan(rendered) -> str:
    from render.output import plan_md
    return plan_md(rendered)


def test_mounted_writable_only_by_the_engine_containers_each_at_its_key(renders):
    for name, rendered in renders.items():
        engines = 0
        for obj in k8s_objects(rendered):
            for ref in pod_templates(obj.get("kind"), obj):
                volumes = (ref.template.get("spec") or {}).get("volumes") or []
                cache = [v["name"] for v in volumes
                         if (v.get("persistentVolumeClaim") or {}).get("claimName") == COMPILE_CACHE_CLAIM]
                annotations = ref.template["metadata"].get("annotations") or {}
                for group, c in containers(ref.template):
                    mounts = [m for m in c.get("volumeMounts") or [] if m["name"] in cache]
                    if group == "containers" and gpu_count(c)[1] > 0:
                        (mount,) = mounts
                        assert mount["mountPath"] == CACHE_MOUNT and not mount.get("readOnly"), (name, c["name"])
                        assert mount["subPath"] == annotations[f"{ANN_CACHE_KEY}-{c['name']}"], (name, c["name"])
                        engines += 1
                    else:
                        assert mounts == [], f"{name}: {obj['kind']} {obj['metadata']['name']}: {c['name']} mounts it"
                if cache:
                    assert any(gpu_count(c)[1] for _, c in containers(ref.template)), (name, obj["kind"])
        assert engines >= (2 if name == "pd-same-pod" else 1), name


def test_the_engine_workloads_wait_for_the_claim(renders):
    for name, rendered in renders.items():
        (claim,) = claim_resources(rendered)
        workloads = [r for r in rendered.resources if r.custom and any(
            ref for ref in pod_templates(r.inputs.get("kind"), r.inputs)
            if any(gpu_count(c)[1] for _, c in containers(ref.template)))]
        assert workloads, name
        for w in workloads:
            assert f"{claim.type}::{claim.name}" in w.options["dependsOn"], (name, w.name)


def refusal(sf) -> str:
    with pytest.raises(ConfigError) as err:
        render(sf)
    return str(err.value)


def test_what_the_claim_needs_is_named():
    assert refusal(with_cache(variant_file(), {"kind": "claim"})) == (
        "Pulumi.variant.yaml: llm-serving:compileCache.storageClassName = (unset): is required when "
        "compileCache.kind is 'claim': the stack's claim is ReadWriteMany (every engine pod mounts it, on any node), "
        "which a cluster's default class often cannot provision; name one that can (CephFS, NFS, EFS and the like)")
    assert refusal(with_cache(variant_file(), {"kind": "emptyDir", "storageClassName": "cephfs"})) == (
        "Pulumi.variant.yaml: llm-serving:compileCache.storageClassName = 'cephfs': must be unset when "
        "compileCache.kind is 'emptyDir': only a claim of kind 'claim' is created by the stack")
    assert refusal(with_cache(variant_file(), {**CLAIM, "claimName": "llm-bench-results"})) == (
        "Pulumi.variant.yaml: llm-serving:compileCache.claimName = 'llm-bench-results': must differ from the claims "
        "the stack makes itself: operations.loadTest's results claim has it")
    named = render(with_cache(variant_file(), {**CLAIM, "claimName": "jit"}))
    assert claim_resources(named, "jit") and not claim_resources(named)


def test_sglang_takes_the_stacks_claim_and_refuses_an_empty_dir():
    render(with_cache(sglang_stack()))
    assert refusal(with_cache(sglang_stack(), {"kind": "emptyDir"})).startswith(
        "Pulumi.variant.yaml: llm-serving:compileCache.kind = 'emptyDir': must be 'claim' (the stack makes it) or "
        "'existingClaim' for SGLang (models[0]): ")


def test_an_existing_claim_is_mounted_and_not_made():
    rendered = render(with_cache(variant_file(), {"kind": "existingClaim", "claimName": "jit-cache"}))
    assert not claim_resources(rendered, "jit-cache")
    volumes = [v for o in k8s_objects(rendered) for ref in pod_templates(o.get("kind"), o)
               for v in ref.template["spec"].get("volumes", []) if v["name"] == "compile-cache"]
    assert volumes and all(v["persistentVolumeClaim"] == {"claimName": "jit-cache"} for v in volumes)
