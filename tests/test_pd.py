"""Prefill/decode disaggregation: dual RayClusterFleet, same-pod 4P+4D, hybrid routing. The
field report's wiring mistakes (11.3) are refused by config rules or policies, each shown here."""

from __future__ import annotations

import copy
import functools
import json

import pytest
from conftest import k8s_objects, stack_resources
from crd_schemas import crd_index, validate_custom_resource
from variants import dev_config, model, render, variant_file

from components.disaggregated import FLEET_WAIT_FOR
from policy import rules
from policy.workloads import containers, pod_templates
from render.output import plan_md
from stacks.loader import ConfigError

RAY_IMAGE = {"upstream": "registry.internal/llm/vllm-openai-ray:v0.26.0-cu129", "digest": "sha256:" + "7" * 64,
             "rayVersion": "2.47.1", "cudaVersion": "12.9"}


def images():
    return dev_config()["images"] | {"vllmRay": RAY_IMAGE}


def stack(topology: str, orchestrator: str, budget: int, **changes):
    m = model(topology=topology, orchestrator=orchestrator, **changes)
    if orchestrator != "deployment":
        m.pop("rollout")
    if topology == "pd-same-pod":
        m["vllm"] = {**m["vllm"], "tensorParallelSize": 4}
    return variant_file(images=images(), models=[m], gpuBudget=budget)


@functools.lru_cache(maxsize=None)
def rendered(topology: str, orchestrator: str, budget: int):
    return render(stack(topology, orchestrator, budget))


def fleets(r) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in k8s_objects(r) if o["kind"] == "RayClusterFleet"}


def head(fleet: dict) -> tuple[dict, dict]:
    (ref,) = pod_templates("RayClusterFleet", fleet)
    (engine,) = [c for g, c in containers(ref.template) if g == "containers"]
    return ref.template, engine


CASES = [("pd", "rayclusterfleet", 24), ("pd-same-pod", "deployment", 8), ("hybrid", "stormservice", 32),
         ("hybrid", "deployment", 32)]


@pytest.mark.parametrize("topology,orchestrator,budget", CASES)
def test_topology_renders_validates_and_passes_every_policy(topology, orchestrator, budget):
    r = rendered(topology, orchestrator, budget)
    for obj in k8s_objects(r):
        if obj["kind"] in ("RayClusterFleet", "StormService", "HTTPRoute", "ReferenceGrant"):
            assert validate_custom_resource(obj, crd_index()) == [], obj["metadata"]["name"]
    for policy in rules.RESOURCE_POLICIES:
        for res in r.resources:
            assert policy.check(res.type, res.inputs) == [], (policy.name, res.name)
    resources = stack_resources(r)
    assert rules.gpus_within_budget(resources, budget) == []
    assert rules.gpu_total(resources) == budget
    assert rules.pd_rolesets_are_complete_and_matched(resources) == []
    assert rules.routes_have_reference_grants(resources) == []
    assert rules.await_timeouts_cover_rollout(resources) == []


# ---- dual RayClusterFleet ----

