"""Stacks of models spanning nodes (issue 29), for the tests of every layer: DeepSeek-R1 on two nodes of
8 x H20 96 GB on each orchestrator and engine that runs groups.

DeepSeek-R1 (deepseek-ai/DeepSeek-R1 model card: 671B parameters, FP8 weights; the DeepSeek-V3 architecture,
config.json num_hidden_layers 61, MLA kv_lora_rank 512 + qk_rope_head_dim 64 = 576 per token and layer) is
"about 640 GiB of weights" (issue 29; 671B parameters at one byte is 625 GiB before its BF16 parts), taken
as 642 GiB as docs/topologies.md's DeepSeek-V3 example does: more than one node's 8 x 95.58 GiB, while
TP 8 x PP 2 over two nodes holds about 40 GiB per GPU. Its family has no profile here (generic), so sizeGiB
and kvCache are the stack's own.
"""

from __future__ import annotations

import copy

from variants import dev_config, variant_file

from render import stackfile

SGLANG_0523 = {"upstream": "lmsysorg/sglang:v0.5.23-cu130", "digest": "sha256:" + "5" * 64, "cudaVersion": "13.0"}
# The orchestrator x engine pairs that run a group, and the gang scheduler each creates pod groups for.
GROUP_PAIRS = (("leaderworkerset", "vllm"), ("leaderworkerset", "sglang"), ("stormservice", "sglang"),
               ("rolebasedgroup", "sglang"))
GANG = {"leaderworkerset": "volcano", "stormservice": "coscheduling", "rolebasedgroup": "coscheduling"}


def r1_model(orchestrator: str = "leaderworkerset", engine: str = "vllm", tp: int = 8, pp: int = 2,
             **changes) -> dict:
    m = copy.deepcopy(dev_config()["models"][0])
    for key in ("expectedShardCount", "startupBudgetSeconds", "vllm", "rollout"):
        m.pop(key, None)
    m.update({"name": "deepseek-r1", "servedModelName": "deepseek-r1", "directory": "DeepSeek-R1",
              "objectPrefix": "models/DeepSeek-R1", "revision": "v1", "profile": "generic", "sizeGiB": 642,
              "kvCache": {"layers": 61, "latentDim": 576}, "orchestrator": orchestrator, "engine": engine,
              engine: {"tensorParallelSize": tp, "pipelineParallelSize": pp}})
    m.update(changes)
    return m


def r1_config(orchestrator: str = "leaderworkerset", engine: str = "vllm", network: dict | None = None,
              pool: dict | None = None, sglang_image: dict = SGLANG_0523, **model_changes) -> dict:
    """The dev stack's config with DeepSeek-R1 as its one model, spanning two nodes of a four-node pool."""
    cfg = copy.deepcopy(dev_config())
    cfg["models"] = [r1_model(orchestrator, engine, **model_changes)]
    cfg["gpuBudget"] = 16
    cfg["gpuPool"] = {"gpuType": "H20", "nodeCount": 4, "gangScheduling": {"scheduler": GANG[orchestrator]},
                      **({"network": network} if network is not None else {}), **(pool or {})}
    cfg["modelVolume"] = {**cfg["modelVolume"], "capacityGiB": 1400}
    if engine == "sglang":
        cfg["images"] = {**cfg["images"], "sglang": sglang_image}
        cfg["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
    return cfg


def r1_stack(orchestrator: str = "leaderworkerset", engine: str = "vllm", stack: str = "r1",
             **kwargs) -> stackfile.StackFile:
    return variant_file(stack, **r1_config(orchestrator, engine, **kwargs))


RDMA_NETWORK = {"socketInterface": "eth0", "ibHca": "mlx5_0:1,mlx5_1:1",
                "rdma": {"resourceName": "rdma/rdma_shared_device_a"}, "topologyKey": "topology.kubernetes.io/zone"}
