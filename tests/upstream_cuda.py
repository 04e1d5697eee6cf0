"""The CUDA driver's PTX JIT cache (NVIDIA CUDA Programming Guide, "CUDA Environment Variables"), READ:
not code, a documented driver variable; re-check the guide when the images' CUDA major version moves
(vllm/vllm-openai:v0.26.0-cu129 is CUDA 12.9)."""

from __future__ import annotations

from source_facts import ReadAt

READ = (ReadAt("CUDA_CACHE_PATH", ("vllm", "sglang"),
               "NVIDIA CUDA Programming Guide, CUDA environment variables (driver PTX JIT cache)",
               "~/.nv/ComputeCache"),)