def test_two_head_only_fleets_of_one_8_gpu_pod_each():
    f = fleets(rendered("pd", "rayclusterfleet", 24))
    assert set(f) == {"deepseek-v4-flash-prefill", "deepseek-v4-flash-decode"}
    for fleet in f.values():
        spec = fleet["spec"]
        assert spec["replicas"] == 1
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
        ray = spec["template"]["spec"]
        assert ray["rayVersion"] == "2.47.1" and "workerGroupSpecs" not in ray
        assert spec["template"]["metadata"]["annotations"] == {"ray.io/overwrite-container-cmd": "true"}
        _, engine = head(fleet)
        assert engine["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert engine["image"] == f"{RAY_IMAGE['upstream']}@{RAY_IMAGE['digest']}"
        assert fleet["metadata"]["annotations"]["pulumi.com/waitFor"] == FLEET_WAIT_FOR


def test_fleets_carry_no_model_label_so_aibrix_makes_no_shared_route():
    for fleet in fleets(rendered("pd", "rayclusterfleet", 24)).values():
        assert not any(k.startswith("model.aibrix.ai/") for k in fleet["metadata"]["labels"])
        assert not any(k.startswith("model.aibrix.ai/") for k in fleet["spec"]["template"]["metadata"]["labels"])


def test_head_pods_carry_the_pd_labels_and_the_profiles_config():
    for side, fleet in (("prefill", fleets(rendered("pd", "rayclusterfleet", 24))["deepseek-v4-flash-prefill"]),
                        ("decode", fleets(rendered("pd", "rayclusterfleet", 24))["deepseek-v4-flash-decode"])):
        template, _ = head(fleet)
        labels = template["metadata"]["labels"]
        assert labels["model.aibrix.ai/name"] == "DeepSeek-V4-Flash"
        assert labels["roleset-name"] == "deepseek-v4-flash-pd" and labels["role-name"] == side
        assert labels["model.aibrix.ai/kv-connector-type"] == "shfs"
        assert json.loads(template["metadata"]["annotations"]["model.aibrix.ai/config"]) == {
            "profiles": {"default": {"routingStrategy": "pd"}}}


def test_both_sides_run_one_argument_set_with_mp_and_nixl_off_loopback():
    f = fleets(rendered("pd", "rayclusterfleet", 24))
    (_, p), (_, d) = head(f["deepseek-v4-flash-prefill"]), head(f["deepseek-v4-flash-decode"])
    assert p["command"] == d["command"] and p["args"] == d["args"] and p["env"] == d["env"]
    assert p["command"][:2] == ["/bin/sh", "-c"] and "KUBERAY_GEN_RAY_START_CMD" in p["command"][2]
    args = p["args"]
    assert args[:2] == ["vllm", "serve"]
    assert args[args.index("--distributed-executor-backend") + 1] == "mp"
    assert json.loads(args[args.index("--kv-transfer-config") + 1]) == {
        "kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "cuda",
        "kv_load_failure_policy": "recompute"}
    env = {e["name"]: e.get("value") for e in p["env"]}
    assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "0.0.0.0" and env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
    assert {"name": "nixl", "containerPort": 5600, "protocol": "TCP"} in p["ports"]


def test_pd_budget_must_cover_both_sides_and_the_overshoot():
    with pytest.raises(ConfigError) as err:
        render(stack("pd", "rayclusterfleet", 16))
    assert str(err.value) == ("Pulumi.variant.yaml: llm-serving:gpuBudget = 16: the workloads need 24 GPUs at peak, "
                              "rollouts included (deepseek-v4-flash-prefill 16, deepseek-v4-flash-decode 8); raise "
                              "gpuBudget or lower replicas")
    r = render(stack("pd", "rayclusterfleet", 16, pd={"rolloutOvershootPods": 0}))
    assert rules.gpu_total(stack_resources(r)) == 16


def test_rdma_adds_devices_and_ipc_lock_only():
    r = render(stack("pd", "rayclusterfleet", 24, pd={"rdma": {"resourceName": "rdma/rdma_shared_device_a", "count": 1}}))
    for fleet in fleets(r).values():
        _, engine = head(fleet)
        assert engine["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"
        assert engine["securityContext"] == {"privileged": False, "allowPrivilegeEscalation": False,
                                             "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}
    for policy in rules.RESOURCE_POLICIES:
        for res in r.resources:
            assert policy.check(res.type, res.inputs) == [], policy.name


def test_kv_transfer_is_open_only_within_the_roleset():
    objs = k8s_objects(rendered("pd", "rayclusterfleet", 24))
    policy = next(o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "llm-serving-pd-deepseek-v4-flash-pd")
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"roleset-name": "deepseek-v4-flash-pd"}}}]}]


# ---- the wiring mistakes, caught by policy ----

FLEET_TYPE = "kubernetes:orchestration.aibrix.ai/v1alpha1:RayClusterFleet"


def broken_fleet(mutate) -> dict:
    fleet = copy.deepcopy(fleets(rendered("pd", "rayclusterfleet", 24))["deepseek-v4-flash-decode"])
    template, engine = head(fleet)
    mutate(template, engine)
    return fleet


def set_env(engine, name, value):
    next(e for e in engine["env"] if e["name"] == name)["value"] = value


@pytest.mark.parametrize("mutate,expected", [
    (lambda t, e: e["args"].__setitem__(e["args"].index("mp"), "ray"), "Ray executor"),
    (lambda t, e: set_env(e, "VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"), "side channel host is 127.0.0.1"),
    (lambda t, e: t["metadata"]["labels"].__setitem__("model.aibrix.ai/kv-connector-type", "nixl"), "kv-connector-type=shfs"),
    (lambda t, e: e["args"].__setitem__(e["args"].index("--kv-transfer-config") + 1,
                                        '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'), "kv_load_failure_policy implicit"),
])
def test_pd_wiring_mistakes_are_refused(mutate, expected):
    assert any(expected in v for v in rules.pd_wiring(FLEET_TYPE, broken_fleet(mutate)))


