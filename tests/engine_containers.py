"""Every rendered engine container of every topology, with the engine argv and the env it gets.

Shared by the cache and flag tests: the committed stacks plus a variant of each topology and
orchestrator, with the optional SGLang and vLLM flags switched on so every argv branch renders."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import sglang_cli
import upstream_sglang
import vllm_cli
from conftest import IN_CI, PROJECT_DIR, STACKS, k8s_objects, render_stack
from model_matrix import CASES as MATRIX
from model_matrix import stack_file
from variants import SGLANG_FIXTURE, consumers_file, dev_config, model, render, sglang_stack, variant_file

from policy.profiles import NAMES as PROFILE_NAMES
from policy.workloads import containers, gpu_count, pod_templates

RAY_IMAGE = {"upstream": "registry.internal/llm/vllm-openai-ray:v0.26.0-cu129", "digest": "sha256:" + "7" * 64,
             "rayVersion": "2.47.1", "cudaVersion": "12.9"}
ENGINES = ("vllm", "sglang")
NATIVE_OFFLOAD = {"backend": "native", "sizeGiB": 96}
NODE_MEMORY_GIB = 2048


@dataclass(frozen=True)
class EngineContainer:
    where: str                  # stack or variant / workload / container, for messages
    engine: str                 # vllm | sglang
    argv: tuple[str, ...]       # from `serve` on
    env: tuple[tuple[str, str], ...]   # literal values only (secrets come by valueFrom)
    container: dict
    annotations: dict


def _variants():
    images = dev_config()["images"] | {"vllmRay": RAY_IMAGE}
    every_vllm_flag = {"tensorParallelSize": 4, "dataParallelSize": 2, "maxNumSeqs": 64, "enforceEager": True,
                       "speculativeDecoding": "dspark"}
    # KV offload (issue 13) on the vLLM every-flag variant: vLLM's per-engine size with two DP engines in the
    # pod, which needs the node's memory. SGLang's HiCache is refused for DeepSeek-V4 (stacks/rules/capacity.py).
    out = {"stormservice": variant_file(models=[{k: v for k, v in model(orchestrator="stormservice").items()
                                                 if k != "rollout"}]),
           "vllm-every-flag": variant_file(models=[model(vllm={**model()["vllm"], **every_vllm_flag},
                                                         kvCacheOffload=NATIVE_OFFLOAD)],
                                           gpuPool={"gpuType": "H20", "nodeMemoryGiB": NODE_MEMORY_GIB}),
           "sglang": sglang_stack(),
           "sglang-every-flag": sglang_stack(sglang={"speculativeAlgorithm": "DSPARK", "maxRunningRequests": 64,
                                                     "cudaGraphMaxBs": 32, "contextLength": 131072})}
    out |= generic_variants()
    out |= family_variants()
    # Issue 28's model x hardware matrix (tests/model_matrix.py): every flag, cache and read-back test over
    # engine containers covers its stacks too, and its vLLM argvs join the session's one parser batch.
    out |= {f"matrix-{c.key}": stack_file(c) for c in MATRIX}
    # Issue 21: the shared key and one per consumer, in combined pods and in both P/D fleets (and hybrid's).
    out["vllm-consumers"] = consumers_file()
    for topology, orchestrator, budget in (("pd", "rayclusterfleet", 24), ("hybrid", "stormservice", 32)):
        m = {k: v for k, v in model(topology=topology, orchestrator=orchestrator).items() if k != "rollout"}
        out[f"{topology}-consumers"] = consumers_file(images=images, models=[m], gpuBudget=budget)
    for topology, orchestrator, budget in (("pd", "rayclusterfleet", 24), ("pd-same-pod", "deployment", 8),
                                           ("hybrid", "stormservice", 32)):
        for profile in PROFILE_NAMES:
            m = model(topology=topology, orchestrator=orchestrator)
            if profile != "deepseek-v4":
                m.update(GENERIC_72B, name="qwen-72b", topology=topology, orchestrator=orchestrator)
                m["vllm"] = {**m["vllm"], "tensorParallelSize": 8, "reasoningParser": "qwen3"}
            if orchestrator != "deployment":
                m.pop("rollout", None)
            if topology == "pd-same-pod":
                m["vllm"] = {**m["vllm"], "tensorParallelSize": 4}
            out[topology if profile == "deepseek-v4" else f"{topology}-{profile}"] = variant_file(
                images=images, models=[m], gpuBudget=budget)
    return out


# The example (issue 20): a 70B-class model at TP=4 and a 32B at TP=2 in one stack, profile
# generic, with what the program does not model passed as extraArgs and env. The extra flags are
# declared by the pinned engines (vLLM's own parsers, tests/vllm_cli.py; SGLang's parsed from its source).
GENERIC_72B = {"name": "qwen-72b", "profile": "generic", "servedModelName": "qwen2.5-72b-instruct",
               "directory": "Qwen2.5-72B-Instruct", "objectPrefix": "models/Qwen2.5-72B-Instruct", "revision": "main",
               "expectedShardCount": 37, "sizeGiB": 136,
               "vllm": {"tensorParallelSize": 4, "maxModelLen": 32768,
                        "extraArgs": ["--max-num-batched-tokens", "8192"]},
               "env": {"VLLM_LOGGING_LEVEL": "INFO"}}
GENERIC_32B = {"name": "qwen-32b", "profile": "generic", "servedModelName": "qwq-32b", "directory": "QwQ-32B",
               "objectPrefix": "models/QwQ-32B", "revision": "main", "expectedShardCount": 14, "sizeGiB": 62,
               "vllm": {"tensorParallelSize": 2, "reasoningParser": "deepseek_r1", "toolCallParser": "hermes"}}
SGLANG_EXTRA = ["--schedule-conservativeness", "0.3", "--enable-mixed-chunk"]


def generic_variants() -> dict:
    """Stacks of profile generic: the issue's two vLLM models side by side, and an SGLang one."""
    two = [{**model(rollout={"strategy": "Recreate"}), **GENERIC_72B}, {**model(), **GENERIC_32B}]
    for m in two:
        m.pop("startupBudgetSeconds", None)
    sglang = {k: v for k, v in GENERIC_72B.items() if k not in ("vllm", "env")}
    return {"generic": variant_file(models=two),
            "generic-sglang": sglang_stack(**sglang, sglang={"tensorParallelSize": 4, "extraArgs": SGLANG_EXTRA})}


