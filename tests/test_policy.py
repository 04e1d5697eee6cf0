"""Policy rules on every stack, and proof that each rule catches what it is for."""

from __future__ import annotations

import copy

import pytest
from conftest import PROJECT_DIR, k8s_objects, render_stack, stack_resources

from config_model import Environment
from policy import rules
from policy.workloads import pod_templates
from render import stackfile


def _deployment(stack="dev") -> dict:
    return copy.deepcopy(next(o for o in k8s_objects(render_stack(stack)) if o["kind"] == "Deployment"))


def _job(stack="dev") -> dict:
    return copy.deepcopy(next(o for o in k8s_objects(render_stack(stack)) if o["kind"] == "Job"))


def _engine(dep: dict) -> dict:
    return next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "engine")


def _violations(policy_name: str, obj: dict) -> list[str]:
    policy = next(p for p in rules.RESOURCE_POLICIES if p.name == policy_name)
    api = obj["apiVersion"]
    group_version = api if "/" in api else f"core/{api}"
    return policy.check(f"kubernetes:{group_version}:{obj['kind']}", obj)


@pytest.mark.parametrize("policy", rules.RESOURCE_POLICIES, ids=lambda p: p.name)
def test_every_resource_of_every_stack_passes(rendered, policy):
    for r in rendered.resources:
        assert policy.check(r.type, r.inputs) == [], r.name


def test_stack_rules_pass(rendered, stack):
    resources = stack_resources(rendered)
    assert rules.gpus_within_budget(resources, rendered.outputs["gpuBudget"]) == []
    assert rules.await_timeouts_cover_rollout(resources) == []
    environment = stackfile.read(PROJECT_DIR, stack).config["llm-serving:environment"]  # not the stack's name
    assert rules.data_is_protected(resources, environment) == []
    assert rules.explicit_providers_only(resources) == []
    assert rules.only_sync_jobs_write_models(resources) == []
    assert rules.routes_have_reference_grants(resources) == []
    assert rules.inference_pools_select_serving_pods(resources) == rules.inference_pools_have_their_picker(resources) == []
    assert rules.routes_reach_inference_pools(resources) == []


def test_every_stack_has_a_gpu_workload_checked(rendered):
    """The policies above are not vacuous: each stack has engine pods for them to inspect."""
    engines = [ref for o in k8s_objects(rendered) for ref in pod_templates(o["kind"], o)
               if (ref.template["metadata"].get("annotations") or {}).get(rules.ROLE) == "engine"]
    assert engines and all(rules.pod_gpus(ref.template) == 8 for ref in engines)


def test_gpu_total_matches_the_exported_total(rendered):
    assert rules.gpu_total(stack_resources(rendered)) == rendered.outputs["gpuTotal"]


@pytest.mark.parametrize("probe", rules.PROBES)
def test_http_health_probe_is_refused(probe):
    dep = _deployment()
    _engine(dep)[probe] = {"httpGet": {"path": "/health", "port": "engine"}, "periodSeconds": 10}
    assert any(probe in v and "tcpSocket" in v for v in _violations("engine-probes-tcp", dep))


def test_missing_probe_is_refused():
    dep = _deployment()
    del _engine(dep)["livenessProbe"]
    assert any("no livenessProbe" in v for v in _violations("engine-probes-tcp", dep))


def test_short_startup_allowance_is_refused():
    dep = _deployment()
    _engine(dep)["startupProbe"]["failureThreshold"] = 30
    assert any("startup allowance 300s" in v for v in _violations("startup-allowance", dep))


def test_writable_model_mount_is_refused():
    dep = _deployment()
    next(m for m in _engine(dep)["volumeMounts"] if m["name"] == "model")["readOnly"] = False
    assert any("without readOnly" in v for v in _violations("model-read-only", dep))


def test_writable_model_claim_is_refused():
    dep = _deployment()
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "model")
    vol["persistentVolumeClaim"]["readOnly"] = False
    assert any("not readOnly at the volume level" in v for v in _violations("model-read-only", dep))


def test_empty_dir_model_is_refused():
    dep = _deployment()
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "model")
    vol.pop("persistentVolumeClaim")
    vol["emptyDir"] = {}
    assert any("re-downloads" in v for v in _violations("model-read-only", dep))


def test_gpu_request_limit_mismatch_is_refused():
    dep = _deployment()
    _engine(dep)["resources"]["requests"]["nvidia.com/gpu"] = "4"
    assert any("requests 4 nvidia.com/gpu but limits 8" in v for v in _violations("gpu-parallel-size", dep))


def test_gpus_not_matching_tensor_parallel_size_are_refused():
    dep = _deployment()
    args = _engine(dep)["args"]
    args[args.index("--tensor-parallel-size") + 1] = "4"
    assert any("parallel size of 4" in v for v in _violations("gpu-parallel-size", dep))


def test_small_shm_is_refused():
    dep = _deployment()
    shm = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "shm")
    shm["emptyDir"]["sizeLimit"] = "32Gi"
    assert any("below 64Gi" in v for v in _violations("shm-memory", dep))


