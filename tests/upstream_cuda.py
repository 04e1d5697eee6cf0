"""The CUDA driver's PTX JIT cache (NVIDIA CUDA Programming Guide, "CUDA Environment Variables"), READ:
not code, a documented driver variable; re-check the guide when the images' CUDA major version moves
(vllm/vllm-openai:v0.26.0-cu129 is CUDA 12.9)."""

from __future__ import annotations

from source_facts import ReadAt

# Compared with the cudaVersion of the engine images the stacks run (images.<engine>.cudaVersion) by
# tests/test_upstream_releases.py: the variable is the driver's, documented per CUDA major version.
PORTED_FROM = {
    "repo": "NVIDIA CUDA Programming Guide", "release": "12.9", "component": "cuda",
    "files": ("CUDA Environment Variables (CUDA_CACHE_PATH)",),
    "covers": {"from": "12", "to": "12", "why": "a documented driver variable: re-read when the images' CUDA "
               "major version moves (above)"},
}

READ = (ReadAt("CUDA_CACHE_PATH", ("vllm", "sglang"),
               "NVIDIA CUDA Programming Guide, CUDA environment variables (driver PTX JIT cache)",
               "~/.nv/ComputeCache"),)
