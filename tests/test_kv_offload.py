"""Issue 13, KV-cache offload to CPU memory: the engine flags against the pinned engines' own definitions
(tests/upstream_vllm.py, tests/upstream_sglang.py), the rendered pods' memory and /dev/shm against the
stack config, and every refusal (node fit, the combinations the engines refuse or would silently break)."""

from __future__ import annotations

import ast
import functools

import pytest
import upstream_sglang as sglang
import upstream_vllm as vllm
from engine_containers import engine_containers, engine_packages
from test_config import problems, raw_config

from components.topologies import pod_base, pod_memory_limit_gib
from config_model import GpuPool
from policy.manifests import quantity_gib
from stacks import loader


def flag(argv, name: str) -> str | None:
    argv = list(argv)
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def offloading(engine: str):
    return [c for c in engine_containers() if c.engine == engine and
            ("--kv-offloading-size" in c.argv or "--enable-hierarchical-cache" in c.argv)]


def test_vllm_offload_flags_take_values_vllm_accepts():
    seen = offloading("vllm")
    assert seen, "no rendered vLLM engine offloads (the staging stack and the every-flag variant should)"
    for c in seen:
        assert flag(c.argv, "--kv-offloading-backend") in vllm.KV_OFFLOADING_BACKENDS
        assert flag(c.argv, "--kv-offloading-backend") != "lmcache"
        vllm.KV_OFFLOADING_SIZE_TYPE(flag(c.argv, "--kv-offloading-size"))
        # vLLM would replace the NIXL connector with the offload connector (OFFLOAD_REPLACES_KV_TRANSFER_CONNECTOR).
        assert vllm.OFFLOAD_REPLACES_KV_TRANSFER_CONNECTOR and "--kv-transfer-config" not in c.argv, c.where


@functools.lru_cache(maxsize=None)
def sglang_field_types(version: str) -> dict[str, str]:
    """`name: A[T, ...]` annotations of the pinned SGLang's server-argument fields, read from its source."""
    root = engine_packages() / f"sglang=={version}"
    out = {}
    for pattern in sglang.FIELD_SOURCES[version]:
        for path in sorted(root.glob(pattern)):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                        and isinstance(node.annotation, ast.Subscript) and ast.unparse(node.annotation.value) == "A"):
                    out[node.target.id] = ast.unparse(node.annotation.slice.elts[0])
    return out


@pytest.mark.parametrize("version", sglang.RELEASES)
def test_hicache_flags_are_typed_as_sglang_declares_them(version):
    # The fields policy/engines/sglang.py offload_host_gib sizes (a size in 10^9 bytes per TP rank).
    types = sglang_field_types(version)
    assert {k: types.get(k) for k in sglang.HICACHE_FIELDS} == sglang.HICACHE_FIELDS
    # The program renders none: HiCache is refused for DeepSeek-V4 (DSV4_HICACHE_SIZE_REFUSAL), so the
    # pack reads no HiCache flag back either (test_offload_memory_policy_reads_the_offload_from_the_argv).
    assert not offloading("sglang")


def _config_of(where: str):
    """The validated stack config a rendered container came from (committed stack or test variant)."""
    from engine_containers import _variants
    from variants import SECRETS
    name = where.split("/")[0]
    if name in ("dev", "staging", "prod"):
        return loader.validate(raw_config(name), name, {k: True for k in SECRETS})
    sf = _variants()[name]
    raw = {k.removeprefix("llm-serving:"): loader.decode(k.removeprefix("llm-serving:"), v)
           for k, v in sf.config.items() if k.startswith("llm-serving:") and k not in sf.secret_keys}
    return loader.validate(raw, name, {k.removeprefix("llm-serving:"): True for k in sf.secret_keys})


