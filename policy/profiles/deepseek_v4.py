"""DeepSeek-V4-Flash, as the field report ran it: vLLM's command of section 5 and SGLang's H20 command
of 12.1, the checkpoint of 3.1, the smoke test of 12.3 and the cold starts of 6 and 12.2."""

from __future__ import annotations

NAME = "deepseek-v4"
DESCRIPTION = "DeepSeek-V4-Flash, as the field report ran it"
# The checkpoint the facts below are of (48 shards, 155.43 GiB): DeepSeek-V4-Flash, e.g. the report's
# directory DeepSeek-V4-Flash-0731. Another DeepSeek-V4 checkpoint (another size, V4.1) is not chosen by name.
NAME_PATTERN = r"^deepseek-v4-flash(?![a-z0-9.])"

ENGINE_DEFAULTS = {
    # vllm serve, field report section 5. Pages are 256 tokens; 204800 is the context section 5 serves.
    # fp8 KV and 0.88 are what section 5 ran on H20 (about 93 GiB used per 96 GB card, section 1).
    "vllm": {"tokenizer_mode": "deepseek_v4", "tool_call_parser": "deepseek_v4", "reasoning_parser": "deepseek_v4",
             "block_size": 256, "max_model_len": 204800, "trust_remote_code": True,
             "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.88},
    # sglang serve, field report 12.1, spelled as SGLang spells them (deepseek-v4, deepseekv4). marlin is
    # the MXFP4 MoE path on Hopper/H20; the SWA ratio is for DeepSeek-V4's sliding-window layers.
    "sglang": {"reasoning_parser": "deepseek-v4", "tool_call_parser": "deepseekv4", "moe_runner_backend": "marlin",
               "swa_full_tokens_ratio": 0.1, "trust_remote_code": True,
               "mem_fraction_static": 0.82, "chunked_prefill_size": 4096},
}
# Of these, the figures of the report's one deployment (8 x H20), not facts of the checkpoint: the KV
# dtype and memory shares sized to a 96 GB card, the chunk size of 12.1's command, the MoE path chosen
# for Hopper (Blackwell takes FlashInfer's MXFP4, 12.1) and the sliding-window share of the KV pool.
# The parsers, tokenizer mode, trust-remote-code, 256-token pages and the 204800-token context are
# the model's (its tokenizer, chat format, code and attention backend; the context it was served at).
FIELD_REPORT_DEFAULTS = {
    "vllm": {"kv_cache_dtype": "5", "gpu_memory_utilization": "5"},
    "sglang": {"mem_fraction_static": "12.1", "chunked_prefill_size": "12.1", "moe_runner_backend": "12.1",
               "swa_full_tokens_ratio": "12.1"},
}

# marlin is what SGLang 0.5.17 ran on the H20 (12.1: "MXFP4 Marlin MoE on this hardware, rather than the
# FlashInfer MXFP4 path intended for Blackwell"): a Hopper choice. Left to itself ("auto"), SGLang 0.5.23
# picks flashinfer_mxfp4 for DeepSeek-V4's FP4 experts on sm90, sm100 and sm120
# (sglang/srt/arg_groups/model_overrides/deepseek_v4.py), so off Hopper the stack must say which it wants.
ARCHITECTURE_DEFAULTS = {
    "vllm": {},
    "sglang": {"moe_runner_backend": (("sm90",), "marlin is the MXFP4 MoE path the field report ran on Hopper "
                                      "(12.1), not the one SGLang takes on other GPUs")},
}

# Field report 3.1: the checkpoint's files besides the 48 shards and the tokenizer payload.
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "model.safetensors.index.json")
EXPECTED_SHARD_COUNT = 48
SIZE_GIB = 155.43
# Not derived: its config.json is not recorded in the field report, which gives only the pool vLLM
# allocated (about 58.36 GiB per card for about 1.76 million tokens at fp8, section 6), and its
# dedicated attention backend with sliding-window layers (12.1 --swa-full-tokens-ratio) is neither of
# the two shapes policy/kv_cache.py models. models[].kvCache gives it where known.
KV_CACHE = None

# Field report 12.3: a deterministic exact answer with thinking off; reasoning and tool calls with
# DeepSeek's chat template switch `thinking`.
SMOKE_PROMPT = "只回答：你好"
SMOKE_MAX_TOKENS = 32  # the field report's smoke requests (9.2, 12.3)
SMOKE_EXPECTED_TEXT = "你好"
REASONING_KWARG = "thinking"
# Where its reasoning starts and ends in the output (vLLM --reasoning-config, field report 9.2).
REASONING_TAGS = ("<think>", "</think>")

# The checkpoint carries a DSpark head (field report 5, 12.5): vllm.speculativeDecoding and
# sglang.speculativeAlgorithm may switch it on.
DSPARK = True

# Measured cold start, pod creation to Ready. vLLM TP=8: about 12 min (field report 6, 9.3), not broken
# down. SGLang TP=8 with DSpark on 8 x H20: about 23 min, of which 854 s engine start with 394 + 123 s of
# graph capture (12.2); the 23 min include the image pull.
COLD_START_ESTIMATE_SECONDS = {"vllm": 12 * 60, "sglang": 23 * 60}
COLD_START_INCLUDES_IMAGE_PULL = {"vllm": False, "sglang": True}
COLD_START_FIELD_REPORT = {"vllm": "6", "sglang": "12.2"}
# The context SGLang takes from the checkpoint when --context-length is unset is not recorded in the
# field report; warm-up then assumes this many tokens.
ASSUMED_CONTEXT = {"sglang": 131072}
