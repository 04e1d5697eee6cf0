"""Per-model resources, node pool and GPU resource name (issue 20): two models of different sizes in one
stack render their own requests, limits, /dev/shm, selectors and tolerations, pass the API-server rules
and the policy pack through its real server; the budget and the node fit count per model; a model on
amd.com/gpu is counted by the budget and the pack; bad input is refused under the field that holds it."""

from __future__ import annotations

import copy
import functools

import pytest
from conftest import k8s_objects
from crd_schemas import raw_crd_index
from pod_disk import engine_disk
from policy_server import PackServer, operation
from test_config import problems, raw_config
from variants import model, render, variant_file

from components.topologies import pod_resources
from policy import pack
from policy.workloads import containers, gpu_count, pod_templates
from stacks import loader
from stacks.rules.capacity import gpu_demand

SECRETS = {"apiKey": True, "objectStoreAccessKeyId": True, "objectStoreSecretAccessKey": True, "cephUserKey": True,
           "registryDockerConfigJson": True}
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
L40S_TAINT = {"key": "example.com/l40s", "operator": "Exists", "effect": "NoSchedule"}


def big(**changes) -> dict:
    """The issue's example: a TP=4 model with 32 CPU, 256Gi memory and 32Gi /dev/shm."""
    return model(**{"name": "qwen-72b", "servedModelName": "qwen2.5-72b-instruct", "directory": "Qwen2.5-72B-Instruct",
                    "objectPrefix": "models/Qwen2.5-72B-Instruct", "revision": "main", "sizeGiB": 136,
                    "resources": {"cpu": "32", "memory": "256Gi", "shm": "32Gi"},
                    "vllm": {"tensorParallelSize": 4, "maxModelLen": 32768}, **changes})


def small(**changes) -> dict:
    """A TP=2 model on its own node pool (L40S nodes, their own taint), request below limit."""
    return model(**{"name": "qwen-32b", "servedModelName": "qwen2.5-32b-instruct", "directory": "Qwen2.5-32B-Instruct",
                    "objectPrefix": "models/Qwen2.5-32B-Instruct", "revision": "main", "sizeGiB": 62,
                    "resources": {"cpu": "15500m", "cpuLimit": 24, "memory": "96Gi", "memoryLimit": "128Gi",
                                  "shm": "16Gi"},
                    "nodeSelector": L40S, "tolerations": [L40S_TAINT],
                    "vllm": {"tensorParallelSize": 2, "maxModelLen": 32768}, **changes})


def two_model_file(stack: str = "two-models", **changes):
    return variant_file(stack, models=[big(), small()], gpuBudget=8, **changes)


@functools.lru_cache(maxsize=None)
def rendered_two(preview: bool = False):
    from render import runtime
    return runtime.render(two_model_file(), preview=preview)


def engine_pod(objects: list[dict], name: str) -> dict:
    (dep,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name]
    return dep["spec"]["template"]["spec"]


def engine_container(pod: dict) -> dict:
    return next(c for c in pod["containers"] if c["name"] == "engine")



def shm_of(pod: dict) -> dict:
    return next(v for v in pod["volumes"] if v["name"] == "shm")["emptyDir"]


def raw_two() -> dict:
    raw = raw_config()
    raw["models"], raw["gpuBudget"] = [big(), small()], 8
    return raw


# ---- rendering: each pod its own resources, /dev/shm and node pool ----

