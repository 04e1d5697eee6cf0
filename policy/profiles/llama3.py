"""Llama 3.1 and 3.3 (8B, 70B, 405B Instruct and their FP8 checkpoints): no reasoning, JSON tool calls
as their chat template writes them. Llama 3.0 (no tool calls), 3.2 (vision and 1B/3B) and Llama 4
differ and are not chosen by name, nor are fine-tunes named after their base (Hermes-3-Llama-3.1,
Llama-3.1-Nemotron), whose chat formats are their own."""

from __future__ import annotations

NAME = "llama3"
DESCRIPTION = "Llama 3.1 and 3.3 Instruct, e.g. Llama-3.1-8B-Instruct, Llama-3.3-70B-Instruct"
# (Meta-)Llama-3.1-<size>B or Llama-3.3-<size>B at the start of the name: Meta-Llama-3.1-405B-Instruct-FP8.
NAME_PATTERN = r"^(meta-)?llama-?3\.[13]-\d+b(?![a-z0-9])"

ENGINE_DEFAULTS = {
    # vLLM v0.26.0 and v0.33.0, vllm/tool_parsers/__init__.py: "llama3_json" (Llama3JsonToolParser,
    # vllm/tool_parsers/llama_tool_parser.py, "for Llama 3.x and 4 models"; it reads the "parameters" key
    # the checkpoint's own template asks for as well as "arguments", so no --chat-template is rendered:
    # vLLM's docs pair it with examples/tool_chat_template_llama3.1_json.jinja, which a stack may pass in
    # vllm.extraArgs). No reasoning parser: Llama 3.1/3.3 do not reason. LlamaForCausalLM is in
    # transformers: no remote code; tokenizer.json: tokenizer mode auto.
    "vllm": {"tokenizer_mode": None, "tool_call_parser": "llama3_json", "reasoning_parser": None, "block_size": None,
             "max_model_len": None, "trust_remote_code": False, "kv_cache_dtype": None, "gpu_memory_utilization": None},
    # SGLang 0.5.17 sglang/srt/function_call/function_call_parser.py ToolCallParserEnum and 0.5.23
    # sglang/srt/function_call/parser_names.py: "llama3" (Llama32Detector, the <|python_tag|>{json}
    # format, sglang/srt/function_call/llama32_detector.py).
    "sglang": {"reasoning_parser": None, "tool_call_parser": "llama3", "moe_runner_backend": None,
               "swa_full_tokens_ratio": None, "trust_remote_code": False, "mem_fraction_static": None,
               "chunked_prefill_size": None},
}
FIELD_REPORT_DEFAULTS: dict[str, dict[str, str]] = {"vllm": {}, "sglang": {}}
ARCHITECTURE_DEFAULTS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {"vllm": {}, "sglang": {}}

# The meta-llama repositories ship config.json, generation_config.json, tokenizer_config.json (with the
# chat template), tokenizer.json and sharded safetensors with their index (besides original/, Meta's
# own format, which the engines do not read).
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "model.safetensors.index.json")
EXPECTED_SHARD_COUNT = None
SIZE_GIB = None
# No one shape: 8 KV heads of 128 at every size, but 32 layers (8B), 80 (70B) and 126 (405B)
# (config.json num_hidden_layers of each; The Llama 3 Herd of Models, table 3).
KV_CACHE = None

SMOKE_PROMPT = "Reply with exactly the word OK and nothing else."
SMOKE_MAX_TOKENS = 32  # the field report's smoke requests (9.2, 12.3)
SMOKE_EXPECTED_TEXT = "OK"
REASONING_KWARG = None         # nothing to switch
REASONING_TAGS = None

DSPARK = False
COLD_START_ESTIMATE_SECONDS: dict[str, int] = {}   # not measured
COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool] = {}
COLD_START_FIELD_REPORT: dict[str, str] = {}
ASSUMED_CONTEXT: dict[str, int] = {}
