"""Triton (github.com/triton-lang/triton) kernel cache, READ: neither engine pins Triton directly (it
comes with the torch each engine release pins: torch 2.11.0 for vLLM 0.26.0 and SGLang 0.5.17, 2.14.0
for vLLM 0.33.0, 2.14.1 for SGLang 0.5.23, per the wheels' Requires-Dist). Recorded without a tag;
re-check python/triton/knobs.py at the Triton the new torch requires when an engine bumps torch."""

from __future__ import annotations

from source_facts import ReadAt

PORTED_FROM = {
    "repo": "triton-lang/triton", "release": None,
    "untagged": "recorded without a tag: the Triton the engines' torch requires",
    "files": ("python/triton/knobs.py",),
    "not_deployed": "no stack pins it; the engine image's torch brings it",
}

READ = (ReadAt("TRITON_CACHE_DIR", ("vllm", "sglang"),
               "triton-lang/triton python/triton/knobs.py (cache.dir: TRITON_CACHE_DIR)", "~/.triton/cache"),)
