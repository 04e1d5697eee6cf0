"""tvm-ffi (github.com/apache/tvm-ffi, PyPI apache-tvm-ffi) build cache. FlashInfer's and SGLang's JIT
go through it.

The versions are not ours to choose: each engine release pins one (TVM_FFI in tests/upstream_vllm.py
and tests/upstream_sglang.py, from the wheels' Requires-Dist). The file is tvm-ffi's own and shared
by both engines, so it lives here once, RUN at every pinned version. Re-check on a bump: an
engine pinning a new tvm-ffi needs its line in requirements-engines.txt; the cache test then
executes the new file and fails if the assignment moved.
"""

from __future__ import annotations

import upstream_sglang
import upstream_vllm
from source_facts import Statement

# Every version an engine release pins, each run (a new pin gets its entry without an edit here).
PINNED = sorted(set(upstream_vllm.TVM_FFI.values()) | set(upstream_sglang.TVM_FFI.values()))
# python/tvm_ffi/cpp/extension.py: load_inline / build build under TVM_FFI_CACHE_DIR, else
# ~/.cache/tvm-ffi (cache_dir = os.environ.get("TVM_FFI_CACHE_DIR", ...)).
STATEMENTS = tuple(Statement(f"apache-tvm-ffi=={v}", "tvm_ffi/cpp/extension.py", "cache_dir", "tvm-ffi C++ builds")
                   for v in PINNED)
# RUN at every pinned version, so the releases are those pins (compared with the deployed engines' pins,
# which must also be installed, by tests/test_upstream_releases.py).
PORTED_FROM = {
    "repo": "apache/tvm-ffi", "releases": tuple(PINNED), "component": "apache-tvm-ffi",
    "files": ("python/tvm_ffi/cpp/extension.py",),
}
