"""What the pinned engines read, in one place: re-check this module when bumping an engine version.

Two kinds of entry. RUN: code the tests execute from the PyPI wheels that `make test` installs
--no-deps into .venv-engines/<pin> (requirements-engines.txt); a bump means a new pin there and a new
entry here, and the tests then run the new code. READ: code that cannot run here (it needs torch,
CUDA or a GPU driver), recorded as read at the tag, with the file; a bump means re-reading it.
"""

from __future__ import annotations

from dataclasses import dataclass

SGLANG_VERSIONS = ("0.5.17", "0.5.23")   # field report 12 ran 0.5.17; 0.5.23 is the current target
VLLM_VERSIONS = ("0.26.0", "0.33.0")

# Which TileLang and tvm-ffi each engine version pins (Requires-Dist in the engine wheel's METADATA).
TILELANG = {("sglang", "0.5.17"): "0.1.11", ("sglang", "0.5.23"): "0.1.12",
            ("vllm", "0.26.0"): "0.1.9", ("vllm", "0.33.0"): "0.1.12"}
TVM_FFI = {("sglang", "0.5.17"): "0.1.11", ("sglang", "0.5.23"): "0.1.11",
           ("vllm", "0.26.0"): "0.1.10", ("vllm", "0.33.0"): "0.1.11"}


@dataclass(frozen=True)
class Statement:
    """RUN: one assignment in an installed upstream file, executed as written with the container's env.
    `target` is the assignment's left side as ast.unparse prints it; the first match in the file runs."""

    pin: str        # directory under .venv-engines, e.g. "sglang==0.5.23"
    path: str       # file inside that directory
    target: str
    why: str


# Cache paths computed outside the environment module, where a later line overrides or bypasses it.
STATEMENTS = (
    # sgl-project/sglang v0.5.17 python/sglang/srt/layers/deep_gemm_wrapper/compile_utils.py: at import,
    # DG_JIT_CACHE_DIR is overwritten from SGLANG_DG_CACHE_DIR (default ~/.cache/deep_gemm), so
    # DG_JIT_CACHE_DIR alone never reaches DeepGEMM under SGLang.
    Statement("sglang==0.5.17", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py",
              "os.environ['DG_JIT_CACHE_DIR']", "DeepGEMM JIT cache as SGLang sets it"),
    # v0.5.23, same file: os.environ["DG_JIT_CACHE_DIR"] = envs.SGLANG_DG_CACHE_DIR.get()
    Statement("sglang==0.5.23", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py",
              "os.environ['DG_JIT_CACHE_DIR']", "DeepGEMM JIT cache as SGLang sets it"),
    # v0.5.17 python/sglang/kernels/jit/utils/compile.py: SGLang's JIT kernels build under
    # TVM_FFI_CACHE_DIR (default ~/.cache/tvm-ffi); there is no SGLANG_JIT_CACHE_* variable yet.
    Statement("sglang==0.5.17", "sglang/kernels/jit/utils/compile.py", "cache_dir", "SGLang JIT kernels"),
    # v0.5.23 python/sglang/kernels/jit/utils/compile/cache.py: SGLANG_JIT_CACHE_DIR, else
    # ~/.cache/sglang/jit (not under SGLANG_CACHE_DIR).
    Statement("sglang==0.5.23", "sglang/kernels/jit/utils/compile/cache.py", "configured", "SGLang JIT kernels"),
    # apache/tvm-ffi python/tvm_ffi/cpp/extension.py: load_inline / build builds under TVM_FFI_CACHE_DIR,
    # else ~/.cache/tvm-ffi (FlashInfer's and SGLang's JIT go through it).
    Statement("apache-tvm-ffi==0.1.10", "tvm_ffi/cpp/extension.py", "cache_dir", "tvm-ffi C++ builds"),
    Statement("apache-tvm-ffi==0.1.11", "tvm_ffi/cpp/extension.py", "cache_dir", "tvm-ffi C++ builds"),
)

# RUN: SGLang's environment module, sglang/srt/environ.py (stdlib only, loaded by path: the package
# __init__ imports torch). Every EnvField whose name says CACHE or DIR is read; 0.5.23 also applies
# redirect_third_party_caches() as sglang/__init__.py does first thing (setdefault of TRITON_CACHE_DIR,
# TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_PATH, TILELANG_CACHE_DIR, FLASHINFER_WORKSPACE_BASE).
SGLANG_ENVIRON = "sglang/srt/environ.py"
# RUN: tile-ai/tilelang tilelang/env.py (v0.1.9, v0.1.11, v0.1.12): env.TILELANG_CACHE_DIR defaults to
# ~/.tilelang/cache; TILELANG_TMP_DIR follows it. vLLM's DeepSeek-V4 MHC kernels are TileLang
# (vllm/model_executor/kernels/mhc/tilelang.py at v0.33.0), as are SGLang's (field report 8.2).
TILELANG_ENV = "tilelang/env.py"
TILELANG_ATTRIBUTES = ("TILELANG_CACHE_DIR", "TILELANG_TMP_DIR")


