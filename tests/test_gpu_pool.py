"""The GPU pool says what hardware it is (issue 28): the catalogue (policy/gpus.py) checked against the names
the engines themselves read, the defaults each type gives, engine pods sized from the declared node (or the
field report's pod per GPU), refusals naming the field and the numbers, /dev/shm counted from the pod's GPUs,
and the memory fit (policy/memory_fit.py, stacks/rules/hardware.py) with plan.md's per-GPU budget."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import pytest
from conftest import PROJECT_DIR, k8s_objects, render_stack
from pod_disk import engine_disk
from test_config import SECRETS, problems, raw_config
from variants import model, render, variant_file

from components.topologies import gpus_per_pod, pod_resources
from config_model import GpuPool
from config_model.resources import FIELD_REPORT_POD, FIELD_REPORT_POD_GPUS, inherited_pod_sizes, pool_pod
from policy import gpus, k8s_names, memory_fit
from policy.manifests import SHM_GIB_PER_GPU, quantity_gib
from render.output import plan_md
from stacks import loader

ISSUE_TYPES = {"H20", "H100-80GB", "H200", "A100-80GB", "A100-40GB", "L40S", "L4", "B200"}
GIB = 2**30


# ---- the catalogue ----

def _vllm_site() -> Path:
    root = Path(os.environ.get("VLLM_VENVS") or PROJECT_DIR / ".venv-vllm") / "0.33.0"
    found = sorted(root.glob("lib/python3*/site-packages"))
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"vLLM 0.33.0 is not installed under {root} (make test builds it)")
        pytest.skip(f"vLLM 0.33.0 is not installed under {root}")
    return found[0]


def test_the_catalogue_holds_the_types_the_issue_names():
    assert ISSUE_TYPES <= set(gpus.NAMES)


def test_product_labels_are_the_names_the_engines_read_with_spaces_as_dashes():
    """GFD's label is the NVML name with ' ' -> '-' (k8s-device-plugin internal/lm/resource.go). vLLM 0.33.0
    names its tuned fused-MoE configs after the same name with ' ' -> '_' (get_device_name_as_file_name), and
    PyTorch keys its device table by it: so each label is one of those names with '_' -> '-'."""
    site = _vllm_site()
    configs = site / "vllm/model_executor/layers/fused_moe/configs"
    device_names = {m.group(1) for p in configs.glob("*.json") if (m := re.search(r"device_name=([^,]+?)(?:,|\.json$)", p.name))}
    torch_names = set(re.findall(r'^    "([^"]+)": DeviceInfo\(', (site / "torch/_inductor/analysis/device_info.py")
                                 .read_text(), re.M))
    seen = {n.replace("_", "-") for n in device_names} | {n.replace(" ", "-") for n in torch_names}
    missing = [t.name for t in gpus.CATALOGUE.values() if t.product not in seen]
    assert missing == []


@pytest.mark.parametrize("name", sorted(gpus.NAMES))
def test_each_type_gives_its_selector_architecture_and_memory(name):
    entry = gpus.named(name)
    assert k8s_names.label_value(entry.product) == []
    pool = GpuPool(gpu_type=name)
    assert pool.node_selector == {gpus.PRODUCT_LABEL: entry.product}
    assert pool.gpu_architecture == entry.architecture
    assert pool.memory_per_gpu_gib == entry.memory_mib / 1024
    # The product label alone names the type, and an explicit selector or architecture wins.
    assert GpuPool(node_selector={gpus.PRODUCT_LABEL: entry.product}).gpu_type == name
    own = GpuPool(gpu_type=name, node_selector={"pool": "a"}, gpu_architecture="sm90a")
    assert (own.node_selector, own.gpu_architecture) == ({"pool": "a"}, "sm90a")


def test_architectures_follow_the_compute_capability_of_each_family():
    by_arch = {t.name: t.architecture for t in gpus.CATALOGUE.values()}
    assert {n for n, a in by_arch.items() if a == "sm90"} == {"H20", "H100-80GB", "H200"}
    assert {n for n, a in by_arch.items() if a == "sm80"} == {"A100-80GB", "A100-40GB"}
    assert {n for n, a in by_arch.items() if a == "sm89"} == {"L40S", "L4"}
    assert by_arch["B200"] == "sm100"


def test_an_a100_pool_renders_its_selector_and_architecture():
    """The issue's A100 pool kept gpuArchitecture sm90 unless the user knew to change it."""
    objects = k8s_objects(render(generic_stack("A100-80GB", 4)))
    (dep,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "gen"]
    pod = dep["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {gpus.PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"}
    keys = [v for k, v in pod["metadata"]["annotations"].items() if k.startswith("llm-serving.io/compile-cache-key")]
    assert keys and all(v.startswith("sm80-") for v in keys)


