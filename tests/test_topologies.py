"""Every supported engine/orchestrator pair renders, validates against its CRD and passes every
policy; the SGLang, StormService and DSpark A/B specifics are checked on the rendered objects."""

from __future__ import annotations

import copy
import functools

import pytest
from conftest import k8s_objects, render_stack, stack_resources
from crd_schemas import crd_index, validate_custom_resource
from variants import dev_config, model, pair_file, render, variant_file

from policy import rules
from policy.workloads import containers, pod_templates
from render.output import ab_pairs, plan_md


@functools.lru_cache(maxsize=None)
def rendered_pair(engine: str, orchestrator: str):
    return render(pair_file(engine, orchestrator))


PAIRS = [("vllm", "deployment"), ("vllm", "stormservice"), ("sglang", "rolebasedgroup")]
KIND = {"deployment": "Deployment", "stormservice": "StormService", "rolebasedgroup": "RoleBasedGroup"}


def workload(rendered, kind: str) -> dict:
    return next(o for o in k8s_objects(rendered) if o["kind"] == kind)


def engine_container(obj: dict) -> dict:
    (ref,) = pod_templates(obj["kind"], obj)
    return next(c for g, c in containers(ref.template) if c["name"] == "engine")


@pytest.mark.parametrize("engine,orchestrator", PAIRS)
def test_pair_renders_and_passes_every_policy(engine, orchestrator):
    r = rendered_pair(engine, orchestrator)
    obj = workload(r, KIND[orchestrator])
    for policy in rules.RESOURCE_POLICIES:
        for res in r.resources:
            assert policy.check(res.type, res.inputs) == [], (policy.name, res.name)
    resources = stack_resources(r)
    assert rules.gpus_within_budget(resources, 8) == []
    assert rules.await_timeouts_cover_rollout(resources) == []
    assert rules.only_sync_jobs_write_models(resources) == []
    assert rules.gpu_total(resources) == 8
    (ref,) = pod_templates(obj["kind"], obj)
    assert ref.replicas == 1 and ref.surge == 0 and rules.pod_gpus(ref.template) == 8


@pytest.mark.parametrize("engine,orchestrator", [p for p in PAIRS if p[1] != "deployment"])
def test_custom_resources_validate_and_are_awaited(engine, orchestrator):
    r = rendered_pair(engine, orchestrator)
    obj = workload(r, KIND[orchestrator])
    assert validate_custom_resource(obj, crd_index()) == []
    assert "condition=Ready" in obj["metadata"]["annotations"]["pulumi.com/waitFor"]
    res = next(x for x in r.resources if x.inputs.get("kind") == KIND[orchestrator])
    assert res.options["customTimeouts"]["create"] == res.options["customTimeouts"]["update"]


@pytest.mark.parametrize("engine,orchestrator", PAIRS)
def test_every_workload_has_a_service_with_aibrix_labels(engine, orchestrator):
    r = rendered_pair(engine, orchestrator)
    svc = workload(r, "Service")
    port = 30000 if engine == "sglang" else 8000
    assert svc["metadata"]["labels"]["model.aibrix.ai/port"] == str(port)
    assert svc["metadata"]["labels"]["model.aibrix.ai/engine"] == engine
    assert svc["spec"]["ports"][0]["port"] == port
    (ref,) = pod_templates(KIND[orchestrator], workload(r, KIND[orchestrator]))
    assert all(ref.template["metadata"]["labels"][k] == v for k, v in svc["spec"]["selector"].items())


def test_rolebasedgroup_is_the_storage_version_with_one_server_role():
    rbg = workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup")
    assert rbg["apiVersion"] == "workloads.x-k8s.io/v1alpha2"
    (role,) = rbg["spec"]["roles"]
    assert role["name"] == "server" and role["replicas"] == 1 and set(role) >= {"standalonePattern"}
    assert role["rolloutStrategy"]["rollingUpdate"]["maxSurge"] == 0