# Issue 28: one model of each family beside DeepSeek-V4, on each engine, its profile left out so the
# directory chooses it. Shard counts and sizes are fixture values the stack file must give (the profiles
# know no checkpoint of these families), not the checkpoints' own.
FAMILIES = {
    "qwen3": {"name": "qwen3-235b", "servedModelName": "qwen3-235b-a22b", "directory": "Qwen3-235B-A22B-FP8",
              "objectPrefix": "models/Qwen3-235B-A22B-FP8", "revision": "main", "expectedShardCount": 24,
              "sizeGiB": 220, "tensorParallelSize": 8},
    "llama3": {"name": "llama-70b", "servedModelName": "llama-3.3-70b", "directory": "Llama-3.3-70B-Instruct",
               "objectPrefix": "models/Llama-3.3-70B-Instruct", "revision": "main", "expectedShardCount": 30,
               "sizeGiB": 132, "tensorParallelSize": 4},
    "gpt-oss": {"name": "gpt-oss-20b", "servedModelName": "gpt-oss-20b", "directory": "gpt-oss-20b",
                "objectPrefix": "models/gpt-oss-20b", "revision": "main", "expectedShardCount": 3, "sizeGiB": 13,
                "tensorParallelSize": 1},
}


def family_model(family: str, engine: str) -> dict:
    fixture = dict(FAMILIES[family])
    tp = fixture.pop("tensorParallelSize")
    m = {k: v for k, v in model().items() if k not in ("profile", "startupBudgetSeconds", "vllm", "rollout")}
    m.update(fixture, engine=engine, **{engine: {"tensorParallelSize": tp}})
    if engine == "sglang":
        m.update(name=f"{m['name']}-sg", orchestrator="rolebasedgroup")
    return m


def family_variants() -> dict:
    """`family-<family>-<engine>`: the family's model alone in the dev stack."""
    images = dev_config()["images"] | {"sglang": SGLANG_FIXTURE}
    volume = dev_config()["modelVolume"] | {"capacityGiB": 1000}
    return {f"family-{family}-{engine}": variant_file(
                images=images, models=[family_model(family, engine)], modelVolume=volume,
                **({"compileCache": {"kind": "existingClaim", "claimName": "jit-cache"}} if engine == "sglang" else {}))
            for family in FAMILIES for engine in ENGINES}


