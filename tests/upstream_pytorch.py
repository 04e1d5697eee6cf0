"""PyTorch (github.com/pytorch/pytorch) Inductor cache, READ at the torch each engine release pins
(2.11.0 for vLLM 0.26.0 and SGLang 0.5.17, 2.14.0 for vLLM 0.33.0, 2.14.1 for SGLang 0.5.23, per the
wheels' Requires-Dist). Recorded without a tag; re-check torch/_inductor/runtime/cache_dir_utils.py
at the new tag when an engine bumps torch."""

from __future__ import annotations

from source_facts import ReadAt

PORTED_FROM = {
    "repo": "pytorch/pytorch", "release": None,
    "untagged": "recorded without a tag (the torch each engine release pins: TORCH in tests/upstream_vllm.py and "
                "tests/upstream_sglang.py)",
    "files": ("torch/_inductor/runtime/cache_dir_utils.py",), "component": "torch",
}

READ = (ReadAt("TORCHINDUCTOR_CACHE_DIR", ("vllm", "sglang"),
               "pytorch/pytorch torch/_inductor/runtime/cache_dir_utils.py", "/tmp/torchinductor_<user>"),)