def test_sglang_engine_never_generates_on_health_and_uses_tcp_probes():
    engine = engine_container(workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup"))
    env = {e["name"]: e for e in engine["env"]}
    assert env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]["value"] == "0"
    assert env["SGLANG_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "llm-serving-api-key"
    assert engine["args"][-2:] == ["--api-key", "$(SGLANG_API_KEY)"]
    assert all("tcpSocket" in engine[p] for p in rules.PROBES)
    assert engine["command"] == ["sglang"] and engine["ports"][0]["containerPort"] == 30000


def test_sglang_startup_budget_covers_23_minutes():
    rbg = workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup")
    (ref,) = pod_templates("RoleBasedGroup", rbg)
    budget = int(ref.template["metadata"]["annotations"]["llm-serving.io/startup-budget-seconds"])
    startup = engine_container(rbg)["startupProbe"]
    assert budget >= 23 * 60 and startup["periodSeconds"] * startup["failureThreshold"] >= budget


def test_sglang_jit_cache_is_persistent_and_keyed():
    rbg = workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup")
    (ref,) = pod_templates("RoleBasedGroup", rbg)
    volumes = {v["name"]: v for v in ref.template["spec"]["volumes"]}
    assert volumes["compile-cache"] == {"name": "compile-cache", "persistentVolumeClaim": {"claimName": "jit-cache"}}
    mount = next(m for m in engine_container(rbg)["volumeMounts"] if m["name"] == "compile-cache")
    assert mount["subPath"] == ref.template["metadata"]["annotations"]["llm-serving.io/compile-cache-key-engine"]
    env = {e["name"]: e.get("value") for e in engine_container(rbg)["env"]}
    assert env["SGLANG_CACHE_DIR"].startswith(mount["mountPath"])   # every cache: tests/test_engine_caches.py


def test_sglang_gate_checks_the_marker_and_never_downloads():
    rbg = workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup")
    (ref,) = pod_templates("RoleBasedGroup", rbg)
    (gate,) = ref.template["spec"]["initContainers"]
    assert gate["command"][-1].endswith("model_gate.py")
    assert gate["args"][gate["args"].index("--expected-shards") + 1] == "48"
    assert "aws" not in " ".join(gate["command"] + gate["args"])


def test_stormservice_never_surges_at_either_level():
    ss = workload(rendered_pair("vllm", "stormservice"), "StormService")
    assert ss["spec"]["updateStrategy"]["maxSurge"] == 0
    (role,) = ss["spec"]["template"]["spec"]["roles"]
    assert role["updateStrategy"]["maxSurge"] == 0
    assert engine_container(ss)["ports"][0]["containerPort"] == 8000


def test_stormservice_surge_counts_in_the_budget():
    ss = copy.deepcopy(workload(rendered_pair("vllm", "stormservice"), "StormService"))
    ss["spec"]["template"]["spec"]["roles"][0]["updateStrategy"]["maxSurge"] = 1
    assert pod_templates("StormService", ss)[0].surge == 1
    del ss["spec"]["updateStrategy"]["maxSurge"]
    assert pod_templates("StormService", ss)[0].surge == 2  # unset top-level surge is counted, not assumed 0
    found = rules.rollout_never_adds_gpus("kubernetes:orchestration.aibrix.ai/v1alpha1:StormService", ss)
    assert any("may start 2 extra pod(s)" in v for v in found)


@pytest.mark.parametrize("engine,orchestrator", [p for p in PAIRS if p[1] != "deployment"])
def test_policies_catch_broken_custom_resources(engine, orchestrator):
    kind = KIND[orchestrator]
    resource_type = f"kubernetes:{workload(rendered_pair(engine, orchestrator), kind)['apiVersion']}:{kind}"

    def broken(mutate) -> dict:
        obj = copy.deepcopy(workload(rendered_pair(engine, orchestrator), kind))
        mutate(obj)
        return obj

    def violations(name, obj):
        return next(p for p in rules.RESOURCE_POLICIES if p.name == name).check(resource_type, obj)

    http = broken(lambda o: engine_container(o).update(readinessProbe={"httpGet": {"path": "/health", "port": 80}}))
    assert violations("engine-probes-tcp", http)
    rw = broken(lambda o: next(m for m in engine_container(o)["volumeMounts"] if m["name"] == "model").update(readOnly=False))
    assert violations("model-read-only", rw)
    gpus = broken(lambda o: engine_container(o)["resources"]["limits"].update({"nvidia.com/gpu": "4"}))
    assert violations("gpu-parallel-size", gpus)
    tag = broken(lambda o: engine_container(o).update(image="vllm/vllm-openai:latest"))
    assert violations("image-digest", tag)
    unwaited = broken(lambda o: o["metadata"]["annotations"].pop("pulumi.com/waitFor"))
    assert violations("custom-resources-awaited", unwaited)


def test_generative_health_cannot_be_turned_back_on():
    obj = copy.deepcopy(workload(rendered_pair("sglang", "rolebasedgroup"), "RoleBasedGroup"))
    env = engine_container(obj)["env"]
    next(e for e in env if e["name"] == "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION")["value"] = "1"
    assert rules.no_generative_health_checks("kubernetes:workloads.x-k8s.io/v1alpha2:RoleBasedGroup", obj)


# ---- DSpark A/B ----

def _without_identity(obj: dict, name: str, served: str) -> dict:
    """A workload with what an A/B arm may change removed: names, the served name, the cache key
    (it hashes the argv) and the pointer to the baseline. The speculative flag stays."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta.pop("name"), meta["labels"].pop("app.kubernetes.io/name")
    (ref,) = pod_templates(obj["kind"], obj)
    t = ref.template
    for key in ("app.kubernetes.io/name", "model.aibrix.ai/name", "llm-serving.io/model"):
        t["metadata"]["labels"].pop(key)
    t["metadata"]["annotations"].pop("llm-serving.io/compile-cache-key-engine")
    t["metadata"]["annotations"].pop("llm-serving.io/ab-baseline", None)
    for _, c in containers(t):
        c["args"] = [a for a in c.get("args", []) if a != served]
        for m in c.get("volumeMounts", []):
            m.pop("subPath", None)
    obj["spec"]["selector"]["matchLabels"].pop("app.kubernetes.io/name")
    obj["spec"]["template"]["metadata"]["labels"].pop("app.kubernetes.io/name")
    return obj


def test_ab_arms_differ_only_in_names_and_the_speculative_flag():
    objs = {o["metadata"]["name"]: o for o in k8s_objects(render_stack("staging")) if o["kind"] == "StormService"}
    base = _without_identity(objs["deepseek-v4-flash"], "deepseek-v4-flash", "DeepSeek-V4-Flash")
    cand = _without_identity(objs["deepseek-v4-flash-dspark"], "deepseek-v4-flash-dspark", "DeepSeek-V4-Flash-DSpark")
    spec = '{"method":"dspark","num_speculative_tokens":5,"draft_sample_method":"greedy"}'
    args = engine_container(cand)["args"]
    assert args[args.index("--speculative-config") + 1] == spec
    assert "--speculative-config" not in engine_container(base)["args"]
    del args[args.index("--speculative-config"):args.index("--speculative-config") + 2]
    assert base == cand


def test_plan_shows_the_pair_side_by_side():
    plan = plan_md(render_stack("staging"))
    assert "## DSpark A/B pairs" in plan
    assert "| Workload | StormService deepseek-v4-flash | StormService deepseek-v4-flash-dspark |" in plan
    (pair,) = ab_pairs(render_stack("staging"))
    assert pair["onlyBaseline"] == ["--served-model-name DeepSeek-V4-Flash"]
    assert pair["onlyCandidate"][0] == "--served-model-name DeepSeek-V4-Flash-DSpark"
    assert pair["onlyCandidate"][1].startswith("--speculative-config ")


def test_sglang_ab_pair_toggles_the_speculative_algorithm():
    images = dev_config()["images"] | {"sglang": {"upstream": "lmsysorg/sglang:v0.5.17-cu130",
                                                  "digest": "sha256:" + "5" * 64}}
    base = model(name="sg", servedModelName="sg", engine="sglang", orchestrator="rolebasedgroup")
    for m in (base,):
        m.pop("vllm"), m.pop("rollout"), m.pop("startupBudgetSeconds")
    cand = dict(base, name="sg-dspark", servedModelName="sg-dspark", dsparkOf="sg", sglang={"speculativeAlgorithm": "DSPARK"})
    r = render(variant_file(images=images, models=[base, cand], gpuBudget=16,
                            compileCache={"kind": "existingClaim", "claimName": "jit"}))
    (pair,) = ab_pairs(r)
    assert pair["onlyCandidate"] == ["--served-model-name sg-dspark", "--speculative-algorithm DSPARK"]
