"""TileLang (github.com/tile-ai/tilelang) cache directories. vLLM's DeepSeek-V4 MHC kernels are TileLang
(vllm/model_executor/kernels/mhc/tilelang.py at v0.33.0), as are SGLang's (field report 8.2).

The versions are not ours to choose: each engine release pins one (TILELANG in tests/upstream_vllm.py
and tests/upstream_sglang.py, from the wheels' Requires-Dist). What the file says is TileLang's own
and shared by both engines, so it lives here once. RUN: tests/engine_probe.py executes ENV from the
wheel of each pinned version (.venv-engines/tilelang==<v>, requirements-engines.txt); read at tags
v0.1.9, v0.1.11, v0.1.12 with `git -C <mirror of tile-ai/tilelang> show <tag>:tilelang/env.py`.
Re-check on a bump: an engine pinning a new TileLang needs its line in requirements-engines.txt;
the cache test then runs the new file and fails if an attribute moved.
"""

from __future__ import annotations

# tilelang/env.py: env.TILELANG_CACHE_DIR defaults to ~/.tilelang/cache; TILELANG_TMP_DIR follows it.
ENV = "tilelang/env.py"
# Compared with the TileLang each engine release the stacks run pins (TILELANG in the engine modules);
# RUN from requirements-engines.txt, so a pin read here must be installed there too (the test checks both).
PORTED_FROM = {
    "repo": "tile-ai/tilelang", "releases": ("0.1.9", "0.1.11", "0.1.12"), "component": "tilelang",
    "files": (ENV,),
}
ATTRIBUTES = ("TILELANG_CACHE_DIR", "TILELANG_TMP_DIR")