def test_each_model_renders_its_own_requests_limits_shm_and_node_pool():
    objects = k8s_objects(rendered_two())
    big_pod, small_pod = engine_pod(objects, "qwen-72b"), engine_pod(objects, "qwen-32b")
    assert engine_disk(big_pod, engine_container(big_pod)) == {
        "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"},
        "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"}}
    assert engine_disk(small_pod, engine_container(small_pod)) == {
        "requests": {"cpu": "15500m", "memory": "96Gi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "24", "memory": "128Gi", "nvidia.com/gpu": "2"}}
    assert shm_of(big_pod) == {"medium": "Memory", "sizeLimit": "32Gi"}
    assert shm_of(small_pod) == {"medium": "Memory", "sizeLimit": "16Gi"}
    # Unset: gpuPool's node pool, as the committed stacks; set: the model's own.
    dev = raw_config()["gpuPool"] if "gpuPool" in raw_config() else {}
    assert big_pod["nodeSelector"] == dev.get("nodeSelector", {"nvidia.com/gpu.product": "NVIDIA-H20"})
    assert big_pod["tolerations"] == dev.get("tolerations", [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                              "effect": "NoSchedule"}])
    assert small_pod["nodeSelector"] == L40S and small_pod["tolerations"] == [L40S_TAINT]


def test_the_pre_pull_runs_on_every_pool_the_image_serves_on_and_cpu_jobs_avoid_both():
    objects = k8s_objects(rendered_two())
    pools = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] == "DaemonSet"}
    assert len(pools) == 2 and "image-prepull-vllm" in pools
    assert {tuple(sorted(p["nodeSelector"].items())) for p in pools.values()} == {
        tuple(sorted(engine_pod(objects, n)["nodeSelector"].items())) for n in ("qwen-72b", "qwen-32b")}
    own = next(p for n, p in pools.items() if n != "image-prepull-vllm")
    assert own["nodeSelector"] == L40S and own["tolerations"] == [L40S_TAINT]
    jobs = [o for o in objects if o["kind"] == "Job"]
    assert jobs
    for job in jobs:
        (term,) = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {e["key"] for e in term["matchExpressions"] if e["operator"] == "DoesNotExist"} >= {
            "nvidia.com/gpu.product", *L40S}


# A node pool labelled by a key the GPU pool's selector does not use (a mutation audit found that
# dropping the models' keys from the sync Job passed: the L40S pool above shares gpuPool's key).
OWN_POOL = {"example.com/gpu-pool": "l40s"}


def own_pool_jobs() -> list[dict]:
    sf = variant_file("own-pool", models=[big(), small(nodeSelector=OWN_POOL)], gpuBudget=8)
    return [o for o in k8s_objects(render(sf)) if o["kind"] == "Job"]


def excluded_keys(job: dict) -> set[str]:
    (term,) = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return {e["key"] for e in term["matchExpressions"] if e["operator"] == "DoesNotExist"}


def test_the_sync_job_avoids_a_model_pool_whose_key_the_gpu_pool_does_not_use():
    jobs = own_pool_jobs()
    syncs = [j for j in jobs if j["metadata"]["name"].startswith("sync-")]
    assert len(syncs) == 2   # one per model directory
    pool_keys = set(dev_pool_selector())
    assert not set(OWN_POOL) & pool_keys
    for job in syncs:
        assert excluded_keys(job) == pool_keys | set(OWN_POOL), job["metadata"]["name"]
    # Every other CPU Job of the stack avoids it too (smoke, warm-up, image mirror).
    for job in jobs:
        assert excluded_keys(job) >= pool_keys | set(OWN_POOL), job["metadata"]["name"]


def dev_pool_selector() -> dict:
    dev = raw_config()["gpuPool"] if "gpuPool" in raw_config() else {}
    return dev.get("nodeSelector", {"nvidia.com/gpu.product": "NVIDIA-H20"})


def test_a_stack_without_per_model_values_keeps_the_pool_defaults():
    """Field report 2.1 through gpuPool: 64/320Gi request, 128/512Gi limit, 128Gi /dev/shm."""
    pod = engine_pod(k8s_objects(render(variant_file())), "deepseek-v4-flash")
    resources = engine_disk(pod, engine_container(pod))
    assert resources["requests"] == {"cpu": "64", "memory": "320Gi", "nvidia.com/gpu": "8"}
    assert resources["limits"] == {"cpu": "128", "memory": "512Gi", "nvidia.com/gpu": "8"}
    assert shm_of(pod)["sizeLimit"] == "128Gi"


