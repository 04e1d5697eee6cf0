"""gpt-oss (gpt-oss-20b, gpt-oss-120b): OpenAI's open-weight reasoning MoE models, trained on the harmony
response format, which both engines render and parse themselves."""

from __future__ import annotations

NAME = "gpt-oss"
DESCRIPTION = "OpenAI gpt-oss-20b and gpt-oss-120b, harmony format"
NAME_PATTERN = r"^gpt-oss-(20|120)b(?![a-z0-9])"

ENGINE_DEFAULTS = {
    # vLLM v0.26.0 and v0.33.0: vllm/reasoning/__init__.py "openai_gptoss" (GptOssReasoningParser, which
    # "uses harmony to extract reasoning content" and only detects where reasoning ends,
    # vllm/reasoning/gptoss_reasoning_parser.py); vllm/tool_parsers/__init__.py "openai" (GptOssToolParser,
    # vllm/tool_parsers/gptoss_tool_parser.py). The chat completions server switches to harmony for
    # config.json model_type gpt_oss (v0.33.0 vllm/entrypoints/openai/chat_completion/serving.py
    # is_harmony). GptOssForCausalLM is in transformers: no remote code.
    "vllm": {"tokenizer_mode": None, "tool_call_parser": "openai", "reasoning_parser": "openai_gptoss",
             "block_size": None, "max_model_len": None, "trust_remote_code": False, "kv_cache_dtype": None,
             "gpu_memory_utilization": None},
    # SGLang 0.5.17 (reasoning_parser.py DetectorMap, function_call_parser.py ToolCallParserEnum) and 0.5.23
    # (reasoning_parser_names.py, function_call/parser_names.py): "gpt-oss" for both (GptOssDetector).
    "sglang": {"reasoning_parser": "gpt-oss", "tool_call_parser": "gpt-oss", "moe_runner_backend": None,
               "swa_full_tokens_ratio": None, "trust_remote_code": False, "mem_fraction_static": None,
               "chunked_prefill_size": None},
}
FIELD_REPORT_DEFAULTS: dict[str, dict[str, str]] = {"vllm": {}, "sglang": {}}
ARCHITECTURE_DEFAULTS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {"vllm": {}, "sglang": {}}

# The openai/gpt-oss repositories ship config.json, generation_config.json, tokenizer_config.json,
# tokenizer.json and sharded safetensors with their index (besides original/ and metal/, which the
# engines do not read).
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "model.safetensors.index.json")
EXPECTED_SHARD_COUNT = None
SIZE_GIB = None
# No one shape: 24 layers (20b) and 36 (120b), each 8 KV heads of 64 (the model card), and every other
# layer attends to a 128-token window, which a KvCacheShape would count at full context.
KV_CACHE = None

SMOKE_PROMPT = "Reply with exactly the word OK and nothing else."
SMOKE_EXPECTED_TEXT = "OK"
# Harmony has no off switch: the model always writes its analysis channel first, at the reasoning effort
# (low, medium, high) the system message names (model card); the answer is the final channel, which the
# engines return as content. So no kwarg is sent, and the smoke request must leave room for the
# analysis before the answer
# (SMOKE_MAX_TOKENS below).
REASONING_KWARG = None
# Room for that analysis first: at the default (medium) effort it runs to some hundreds of tokens; a
# deterministic answer still stops at its end-of-turn token, so a larger bound costs nothing when it fits.
SMOKE_MAX_TOKENS = 1024
REASONING_TAGS = None          # channels, not tags: no --reasoning-config for same-pod P/D

DSPARK = False
COLD_START_ESTIMATE_SECONDS: dict[str, int] = {}   # not measured
COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool] = {}
COLD_START_FIELD_REPORT: dict[str, str] = {}
ASSUMED_CONTEXT: dict[str, int] = {}
