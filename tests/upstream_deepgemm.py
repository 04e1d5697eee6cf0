"""DeepGEMM (github.com/deepseek-ai/DeepGEMM) JIT cache. Neither engine wheel pins it (the engine images
bundle a build), so it is READ at the newest tag in the mirror, v2.1.1.post3:
`git -C <mirror> show v2.1.1.post3:csrc/jit/compiler.hpp`. Re-check when an engine image moves.
How each engine sets the variable is that engine's fact: SGLang overwrites it
(tests/upstream_sglang.py STATEMENTS), vLLM fills it only when unset (tests/upstream_vllm.py READ)."""

from __future__ import annotations

from source_facts import ReadAt

PORTED_FROM = {
    "repo": "deepseek-ai/DeepGEMM", "release": "v2.1.1.post3", "files": ("csrc/jit/compiler.hpp",),
    "not_deployed": "neither engine wheel pins DeepGEMM (the engine images bundle a build): read at the newest tag",
}

# csrc/jit/compiler.hpp (Compiler constructor): cache_dir_path = $HOME/.deep_gemm, replaced by
# DG_JIT_CACHE_DIR when that is set and non-empty.
READ = (
    ReadAt("DG_JIT_CACHE_DIR", ("vllm", "sglang"),
           "deepseek-ai/DeepGEMM v2.1.1.post3 csrc/jit/compiler.hpp (get_env DG_JIT_CACHE_DIR)",
           "$HOME/.deep_gemm"),
)
