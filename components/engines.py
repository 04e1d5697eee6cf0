"""Engine knowledge as pure functions and constants: argv builders, ports, cold-start estimates.

Nothing here registers a resource, so every flag can be tested without the Pulumi runtime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from config_model import ServedModel, Sglang, Vllm

# Measured cold starts, pod creation to Ready, on 8 x H20. vLLM TP=8: about 12 min (field report 6
# and 9.3); SGLang TP=8 with DSpark: about 23 min, of which 854 s engine start with 394 + 123 s of
# graph capture (field report 12.2). A startup budget below the estimate kills every cold start.
COLD_START_ESTIMATE_SECONDS = {"vllm": 12 * 60, "sglang": 23 * 60}
DEFAULT_STARTUP_BUDGET_SECONDS = {"vllm": 30 * 60, "sglang": 45 * 60}

ENGINE_PORT = {"vllm": 8000, "sglang": 30000}
API_KEY_ENV = {"vllm": "VLLM_API_KEY", "sglang": "SGLANG_API_KEY"}


@dataclass(frozen=True)
class EngineCommand:
    """The container command of one engine and the environment it needs besides secrets."""

    command: list[str]
    args: list[str]
    env: dict[str, str]


def parallel_size(model: ServedModel) -> int:
    """GPUs one engine pod drives: TP x DP for vLLM, TP for SGLang."""
    if model.engine == "sglang":
        return model.sglang.tensor_parallel_size
    return model.vllm.tensor_parallel_size * model.vllm.data_parallel_size


def startup_budget_seconds(model: ServedModel) -> int:
    if model.startup_budget_seconds is not None:
        return model.startup_budget_seconds
    return DEFAULT_STARTUP_BUDGET_SECONDS[model.engine]


# The context SGLang takes from the DeepSeek-V4-Flash checkpoint when --context-length is unset is
# not recorded in the field report; warm-up then assumes this many tokens.
SGLANG_ASSUMED_CONTEXT = 131072


def max_model_len(model: ServedModel) -> int:
    """Longest prompt plus output the engine accepts, in tokens."""
    if model.engine == "sglang":
        return model.sglang.context_length or SGLANG_ASSUMED_CONTEXT
    return model.vllm.max_model_len


def tokenizer_mode(model: ServedModel) -> str:
    return model.vllm.tokenizer_mode if model.engine == "vllm" else "auto"


def speculative_decoding(model: ServedModel) -> bool:
    if model.engine == "sglang":
        return model.sglang.speculative_algorithm != "off"
    return model.vllm.speculative_decoding != "off"


def with_speculative_decoding(model: ServedModel, on: bool) -> ServedModel:
    """The same model with DSpark switched on or off and nothing else changed."""
    if model.engine == "sglang":
        section = {"sglang": model.sglang.model_copy(update={"speculative_algorithm": "DSPARK" if on else "off"})}
    else:
        section = {"vllm": model.vllm.model_copy(update={"speculative_decoding": "dspark" if on else "off"})}
    return model.model_copy(update=section)


def vllm_args(model_path: str, served_model_name: str, port: int, vllm: Vllm) -> list[str]:
    """`vllm serve` arguments, exactly the validated command of field report section 5.

    DSpark stays off unless asked for, so the first deployment is the target-only baseline that
    section 5 wants before any A/B. The API key is not an argument: vLLM reads VLLM_API_KEY, which
    comes from a Secret, so it never shows in `ps` or in the manifest.
    """
    args = [
        "serve", model_path,
        "--served-model-name", served_model_name,
        "--host", "0.0.0.0",
        "--port", str(port),
        "--trust-remote-code",
        "--tensor-parallel-size", str(vllm.tensor_parallel_size),
    ]
    if vllm.data_parallel_size > 1:
        args += ["--data-parallel-size", str(vllm.data_parallel_size)]
    args += [
        "--kv-cache-dtype", vllm.kv_cache_dtype,
        "--block-size", str(vllm.block_size),
        "--gpu-memory-utilization", _decimal(vllm.gpu_memory_utilization),
        "--max-model-len", str(vllm.max_model_len),
        "--max-num-seqs", str(vllm.max_num_seqs),
        "--tokenizer-mode", vllm.tokenizer_mode,
        "--tool-call-parser", vllm.tool_call_parser,
        "--enable-auto-tool-choice",
        "--reasoning-parser", vllm.reasoning_parser,
    ]
    if vllm.enable_prefix_caching:
        args.append("--enable-prefix-caching")
    if vllm.speculative_decoding == "dspark":
        spec = {"method": "dspark", "num_speculative_tokens": vllm.dspark_num_speculative_tokens,
                "draft_sample_method": "greedy"}
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if vllm.enforce_eager:
        args.append("--enforce-eager")
    return args


def sglang_args(model_path: str, served_model_name: str, port: int, sglang: Sglang, api_key_env: str) -> list[str]:
    """`sglang serve` arguments, the validated H20 command of field report 12.1, in its order, plus
    `--enable-metrics`. The API key is passed as `$(VAR)`, which Kubernetes expands from the
    Secret-backed env var, so the manifest never holds it.

    Every flag by an option string SGLang declares (tests/test_engine_flags.py parses the argv with
    the option strings of each pinned version): the report's `--tp` is only an argparse abbreviation
    of `--tp-size`; `--tensor-parallel-size` is its declared alias in 0.5.17 and 0.5.23, and the
    spelling vLLM and the policy pack read. `--cuda-graph-max-bs` is a deprecated alias in 0.5.17 and
    an ambiguous prefix of the -decode/-prefill pair in 0.5.23, which refuses it.
    """
    args = [
        "serve",
        "--trust-remote-code",
        "--model-path", model_path,
        "--served-model-name", served_model_name,
        "--tensor-parallel-size", str(sglang.tensor_parallel_size),
        "--moe-runner-backend", sglang.moe_runner_backend,
    ]
    if sglang.speculative_algorithm != "off":
        args += ["--speculative-algorithm", sglang.speculative_algorithm]
    args += [
        "--mem-fraction-static", _decimal(sglang.mem_fraction_static),
        "--chunked-prefill-size", str(sglang.chunked_prefill_size),
        "--swa-full-tokens-ratio", _decimal(sglang.swa_full_tokens_ratio),
        "--reasoning-parser", sglang.reasoning_parser,
        "--tool-call-parser", sglang.tool_call_parser,
        "--host", "0.0.0.0",
        "--port", str(port),
    ]
    if sglang.max_running_requests is not None:
        args += ["--max-running-requests", str(sglang.max_running_requests)]
    if sglang.cuda_graph_max_bs is not None:
        args += ["--cuda-graph-max-bs-decode", str(sglang.cuda_graph_max_bs)]
    if sglang.context_length is not None:
        args += ["--context-length", str(sglang.context_length)]
    # SGLang serves /metrics only when asked; monitoring, the load-test guard and the drain read it.
    return args + ["--enable-metrics", "--api-key", f"$({api_key_env})"]


# Weights come only from the read-only volume; a hub download would bypass the integrity check and
# the ready marker.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# /health only checks the process instead of running a one-token generation every probe period
# (field report 12.4). Not configurable: the probes are TCP anyway, and this keeps any other /health
# caller from injecting prefill traffic into the engine.
SGLANG_ENV = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0"}


# ---- KV-cache offload to CPU memory (issue 13; sources in tests/upstream_vllm.py, tests/upstream_sglang.py) ----

# Which backend each engine runs; lmcache is refused by stacks/rules.py (tests/upstream_vllm.py LMCACHE_*).
OFFLOAD_ENGINE = {"native": "vllm", "hicache": "sglang"}


def kv_offload_args(model: ServedModel) -> list[str]:
    """The engine flags of models[].kvCacheOffload; none when it is off. vLLM's size is GiB over all TP
    ranks of one engine (vllm/config/cache.py kv_offloading_size). Only native renders: stacks/rules.py
    refuses lmcache and, for DeepSeek-V4, SGLang's hicache."""
    offload = model.kv_cache_offload
    if offload.backend == "native":
        return ["--kv-offloading-backend", "native", "--kv-offloading-size", str(offload.size_gib)]
    return []


