"""Qwen3, dense and MoE (Qwen3-0.6B ... Qwen3-32B, Qwen3-30B-A3B, Qwen3-235B-A22B, their FP8 and 2507
checkpoints): the hybrid-thinking family of the Qwen3 model cards, served by both engines' own Qwen3
parsers. Qwen3-Coder, Qwen3-VL, Qwen3-Next and later Qwen generations parse or load differently and are
not chosen by name."""

from __future__ import annotations

NAME = "qwen3"
DESCRIPTION = "Qwen3 dense and MoE, e.g. Qwen3-8B, Qwen3-32B, Qwen3-30B-A3B, Qwen3-235B-A22B"
# Qwen3-<size>B, optionally -A<active>B: Qwen3-235B-A22B-FP8, qwen3-8b. Not Qwen3-Coder-30B-A3B,
# Qwen3-VL-..., Qwen3-Next-80B-A3B, Qwen3-Embedding-8B, Qwen3.5-...: the size must follow "Qwen3-".
NAME_PATTERN = r"^qwen3-\d+(\.\d+)?b(-a\d+(\.\d+)?b)?(?![a-z0-9.])"

ENGINE_DEFAULTS = {
    # vLLM v0.26.0 and v0.33.0, vllm/reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER: "qwen3"
    # (qwen3_engine_reasoning_parser). vllm/tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER: "hermes"
    # (Hermes2ProToolParser, the <tool_call>{json}</tool_call> format of Qwen3's chat template); v0.33.0
    # registers "qwen3_json" to the same class, v0.26.0 does not, so the name both releases know.
    # Tokenizer: the checkpoint's tokenizer.json (tokenizer mode auto); Qwen3ForCausalLM and
    # Qwen3MoeForCausalLM are in transformers and vLLM's model registry: no remote code. Memory and
    # context: the engine's defaults and the checkpoint's config.json (no measurement of this family).
    "vllm": {"tokenizer_mode": None, "tool_call_parser": "hermes", "reasoning_parser": "qwen3", "block_size": None,
             "max_model_len": None, "trust_remote_code": False, "kv_cache_dtype": None, "gpu_memory_utilization": None},
    # SGLang 0.5.17 sglang/srt/parser/reasoning_parser.py ReasoningParser.DetectorMap and 0.5.23
    # sglang/srt/parser/reasoning_parser_names.py: "qwen3" (Qwen3Detector). Tool calls: "qwen"
    # (Qwen25Detector, "Detector for Qwen 2.5 and Qwen 3 model function call format",
    # sglang/srt/function_call/qwen25_detector.py); "qwen25" is its deprecated spelling (0.5.17
    # server_args.py, 0.5.23 arg_groups/serving_hook.py deprecated_tool_call_parsers).
    "sglang": {"reasoning_parser": "qwen3", "tool_call_parser": "qwen", "moe_runner_backend": None,
               "swa_full_tokens_ratio": None, "trust_remote_code": False, "mem_fraction_static": None,
               "chunked_prefill_size": None},
}
FIELD_REPORT_DEFAULTS: dict[str, dict[str, str]] = {"vllm": {}, "sglang": {}}
ARCHITECTURE_DEFAULTS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {"vllm": {}, "sglang": {}}

# Each Qwen3 repository ships config.json, generation_config.json (the sampling defaults vLLM applies
# with --generation-config auto), tokenizer_config.json with the chat template and tokenizer.json. The
# weights are sharded safetensors with their index, except Qwen3-0.6B's one model.safetensors (no index),
# so the index is not required here: the gate takes the index and its shards or the single file
# (components/scripts/model_files.py weight_files).
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")
EXPECTED_SHARD_COUNT = None    # one per checkpoint size: the stack file names it
SIZE_GIB = None
# No one shape: Qwen3-0.6B has 28 layers and 8 KV heads, Qwen3-235B-A22B 94 layers and 4 KV heads
# (their model cards), so models[].kvCache gives the checkpoint's.
KV_CACHE = None

# Thinking off (below), a deterministic one-word answer at temperature 0.
SMOKE_PROMPT = "Reply with exactly the word OK and nothing else."
SMOKE_EXPECTED_TEXT = "OK"
# The Qwen3 model cards: tokenizer.apply_chat_template(..., enable_thinking=False) switches thinking off
# (True is the default), "also available in APIs created by vLLM and SGLang" as chat_template_kwargs.
# The 2507 Instruct checkpoints never think and their template ignores it; the 2507 Thinking ones always
# think, so their smoke answer comes after the reasoning (SMOKE_MAX_TOKENS leaves room for it).
REASONING_KWARG = "enable_thinking"
# Room for a Thinking-2507 checkpoint's reasoning before its answer; with thinking off the answer stops at
# its end-of-turn token well before this.
SMOKE_MAX_TOKENS = 1024
REASONING_TAGS = ("<think>", "</think>")   # the model cards: thinking content wrapped in <think>...</think>

DSPARK = False
COLD_START_ESTIMATE_SECONDS: dict[str, int] = {}   # not measured
COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool] = {}
COLD_START_FIELD_REPORT: dict[str, str] = {}
ASSUMED_CONTEXT: dict[str, int] = {}