def test_rendered_memory_and_shm_grow_by_the_offload():
    """Each engine container's memory request and limit are the pool's share plus the host memory the engine
    allocates (vLLM: size per DP engine; SGLang: size per TP rank), computed from the stack config and
    compared with the rendered container."""
    checked = set()
    for c in engine_containers():
        if c.engine == "vllm" and "--kv-transfer-config" in c.argv:
            continue   # P/D engines never offload (refused), covered by the sum below
        where = c.where.split("/")[0]
        cfg = _config_of(c.where)
        m = next(m for m in cfg.models if m.name == c.where.split("/")[1])
        pool, offload = cfg.gpu_pool, m.kv_cache_offload
        if offload.backend == "native":
            host = offload.size_gib * int(flag(c.argv, "--data-parallel-size") or 1)
        else:
            host = 0
        res = c.container["resources"]
        base = pod_base(pool, m)
        assert quantity_gib(res["requests"]["memory"]) == base.memory_request_gib + host, c.where
        assert quantity_gib(res["limits"]["memory"]) == base.memory_limit_gib + host, c.where
        checked.add((where, offload.backend))
    assert {b for _, b in checked} == {"off", "native"}
    assert ("staging", "native") in checked


def test_dev_shm_and_pod_limit_sum_match_the_node_fit_arithmetic(stack, rendered):
    """The /dev/shm emptyDir of every engine pod is the pool's plus vLLM's offload, and the sum of the
    pod's container limits is what stacks/rules/capacity.py's node-fit rule counts (components/topologies/)."""
    from conftest import k8s_objects

    from policy.workloads import containers, pod_templates
    cfg = loader.validate(raw_config(stack), stack, {k: True for k in loader.SECRET_KEYS})
    by_name = {m.name: m for m in cfg.models}
    seen = 0
    for obj in k8s_objects(rendered):
        for ref in pod_templates(obj.get("kind"), obj):
            labels = ref.template["metadata"].get("labels") or {}
            if ref.template["metadata"].get("annotations", {}).get("llm-serving.io/role") != "engine":
                continue
            m = by_name[labels["llm-serving.io/model"]]
            main = [c for g, c in containers(ref.template) if g == "containers"]
            assert sum(quantity_gib(c["resources"]["limits"]["memory"]) for c in main) == pod_memory_limit_gib(
                cfg.gpu_pool, m)
            shm = next(v for v in ref.template["spec"]["volumes"] if v["name"] == "shm")["emptyDir"]
            extra = m.kv_cache_offload.size_gib * m.vllm.data_parallel_size if m.kv_cache_offload.backend == "native" else 0
            assert shm == {"medium": "Memory", "sizeLimit": f"{pod_base(cfg.gpu_pool, m).shm_size_gib + extra}Gi"}
            seen += 1
    assert seen


# ---- refusals ----

def offload(raw: dict, backend: str = "native", size: int = 64, node: int | None = 2048, i: int = 0) -> dict:
    raw["models"][i]["kvCacheOffload"] = {"backend": backend, "sizeGiB": size}
    if node is not None:
        # The field report's pod (2.1), so the offload grows it rather than the node's share shrinking for it.
        raw["gpuPool"] = {**raw.get("gpuPool", {}), "nodeMemoryGiB": node, "memoryRequestGiB": 320,
                          "memoryLimitGiB": 512, "shmSizeGiB": 128}
    return raw


def test_offload_needs_the_node_memory():
    assert problems(offload(raw_config(), node=None)) == [
        "Pulumi.dev.yaml: llm-serving:gpuPool.nodeMemoryGiB = (unset): is required: models[0].kvCacheOffload "
        "offloads KV cache to host memory, and only the node's allocatable memory says whether the grown pods still fit"]


def too_big_for_a_node_of(node_gib: int) -> str:
    """dev with 600 GiB of offload: one TP=8 pod of 512 + 600 GiB and the pre-pull pod on an 8-GPU node."""
    return ("Pulumi.dev.yaml: llm-serving:models[0].kvCacheOffload.sizeGiB = 600: one node of gpuPool.gpusPerNode 8 "
            "GPUs may hold engine pods whose memory limits sum to 1112 GiB (deepseek-v4-flash 1112 GiB: "
            "gpuPool.memoryLimitGiB 512 per pod plus the KV offload; the Memory /dev/shm emptyDir is charged within "
            "these limits) and 1 pre-pull DaemonSet pod (operations.imagePrePull) with 32Mi, more than "
            f"gpuPool.nodeMemoryGiB {node_gib}")