# ---- engine pod sizes ----

# Nodes of each GPU as clouds sell them, allocatable as a kubelet might report them (8 GPUs each).
NODES = {"L4": (190, 740), "A100-80GB": (94, 1100), "H100-80GB": (190, 1980), "H20": (180, 1800)}
SIZE = {"L4": 12, "A100-80GB": 60, "H100-80GB": 60, "H20": 60}   # GiB of weights that fit at TP 1 on each


def generic_stack(gpu: str, tp: int, node: tuple[int, int] | None = None, **pool):
    m = model(name="gen", profile="generic", servedModelName="gen", directory="Gen", objectPrefix="models/gen",
              revision="main", expectedShardCount=4, sizeGiB=SIZE.get(gpu, 60), vllm={"tensorParallelSize": tp})
    m.pop("startupBudgetSeconds", None)
    if node is not None:
        pool |= {"nodeCpu": node[0], "nodeMemoryGiB": node[1]}
    return variant_file(f"gpu-{gpu.lower()}-{tp}", models=[m], gpuPool={"gpuType": gpu, **pool})


def _engine(objects: list[dict]) -> tuple[dict, dict]:
    (dep,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "gen"]
    spec = dep["spec"]["template"]["spec"]
    container = next(c for c in spec["containers"] if c["name"] == "engine")
    shm = next(v for v in spec["volumes"] if v["name"] == "shm")["emptyDir"]["sizeLimit"]
    # Its ephemeral storage is the rule's (tests/pod_disk.py); the rest is the pool's.
    return engine_disk(spec, container), quantity_gib(shm)


