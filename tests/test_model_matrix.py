"""Issue 28, "How it is checked": model x hardware stacks (tests/model_matrix.py CASES: each family, each
catalogue GPU, TP 1/2/4/8, both engines, single-file and sharded checkpoints, 1 and 3 replicas, with and without
the node's allocatable) rendered once each, and for each: the engine pod within its node, the family's flags in
the argv and that argv accepted by the pinned vLLM and SGLang parsers, the checkpoint through the rendered gate
code, plan.md's memory-fit verdict with its numbers, the rollout and what serves during it, and the time to first
token with each figure's source. The expected values are worked out here from the stack inputs and the documented
rules (docs/topologies.md, docs/operations.md, docs/models.md), never read back from the render. Then bad input:
each refused through the render CLI, exit 2, with the field and the numbers."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pytest
import sglang_cli
import upstream_sglang
import upstream_vllm
import yaml
from conftest import k8s_objects
from engine_containers import option_names, rendered_variants, sglang_options
from engine_containers import vllm_releases as parse_every_vllm_argv
from model_matrix import BY_KEY, CASES, Case
from pod_disk import engine_disk
from test_config import raw_config
from variants import stack_project

from config_model.resources import NODE_RESERVED_CPU, NODE_RESERVED_GIB
from policy import gpus, quantity
from policy.profiles import NAMES as PROFILE_NAMES
from policy.workloads import containers, gpu_count, pod_templates
from render.__main__ import main as render_main
from render.output import plan_md

# The parser runs and the renders are module fixtures: the whole file on one worker (Makefile --dist loadgroup).
pytestmark = pytest.mark.xdist_group("model-matrix")

GIB = 2**30
KEYS = [c.key for c in CASES]
# Field report figures the plan falls back to, as the docs state them: 2.1's 8-GPU pod (64/320Gi request,
# 128/512Gi limit, 128Gi /dev/shm), 3.2's 437 MiB/s download, 12.2's 127 s image pull, 6's 12 min vLLM cold start.
FR_POD_PER_GPU = {"cpu_request": 8, "cpu_limit": 16, "memory_request": 40, "memory_limit": 64, "shm": 16}
FR_DOWNLOAD_MIBPS = 437
FR_IMAGE_PULL_S = 127
FR_DEEPSEEK_VLLM_COLD_S = 12 * 60
SHM_GIB_PER_GPU = 8     # the least /dev/shm per GPU the rules and the pack ask (docs/topologies.md)
# vLLM's own default --gpu-memory-utilization (CacheConfig, vllm/config/cache.py at v0.26.0 and v0.33.0).
VLLM_DEFAULT_UTILIZATION = 0.92
DEEPSEEK_V4 = {"size_gib": 155.43, "shards": 48, "context": 204800, "utilization": 0.88}   # field report 3.1, 5


# ---- the renders, once each ----

@pytest.fixture(scope="module")
def rendered() -> dict:
    """Each stack rendered once per worker: the shared variants (tests/engine_containers.py) hold them, so the
    flag, cache and read-back tests over every engine container cover them too."""
    variants = rendered_variants()
    return {c.key: variants[f"matrix-{c.key}"] for c in CASES}


@pytest.fixture(scope="module")
def plans(rendered) -> dict[str, str]:
    return {k: plan_md(r) for k, r in rendered.items()}


def engine_pod(r) -> tuple[dict, object]:
    """The one GPU workload of the stack and its pod template reference."""
    found = [(obj, ref) for obj in k8s_objects(r) for ref in pod_templates(obj.get("kind"), obj)
             if any(gpu_count(c)[1] for _, c in containers(ref.template))]
    assert len(found) == 1, [o["metadata"]["name"] for o, _ in found]
    return found[0]


def engine_container(r) -> dict:
    _, ref = engine_pod(r)
    (c,) = [c for _, c in containers(ref.template) if gpu_count(c)[1]]
    return c


def argv(r) -> tuple[str, ...]:
    c = engine_container(r)
    full = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    return tuple(full[full.index("serve"):])


def table_row(text: str, heading: str, first_cell: str) -> list[str]:
    """The row of the table under `heading` whose first cell is `first_cell`, as cells."""
    (row,) = [line for line in table_rows_after(text, heading) if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


def gib(q: str) -> float:
    return float(quantity.value(quantity.parse(q))) / GIB


def cpu(q: str) -> float:
    return float(quantity.parse(q))


def test_the_matrix_covers_what_the_issue_names():
    assert {c.family for c in CASES} == set(PROFILE_NAMES) == {"deepseek-v4", "qwen3", "llama3", "gpt-oss", "generic"}
    assert {c.gpu for c in CASES} == {"H20", "H100-80GB", "H200", "A100-80GB", "A100-40GB", "L40S", "L4", "B200"}
    assert {c.gpu for c in CASES} == set(gpus.NAMES)
    assert {c.tp for c in CASES} == {1, 2, 4, 8}
    assert {c.engine for c in CASES} == {"vllm", "sglang"}
    assert {c.single_file for c in CASES} == {True, False}
    assert {c.replicas for c in CASES} == {1, 3}
    assert {c.node is not None for c in CASES} == {True, False}
    assert {c.download_rate is not None for c in CASES} == {True, False}
    assert len(CASES) >= 8


# ---- pod sizes within the node ----

def _pod_totals(template: dict, field: str, resource: str) -> float:
    """What the scheduler counts for the pod: the larger of its containers' sum and its largest init container."""
    read = cpu if resource == "cpu" else gib
    main = sum(read(c["resources"][field][resource]) for g, c in containers(template) if g == "containers")
    init = [read(c["resources"][field][resource]) for g, c in containers(template) if g == "initContainers"]
    return max([main, *init])