def test_offload_that_does_not_fit_the_node_is_refused():
    # dev: one TP=8 pod per 8-GPU node with a 512 GiB limit; 600 GiB of offload makes it 1112 GiB.
    lines = problems(offload(raw_config(), size=600, node=1024))
    assert lines == [too_big_for_a_node_of(1024)]
    # The same offload fits a node with the memory for it, the pre-pull DaemonSet's pod included.
    loader.validate(offload(raw_config(), size=600, node=1113), "dev", {k: True for k in loader.SECRET_KEYS})


def test_the_pre_pull_pod_on_every_gpu_node_is_counted_too():
    # The pre-pull DaemonSet (operations.imagePrePull, on by default) puts a pod with a 32Mi memory limit on
    # every GPU node beside the engine pods (components/prepull.py): 1112 GiB of engine limits leave it no room
    # on a 1112 GiB node.
    lines = problems(offload(raw_config(), size=600, node=1112))
    assert lines == [too_big_for_a_node_of(1112)]
    raw = offload(raw_config(), size=600, node=1112)
    raw.setdefault("operations", {})["imagePrePull"] = {"enabled": False}
    loader.validate(raw, "dev", {k: True for k in loader.SECRET_KEYS})


def test_pods_sharing_a_node_are_counted_together():
    # Two TP=4 pods fit one 8-GPU node: twice (512 + 100) GiB.
    raw = offload(raw_config(), size=100, node=1200)
    raw["models"][0]["vllm"]["tensorParallelSize"] = 4
    raw["models"][0]["replicas"] = 2
    raw["gpuBudget"] = 8
    lines = problems(raw)
    assert len(lines) == 1 and "memory limits sum to 1224 GiB (deepseek-v4-flash 612 GiB, deepseek-v4-flash 612 GiB" in lines[0]


def test_node_memory_is_checked_without_offload_too():
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H20", "nodeMemoryGiB": 500, "memoryRequestGiB": 320, "memoryLimitGiB": 512}
    assert problems(raw) == [
        "Pulumi.dev.yaml: llm-serving:gpuPool.memoryLimitGiB = 512: one node of gpuPool.gpusPerNode 8 GPUs may hold "
        "engine pods whose memory limits sum to 512 GiB (deepseek-v4-flash 512 GiB: gpuPool.memoryLimitGiB 512 per "
        "pod; the Memory /dev/shm emptyDir is charged within these limits) and 1 pre-pull DaemonSet pod "
        "(operations.imagePrePull) with 32Mi, more than gpuPool.nodeMemoryGiB 500"]


@pytest.mark.parametrize("backend,size,path,message", [
    ("lmcache", 64, "models[0].kvCacheOffload.backend = 'lmcache'", "selects LMCacheMPConnector"),
    ("hicache", 64, "models[0].kvCacheOffload.backend = 'hicache'", "is a sglang backend; engine 'vllm' offloads with 'native'"),
    ("native", 0, "models[0].kvCacheOffload.sizeGiB = 0", "must be at least 1"),
    ("off", 64, "models[0].kvCacheOffload.sizeGiB = 64", "must be 0 (unset) while kvCacheOffload.backend is 'off'"),
])
def test_offload_combinations_the_engine_refuses(backend, size, path, message):
    lines = problems(offload(raw_config(), backend=backend, size=size))
    assert len(lines) == 1 and lines[0].startswith(f"Pulumi.dev.yaml: llm-serving:{path}: ") and message in lines[0]


def sglang_config() -> dict:
    """dev's model on SGLang under an RBG, as the stack rules accept it."""
    from test_config import SGLANG_IMAGE
    raw = raw_config()
    m = raw["models"][0]
    m.update(engine="sglang", orchestrator="rolebasedgroup", startupBudgetSeconds=2700)
    m.pop("vllm")
    m.pop("rollout")
    raw["images"]["sglang"] = SGLANG_IMAGE
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit"}
    return raw


