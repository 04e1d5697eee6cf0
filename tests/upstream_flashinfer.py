"""FlashInfer (github.com/flashinfer-ai/flashinfer) JIT and cubin cache, READ at 0.7.2 (the engines pin
flashinfer-python 0.6.14 for vLLM 0.26.0, 0.7.2.post1 for vLLM 0.33.0, 0.6.15.post1 for SGLang 0.5.17,
0.7.2 for SGLang 0.5.23, per the wheels' Requires-Dist). Re-check flashinfer/jit/env.py at the new pin
when an engine bumps FlashInfer."""

from __future__ import annotations

from source_facts import ReadAt

READ = (ReadAt("FLASHINFER_WORKSPACE_BASE", ("vllm", "sglang"),
               "flashinfer-ai/flashinfer flashinfer/jit/env.py (0.7.2): base/.cache/flashinfer holds JIT "
               "modules and downloaded cubins (FLASHINFER_CUBIN_DIR)", "$HOME"),)