@pytest.mark.parametrize("gpu", sorted(NODES))
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_without_the_node_a_pod_is_the_field_report_pod_per_gpu(gpu, tp):
    """Field report 2.1's 8-GPU H20 pod (64/320Gi request, 128/512Gi limit, 128Gi shm), scaled to the pod's GPUs."""
    base = pool_pod(GpuPool(gpu_type=gpu), tp)
    want = {k: v * tp // FIELD_REPORT_POD_GPUS for k, v in FIELD_REPORT_POD.items()}
    assert {k: getattr(base, k) for k in want} == want
    assert set(base.sources.values()) == {"fieldReport"}


@pytest.mark.parametrize("gpu", sorted(NODES))
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_with_the_node_a_pod_takes_its_share_and_a_full_node_fits(gpu, tp):
    node_cpu, node_gib = NODES[gpu]
    resources, shm = _engine(k8s_objects(render(generic_stack(gpu, tp, NODES[gpu]))))
    cpu, memory = int(resources["requests"]["cpu"]), quantity_gib(resources["requests"]["memory"])
    assert resources["requests"] == resources["limits"]
    assert resources["requests"]["nvidia.com/gpu"] == str(tp)
    # Its share of the node, less what the node keeps for the pre-pull pods (one core, one GiB).
    assert cpu == (node_cpu - 1) * tp // 8 and memory == (node_gib - 1) * tp // 8
    assert shm == max(memory // 4, SHM_GIB_PER_GPU * tp) and shm < memory
    # As many such pods as the node has GPUs for fit its CPU and memory with the pre-pull pod beside them.
    pods = 8 // tp
    assert pods * cpu + 0.01 <= node_cpu and pods * memory + 32 / 1024 <= node_gib


def test_the_issue_l4_pod_is_sized_for_one_l4_not_eight_h20s():
    resources, shm = _engine(k8s_objects(render(generic_stack("L4", 1))))
    assert resources["requests"] == {"cpu": "8", "memory": "40Gi", "nvidia.com/gpu": "1"}
    assert resources["limits"] == {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"}
    assert shm == 16


def test_the_field_report_fallback_is_reported_as_inherited():
    cfg = loader.validate(raw_config(), "dev", SECRETS)
    found = inherited_pod_sizes(cfg.gpu_pool, [(m, gpus_per_pod(m)) for m in cfg.models])
    assert {i.path: (i.value, i.section) for i in found} == {
        "gpuPool.cpuRequest": ("8 cores per GPU: 64", "2.1"), "gpuPool.cpuLimit": ("16 cores per GPU: 128", "2.1"),
        "gpuPool.memoryRequestGiB": ("40 GiB per GPU: 320", "2.1"),
        "gpuPool.memoryLimitGiB": ("64 GiB per GPU: 512", "2.1"), "gpuPool.shmSizeGiB": ("16 GiB per GPU: 128", "2.1")}
    # Staging states its memory and the node's: only the CPU falls back.
    staging = loader.validate(raw_config("staging"), "staging", SECRETS)
    assert [i.path for i in inherited_pod_sizes(staging.gpu_pool, [(m, gpus_per_pod(m)) for m in staging.models])] == [
        "gpuPool.cpuRequest", "gpuPool.cpuLimit"]


def test_explicit_pool_and_model_values_still_win():
    raw = raw_config()
    raw["gpuPool"] |= {"nodeCpu": 180, "nodeMemoryGiB": 1800, "cpuRequest": 48, "memoryLimitGiB": 600}
    raw["models"][0]["resources"] = {"memory": "256Gi"}
    cfg = loader.validate(raw, "dev", SECRETS)
    res = pod_resources(cfg.gpu_pool, cfg.models[0])
    assert (res.cpu_request, res.cpu_limit) == (48_000, 179_000)
    assert (res.memory_request, res.memory_limit) == (256 * GIB, 256 * GIB)
    assert res.shm == 600 // 4 * GIB   # a quarter of the stack's own pool memory limit


# ---- refusals ----

def test_an_unknown_type_without_memory_is_refused_with_the_catalogue():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "MI300X"}
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:gpuPool.gpuType = 'MI300X': is not in the catalogue")
    assert all(f"{t.name} ({t.product}" in line for t in gpus.CATALOGUE.values()) and "gpuPool.gpuMemoryGiB" in line
    raw["gpuPool"] = {}
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:gpuPool.gpuType = (unset): is required") and "H20 (" in line


def test_an_unknown_type_with_its_memory_needs_its_architecture_and_selector():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "RTX-PRO-6000", "gpuMemoryGiB": 94.97}
    assert [line.split(": is required")[0] for line in problems(raw)] == [
        "Pulumi.dev.yaml: llm-serving:gpuPool.gpuArchitecture = (unset)",
        "Pulumi.dev.yaml: llm-serving:gpuPool.nodeSelector = (unset)"]
    raw["gpuPool"] |= {"gpuArchitecture": "sm120", "nodeSelector": {gpus.PRODUCT_LABEL: "NVIDIA-RTX-PRO-6000"}}
    loader.validate(raw, "dev", SECRETS)


def test_a_selector_naming_another_catalogue_gpu_is_refused():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H100-80GB", "nodeSelector": {gpus.PRODUCT_LABEL: "NVIDIA-H20"}}
    (line,) = problems(raw)
    assert "gpuPool.nodeSelector" in line and "the catalogue's H20, but gpuPool.gpuType is H100-80GB" in line


def test_a_pod_larger_than_its_node_is_refused_with_the_numbers():
    raw = raw_config()
    raw["gpuPool"] |= {"nodeCpu": 96, "nodeMemoryGiB": 1800, "cpuRequest": 100, "cpuLimit": 100}
    (line,) = problems(raw)
    assert line == ("Pulumi.dev.yaml: llm-serving:gpuPool.cpuRequest = 100: one node of gpuPool.gpusPerNode 8 GPUs may "
                    "hold engine pods whose CPU requests sum to 100 cores (deepseek-v4-flash 100) and 1 pre-pull pod of "
                    "10m, more than gpuPool.nodeCpu 96: the scheduler would leave GPUs of the node idle")
    raw = raw_config()
    raw["gpuPool"] |= {"nodeMemoryGiB": 256, "memoryLimitGiB": 512}
    (line,) = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:gpuPool.memoryLimitGiB = 512: one node") and \
        "sum to 512 GiB" in line and "more than gpuPool.nodeMemoryGiB 256" in line


def test_two_tp4_pods_of_a_node_are_counted_together():
    raw = raw_config()
    raw["gpuPool"] |= {"nodeCpu": 96, "cpuRequest": 50, "cpuLimit": 50}
    raw["models"][0]["vllm"]["tensorParallelSize"] = 4
    loader.validate(raw, "dev", SECRETS)   # one pod of 50 cores fits 96
    raw["models"][0]["replicas"] = 2
    (line,) = problems(raw)
    assert "CPU requests sum to 100 cores (deepseek-v4-flash 50, deepseek-v4-flash 50) and 1 pre-pull pod" in line


def test_shm_is_counted_from_the_pods_gpus_not_one_engines_parallel_size():
    """Same-pod P/D: two TP=4 engines in one 8-GPU pod need 8 x 8 GiB; 40Gi would pass if counted from one
    engine's parallel size (4 x 8 = 32 GiB)."""
    raw = raw_config()
    m = raw["models"][0]
    m.update(topology="pd-same-pod", orchestrator="deployment", resources={"shm": "40Gi"})
    m["vllm"] = {**m["vllm"], "tensorParallelSize": 4}
    (line,) = [p for p in problems(raw) if "shm" in p]
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].resources.shm = '40Gi': must be at least 64 GiB for "
                           "models[0] (deepseek-v4-flash) with 8 GPUs per pod (TP=4 per engine, two engines)"), line