def test_tag_only_image_is_refused():
    dep = _deployment()
    _engine(dep)["image"] = "vllm/vllm-openai:v0.26.0-cu129"
    assert any("not pinned by digest" in v for v in _violations("image-digest", dep))


def test_privileged_container_is_refused():
    dep = _deployment()
    _engine(dep)["securityContext"]["privileged"] = True
    assert _violations("no-privileged", dep)


def test_literal_api_key_is_refused():
    dep = _deployment()
    _engine(dep)["env"].append({"name": "VLLM_API_KEY", "value": "plaintext"})
    assert any("VLLM_API_KEY" in v for v in _violations("secret-refs", dep))


def test_an_api_key_in_the_argv_only_by_reference():
    """Issue 21: vLLM takes several keys in its argv; each must be $(VAR) of a secretKeyRef variable."""
    dep = _deployment()
    engine = _engine(dep)
    engine["args"] = engine["args"] + ["--api-key", "$(VLLM_API_KEY)", "$(PLAIN_VALUE)", "literal-key"]
    engine["env"].append({"name": "PLAIN_VALUE", "value": "x"})
    violations = _violations("secret-refs", dep)
    assert [v.split(": ", 1)[1] for v in violations] == [
        f"container engine passes API key {i} in its argv as a value, not as $(VAR) of a secretKeyRef variable."
        for i in (2, 3)]
    engine["args"] = engine["args"][:-4] + ["--api-key=literal"]
    assert len(_violations("secret-refs", dep)) == 1


def test_sync_job_on_gpu_is_refused():
    job = _job()
    spec = job["spec"]["template"]["spec"]
    spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    del spec["affinity"]
    found = _violations("sync-off-gpu", job)
    assert len(found) == 3


def test_jobs_must_exclude_every_node_label_key_a_gpu_pod_selects():
    """The stack view of sync-off-gpu: which keys. A Job excluding only the GPU pool's key passes the
    per-resource rule but not this one once a GPU pod selects its own pool by another key."""
    from policy.resource_rules import jobs_avoid_every_gpu_pool
    job, dep = _job(), _deployment("prod")
    pool_keys = set(pod_templates("Deployment", dep)[0].template["spec"]["nodeSelector"])
    excluded = {e["key"] for t in job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert pool_keys and pool_keys <= excluded
    manifests = [("kubernetes:batch/v1:Job", job), ("kubernetes:apps/v1:Deployment", dep)]
    assert jobs_avoid_every_gpu_pool(manifests) == []
    own = copy.deepcopy(dep)
    pod_templates("Deployment", own)[0].template["spec"]["nodeSelector"] = {"example.com/gpu-pool": "l40s"}
    manifests.append(("kubernetes:apps/v1:Deployment", own))
    assert _violations("sync-off-gpu", job) == []          # the old rule: some DoesNotExist is there
    assert jobs_avoid_every_gpu_pool(manifests) == [
        f"Job {job['metadata']['namespace']}/{job['metadata']['name']}: its node affinity lets in nodes labelled "
        f"example.com/gpu-pool, which Deployment {own['metadata']['namespace']}/{own['metadata']['name']}'s GPU pods "
        "select; add {key: example.com/gpu-pool, operator: DoesNotExist} to every nodeSelectorTerm."]
    # A second term without it is a way in too (terms are ORed); a pod without GPUs selects no GPU pool.
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms["nodeSelectorTerms"][0]["matchExpressions"].append({"key": "example.com/gpu-pool", "operator": "DoesNotExist"})
    assert jobs_avoid_every_gpu_pool(manifests) == []
    terms["nodeSelectorTerms"].append({"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]})
    assert len(jobs_avoid_every_gpu_pool(manifests)) == 2   # both GPU pool keys, through the second term
    del terms["nodeSelectorTerms"][1]
    for c in pod_templates("Deployment", own)[0].template["spec"]["containers"]:
        for part in ("requests", "limits"):
            (c.get("resources") or {}).get(part, {}).pop("nvidia.com/gpu", None)
    own["spec"]["template"]["spec"]["nodeSelector"]["example.com/cpu-pool"] = "x"
    assert jobs_avoid_every_gpu_pool(manifests) == []


def test_surge_rollout_beyond_one_pod_is_refused():
    dep = _deployment("prod")
    dep["spec"]["strategy"]["rollingUpdate"].update(maxSurge=1, maxUnavailable=0)
    assert _violations("rollout-gpus", dep) == []   # the opt-in surge pod, which gpu-budget counts
    dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = 2
    assert any("may start 2 extra pod(s)" in v for v in _violations("rollout-gpus", dep))


def test_default_surge_percentage_counts_as_a_pod():
    dep = _deployment("prod")
    dep["spec"]["strategy"] = {"type": "RollingUpdate"}
    assert pod_templates("Deployment", dep)[0].surge == 1


def test_budget_overrun_is_reported_with_rollout_pods():
    resources = stack_resources(render_stack("prod"))
    dep = next(r for r in resources if r.props.get("kind") == "Deployment")
    dep.props["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    try:
        assert rules.gpus_within_budget(resources, 16) == [
            "The stack needs 24 GPUs at peak (rollouts included) but its budget is 16; raise llm-serving:gpuBudget or lower replicas."]
    finally:
        dep.props["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def test_short_await_timeout_is_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("dev"))]
    dep = next(r for r in resources if r.props.get("kind") == "Deployment")
    dep.options["customTimeouts"] = {"create": "10m"}
    found = rules.await_timeouts_cover_rollout(resources)
    assert any("create timeout 10m" in v for v in found) and any("update timeout" in v for v in found)


def test_unprotected_bucket_outside_dev_is_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("prod"))]
    bucket = next(r for r in resources if r.type == "aws:s3/bucket:Bucket")
    bucket.options["protect"] = False
    assert rules.data_is_protected(resources, Environment.prod.value)
    assert rules.data_is_protected(resources, "dev") == []


def test_default_provider_is_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("dev"))]
    resources[0] = rules.StackResource(type="kubernetes:core/v1:Service", name="x", props={}, options={}, provider="")
    assert rules.explicit_providers_only(resources)
    default = "urn:pulumi:dev::llm-serving::pulumi:providers:kubernetes::default_4_34_2"
    resources[0] = rules.StackResource(type="kubernetes:core/v1:Service", name="x", props={}, options={}, provider=default)
    assert rules.explicit_providers_only(resources) == [
        f"kubernetes:core/v1:Service x uses the default provider ({default}); pass an explicit one."]


def test_root_stack_components_and_providers_need_no_provider():
    root = rules.StackResource(type="pulumi:pulumi:Stack", name="llm-serving-prod", props={}, options={}, provider="",
                               custom=False)
    component = rules.StackResource(type="llm-serving:stack:Facts", name="stack-facts", props={}, options={},
                                    provider="", custom=False)
    provider = rules.StackResource(type="pulumi:providers:kubernetes", name="kubernetes", props={}, options={},
                                   provider="")
    assert rules.explicit_providers_only([root, component, provider]) == []


def test_writable_sync_claim_outside_a_job_is_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("dev"))]
    dep = next(r for r in resources if r.props.get("kind") == "Deployment")
    sync = next(r.props["metadata"]["name"] for r in resources if r.props.get("kind") == "PersistentVolumeClaim"
                and r.props["spec"]["accessModes"] == ["ReadWriteMany"])
    dep.props["spec"]["template"]["spec"]["volumes"].append(
        {"name": "weights", "persistentVolumeClaim": {"claimName": sync}})
    assert rules.only_sync_jobs_write_models(resources) == [
        f"Deployment llm-serving-dev/deepseek-v4-flash: mounts model claim {sync} writable; "
        "only the sync Job may write the model path."]