def _engine_argv(c: dict) -> tuple[str, tuple[str, ...]] | None:
    argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
    for i, a in enumerate(argv[1:], 1):
        if a == "serve" and argv[i - 1] in ENGINES:
            return argv[i - 1], tuple(argv[i:])
    return None


@functools.lru_cache(maxsize=None)
def rendered_variants() -> dict:
    """Each variant of _variants(), rendered once per session."""
    return {k: render(v) for k, v in _variants().items()}


@functools.lru_cache(maxsize=None)
def engine_containers() -> tuple[EngineContainer, ...]:
    rendered = {s: render_stack(s) for s in STACKS} | rendered_variants()
    out = []
    for where, r in rendered.items():
        for obj in k8s_objects(r):
            for ref in pod_templates(obj.get("kind"), obj):
                for _, c in containers(ref.template):
                    if gpu_count(c)[1] == 0:
                        continue
                    found = _engine_argv(c)
                    assert found, f"{where}: GPU container {c['name']} runs no vllm/sglang serve"
                    env = tuple((e["name"], e["value"]) for e in c.get("env", []) if "value" in e)
                    out.append(EngineContainer(f"{where}/{obj['metadata']['name']}/{c['name']}", found[0], found[1],
                                               env, c, ref.template["metadata"].get("annotations", {})))
    assert {c.engine for c in out} == set(ENGINES)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def sglang_options(version: str) -> dict[str, bool]:
    """`sglang serve`'s option strings at the release, read from its installed source (tests/sglang_cli.py)."""
    root = engine_packages() / f"sglang=={version}"
    return sglang_cli.serve_options(root, upstream_sglang.FIELD_SOURCES[version], upstream_sglang.ADD_ARGUMENT_SOURCES)


def option_names(argv) -> list[str]:
    """The option strings of an argv, `--x=1` as `--x`."""
    return [a.split("=", 1)[0] for a in argv if a.startswith("-")]


def engine_packages() -> Path:
    """.venv-engines, which `make test` fills from requirements-engines.txt."""
    root = Path(os.environ.get("ENGINE_PACKAGES") or PROJECT_DIR / ".venv-engines")
    if not (root / ".requirements-installed").exists():
        if IN_CI:
            pytest.fail(f"engine packages are missing at {root}; `make test` installs them from requirements-engines.txt")
        pytest.skip("engine packages are not installed (run `make test`)")
    return root


# What each vLLM release's own parser must refuse, and where each refusal comes from (both releases): argparse's
# unknown option and int type, a Literal field's choices (EngineArgs get_kwargs), validate_parsed_serve_args
# (tests/test_engine_flags.py checks them).
VLLM_REFUSED = {("serve", "/m", "--no-such-flag", "1"): "unrecognized arguments: --no-such-flag 1",
                ("serve", "/m", "--tensor-parallel-size", "four"): "argument --tensor-parallel-size/-tp: invalid int value",
                ("serve", "/m", "--kv-offloading-backend", "disk"): "argument --kv-offloading-backend: invalid choice",
                ("serve", "/m", "--enable-auto-tool-choice"): "--enable-auto-tool-choice requires --tool-call-parser"}


def vllm_releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, vllm_cli.Release]:
    """Every rendered vLLM argv of engine_containers(), the group pods' and VLLM_REFUSED through each pinned
    release's parser: one
    batch, so the parsers run once per release per session (and per set of argvs: vllm_cli keeps the answers),
    whichever test file asks first; the others wait for that run and read its answers."""
    # Issue 29: every rank of the multi-node stacks, as the kubelet expands it (tests/multinode_pods.py), to the
    # engine config as well.
    from multinode_pods import group_pods
    group = [p.argv for p in group_pods() if p.engine == "vllm"]
    argvs = [c.argv for c in engine_containers() if c.engine == "vllm"] + list(VLLM_REFUSED) + group
    return vllm_cli.parse(argvs, vllm_cli.session_tmp_root(tmp_path_factory), configs=group)