def test_two_engines_in_one_pod_share_the_model_resources():
    """pd-same-pod: two engine containers each take half, floored to whole cores and GiB, as the pool's did."""
    m = model(topology="pd-same-pod", resources={"cpu": "33", "memory": "301Gi", "shm": "72Gi"},
              vllm={**model()["vllm"], "tensorParallelSize": 4})
    pod = engine_pod(k8s_objects(render(variant_file(models=[m]))), "deepseek-v4-flash")
    engines = [c for c in pod["containers"] if max(gpu_count(c))]
    assert len(engines) == 2
    assert all(c["resources"]["requests"]["cpu"] == "16" and c["resources"]["limits"]["memory"] == "150Gi"
               for c in engines)
    assert shm_of(pod)["sizeLimit"] == "72Gi"


@pytest.mark.parametrize("variant", ["two models", "amd"])
def test_the_per_model_stacks_pass_the_api_server_rules_and_schema(variant):
    from test_schema import strict_errors

    import apivalidation
    objects = k8s_objects(rendered_two() if variant == "two models" else render(amd_file()))
    index = raw_crd_index()
    for obj in objects:
        if obj["kind"] in ("Deployment", "DaemonSet", "Job"):
            assert strict_errors(obj, "1.33") == [], obj["metadata"]["name"]
    problems_found = apivalidation.validate(objects, index)
    assert problems_found == [], apivalidation.report(problems_found)


@pytest.mark.parametrize("topology, orchestrator, budget", [
    ("pd", "rayclusterfleet", 24), ("hybrid", "stormservice", 32), ("combined", "rolebasedgroup", 8)])
def test_every_workload_kind_takes_the_model_resources_and_node_pool(topology, orchestrator, budget):
    """One pod builder for every kind: the fleets' heads, StormService roles and RBG roles carry them too."""
    from test_pd import stack as pd_stack
    from variants import sglang_stack
    own = {"resources": {"cpu": "48", "memory": "400Gi", "shm": "96Gi"},
           "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}}
    sf = sglang_stack(**own) if orchestrator == "rolebasedgroup" else pd_stack(topology, orchestrator, budget, **own)
    engines = [ref.template for o in k8s_objects(render(sf)) for ref in pod_templates(o["kind"], o)
               if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") == "engine"]
    assert engines
    for t in engines:
        c = next(c for _, c in containers(t) if max(gpu_count(c)))
        assert c["resources"]["requests"]["cpu"] == "48" and c["resources"]["limits"]["memory"] == "400Gi"
        assert shm_of(t["spec"])["sizeLimit"] == "96Gi"
        assert t["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}


@pytest.fixture(scope="module")
def server():
    s = PackServer.start()
    yield s
    s.close()


@pytest.mark.parametrize("preview", [False, True])
def test_the_two_model_stack_passes_the_pack_through_its_server(server, preview):
    sf = two_model_file()
    report = server.run(operation(rendered_two(preview), server.fresh_stack("variant"), stack_file=sf,
                                  policy_config="dev"))
    assert report.skipped_mandatory() == []
    assert report.violations() == [], [(d.policy, d.message) for d in report.violations()]


# ---- the budget and the node fit count per model ----

def test_the_budget_counts_each_model_by_its_own_gpus():
    cfg = loader.validate(raw_two(), "dev", SECRETS)
    assert dict(gpu_demand(cfg)) == {"qwen-72b": 4, "qwen-32b": 2}
    raw = raw_two()
    raw["gpuBudget"] = 5
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuBudget = 5: the workloads need 6 GPUs at peak, "
                             "rollouts included (qwen-72b 4, qwen-32b 2); raise gpuBudget or lower replicas"]


def test_node_fit_counts_each_model_memory_limit_on_its_own_pool():
    """Two qwen-72b pods (2 x 256Gi) fill an 8-GPU H20 node; qwen-32b runs on L40S nodes, which its selector
    keeps apart (nvidia.com/gpu.product cannot be both), so it is not added to the H20 node."""
    raw = raw_two()
    raw["models"][0]["replicas"] = 2
    raw["gpuBudget"] = 10
    raw["gpuPool"] = {**raw.get("gpuPool", {}), "nodeMemoryGiB": 520}
    raw["operations"] = {**raw.get("operations", {}), "imagePrePull": {"enabled": False}}
    assert loader.validate(raw, "dev", SECRETS)
    raw["gpuPool"]["nodeMemoryGiB"] = 500
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].resources.memory = '256Gi': one node of "
                           "gpuPool.gpusPerNode 8 GPUs may hold engine pods whose memory limits sum to 512 GiB "
                           "(qwen-72b 256 GiB, qwen-72b 256 GiB: each model's memory limit per pod"), line
    # On one pool (no selector of its own) the TP=2 pods share the node: 2 x 256 + 2 x 128 with 8 GPUs... at most
    # one qwen-72b (4 GPUs) and two qwen-32b (2 x 2 GPUs): 256 + 2 x 128 = 512 GiB.
    raw["models"][0]["replicas"] = 1
    raw["models"][1]["replicas"] = 2
    raw["models"][1].pop("nodeSelector")
    raw["gpuPool"]["nodeMemoryGiB"] = 511
    (line,) = problems(raw)
    assert "memory limits sum to 512 GiB (qwen-72b 256 GiB, qwen-32b 128 GiB, qwen-32b 128 GiB" in line, line