def test_old_top_level_model_config_is_refused():
    fleet = broken_fleet(lambda t, e: t["metadata"]["annotations"].__setitem__("model.aibrix.ai/config",
                                                                                '{"routingStrategy":"pd"}'))
    assert rules.aibrix_profiles_schema(FLEET_TYPE, fleet)


def test_broader_capabilities_are_refused():
    fleet = broken_fleet(lambda t, e: e["securityContext"]["capabilities"].__setitem__("add", ["IPC_LOCK", "SYS_ADMIN"]))
    assert rules.capabilities_minimal(FLEET_TYPE, fleet)
    no_rdma = broken_fleet(lambda t, e: e["securityContext"]["capabilities"].__setitem__("add", ["IPC_LOCK"]))
    assert rules.capabilities_minimal(FLEET_TYPE, no_rdma)


def test_incomplete_or_mismatched_rolesets_are_refused():
    resources = [copy.deepcopy(r) for r in stack_resources(rendered("pd", "rayclusterfleet", 24))]
    without_decode = [r for r in resources if r.props.get("metadata", {}).get("name") != "deepseek-v4-flash-decode"]
    assert rules.pd_rolesets_are_complete_and_matched(without_decode) == [
        "P/D roleset deepseek-v4-flash-pd has no decode pods; AIBrix only pairs complete rolesets."]
    decode = next(r for r in resources if r.props.get("metadata", {}).get("name") == "deepseek-v4-flash-decode")
    _, engine = head(decode.props)
    args = engine["args"]
    args[args.index("--kv-cache-dtype") + 1] = "auto"
    args[args.index("--tensor-parallel-size") + 1] = "4"
    found = rules.pd_rolesets_are_complete_and_matched(resources)
    assert any("differ in --kv-cache-dtype (fp8 vs auto)" in v for v in found)
    assert any("decode TP 4 is below prefill TP 8" in v for v in found)


# ---- same-pod 4P+4D ----

def same_pod() -> tuple[dict, dict[str, dict]]:
    dep = next(o for o in k8s_objects(rendered("pd-same-pod", "deployment", 8)) if o["kind"] == "Deployment")
    return dep, {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}


