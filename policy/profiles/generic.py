"""Any other model: no model-specific flag. The engine takes tokenizer mode, parsers, block size and
context length from the checkpoint and its own defaults, and code from the checkpoint is not run,
unless the stack file sets them. Nothing of it is measured, so the stack file names the size, the
shard count comes from the checkpoint's index (or the stack file), and no cold start is assumed."""

from __future__ import annotations

NAME = "generic"
DESCRIPTION = "any other model: only the flags the stack file sets"
NAME_PATTERN = None            # never chosen by name: a stack file names it

ENGINE_DEFAULTS = {
    "vllm": {"tokenizer_mode": None, "tool_call_parser": None, "reasoning_parser": None, "block_size": None,
             "max_model_len": None, "trust_remote_code": False, "kv_cache_dtype": None, "gpu_memory_utilization": None},
    "sglang": {"reasoning_parser": None, "tool_call_parser": None, "moe_runner_backend": None,
               "swa_full_tokens_ratio": None, "trust_remote_code": False, "mem_fraction_static": None,
               "chunked_prefill_size": None},
}
FIELD_REPORT_DEFAULTS: dict[str, dict[str, str]] = {"vllm": {}, "sglang": {}}
ARCHITECTURE_DEFAULTS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {"vllm": {}, "sglang": {}}

# What transformers needs besides the weights to load a checkpoint and its tokenizer. The weights are
# either a sharded checkpoint's model.safetensors.index.json and the shards it names, or a single
# model.safetensors (components/scripts/model_files.py weight_files).
REQUIRED_FILES = ("config.json", "tokenizer_config.json")
EXPECTED_SHARD_COUNT = None    # the checkpoint's index says, unless models[].expectedShardCount does
SIZE_GIB = None
KV_CACHE = None                # unknown: models[].kvCache gives it

# A deterministic answer an instruction-tuned model gives at temperature 0; set
# models[].smoke.prompt and expectedText for a model that answers otherwise.
SMOKE_PROMPT = "Reply with exactly the word OK and nothing else."
SMOKE_MAX_TOKENS = 32  # the field report's smoke requests (9.2, 12.3)
SMOKE_EXPECTED_TEXT = "OK"
REASONING_KWARG = None
REASONING_TAGS = None

DSPARK = False                 # no DSpark head is known of the checkpoint
COLD_START_ESTIMATE_SECONDS: dict[str, int] = {}
COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool] = {}
COLD_START_FIELD_REPORT: dict[str, str] = {}
ASSUMED_CONTEXT: dict[str, int] = {}