# ---- another GPU resource name: the budget and the pack count it ----

def amd_file(stack: str = "amd"):
    return variant_file(stack, models=[big(gpuResourceName="amd.com/gpu", nodeSelector={"amd.com/gpu.product": "MI300X"},
                                           tolerations=[{"key": "amd.com/gpu", "operator": "Exists",
                                                         "effect": "NoSchedule"}]), small()], gpuBudget=8)


def test_a_model_on_amd_gpus_requests_them_and_the_budget_counts_them():
    objects = k8s_objects(render(amd_file()))
    resources = engine_container(engine_pod(objects, "qwen-72b"))["resources"]
    assert resources["requests"]["amd.com/gpu"] == resources["limits"]["amd.com/gpu"] == "4"
    assert "nvidia.com/gpu" not in resources["requests"]
    raw = raw_two()
    raw["models"][0]["gpuResourceName"] = "amd.com/gpu"
    raw["gpuBudget"] = 5
    assert "need 6 GPUs at peak" in problems(raw)[0]


def test_the_pack_counts_amd_gpus_against_the_budget(server):
    from test_pack import of_type
    sf = amd_file()
    rendered = render(sf)
    report = server.run(operation(rendered, server.fresh_stack("variant"), stack_file=sf, policy_config="dev"))
    assert report.violations() == [], [(d.policy, d.message) for d in report.violations()]
    templates = [t for o in k8s_objects(rendered) for t in pod_templates(o["kind"], o)]
    assert sum(max(gpu_count(c)) for t in templates for _, c in containers(t.template)) == 6
    over = operation(rendered, server.fresh_stack("variant"), stack_file=sf, policy_config="dev",
                     edit=of_type(pack.STACK_FACTS, lambda r: r.outputs.update(gpuBudget=5)))
    assert server.run(over).messages("gpu-budget-stack") == [
        "The stack needs 6 GPUs at peak (rollouts included) but its budget is 5; raise llm-serving:gpuBudget "
        "or lower replicas."]


def test_the_pack_refuses_an_amd_gpu_in_a_daemonset_and_a_job():
    from policy import resource_rules
    ds = {"kind": "DaemonSet", "metadata": {"name": "x", "namespace": "n"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
                        "resources": {"limits": {"amd.com/gpu": "1"}}}]}}}}
    assert resource_rules.daemonsets_hold_no_gpus("kubernetes:apps/v1:DaemonSet", ds) == [
        "DaemonSet n/x: container c of a DaemonSet requests amd.com/gpu; a pod per node is a GPU count no budget bounds."]
    job = copy.deepcopy(ds)
    job["kind"] = "Job"
    assert any("must not request amd.com/gpu" in m
               for m in resource_rules.model_sync_stays_off_gpus("kubernetes:batch/v1:Job", job))


# ---- bad input: refused under the field that holds it ----

