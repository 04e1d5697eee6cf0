"""FlashInfer (github.com/flashinfer-ai/flashinfer) JIT and cubin cache, READ at 0.7.2 (the engines pin
flashinfer-python 0.6.14 for vLLM 0.26.0, 0.7.2.post1 for vLLM 0.33.0, 0.6.15.post1 for SGLang 0.5.17,
0.7.2 for SGLang 0.5.23, per the wheels' Requires-Dist). Re-check flashinfer/jit/env.py at the new pin
when an engine bumps FlashInfer.

0.6.14 and 0.6.15.post1 (the pins of the releases the stacks run) were read too, in the mirror of
flashinfer-ai/flashinfer (`git show v0.6.14:flashinfer/jit/env.py`): the same blob 5623022c at both tags,
FLASHINFER_WORKSPACE_BASE defaulting to the home directory and FLASHINFER_CACHE_DIR = base/.cache/flashinfer."""

from __future__ import annotations

from source_facts import ReadAt

# Compared with the FlashInfer each engine release the stacks run pins (FLASHINFER in tests/upstream_vllm.py
# and tests/upstream_sglang.py) by tests/test_upstream_releases.py.
PORTED_FROM = {
    "repo": "flashinfer-ai/flashinfer", "releases": ("0.6.14", "0.6.15.post1", "0.7.2"), "component": "flashinfer",
    "files": ("flashinfer/jit/env.py",),
}

READ = (ReadAt("FLASHINFER_WORKSPACE_BASE", ("vllm", "sglang"),
               "flashinfer-ai/flashinfer flashinfer/jit/env.py (0.7.2): base/.cache/flashinfer holds JIT "
               "modules and downloaded cubins (FLASHINFER_CUBIN_DIR)", "$HOME"),)