def test_native_offload_on_sglang_is_refused():
    raw = sglang_config()
    assert problems(offload(raw)) == ["Pulumi.dev.yaml: llm-serving:models[0].kvCacheOffload.backend = 'native': is a "
                                      "vllm backend; engine 'sglang' offloads with 'hicache'"]


@pytest.mark.parametrize("version", sglang.RELEASES)
def test_both_sglang_releases_refuse_a_hicache_size_for_deepseek_v4(version):
    """The pinned releases' own source (tests/upstream_sglang.py DSV4_HICACHE_SIZE_*): DeepSeek-V4's host pool
    takes no --hicache-size, which is the size the pod's memory would have to reserve."""
    source = (engine_packages() / f"sglang=={version}" / sglang.DSV4_HICACHE_SIZE_SOURCE).read_text()
    body = source.split("def _deepseek_v4_num_host_pages(", 1)[1].split("\ndef ", 1)[0]
    assert "hicache_size > 0:" in body and "raise ValueError" in body and sglang.DSV4_HICACHE_SIZE_REFUSAL in body
    assert "_deepseek_v4_num_host_pages(" in source.split("def build_deepseek_v4_hicache_stack(", 1)[1]
    # ... which the first HiCache strategy tried, DeepSeek-V4's pool's, calls.
    strategy = source.split("class _DeepSeekV4Strategy(", 1)[1].split("\nclass ", 1)[0]
    assert "DeepSeekV4TokenToKVPool" in strategy and "build_deepseek_v4_hicache_stack(" in strategy
    assert source.split("_STRATEGIES: list[StackStrategy] = [", 1)[1].split(",", 1)[0].strip() == "_DeepSeekV4Strategy()"


def test_hicache_is_refused_because_sglang_refuses_its_size_for_deepseek_v4():
    raw = sglang_config()
    lines = problems(offload(raw, backend="hicache", size=24))
    assert len(lines) == 1 and lines[0].startswith(
        "Pulumi.dev.yaml: llm-serving:models[0].kvCacheOffload.backend = 'hicache': is not offered: ")
    assert sglang.DSV4_HICACHE_SIZE_REFUSAL in lines[0]


def test_offload_on_pd_is_refused_because_vllm_would_drop_nixl():
    raw = raw_config()
    raw["models"][0].update(topology="pd-same-pod")
    raw["models"][0]["vllm"]["tensorParallelSize"] = 4
    lines = problems(offload(raw))
    assert len(lines) == 1 and lines[0].startswith(
        "Pulumi.dev.yaml: llm-serving:models[0].kvCacheOffload.backend = 'native': is only for topology 'combined', "
        "not 'pd-same-pod'") and "_post_init_kv_transfer_config" in lines[0]


def test_node_memory_field_is_optional_and_positive():
    assert GpuPool(gpu_type="H20").node_memory_gib is None
    raw = raw_config()
    raw["gpuPool"] = {"gpuType": "H20", "nodeMemoryGiB": 0}
    assert any("gpuPool.nodeMemoryGiB" in line for line in problems(raw))


# ---- the offload-memory policy on the rendered pods (through the real policy server: tests/test_pack.py) ----

def _policy_violations(obj: dict) -> list[str]:
    from policy import rules
    policy = next(p for p in rules.RESOURCE_POLICIES if p.name == "offload-memory")
    group, version = obj["apiVersion"].split("/") if "/" in obj["apiVersion"] else ("core", obj["apiVersion"])
    return policy.check(f"kubernetes:{group}/{version}:{obj['kind']}", obj)