# ---- memory fit ----

# DeepSeek-V3 (671B, FP8): 163 shards, 642 GiB; its config.json: num_hidden_layers 61, kv_lora_rank 512,
# qk_rope_head_dim 64 (MLA latent 576), max_position_embeddings 163840 (huggingface.co/deepseek-ai/DeepSeek-V3).
DEEPSEEK_V3 = {"name": "deepseek-v3", "profile": "generic", "servedModelName": "deepseek-v3", "directory": "DeepSeek-V3",
               "objectPrefix": "models/DeepSeek-V3", "revision": "main", "expectedShardCount": 163, "sizeGiB": 642,
               "kvCache": {"layers": 61, "latentDim": 576}, "vllm": {"tensorParallelSize": 8, "maxModelLen": 163840,
                                                                           # the field report's H20 settings (5)
                                                                           "gpuMemoryUtilization": 0.88, "kvCacheDtype": "fp8"}}


def v3_raw(**changes) -> dict:
    raw = raw_config()
    raw["models"] = [{**copy.deepcopy(DEEPSEEK_V3), **changes}]
    raw["modelVolume"] = {**raw["modelVolume"], "capacityGiB": 1400}
    return raw


def test_642_gib_at_tp8_on_h20_is_refused_with_the_numbers_and_what_would_fit():
    (line,) = problems(v3_raw())
    usable = gpus.named("H20").memory_gib * 0.88
    weights, kv = 642 / 8, 61 * 576 * 163840 / GIB
    assert line.startswith(
        f"Pulumi.dev.yaml: llm-serving:models[0].sizeGiB = 642.0: does not fit: {weights:.2f} GiB of weights per GPU "
        f"(642 GiB / vllm.tensorParallelSize 8) and {kv:.2f} GiB of KV cache for one 163840-token sequence (fp8) need "
        f"{weights + kv:.2f} GiB, more than the {usable:.2f} GiB vLLM may use of one H20 (95.58 GiB x "
        "vllm.gpuMemoryUtilization 0.88). Would fit: "), line
    # Past one node (issue 29): two pipeline stages halve the weights and hold 31 of 61 layers' KV each.
    assert weights / 2 + 31 * 576 * 163840 / GIB <= usable
    assert "a model spanning 2 nodes: vllm.tensorParallelSize 8 x pipelineParallelSize 2" in line
    assert "a GPU with more memory at this parallel size: H200, B200 (gpuPool.gpuType)" in line
    assert f"a quantised checkpoint of at most {(usable - kv) * 8:.0f} GiB" in line
    assert f"vllm.maxModelLen at most {int((usable - weights) * GIB // (61 * 576))} tokens" in line
    # Each suggestion does fit.
    loader.validate(v3_raw(vllm={**DEEPSEEK_V3["vllm"], "maxModelLen": 65536}), "dev", SECRETS)
    h200 = v3_raw()
    h200["gpuPool"] = {"gpuType": "H200"}
    loader.validate(h200, "dev", SECRETS)