@pytest.mark.parametrize("key", KEYS)
def test_the_engine_pod_fits_its_node(rendered, plans, key):
    c = BY_KEY[key]
    obj, ref = engine_pod(rendered[key])
    template, engine = ref.template, engine_container(rendered[key])
    assert ref.replicas == c.replicas
    assert template["spec"]["nodeSelector"] == {gpus.PRODUCT_LABEL: gpus.named(c.gpu).product}
    pod_gpus = sum(gpu_count(ct)[1] for _, ct in containers(template))
    assert pod_gpus == c.tp <= c.gpus_per_node
    for _, ct in containers(template):
        for resource in ("cpu", "memory"):
            read = cpu if resource == "cpu" else gib
            assert read(ct["resources"]["requests"][resource]) <= read(ct["resources"]["limits"][resource]), ct["name"]
    memory_limit = _pod_totals(template, "limits", "memory")
    shm = next(v for v in template["spec"]["volumes"] if v["name"] == "shm")["emptyDir"]
    assert shm["medium"] == "Memory"
    assert SHM_GIB_PER_GPU * c.tp <= gib(shm["sizeLimit"]) < memory_limit
    res = engine_disk(template["spec"], engine)   # its ephemeral storage the rule's, checked there
    inherited = table_rows_after(plans[key], "## Defaults this stack inherits")
    if c.node is not None:
        node_cpu, node_gib = c.node
        # docs/topologies.md: the pod's share of the node (GPUs per pod / gpusPerNode) after one core and 1 GiB
        # kept for the pre-pull pods, request and limit alike, a quarter of it as /dev/shm (at least 8Gi per GPU).
        share_cpu = (node_cpu - NODE_RESERVED_CPU) * c.tp // c.gpus_per_node
        share_gib = (node_gib - NODE_RESERVED_GIB) * c.tp // c.gpus_per_node
        assert res["requests"] == res["limits"]
        assert (cpu(res["requests"]["cpu"]), gib(res["requests"]["memory"])) == (share_cpu, share_gib)
        assert gib(shm["sizeLimit"]) == max(share_gib // 4, SHM_GIB_PER_GPU * c.tp)
        # A full node of these pods (every GPU taken) fits its CPU by requests and its memory by limits.
        pods = c.gpus_per_node // c.tp
        assert pods * _pod_totals(template, "requests", "cpu") <= node_cpu - 0.01   # the pre-pull pod's 10m
        assert pods * memory_limit <= node_gib - 32 / 1024                          # and its 32Mi
        assert not [row for row in inherited if row.startswith("| `gpuPool.")]
    else:
        # docs/topologies.md: without the node, field report 2.1's pod per GPU, listed as inherited.
        want = {k: v * c.tp for k, v in FR_POD_PER_GPU.items()}
        got = {"cpu_request": cpu(res["requests"]["cpu"]), "cpu_limit": cpu(res["limits"]["cpu"]),
               "memory_request": gib(res["requests"]["memory"]), "memory_limit": gib(res["limits"]["memory"]),
               "shm": gib(shm["sizeLimit"])}
        assert got == want
        listed = {row.split("`")[1] for row in inherited if row.startswith("| `gpuPool.")}
        assert listed == {"gpuPool.cpuRequest", "gpuPool.cpuLimit", "gpuPool.memoryRequestGiB",
                          "gpuPool.memoryLimitGiB", "gpuPool.shmSizeGiB"}


def table_rows_after(text: str, heading: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(heading)
    out = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("|---"):
            out.append(line)
    return out


# ---- the family's flags, and the argv through the pinned parsers ----

# Per engine, the flags a model family decides (docs/models.md "Profiles"); a flag of this set the family does
# not give must be absent: the engine's own default, not DeepSeek's.
MODEL_FLAGS = {"vllm": ("--tokenizer-mode", "--tool-call-parser", "--reasoning-parser", "--block-size",
                        "--trust-remote-code", "--kv-cache-dtype", "--gpu-memory-utilization", "--enable-auto-tool-choice"),
               "sglang": ("--reasoning-parser", "--tool-call-parser", "--moe-runner-backend", "--swa-full-tokens-ratio",
                          "--trust-remote-code", "--mem-fraction-static", "--chunked-prefill-size")}
# flag -> value (None: a switch), as docs/models.md names each family's parsers for each engine.
FAMILY_FLAGS = {
    ("qwen3", "vllm"): {"--reasoning-parser": "qwen3", "--tool-call-parser": "hermes", "--enable-auto-tool-choice": None},
    ("qwen3", "sglang"): {"--reasoning-parser": "qwen3", "--tool-call-parser": "qwen"},
    ("llama3", "vllm"): {"--tool-call-parser": "llama3_json", "--enable-auto-tool-choice": None},
    ("llama3", "sglang"): {"--tool-call-parser": "llama3"},
    ("gpt-oss", "vllm"): {"--reasoning-parser": "openai_gptoss", "--tool-call-parser": "openai",
                          "--enable-auto-tool-choice": None},
    ("gpt-oss", "sglang"): {"--reasoning-parser": "gpt-oss", "--tool-call-parser": "gpt-oss"},
    ("deepseek-v4", "vllm"): {"--tokenizer-mode": "deepseek_v4", "--tool-call-parser": "deepseek_v4",
                              "--reasoning-parser": "deepseek_v4", "--block-size": "256", "--trust-remote-code": None,
                              "--kv-cache-dtype": "fp8", "--gpu-memory-utilization": "0.88",
                              "--enable-auto-tool-choice": None},
    ("generic", "vllm"): {},
    ("generic", "sglang"): {},
}
PARALLEL_FLAG = "--tensor-parallel-size"
CONTEXT_FLAG = {"vllm": "--max-model-len", "sglang": "--context-length"}


def flag_values(args: tuple[str, ...]) -> dict[str, str | None]:
    out = {}
    for i, a in enumerate(args):
        if a.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[a] = None if nxt is None or nxt.startswith("--") else nxt
    return out


@pytest.mark.parametrize("key", KEYS)
def test_the_family_s_flags_are_in_the_argv(rendered, plans, key):
    c = BY_KEY[key]
    args = argv(rendered[key])
    assert args[0] == "serve"
    values = flag_values(args)
    want = dict(FAMILY_FLAGS[(c.family, c.engine)])
    if c.mem_fraction is not None:
        want["--mem-fraction-static"] = format(c.mem_fraction, "g")
    assert {f: values.get(f, "absent") for f in MODEL_FLAGS[c.engine]} == {
        f: want.get(f, "absent") for f in MODEL_FLAGS[c.engine]}
    assert values[PARALLEL_FLAG] == str(c.tp)
    context = c.context if c.context is not None else DEEPSEEK_V4["context"] if c.family == "deepseek-v4" else None
    assert values.get(CONTEXT_FLAG[c.engine]) == (str(context) if context is not None else None)
    if c.consumers:
        # One --api-key with the shared key and one per consumer (issue 21): vLLM takes every key up to the next flag.
        start = args.index("--api-key") + 1
        assert args[start:] == ("$(VLLM_API_KEY)", "$(LLM_SERVING_CONSUMER_KEY_SEARCH)",
                                "$(LLM_SERVING_CONSUMER_KEY_NOTEBOOKS)")
    how = "declared" if c.declared else f"inferred from directory '{c.directory}'"
    line = next(ln for ln in plans[key].splitlines() if ln.startswith(f"- `{c.key}` "))
    assert f"**{c.family}**, {how}" in line


@pytest.fixture(scope="module")
def vllm_releases(tmp_path_factory) -> dict:
    """Each pinned release's own `vllm serve` parser over the session's one batch of vLLM argvs, the matrix's
    among them (engine_containers.py _variants): the parsers run once per release whichever file asks first."""
    return parse_every_vllm_argv(tmp_path_factory)


@pytest.mark.parametrize("version", upstream_vllm.RELEASES)
def test_every_vllm_argv_is_accepted_by_the_pinned_vllm(rendered, vllm_releases, version):
    release = vllm_releases[version]
    seen = 0
    for key, r in rendered.items():
        if BY_KEY[key].engine != "vllm":
            continue
        seen += 1
        args = argv(r)
        assert release.results[args] is None, f"{key}: vLLM {version} `vllm {' '.join(args)}`: {release.results[args]}"
        assert [f for f in option_names(args[1:]) if f not in release.options] == [], key
    assert seen == sum(c.engine == "vllm" for c in CASES)


@pytest.mark.parametrize("version", upstream_sglang.RELEASES)
def test_every_sglang_argv_is_accepted_by_the_pinned_sglang(rendered, version):
    options = sglang_options(version)
    parser = sglang_cli.parser(options)
    seen = 0
    for key, r in rendered.items():
        if BY_KEY[key].engine != "sglang":
            continue
        seen += 1
        args = argv(r)
        parser.parse_args(list(args[1:]))   # raises sglang_cli.Refused as `sglang serve` would exit 2
        assert [f for f in option_names(args[1:]) if f not in options] == [], key
    assert seen == sum(c.engine == "sglang" for c in CASES)


# ---- the memory fit ----

def expected_budget(c: Case) -> dict:
    """One engine GPU, as docs/topologies.md "Memory fit" says: weights / TP and one max-length sequence of KV
    (config.json's shape at the KV dtype: 2 bytes for auto on these BF16 attention layers) within GPU memory x the
    engine's fraction. SGLang unset: the most it takes, GPU MiB less 1536 MiB and TP / 8 GiB (its 0.5.23
    memory_hook.py, as policy/engines/sglang.py memory_fraction_at_most cites it)."""
    gpu_mib = gpus.named(c.gpu).memory_mib
    gpu_gib = gpu_mib / 1024
    size = c.size_gib if c.size_gib is not None else DEEPSEEK_V4["size_gib"]
    if c.family == "deepseek-v4":
        utilization = DEEPSEEK_V4["utilization"]
    elif c.engine == "vllm":
        utilization = VLLM_DEFAULT_UTILIZATION
    elif c.mem_fraction is not None:
        utilization = c.mem_fraction
    else:
        utilization = round((gpu_mib - (1536 + c.tp / 8 * 1024)) / gpu_mib, 3)
    kv = None
    if c.kv is not None:
        per_token = c.kv["layers"] * 2 * max(1, math.ceil(c.kv["kvHeads"] / c.tp)) * c.kv["headDim"] * 2
        kv = per_token * c.context / GIB
    usable = gpu_gib * utilization
    weights = size / c.tp
    return {"gpu_gib": gpu_gib, "utilization": utilization, "usable": usable, "weights": weights, "size": size,
            "kv": kv, "headroom": usable - weights - (kv or 0)}


@pytest.mark.parametrize("key", KEYS)
def test_plan_md_gives_the_memory_fit_with_its_numbers(plans, key):
    c, b = BY_KEY[key], expected_budget(BY_KEY[key])
    assert b["headroom"] > 0    # every stack of the matrix is one that fits
    kv = f"{b['kv']:.2f} GiB ({c.context} tokens, auto)" if b["kv"] is not None else "unknown"
    assert table_row(plans[key], "## GPU memory per engine GPU", c.key) == [
        c.key, f"{c.gpu}, {b['gpu_gib']:.2f} GiB", format(b["utilization"], "g"), f"{b['usable']:.2f} GiB",
        f"{b['weights']:.2f} GiB ({b['size']:g} / TP {c.tp})", kv, f"{b['headroom']:.2f} GiB", "fits"]
    sources = next(ln for ln in plans[key].splitlines() if ln.startswith(f"- {c.key}: GPU memory: "))
    assert f"(policy/gpus.py {c.gpu})" in sources
    section = c.engine
    assert (f"weights: {'profile deepseek-v4' if c.size_gib is None else 'models[0].sizeGiB'} / "
            f"{section}.tensorParallelSize") in sources
    if c.kv is not None:
        context = "maxModelLen" if c.engine == "vllm" else "contextLength"
        assert f"KV cache: models[0].kvCache, {section} kvCacheDtype auto, context models[0].{section}.{context}" in sources
    else:
        assert f"KV cache: unknown: no models[0].kvCache and profile {c.family} has no KV_CACHE" in sources
    # Where the fraction comes from: the stack file, the profile (DeepSeek-V4's is field report 5's H20 figure),
    # vLLM's own default, or SGLang's computation at start.
    if c.mem_fraction is not None:
        fraction = f"models[0].{section}.memFractionStatic"
    elif c.family == "deepseek-v4":
        fraction = "profile deepseek-v4 (field report 5, the H20 deployment's figure)"
    elif c.engine == "vllm":
        fraction = "unset: vLLM's default"
    else:
        fraction = f"unset: SGLang computes it at start, at most {b['utilization']:g} on this GPU"
    assert f"; utilisation: {fraction}" in sources


# ---- the rollout, and what serves during it ----

def startup_budget_seconds(c: Case) -> int:
    """docs/operations.md "Startup budgets": 1.5 x the profile's measured cold start, else 1.5 x (the size read at
    437 MiB/s + 854 s of engine start), rounded up to 15 minutes."""
    if c.family == "deepseek-v4" and c.engine == "vllm":
        seconds = FR_DEEPSEEK_VLLM_COLD_S
    else:
        size = c.size_gib if c.size_gib is not None else DEEPSEEK_V4["size_gib"]
        seconds = size * 1024 / FR_DOWNLOAD_MIBPS + 854
    return math.ceil(1.5 * seconds / 900) * 900


def measured(c: Case) -> bool:
    return c.family == "deepseek-v4" and c.engine == "vllm"


@pytest.mark.parametrize("key", KEYS)
def test_the_rollout_follows_the_replica_count_and_plan_md_says_what_serves(rendered, plans, key):
    c = BY_KEY[key]
    obj, ref = engine_pod(rendered[key])
    one_at_a_time = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    if obj["kind"] == "Deployment":
        assert obj["spec"]["strategy"] == ({"type": "Recreate"} if c.replicas == 1 else one_at_a_time)
    else:
        assert obj["kind"] == "RoleBasedGroup" and c.engine == "sglang"
        (role,) = obj["spec"]["roles"]
        assert role["rolloutStrategy"] == one_at_a_time
    budget = startup_budget_seconds(c)
    assert ref.template["metadata"]["annotations"]["llm-serving.io/startup-budget-seconds"] == str(budget)
    outage = (f"about {FR_DEEPSEEK_VLLM_COLD_S / 60:.1f} min down (one cold start, plus the image pull when the image "
              "changed)" if measured(c) else "down for one cold start (unknown: see the next column)")
    if obj["kind"] == "Deployment" and c.replicas == 1:
        strategy, serving = "Recreate", f"at 1 pod: **no pod serves** (Recreate), {outage}"
    elif c.replicas == 1:
        strategy = "RollingUpdate, 1 pod down at a time (maxSurge 0)"
        serving = f"at 1 pod: **no pod serves** (every pod is in the first wave), {outage}"
    else:
        strategy = "RollingUpdate, 1 pod down at a time (maxSurge 0)"
        serving = f"at {c.replicas} pods: {c.replicas - 1} of {c.replicas} serve, {c.replicas} waves in a row"
    cold = ("about 12 min, measured for profile deepseek-v4 on vllm (field report 6)" if measured(c) else
            f"unknown: no cold start measured for profile {c.family} on {c.engine}; at most its startup budget, "
            f"{budget / 60:g} min, after which the pod restarts")
    assert table_row(plans[key], "## Rollouts", f"{obj['kind']} {c.key}") == [f"{obj['kind']} {c.key}", strategy, serving, cold]


# ---- time to first token, each figure with its source ----

def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _bound(seconds: float, known: bool, unit=_minutes) -> str:
    return unit(seconds) if known else f">= {unit(seconds)}" if seconds > 0 else "unknown"


@pytest.mark.parametrize("key", KEYS)
def test_time_to_first_token_is_derived_from_the_inputs_and_says_where_each_figure_comes_from(plans, key):
    c = BY_KEY[key]
    size = c.size_gib if c.size_gib is not None else DEEPSEEK_V4["size_gib"]
    rate = c.download_rate or FR_DOWNLOAD_MIBPS
    sync = size * 1024 / rate
    cold = FR_DEEPSEEK_VLLM_COLD_S if measured(c) else 0
    # docs: without pre-pull the pod pulls its image after the sync, holding its GPUs; with it (these stacks: one
    # engine image per node) the pull runs during the sync and the GPUs wait only for what of it outlasts the sync.
    wait_off, wait_on = FR_IMAGE_PULL_S + cold, max(0, FR_IMAGE_PULL_S - sync) + cold
    gpu_count_ = c.tp * c.replicas
    gpu_minutes = lambda s: f"{s / 60:.0f}"  # noqa: E731
    known = measured(c)
    assert table_row(plans[key], "## Time to first token after `pulumi up`", c.served) == [
        c.served, c.engine, str(gpu_count_), format(size, "g"), _minutes(sync), _minutes(FR_IMAGE_PULL_S),
        _minutes(cold) if known else "unknown", _bound(sync + wait_off, known), _bound(sync + wait_on, known),
        _bound(gpu_count_ * wait_off, known, gpu_minutes), _bound(gpu_count_ * wait_on, known, gpu_minutes), "pre-pull"]
    lines = plans[key].splitlines()
    sync_source = next(ln for ln in lines if ln.startswith("- Sync: "))
    if c.download_rate is not None:
        assert sync_source == (f"- Sync: derived: model size / download rate (declared: objectStore.downloadRateMiBps "
                               f"{c.download_rate:g} MiB/s).")
    else:
        assert sync_source.startswith(f"- Sync: derived: model size / download rate (inherited: {FR_DOWNLOAD_MIBPS} MiB/s, "
                                      "the field report's one measured download from one COS bucket (3.2)")
    assert any(ln.startswith(f"- Image pull: measured in the field report only (12.2: {FR_IMAGE_PULL_S} s") for ln in lines)
    assert any(ln.startswith("- Cold start: measured where the model's profile has a measurement") for ln in lines)
    assert any(ln.startswith("- First token and GPU-minutes: derived: sync + image pull + cold start") for ln in lines)
    lower = [ln for ln in lines if ln.startswith("- **Lower bounds** (marked >=) for ")]
    assert bool(lower) is not known
    if not known:
        assert f"{c.served} ({c.family} on {c.engine})" in lower[0]
    inherited = table_rows_after(plans[key], "## Defaults this stack inherits")
    rate_rows = [row for row in inherited if row.startswith("| `objectStore.downloadRateMiBps` |")]
    assert rate_rows == ([] if c.download_rate is not None else
                         [f"| `objectStore.downloadRateMiBps` | {FR_DOWNLOAD_MIBPS} | 3.2 | the figure itself |"])
    # DeepSeek-V4's engine figures of the field report's H20 deployment, inherited on this B200 pool and listed.
    dtype_rows = [row for row in inherited if "vllm.kvCacheDtype" in row or "vllm.gpuMemoryUtilization" in row]
    assert dtype_rows == ([] if c.family != "deepseek-v4" else [
        "| `models[0].vllm.kvCacheDtype` | fp8 | 5 | the figure itself |",
        "| `models[0].vllm.gpuMemoryUtilization` | 0.88 | 5 | the figure itself |"])


# ---- the checkpoint: single file or sharded, through the rendered gate code ----

def _scripts(r) -> dict[str, str]:
    (cm,) = [o for o in k8s_objects(r) if o["kind"] == "ConfigMap" and "model_files.json" in (o.get("data") or {})]
    return cm["data"]


def _gate_args(r) -> list[str]:
    _, ref = engine_pod(r)
    (gate,) = [ct for g, ct in containers(ref.template) if ct["name"] == "model-gate"]
    return [str(a) for a in gate["args"]]


@pytest.mark.parametrize("key", KEYS)
def test_the_gate_code_as_rendered_accepts_the_checkpoint_as_it_ships(rendered, tmp_path, key):
    c = BY_KEY[key]
    r = rendered[key]
    expected = c.shards if c.shards is not None else DEEPSEEK_V4["shards"] if c.family == "deepseek-v4" else None
    args = _gate_args(r)
    assert (args[args.index("--expected-shards") + 1] if "--expected-shards" in args else None) == (
        str(expected) if expected is not None else None)
    data = _scripts(r)
    code = tmp_path / "scripts"
    code.mkdir()
    for name in ("model_files.py", "model_files.json"):
        (code / name).write_text(data[name])
    spec = importlib.util.spec_from_file_location(f"model_files_{key.replace('-', '_')}", code / "model_files.py")
    model_files = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model_files)
    model_dir = tmp_path / "models" / c.directory / "main"
    model_dir.mkdir(parents=True)
    for name in json.loads(data["model_files.json"])[c.directory]:
        (model_dir / name).write_text("{}")
    (model_dir / "tokenizer.json").write_text("{}")
    if c.single_file:
        (model_dir / "model.safetensors.index.json").unlink(missing_ok=True)
        weights = ["model.safetensors"]
    else:
        # The shards the index names: the checkpoint's count where the stack gives it; otherwise any count
        # stands for the index's (2 here), which the gate then takes.
        n = expected or 2
        weights = [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
        (model_dir / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": {f"layer.{i}": w for i, w in enumerate(weights)}}))
    for w in weights:
        (model_dir / w).write_bytes(b"\0" * 8)
    data_path = str(code / "model_files.json")
    assert model_files.missing_files(str(model_dir), expected, data_path) == []
    (model_dir / weights[-1]).unlink()
    assert model_files.missing_files(str(model_dir), expected, data_path) != []


# ---- bad input: refused through the render CLI, exit 2, the field and the numbers ----

def refused(tmp_path, capsys, **changes) -> list[str]:
    """Pulumi.dev.yaml's config with top-level keys replaced, as a stack file of its own through `python -m render`:
    exit 2, no traceback, nothing written; the problem lines."""
    cfg = raw_config() | changes
    text = yaml.safe_dump({"config": {f"llm-serving:{k}": v for k, v in cfg.items()}}, sort_keys=False,
                          allow_unicode=True)
    project = stack_project(tmp_path / "project", "bad", text)
    out = tmp_path / "out"
    code = render_main(["--stack", "bad", "--project-dir", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not out.exists(), err
    lines = [ln for ln in err.splitlines() if ln.startswith("Pulumi.bad.yaml")]
    assert lines, err
    return lines


def _one(lines: list[str], field: str) -> str:
    (line,) = [ln for ln in lines if re.match(rf"^Pulumi\.bad\.yaml(:\d+)?: llm-serving:{re.escape(field)} = ", ln)]
    return line


def _deepseek_v3(**changes) -> dict:
    """DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json: num_hidden_layers 61, MLA kv_lora_rank 512 + qk_rope_head_dim
    64 = latent 576, max_position_embeddings 163840; 163 shards of FP8 weights, about 689 GB = 642 GiB), profile generic."""
    m = {k: v for k, v in raw_config()["models"][0].items() if k not in ("startupBudgetSeconds", "vllm")}
    m.update(name="deepseek-v3", profile="generic", servedModelName="deepseek-v3", directory="DeepSeek-V3",
             objectPrefix="models/DeepSeek-V3", revision="main", expectedShardCount=163, sizeGiB=642, **changes)
    return m


BIG_VOLUME = raw_config()["modelVolume"] | {"capacityGiB": 2000}


def test_an_unknown_gpu_type_without_its_memory_is_refused_with_the_catalogue(tmp_path, capsys):
    line = _one(refused(tmp_path, capsys, gpuPool={"gpuType": "RTX-PRO-6000"}), "gpuPool.gpuType")
    assert "RTX-PRO-6000" in line and "gpuPool.gpuMemoryGiB" in line
    for t in gpus.CATALOGUE.values():
        assert f"{t.name} ({t.product}, {t.memory_mib / 1024:.2f} GiB, {t.architecture})" in line


@pytest.mark.parametrize("field, changes, limit_gib", [
    ("gpuPool.memoryLimitGiB", {"gpuPool": {"gpuType": "H20", "nodeCpu": 96, "nodeMemoryGiB": 256, "memoryLimitGiB": 400}},
     400),
    ("models[0].resources.memory", {"gpuPool": {"gpuType": "H20", "nodeCpu": 96, "nodeMemoryGiB": 256},
                                    "models": [raw_config()["models"][0] | {"resources": {"memory": "300Gi"}}]}, 300),
])
def test_a_pod_larger_than_its_node_is_refused_with_the_numbers(tmp_path, capsys, field, changes, limit_gib):
    line = _one(refused(tmp_path, capsys, **changes), field)
    assert f"memory limits sum to {limit_gib} GiB" in line and "more than gpuPool.nodeMemoryGiB 256" in line


def test_weights_that_cannot_fit_at_tp4_on_h20_are_refused_with_what_would_fit(tmp_path, capsys):
    gpu = gpus.named("H20").memory_mib / 1024
    usable, weights = gpu * VLLM_DEFAULT_UTILIZATION, 642 / 4
    line = _one(refused(tmp_path, capsys, models=[_deepseek_v3(vllm={"tensorParallelSize": 4})],
                        modelVolume=BIG_VOLUME), "models[0].sizeGiB")
    assert (f"does not fit: {weights:.2f} GiB of weights per GPU (642 GiB / vllm.tensorParallelSize 4) need "
            f"{weights:.2f} GiB, more than the {usable:.2f} GiB vLLM may use of one H20 ({gpu:.2f} GiB x "
            f"vllm.gpuMemoryUtilization {VLLM_DEFAULT_UTILIZATION:g}, vLLM's default when unset)") in line
    assert 642 / 8 <= usable and "Would fit: vllm.tensorParallelSize 8 (8 GPUs per pod)" in line
    assert f"a quantised checkpoint of at most {usable * 4:.0f} GiB at this parallel size" in line


def test_weights_and_one_long_sequence_that_cannot_fit_at_tp8_are_refused(tmp_path, capsys):
    gpu = gpus.named("H20").memory_mib / 1024
    usable, weights = gpu * 0.88, 642 / 8
    per_token = 61 * 576 * 1     # MLA: one latent per token and layer, whole on every rank; fp8: 1 byte
    kv = per_token * 163840 / GIB
    assert weights <= usable < weights + kv   # the weights alone would fit: the KV cache of one sequence does not
    m = _deepseek_v3(vllm={"tensorParallelSize": 8, "gpuMemoryUtilization": 0.88, "kvCacheDtype": "fp8",
                           "maxModelLen": 163840}, kvCache={"layers": 61, "latentDim": 576})
    line = _one(refused(tmp_path, capsys, models=[m], modelVolume=BIG_VOLUME), "models[0].sizeGiB")
    assert (f"{weights:.2f} GiB of weights per GPU (642 GiB / vllm.tensorParallelSize 8) and {kv:.2f} GiB of KV cache "
            f"for one 163840-token sequence (fp8) need {weights + kv:.2f} GiB, more than the {usable:.2f} GiB vLLM may "
            f"use of one H20 ({gpu:.2f} GiB x vllm.gpuMemoryUtilization 0.88)") in line
    assert f"vllm.maxModelLen at most {int((usable - weights) * GIB // per_token)} tokens" in line
    # Past one node (issue 29): two pipeline stages of 8 GPUs halve the weights and hold 31 of 61 layers' KV each.
    assert weights / 2 + 31 * 576 * 163840 / GIB <= usable
    assert ("a model spanning 2 nodes: vllm.tensorParallelSize 8 x pipelineParallelSize 2 (2 pods of 8 GPUs per "
            "replica, on an orchestrator that runs multi-node groups: docs/topologies.md)") in line


def test_a_profile_that_does_not_exist_is_refused_naming_every_profile(tmp_path, capsys):
    line = _one(refused(tmp_path, capsys, models=[raw_config()["models"][0] | {"profile": "mistral"}]),
                "models[0].profile")
    assert "mistral" in line and all(f"'{name}'" in line for name in PROFILE_NAMES)

