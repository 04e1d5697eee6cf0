"""Engine knowledge as pure functions and constants: argv builders, ports, cold-start estimates.

Nothing here registers a resource, so every flag can be tested without the Pulumi runtime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from stacks.config import ServedModel, Vllm

# Measured cold starts, pod creation to Ready, on 8 x H20. vLLM TP=8: about 12 min (field report 6
# and 9.3); SGLang TP=8 with DSpark: about 23 min (field report 12.2). A startup budget below the
# estimate makes Kubernetes kill every cold start.
COLD_START_ESTIMATE_SECONDS = {"vllm": 12 * 60, "sglang": 23 * 60}

ENGINE_PORT = {"vllm": 8000, "sglang": 30000}


@dataclass(frozen=True)
class EngineCommand:
    """The container command of one engine and the environment it needs besides secrets."""

    command: list[str]
    args: list[str]
    env: dict[str, str]


def parallel_size(model: ServedModel) -> int:
    """GPUs one engine pod drives: TP x DP for vLLM."""
    return model.vllm.tensor_parallel_size * model.vllm.data_parallel_size


def gpus_per_pod(model: ServedModel) -> int:
    return model.gpus_per_pod if model.gpus_per_pod is not None else parallel_size(model)


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


def vllm_command(model_path: str, model: ServedModel) -> EngineCommand:
    return EngineCommand(
        command=["vllm"],
        args=vllm_args(model_path, model.served_model_name, ENGINE_PORT["vllm"], model.vllm),
        # Weights come only from the read-only volume; a hub download would bypass the integrity
        # check and the ready marker.
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


def _decimal(value: float) -> str:
    """0.88 -> "0.88" without float noise."""
    return format(value, "g")