def test_same_pod_splits_8_gpus_into_prefill_and_decode_with_a_proxy():
    dep, c = same_pod()
    assert set(c) == {"prefill", "decode", "proxy"} and dep["spec"]["replicas"] == 1
    for role, port, side, kv_role in (("prefill", 8100, "5559", "kv_producer"), ("decode", 8200, "5659", "kv_consumer")):
        args = c[role]["args"]
        assert c[role]["resources"]["limits"]["nvidia.com/gpu"] == "4"
        assert args[args.index("--port") + 1] == str(port) and args[args.index("--tensor-parallel-size") + 1] == "4"
        assert json.loads(args[args.index("--kv-transfer-config") + 1])["kv_role"] == kv_role
        assert "--enforce-eager" in args
        env = {e["name"]: e.get("value") for e in c[role]["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == side and env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "127.0.0.1"
    strip = lambda a: [x for x in a if x not in ("8100", "8200") and not x.startswith('{"kv_connector"')]
    assert strip(c["prefill"]["args"]) == strip(c["decode"]["args"])  # identical common arguments
    # Our proxy (scripts/pd_proxy.py), run from these args in test_ops_topologies.py.
    assert c["proxy"]["args"][:12] == ["--host", "0.0.0.0", "--port", "8000", "--prefill-host", "127.0.0.1",
                                       "--prefill-port", "8100", "--decode-host", "127.0.0.1", "--decode-port", "8200"]
    assert "nvidia.com/gpu" not in json.dumps(c["proxy"]["resources"])
    svc = next(o for o in k8s_objects(rendered("pd-same-pod", "deployment", 8)) if o["kind"] == "Service")
    assert svc["spec"]["ports"][0]["targetPort"] == "proxy"


def test_plan_warns_that_same_pod_is_for_validation_and_says_what_smoke_proves():
    plan = plan_md(rendered("pd-same-pod", "deployment", 8))
    assert "functional validation only" in plan and "3.7-12.1%" in plan
    assert "non-streaming responses keep the reasoning content" in plan
    assert "- **pd-same-pod**: the combined checks through our proxy" in plan


def test_same_pod_needs_two_engines_on_one_node():
    with pytest.raises(ConfigError) as err:
        render(variant_file(images=images(), models=[model(topology="pd-same-pod")]))
    assert "one engine pod needs 16 GPUs but gpuPool.gpusPerNode is 8" in str(err.value)


def test_same_pod_ports_must_differ():
    with pytest.raises(ConfigError) as err:
        render(stack("pd-same-pod", "deployment", 8, samePod={"decodePort": 8100}))
    assert "llm-serving:models[0].samePod.decodePort = 8100: must differ from samePod.prefillPort" in str(err.value)


# ---- hybrid ----

def test_hybrid_combined_pods_are_the_fallback_and_pd_takes_long_prompts():
    r = rendered("hybrid", "stormservice", 32)
    ss = next(o for o in k8s_objects(r) if o["kind"] == "StormService")
    (ref,) = pod_templates("StormService", ss)
    labels, annotations = ref.template["metadata"]["labels"], ref.template["metadata"]["annotations"]
    assert labels["roleset-name"] == "deepseek-v4-flash-combined" and labels["role-name"] == "combined"
    assert json.loads(annotations["model.aibrix.ai/config"]) == {
        "profiles": {"default": {"routingStrategy": "pd", "routingConfig": {"combined": True}}}}
    for fleet in fleets(r).values():
        template, _ = head(fleet)
        assert json.loads(template["metadata"]["annotations"]["model.aibrix.ai/config"]) == {
            "profiles": {"default": {"routingStrategy": "pd", "routingConfig": {"promptLenBucketMinLength": 2049}}}}
    plan = plan_md(r)
    assert "AIBRIX_PROMPT_LENGTH_BUCKETING=true" in plan
    assert "| DeepSeek-V4-Flash | hybrid |" in plan and "| 24 | 32 |" in plan


def test_bucket_boundary_comes_from_config():
    r = render(stack("hybrid", "deployment", 32, pd={"promptLenBucketMinLength": 8193}))
    template, _ = head(next(iter(fleets(r).values())))
    assert "8193" in template["metadata"]["annotations"]["model.aibrix.ai/config"]


# ---- config refusals ----

def test_pd_needs_the_ray_image():
    m = model(topology="pd", orchestrator="rayclusterfleet")
    m.pop("rollout")
    with pytest.raises(ConfigError) as err:
        render(variant_file(models=[m], gpuBudget=24))
    assert str(err.value) == ("Pulumi.variant.yaml: llm-serving:images.vllmRay = (unset): is required: models[0] runs "
                              "P/D on RayClusterFleets, whose image must bring Ray itself (field report 11.3)")


@pytest.mark.parametrize("topology,orchestrator", [("pd", "deployment"), ("pd", "stormservice"),
                                                   ("pd-same-pod", "rayclusterfleet"), ("combined", "rayclusterfleet")])
def test_unsupported_topology_orchestrator_pairs_are_refused(topology, orchestrator):
    with pytest.raises(ConfigError) as err:
        render(stack(topology, orchestrator, 32))
    assert f"topology '{topology}' with engine 'vllm' on '{orchestrator}' is not a combination" in str(err.value)


def test_worker_pods_with_the_model_label_are_refused():
    fleet = copy.deepcopy(fleets(rendered("pd", "rayclusterfleet", 24))["deepseek-v4-flash-decode"])
    template, _ = head(fleet)
    fleet["spec"]["template"]["spec"]["workerGroupSpecs"] = [{
        "groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "rayStartParams": {},
        "template": {"metadata": {"labels": {"model.aibrix.ai/name": "DeepSeek-V4-Flash"}}, "spec": {"containers": []}}}]
    assert any("Ray worker pods" in v for v in rules.no_router_owned_routes(FLEET_TYPE, fleet))


@pytest.mark.parametrize("topology,orchestrator", [("pd", "rayclusterfleet"), ("hybrid", "stormservice")])
def test_pd_without_the_gateway_is_refused(topology, orchestrator):
    sf = stack(topology, orchestrator, 32)
    sf.config["llm-serving:gateway"] = json.dumps({"enabled": False})
    with pytest.raises(ConfigError) as err:
        render(sf)
    assert f"llm-serving:models[0].topology = '{topology}': needs gateway.enabled: true" in str(err.value)