def test_offload_memory_policy_reads_the_offload_from_the_argv():
    import copy

    from conftest import k8s_objects, render_stack

    from policy.workloads import pod_templates
    storm = copy.deepcopy(next(o for o in k8s_objects(render_stack("staging")) if o["kind"] == "StormService"))
    assert _policy_violations(storm) == []
    template = pod_templates("StormService", storm)[0].template
    next(v for v in template["spec"]["volumes"] if v["name"] == "shm")["emptyDir"]["sizeLimit"] = "128Gi"
    assert _policy_violations(storm) == [
        f"StormService llm-serving-staging/{storm['metadata']['name']}: /dev/shm sizeLimit 128Gi does not hold the "
        "128Gi vLLM offloads there plus 64Gi for 8 GPUs."]
    # SGLang's HiCache is refused by the config rules (stacks/rules/capacity.py kv_cache_offload), so the engine module
    # reads no HiCache flag back (policy/engines/sglang.py offload_gib_of_argv): an argv that sets them is the
    # config's to refuse, not the pack's.
    sglang_engine = next(c for c in engine_containers() if c.engine == "sglang" and c.where.startswith("sglang/"))
    rbg = {"apiVersion": "workloads.x-k8s.io/v1alpha2", "kind": "RoleBasedGroup", "metadata": {"name": "s"},
           "spec": {"roles": [{"name": "server", "replicas": 1, "standalonePattern": {"template": {
               "metadata": {"annotations": sglang_engine.annotations},
               "spec": {"containers": [copy.deepcopy(sglang_engine.container)], "volumes": []}}}}]}}
    c = rbg["spec"]["roles"][0]["standalonePattern"]["template"]["spec"]["containers"][0]
    c["args"] = [*c["args"], "--enable-hierarchical-cache", "--hicache-size", "24"]
    c["resources"]["requests"]["memory"] = "128Gi"
    assert _policy_violations(rbg) == []
    # The same container with vLLM's offload flags in its argv is still SGLang's: nothing of vLLM's is read.
    c["args"] = [*c["args"], "--kv-offloading-size", "400"]
    assert _policy_violations(rbg) == []


# ---- the grown pods still validate; a node-fit refusal is an exit 2 with nothing written ----

def test_offloading_pods_pass_schema_and_api_server_rules():
    """The engine workloads of both offload variants (the only objects offload changes): the Deployment
    against Kubernetes' strict schema, the RoleBasedGroup against its pinned CRD's schema, both through
    the API-server and CEL rules of apivalidation/."""
    from conftest import k8s_objects, shared_dir
    from crd_schemas import validate_custom_resource
    from engine_containers import rendered_variants
    from test_schema import strict_errors

    import apivalidation
    index = apivalidation.crd_index(str(shared_dir("crds")), frozenset({"RoleBasedGroup"}))
    checked = set()
    for name in ("vllm-every-flag", "sglang-every-flag"):
        objects = [o for o in k8s_objects(rendered_variants()[name]) if o["kind"] in ("Deployment", "RoleBasedGroup")]
        for obj in objects:
            errors = strict_errors(obj, "1.33") if obj["kind"] == "Deployment" else validate_custom_resource(obj, index)
            assert errors == [], (name, obj["kind"])
            checked.add(obj["kind"])
        problems = apivalidation.validate(objects, index)
        assert problems == [], apivalidation.report(problems)
    assert checked == {"Deployment", "RoleBasedGroup"}


def test_node_fit_refusal_exits_2_and_writes_nothing(tmp_path, capsys):
    from conftest import PROJECT_DIR
    from test_render import bad_project

    from render.__main__ import main as render_main
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    text = dev.replace("      vllm:\n", "      kvCacheOffload:\n        backend: native\n        sizeGiB: 600\n      vllm:\n")
    text = text.replace("    gpuType: H20\n", "    gpuType: H20\n    nodeMemoryGiB: 1024\n    memoryLimitGiB: 512\n")
    out = tmp_path / "out"
    assert render_main(["--stack", "bad", "--project-dir", str(bad_project(tmp_path, text)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Pulumi.bad.yaml: llm-serving:models[0].kvCacheOffload.sizeGiB = 600: one node of gpuPool.gpusPerNode 8" in err
    assert "Traceback" not in err and not out.exists()