def test_weights_alone_that_do_not_fit_are_refused_and_a_larger_tp_is_offered():
    raw = v3_raw(vllm={"tensorParallelSize": 4, "maxModelLen": 163840})
    raw["models"][0].pop("kvCache")
    (line,) = problems(raw)
    assert "160.50 GiB of weights per GPU (642 GiB / vllm.tensorParallelSize 4) need 160.50 GiB" in line
    assert "Would fit: vllm.tensorParallelSize 8 (8 GPUs per pod)" in line


def test_the_kv_shape_is_one_of_two_forms():
    raw = v3_raw(kvCache={"layers": 61, "latentDim": 576, "kvHeads": 8})
    assert any("models[0].kvCache" in line and "kvHeads and headDim" in line for line in problems(raw))


def test_the_shipped_deepseek_stacks_fit_and_plan_shows_the_budget(stack):
    cfg = loader.validate(raw_config(stack), stack, SECRETS)
    b = memory_fit.budget(155.43, 8, gpus.named("H20").memory_gib, 0.88)
    assert b.fits and cfg.models[0].size_gib == 155.43
    plan = plan_md(render_stack(stack))
    assert (f"| deepseek-v4-flash | H20, 95.58 GiB | 0.88 | {b.usable_gib:.2f} GiB | {b.weights_gib:.2f} GiB "
            f"(155.43 / TP 8) | unknown | {b.headroom_gib:.2f} GiB | fits |") in plan
    assert "nvidia-smi memory.total of an NVIDIA H20: 97871MiB" in plan


def test_plan_counts_the_kv_cache_when_the_shape_is_known():
    raw_model = {**copy.deepcopy(DEEPSEEK_V3), "vllm": {**DEEPSEEK_V3["vllm"], "maxModelLen": 65536}}
    m = model(**raw_model)
    m.pop("startupBudgetSeconds", None)
    plan = plan_md(render(variant_file("v3", models=[m], modelVolume={**raw_config()["modelVolume"], "capacityGiB": 1400})))
    kv = 61 * 576 * 65536 / GIB
    assert f"| {kv:.2f} GiB (65536 tokens, fp8) |" in plan
    assert "KV cache: models[0].kvCache, vllm kvCacheDtype fp8, context models[0].vllm.maxModelLen" in plan


def test_an_unset_tensor_parallel_size_is_the_field_report_s_and_says_so():
    """TP 8 is the field report's one 8-GPU node (1, 12.1): unset, it is listed among the inherited defaults
    (of the model's own engine only), and a pool whose nodes hold fewer GPUs refuses it saying it was unset."""
    from config_model.inherited import inherited
    raw = raw_config()
    raw["models"][0]["vllm"] = {k: v for k, v in raw["models"][0]["vllm"].items() if k != "tensorParallelSize"}
    paths = [i.path for i in inherited(loader.validate(raw, "dev", SECRETS))]
    assert "models[0].vllm.tensorParallelSize" in paths and not any(".sglang." in p for p in paths)
    assert "models[0].vllm.tensorParallelSize" not in [i.path for i in inherited(loader.validate(raw_config(), "dev", SECRETS))]
    raw["gpuPool"] = {"gpuType": "L4", "gpusPerNode": 4, "gangScheduling": {"scheduler": "none"}}
    # 8 GPUs on nodes of 4 span two nodes (issue 29), which a Deployment cannot run: the refusal says TP was unset.
    line = next(p for p in problems(raw) if "models[0].orchestrator" in p)
    assert "cannot run deepseek-v4-flash across nodes (2 pods of 4 GPUs per replica" in line
    assert line.endswith("vllm.tensorParallelSize is unset, so the field report's 8 for one 8-GPU node (1): set it "
                         "for this pool if the model fits one node"), line
