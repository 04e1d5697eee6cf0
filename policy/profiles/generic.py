"""Any other model: no model-specific flag. The engine takes tokenizer mode, parsers, block size and
context length from the checkpoint and its own defaults, and code from the checkpoint is not run,
unless the stack file sets them. Nothing of it is measured, so the stack file names the shard count
and size, and no cold start is assumed."""

from __future__ import annotations

NAME = "generic"
DESCRIPTION = "any other model: only the flags the stack file sets"

ENGINE_DEFAULTS = {
    "vllm": {"tokenizer_mode": None, "tool_call_parser": None, "reasoning_parser": None, "block_size": None,
             "max_model_len": None, "trust_remote_code": False},
    "sglang": {"reasoning_parser": None, "tool_call_parser": None, "moe_runner_backend": None,
               "swa_full_tokens_ratio": None, "trust_remote_code": False},
}

# What transformers needs to load a sharded safetensors checkpoint and its tokenizer.
REQUIRED_FILES = ("config.json", "tokenizer_config.json", "model.safetensors.index.json")
EXPECTED_SHARD_COUNT = None
SIZE_GIB = None

# A deterministic answer an instruction-tuned model gives at temperature 0; set
# models[].smoke.prompt and expectedText for a model that answers otherwise.
SMOKE_PROMPT = "Reply with exactly the word OK and nothing else."
SMOKE_EXPECTED_TEXT = "OK"
REASONING_KWARG = None
REASONING_TAGS = None

DSPARK = False                 # no DSpark head is known of the checkpoint
COLD_START_ESTIMATE_SECONDS: dict[str, int] = {}
COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool] = {}
COLD_START_FIELD_REPORT: dict[str, str] = {}
ASSUMED_CONTEXT: dict[str, int] = {}
