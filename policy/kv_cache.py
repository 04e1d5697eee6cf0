"""How many bytes of KV cache one token takes on one GPU, from the shape a checkpoint's config.json
declares. Standard library only: the config model, the rules and plan.md ask it.

Two attention shapes cover the families served here:
- key/value heads (MHA and GQA): each layer keeps a key and a value of `head_dim` per KV head. vLLM
  splits the KV heads across tensor-parallel ranks and replicates them when there are fewer heads than
  ranks (vllm/model_executor/layers/linear.py QKVParallelLinear: num_kv_head_replicas), so a GPU holds
  max(1, kv_heads / tp) heads.
- a latent (MLA, DeepSeek): each layer keeps one compressed vector of `latent_dim` per token, which
  every tensor-parallel rank holds whole (vllm/attention/backends/mla: the latent is not split by TP).
"""

from __future__ import annotations

from dataclasses import dataclass

# Bytes of one cache element per --kv-cache-dtype (vLLM's names; SGLang's are the same words).
ELEMENT_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


@dataclass(frozen=True)
class KvCacheShape:
    """What config.json says of the attention: num_hidden_layers, and either num_key_value_heads and
    head_dim, or the latent width (kv_lora_rank + qk_rope_head_dim)."""

    layers: int
    kv_heads: int | None = None
    head_dim: int | None = None
    latent_dim: int | None = None

    def __post_init__(self) -> None:
        if self.layers < 1 or not self.one_form(self.kv_heads, self.head_dim, self.latent_dim):
            raise ValueError("a KV-cache shape is layers with either kv_heads and head_dim, or latent_dim")

    @staticmethod
    def one_form(kv_heads: int | None, head_dim: int | None, latent_dim: int | None) -> bool:
        """Key/value heads (both of kv_heads and head_dim) or a latent, never both, never half of the first."""
        heads = (kv_heads, head_dim) != (None, None)
        return (kv_heads is None) == (head_dim is None) and heads != (latent_dim is not None)

    def bytes_per_token_per_gpu(self, tensor_parallel: int, element_bytes: int, pipeline_parallel: int = 1) -> int:
        """A pipeline stage holds its own layers' KV only: the largest stage, ceil(layers / PP)."""
        layers = -(-self.layers // pipeline_parallel)
        if self.latent_dim is not None:
            return layers * self.latent_dim * element_bytes
        heads_per_gpu = max(1, -(-self.kv_heads // tensor_parallel))
        return layers * 2 * heads_per_gpu * self.head_dim * element_bytes