def offload_memory_gib(model: ServedModel) -> int:
    """Host memory one engine container holds for offloaded KV, in GiB. vLLM allocates the size once per
    engine core, and every data-parallel rank is an engine core of its own (its world size excludes DP);
    SGLang gives every TP rank a host pool of that many 10^9 bytes, reserved here as GiB."""
    offload = model.kv_cache_offload
    if offload.backend == "native":
        return offload.size_gib * model.vllm.data_parallel_size
    if offload.backend == "hicache":
        return offload.size_gib * model.sglang.tensor_parallel_size
    return 0


def offload_shm_gib(model: ServedModel) -> int:
    """What of the offload lives in /dev/shm. vLLM 0.33.0's native offload maps one file
    /dev/shm/vllm_offload_<engine>.mmap for all ranks on CUDA; 0.26.0 allocates pinned anonymous memory,
    as SGLang's HiCache does in both releases. The image tag does not say which vLLM runs, so native
    offload gets the room in both places."""
    return offload_memory_gib(model) if model.kv_cache_offload.backend == "native" else 0


def engine_command(model_path: str, model: ServedModel) -> EngineCommand:
    port = ENGINE_PORT[model.engine]
    if model.engine == "sglang":
        return EngineCommand(
            command=["sglang"],
            args=sglang_args(model_path, model.served_model_name, port, model.sglang, API_KEY_ENV["sglang"])
            + kv_offload_args(model),
            env={**OFFLINE_ENV, **SGLANG_ENV},
        )
    return EngineCommand(command=["vllm"], args=vllm_args(model_path, model.served_model_name, port, model.vllm)
                         + kv_offload_args(model), env=dict(OFFLINE_ENV))


def _decimal(value: float) -> str:
    """0.88 -> "0.88" without float noise."""
    return format(value, "g")


# Moved to components/topologies (GPU accounting is the topology's). stacks/rules.py still imports them
# from here; the lead converts it, then this goes. Resolved on first use, as components/topologies
# imports this module's engine facts.
_MOVED_TO_TOPOLOGIES = {"gpu_workloads", "gpus_per_pod", "pod_memory_limit_gib"}


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_TOPOLOGIES:
        import components.topologies as topologies  # noqa: PLC0415 (a top-level import would be a cycle)
        return getattr(topologies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