@pytest.mark.parametrize("change, expected", [
    (lambda m: m["resources"].update(cpu="32 cores"), "models[0].resources.cpu = '32 cores': must be a Kubernetes quantity"),
    (lambda m: m["resources"].update(cpu="0.0001"), "models[0].resources.cpu = '0.0001': must be a whole number of millicores"),
    (lambda m: m["resources"].update(memory="256GB"), "models[0].resources.memory = '256GB': must be a Kubernetes quantity"),
    (lambda m: m["resources"].update(memory="0"), "models[0].resources.memory = '0': must be more than 0"),
    (lambda m: m["resources"].update(cpuLimit="16"), "models[0].resources.cpuLimit = '16': must not be below the CPU "
                                                     "request 32"),
    (lambda m: m["resources"].update(memoryLimit="200Gi"), "models[0].resources.memoryLimit = '200Gi': must not be below "
                                                           "the memory request 256Gi"),
    (lambda m: m["resources"].update(shm="300Gi"), "models[0].resources.shm = '300Gi': leaves /dev/shm (300 GiB) not "
                                                   "below the engine pod's memory limit (256 GiB)"),
    (lambda m: m["resources"].update(shm="16Gi"), "models[0].resources.shm = '16Gi': must be at least 32 GiB for "
                                                  "models[0] (qwen-72b) with 4 GPUs per pod"),
    (lambda m: m.update(gpuResourceName="nvidia.com/gpu!"), "models[0].gpuResourceName = 'nvidia.com/gpu!': "),
    (lambda m: m.update(gpuResourceName="cpu"), "models[0].gpuResourceName = 'cpu': must be an extended resource name"),
    (lambda m: m.update(gpuResourceName="example.com/gpu"), "models[0].gpuResourceName = 'example.com/gpu': must be a "
                                                            "GPU resource the policy pack counts"),
    (lambda m: m.update(nodeSelector={}), "models[0].nodeSelector = '{}': must name at least one node label"),
    (lambda m: m.update(nodeSelector={"kubernetes.io/os": "linux"}), "models[0].nodeSelector"),
    (lambda m: m.update(tolerations=[{"key": "a", "operator": "Exists", "value": "b"}]), "models[0].tolerations[0].value"),
])
def test_bad_per_model_resources_are_refused_under_their_field(change, expected):
    raw = raw_two()
    change(raw["models"][0])
    lines = problems(raw)
    assert any(line.startswith(f"Pulumi.dev.yaml: llm-serving:{expected}") for line in lines), lines
    assert "Traceback" not in "\n".join(lines)


def test_a_bad_quantity_exits_2_and_writes_nothing(tmp_path, capsys):
    from conftest import PROJECT_DIR
    from test_render import bad_project

    from render.__main__ import main as render_main
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    text = dev.replace("      vllm:\n", "      resources: {cpu: \"32\", memory: 256Gix, shm: 32Gi}\n      vllm:\n", 1)
    out = tmp_path / "out"
    assert render_main(["--stack", "bad", "--project-dir", str(bad_project(tmp_path, text)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Pulumi.bad.yaml: llm-serving:models[0].resources.memory = '256Gix': must be a Kubernetes quantity" in err
    assert "Traceback" not in err and not out.exists()


def test_a_yaml_number_is_a_quantity_and_unset_keys_keep_the_pool():
    raw = raw_config()
    raw["models"][0]["resources"] = {"cpu": 48}
    cfg = loader.validate(raw, "dev", SECRETS)
    res = pod_resources(cfg.gpu_pool, cfg.models[0])
    assert (res.cpu_request, res.cpu_limit) == (48000, 48000)
    assert (res.memory_request, res.memory_limit, res.shm) == (320 * 2**30, 512 * 2**30, 128 * 2**30)


# ---- plan.md reads the per-model values back off the manifests ----

def test_the_plan_shows_each_model_memory_shm_and_pre_pull_on_its_own_pool():
    from render.plan_md import plan_md
    plan = plan_md(rendered_two())
    assert "| Deployment qwen-72b | engine: off | 256Gi | 256Gi | 32Gi |" in plan
    assert "| Deployment qwen-32b | engine: off | 96Gi | 128Gi | 16Gi |" in plan
    rows = [line for line in plan.splitlines() if line.startswith("| qwen2.5-")]
    ttft = [r for r in rows if r.count("|") == 13]
    assert len(ttft) == 2 and all(r.endswith("| pre-pull |") for r in ttft), ttft
    assert "GPUs at peak, rollouts included: **6 of budget 8**" in plan_md(render(amd_file()))
