"""Whether a model's weights, and the KV cache of one sequence of its longest context, fit in what the engine
may use of one GPU. Standard library only: the stack rule (stacks/rules/hardware.py) and plan.md's per-GPU
budget (render/gpu_budget_md.py) both ask it.

The engines' own arithmetic, at the pinned versions:
- vLLM: --gpu-memory-utilization is the fraction of the GPU's total memory the instance may use, weights,
  activations of its profiling run and KV cache together; after loading and profiling, what is left of it is
  the KV cache, and vLLM refuses to start when that cannot hold one sequence of --max-model-len (vLLM 0.33.0
  vllm/v1/core/kv_cache_planning.py _check_enough_kv_cache_memory: "To serve at least one request with the
  model's max seq len ..."). So weights + one max-length sequence of KV must fit in memory x utilisation,
  and what remains of it is the room for activations and CUDA graphs.
- SGLang: --mem-fraction-static is the fraction the static pool (weights and the KV cache pool) may take; the
  rest, memory x (1 - fraction), is kept for activations and CUDA graphs (SGLang 0.5.23
  sglang/srt/model_executor/model_runner_components/kv_pool_runtime.py: headroom_gb = pre_model_load_memory *
  (1 - mem_fraction_static)). The same sum must fit in memory x fraction.
Weights split over tensor (and pipeline) parallel ranks; data-parallel ranks each hold all of them. The
checkpoint's size on disk stands for its weights in GPU memory (the engines load them as stored).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class GpuBudget:
    """One GPU of one engine: what it has, what the engine may use of it, and what the model takes."""

    gpu_gib: float                # the card's memory
    utilization: float            # the engine's fraction of it
    weights_gib: float            # the model's weights on this GPU
    kv_gib: float | None          # KV cache of one sequence of `context` tokens on this GPU; None: shape unknown
    context: int | None           # the longest sequence the engine admits; None: unknown

    @property
    def usable_gib(self) -> float:
        return self.gpu_gib * self.utilization

    @property
    def headroom_gib(self) -> float:
        """What is left of the usable memory for activations, CUDA graphs and more KV cache."""
        return self.usable_gib - self.weights_gib - (self.kv_gib or 0.0)

    @property
    def fits(self) -> bool:
        return self.headroom_gib >= 0


def weights_per_gpu_gib(size_gib: float, tensor_parallel: int, pipeline_parallel: int = 1) -> float:
    return size_gib / (tensor_parallel * pipeline_parallel)


def budget(size_gib: float, tensor_parallel: int, gpu_gib: float, utilization: float,
           kv_bytes_per_token: int | None = None, context: int | None = None,
           pipeline_parallel: int = 1) -> GpuBudget:
    """`kv_bytes_per_token`: one token's KV cache on one GPU at this tensor parallel size
    (policy/kv_cache.py KvCacheShape.bytes_per_token_per_gpu); with `context`, one max-length sequence."""
    kv = kv_bytes_per_token * context / GIB if kv_bytes_per_token is not None and context is not None else None
    return GpuBudget(gpu_gib, utilization, weights_per_gpu_gib(size_gib, tensor_parallel, pipeline_parallel), kv,
                     context)


def largest_weights_gib(b: GpuBudget, tensor_parallel: int, pipeline_parallel: int = 1) -> float:
    """The largest checkpoint (GiB, all ranks) that would fit beside one max-length sequence of KV."""
    return max(0.0, (b.usable_gib - (b.kv_gib or 0.0)) * tensor_parallel * pipeline_parallel)


def longest_context(b: GpuBudget, kv_bytes_per_token: int | None) -> int | None:
    """The longest sequence whose KV would fit beside the weights; None when KV is unknown or nothing fits."""
    if not kv_bytes_per_token or b.usable_gib <= b.weights_gib:
        return None
    return int((b.usable_gib - b.weights_gib) * GIB // kv_bytes_per_token)