@dataclass(frozen=True)
class ReadAt:
    """READ: an environment variable a cache writer reads, where, and what happens when it is unset."""

    variable: str
    engines: tuple[str, ...]
    source: str
    unset: str


READ = (
    ReadAt("VLLM_CACHE_ROOT", ("vllm",),
           "vllm-project/vllm v0.26.0 and v0.33.0 vllm/envs.py (VLLM_CACHE_ROOT lambda)",
           "$XDG_CACHE_HOME/vllm, else ~/.cache/vllm; holds torch_compile_cache "
           "(vllm/compilation/decorators.py sets TORCHINDUCTOR_CACHE_DIR under it) and "
           "flashinfer_autotune_cache (vllm/model_executor/warmup/flashinfer_autotune_cache.py)"),
    ReadAt("DG_JIT_CACHE_DIR", ("vllm", "sglang"),
           "deepseek-ai/DeepGEMM csrc/jit/compiler.hpp (get_env DG_JIT_CACHE_DIR); vllm v0.26.0/v0.33.0 "
           "vllm/utils/deep_gemm.py sets it to $VLLM_CACHE_ROOT/deep_gemm only when unset",
           "$HOME/.deep_gemm"),
    ReadAt("TRITON_CACHE_DIR", ("vllm", "sglang"),
           "triton-lang/triton python/triton/knobs.py (cache.dir: TRITON_CACHE_DIR)", "~/.triton/cache"),
    ReadAt("TORCHINDUCTOR_CACHE_DIR", ("vllm", "sglang"),
           "pytorch/pytorch torch/_inductor/runtime/cache_dir_utils.py", "/tmp/torchinductor_<user>"),
    ReadAt("FLASHINFER_WORKSPACE_BASE", ("vllm", "sglang"),
           "flashinfer-ai/flashinfer flashinfer/jit/env.py (0.7.2): base/.cache/flashinfer holds JIT "
           "modules and downloaded cubins (FLASHINFER_CUBIN_DIR)", "$HOME"),
    ReadAt("CUDA_CACHE_PATH", ("vllm", "sglang"),
           "NVIDIA CUDA Programming Guide, CUDA environment variables (driver PTX JIT cache)",
           "~/.nv/ComputeCache"),
    ReadAt("HF_HOME", ("vllm", "sglang"), "huggingface/huggingface_hub src/huggingface_hub/constants.py",
           "~/.cache/huggingface (offline here: only the modules cache of trust-remote-code)"),
)


# Flags. SGLang: RUN — tests/sglang_cli.py reads the option strings `sglang serve` declares from the
# installed source (0.5.17: ServerArgs fields in sglang/srt/server_args.py; 0.5.23: the field groups in
# sglang/srt/arg_groups/fields/*.py, as add_cli_args_from_dataclass in sglang/srt/arg_groups/arg_utils.py
# turns them into flags, plus the add_argument calls of ServerArgs.add_cli_args) and parses our argv with
# them on argparse.ArgumentParser(prog="sglang serve"), allow_abbrev left on as prepare_server_args sets it.
SGLANG_FIELD_SOURCES = {
    "0.5.17": ("sglang/srt/server_args.py",),
    "0.5.23": ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/*.py"),
}
SGLANG_ADD_ARGUMENT_SOURCES = ("sglang/srt/server_args.py",)

# vLLM: READ — `vllm serve` options we render, each declared at both v0.26.0 and v0.33.0 (EngineArgs
# fields in vllm/engine/arg_utils.py; frontend fields in vllm/entrypoints/openai/cli_args.py at v0.26.0,
# vllm/entrypoints/common/cli_args.py at v0.33.0). The value says whether the option takes a value
# (False: a store_true / BooleanOptionalAction flag). vLLM's FlexibleArgumentParser
# (vllm/utils/argparse_utils.py) keeps argparse's allow_abbrev, so an abbreviation would also parse:
# rendering only these full names is what the flags test enforces.
VLLM_SERVE_OPTIONS = {
    "--served-model-name": True, "--host": True, "--port": True, "--trust-remote-code": False,
    "--tensor-parallel-size": True, "--data-parallel-size": True, "--kv-cache-dtype": True,
    "--block-size": True, "--gpu-memory-utilization": True, "--max-model-len": True, "--max-num-seqs": True,
    "--tokenizer-mode": True, "--tool-call-parser": True, "--enable-auto-tool-choice": False,
    "--reasoning-parser": True, "--enable-prefix-caching": False, "--speculative-config": True,
    "--enforce-eager": False, "--distributed-executor-backend": True, "--kv-transfer-config": True,
    "--dtype": True, "--reasoning-config": True, "--default-chat-template-kwargs": True,
    "--enable-prompt-tokens-details": False,
}