def test_route_without_reference_grant_is_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("dev"))]
    assert any(r.props.get("kind") == "HTTPRoute" for r in resources)
    without = [r for r in resources if r.props.get("kind") != "ReferenceGrant"]
    assert rules.routes_have_reference_grants(without) == [
        "HTTPRoute aibrix-system/deepseek-v4-flash-api-llm-serving-dev: backend llm-serving-dev/deepseek-v4-flash-api has "
        "no ReferenceGrant from HTTPRoutes in aibrix-system; the gateway would answer 503."]


def test_model_label_on_a_watched_workload_is_refused():
    dep = _deployment()
    dep["metadata"]["labels"]["model.aibrix.ai/name"] = "DeepSeek-V4-Flash"
    assert any("shared HTTPRoute" in v for v in _violations("no-router-owned-routes", dep))


def test_update_timeout_covers_every_rollout_wave():
    """Prod rolls 2 replicas one at a time: an update is two cold starts in a row, so one
    progress deadline of await (what the program used to set) fails the second wave."""
    resources = [copy.deepcopy(r) for r in stack_resources(render_stack("prod"))]
    dep = next(r for r in resources if r.props.get("kind") == "Deployment" and r.props["spec"]["replicas"] == 2)
    deadline = dep.props["spec"]["progressDeadlineSeconds"]
    assert dep.props["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 1
    assert dep.options["customTimeouts"] == {"create": f"{deadline}s", "update": f"{2 * deadline}s"}
    assert rules.await_timeouts_cover_rollout(resources) == []
    dep.options["customTimeouts"] = {"create": f"{deadline}s", "update": f"{deadline}s"}
    assert rules.await_timeouts_cover_rollout(resources) == [
        f"Deployment {dep.props['metadata']['namespace']}/{dep.props['metadata']['name']}: Pulumi update timeout "
        f"{deadline}s is below progressDeadlineSeconds {deadline} x 2 rollout waves = {2 * deadline}s."]
    dep.props["spec"]["strategy"] = {"type": "Recreate"}
    assert rules.await_timeouts_cover_rollout(resources) == []
