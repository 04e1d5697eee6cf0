"""The model x hardware stacks of issue 28's matrix (tests/test_model_matrix.py): real checkpoints on each
catalogue GPU, each family, TP 1/2/4/8, both engines, single-file and sharded, 1 and 3 replicas, with and
without the node's allocatable CPU and memory.

Every model figure comes from the checkpoint's own files or model card, cited per entry; "approx." marks a
size worked out from the parameter count (parameters x bytes per parameter) where no file listing with
byte counts was at hand. KV shapes are config.json's num_hidden_layers, num_key_value_heads and head_dim
(hidden_size / num_attention_heads where config.json has no head_dim). Node sizes are stack inputs (what a
kubelet might report as allocatable on such a node), not facts the tests check against anything.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from variants import SGLANG_FIXTURE, consumers_file, dev_config, variant_file

from render import stackfile

# SGLang 0.5.23's image, a test fixture like variants.SGLANG_FIXTURE (no digest is published for it here).
SGLANG_0523_FIXTURE = {"upstream": "lmsysorg/sglang:v0.5.23-cu130", "digest": "sha256:" + "5" * 64,
                       "cudaVersion": "13.0"}


@dataclass(frozen=True)
class Case:
    """One model on one GPU pool, as a stack file states it."""

    key: str                        # stack name and the model's name
    family: str                     # the profile the render must choose (or that is declared)
    declared: bool                  # models[].profile set; else inferred from the directory
    directory: str
    served: str
    gpu: str                        # gpuPool.gpuType
    engine: str                     # vllm | sglang
    tp: int
    size_gib: float | None          # None: the profile's (deepseek-v4)
    shards: int | None              # expectedShardCount; None: the checkpoint's index (or 1 for a single file)
    single_file: bool               # one model.safetensors, no index
    kv: dict | None                 # models[].kvCache
    context: int | None             # vllm.maxModelLen / sglang.contextLength; None: the profile's or unknown
    replicas: int = 1
    gpus_per_node: int = 8
    node: tuple[int, int] | None = None     # gpuPool.nodeCpu, nodeMemoryGiB
    download_rate: float | None = None      # objectStore.downloadRateMiBps
    consumers: bool = False
    mem_fraction: float | None = None       # sglang.memFractionStatic
    sglang_image: dict = field(default_factory=lambda: SGLANG_FIXTURE)
    minio: bool = False


CASES = (
    # Qwen/Qwen3-235B-A22B-FP8 model card: 94 layers, 64 Q and 4 KV heads, 32,768 tokens natively; config.json
    # head_dim 128 (as every Qwen3 checkpoint). Size approx.: 235B parameters, FP8 experts and attention with BF16
    # embeddings, norms and block scales, about 236 GB = 220 GiB. 8 x H100 80GB (p5.48xlarge-like nodes).
    Case("qwen3-235b", "qwen3", False, "Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "H100-80GB", "vllm", 8, 220, None,
         False, {"layers": 94, "kvHeads": 4, "headDim": 128}, 32768, node=(190, 1900), download_rate=1200),
    # meta-llama/Llama-3.3-70B-Instruct config.json: num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192 /
    # num_attention_heads 64 = head_dim 128, BF16. Size approx.: 70.6B parameters x 2 bytes = 141 GB = 131.4 GiB.
    # SGLang at TP 4 on A100 80GB, weights in MinIO; node not declared (field report 2.1 per GPU).
    Case("llama-70b", "llama3", False, "Llama-3.3-70B-Instruct", "llama-3.3-70b", "A100-80GB", "sglang", 4, 131.4,
         None, False, {"layers": 80, "kvHeads": 8, "headDim": 128}, 32768, download_rate=300, minio=True,
         sglang_image=SGLANG_0523_FIXTURE),
    # openai/gpt-oss-20b: model card 24 layers, 12.8 GiB checkpoint; config.json num_key_value_heads 8, head_dim 64
    # (every other layer a 128-token window: counting all 24 at full context overstates the KV); shards
    # model-00000-of-00002 .. model-00002-of-00002 (three files). Three replicas on 8 x L4 nodes, two consumers.
    Case("gpt-oss-20b", "gpt-oss", False, "gpt-oss-20b", "gpt-oss-20b", "L4", "vllm", 1, 12.8, 3, False,
         {"layers": 24, "kvHeads": 8, "headDim": 64}, 32768, replicas=3, node=(190, 740), consumers=True),
    # Qwen/Qwen3-8B config.json: num_hidden_layers 36, num_key_value_heads 8, head_dim 128, max_position_embeddings
    # 40960; five shards model-0000N-of-00005 of 3996250744 + 3993160032 + 3959604768 + 3187841392 + 1244659840
    # bytes = 16381516776 bytes = 15.26 GiB. 4 x L40S nodes (g6e.12xlarge-like).
    Case("qwen3-8b", "qwen3", False, "Qwen3-8B", "qwen3-8b", "L40S", "vllm", 1, 15.26, 5, False,
         {"layers": 36, "kvHeads": 8, "headDim": 128}, 32768, gpus_per_node=4, node=(46, 360)),
    # meta-llama/Llama-3.1-8B-Instruct config.json: num_hidden_layers 32, num_key_value_heads 8, hidden_size 4096 /
    # 32 heads = 128, max_position_embeddings 131072; four shards model-0000N-of-00004. Size approx.: 8.03B x 2 bytes
    # = 16.06 GB = 14.96 GiB. Its full 131072-token context at TP 1 on an A100 40GB; store rate not declared.
    Case("llama-8b", "llama3", False, "Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b", "A100-40GB", "vllm", 1, 14.96, 4,
         False, {"layers": 32, "kvHeads": 8, "headDim": 128}, 131072),
    # openai/gpt-oss-120b: model card 36 layers, 60.8 GiB checkpoint; config.json 8 KV heads of 64; fifteen shards
    # model-00000-of-00014 .. model-00014-of-00014. TP 2 on H200 (p5en.48xlarge-like nodes).
    Case("gpt-oss-120b", "gpt-oss", False, "gpt-oss-120b", "gpt-oss-120b", "H200", "vllm", 2, 60.8, 15, False,
         {"layers": 36, "kvHeads": 8, "headDim": 64}, 131072, node=(190, 1900)),
    # The field report's DeepSeek-V4-Flash (48 shards, 155.43 GiB, 3.1) on B200 at TP 4: every model figure the
    # profile's (its KV shape is not recorded, so the KV cache is unknown), its cold start measured (6).
    Case("deepseek-v4", "deepseek-v4", True, "DeepSeek-V4-Flash-0731", "DeepSeek-V4-Flash", "B200", "vllm", 4, None,
         None, False, None, None),
    # Qwen/Qwen2.5-72B-Instruct config.json: num_hidden_layers 80, num_key_value_heads 8, hidden_size 8192 / 64 heads
    # = 128; 37 shards model-000NN-of-00037. Size approx.: 72.7B x 2 bytes = 145 GB = 135.5 GiB. No family of
    # its own (Qwen2.5): profile generic, declared; SGLang at TP 4 on the field report's H20 with its fraction set.
    Case("qwen25-72b", "generic", True, "Qwen2.5-72B-Instruct", "qwen2.5-72b-instruct", "H20", "sglang", 4, 135.5, 37,
         False, {"layers": 80, "kvHeads": 8, "headDim": 128}, 32768, mem_fraction=0.85),
    # Qwen/Qwen3-0.6B: one model.safetensors, no index; config.json num_hidden_layers 28, num_key_value_heads 8,
    # head_dim 128. Size approx.: 0.75B parameters (tied embeddings counted once) x 2 bytes = 1.5 GB = 1.4 GiB.
    Case("qwen3-0-6b", "qwen3", False, "Qwen3-0.6B", "qwen3-0.6b", "L4", "sglang", 1, 1.4, None, True,
         {"layers": 28, "kvHeads": 8, "headDim": 128}, 32768),
)
BY_KEY = {c.key: c for c in CASES}

MINIO_STORE = {"bucketName": "llm-weights", "region": "us-east-1", "endpoint": "https://minio.storage.internal:9000",
               "addressingStyle": "path", "create": False, "createCredentials": False}


def _model(c: Case) -> dict:
    base = copy.deepcopy(dev_config()["models"][0])
    for key in ("profile", "startupBudgetSeconds", "rollout", "vllm", "expectedShardCount"):
        base.pop(key, None)
    base.update(name=c.key, servedModelName=c.served, directory=c.directory, objectPrefix=f"models/{c.directory}",
                revision="main", replicas=c.replicas, engine=c.engine)
    if c.declared:
        base["profile"] = c.family
    if c.size_gib is not None:
        base["sizeGiB"] = c.size_gib
    if c.shards is not None:
        base["expectedShardCount"] = c.shards
    if c.kv is not None:
        base["kvCache"] = c.kv
    section: dict = {"tensorParallelSize": c.tp}
    if c.context is not None:
        section["maxModelLen" if c.engine == "vllm" else "contextLength"] = c.context
    if c.mem_fraction is not None:
        section["memFractionStatic"] = c.mem_fraction
    base[c.engine] = section
    if c.engine == "sglang":
        base["orchestrator"] = "rolebasedgroup"
    return base


def stack_file(c: Case) -> stackfile.StackFile:
    cfg = dev_config()
    pool: dict = {"gpuType": c.gpu, "gpusPerNode": c.gpus_per_node}
    if c.node is not None:
        pool |= {"nodeCpu": c.node[0], "nodeMemoryGiB": c.node[1]}
    store = dict(MINIO_STORE if c.minio else cfg["objectStore"])
    if c.download_rate is not None:
        store["downloadRateMiBps"] = c.download_rate
    changes: dict = {"gpuPool": pool, "objectStore": store, "models": [_model(c)], "gpuBudget": c.tp * c.replicas,
                     "modelVolume": cfg["modelVolume"] | {"capacityGiB": 1000}}
    if c.engine == "sglang":
        images = {k: v for k, v in cfg["images"].items() if k != "vllm"}
        changes |= {"images": images | {"sglang": c.sglang_image},
                    "compileCache": {"kind": "existingClaim", "claimName": "jit-cache"}}
    if c.consumers:
        return consumers_file(stack=f"matrix-{c.key}", **changes)
    return variant_file(f"matrix-{c.key}", **changes)
