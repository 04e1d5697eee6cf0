"""Stacks on gateway.routingLayer inferencePool (issue 31) for the tests every shipped stack goes through (the
policy pack through its server, schema, CEL, the API server's rules, checkov, the YAML read-back): vLLM on a
Deployment, SGLang on a RoleBasedGroup, and DeepSeek-R1 spanning two nodes (tests/multinode_stacks.py) as a
LeaderWorkerSet (a leader and a worker template) and as a RoleBasedGroup (one template, the leader's labels a
patch). Each stack file is built and rendered once per test process."""

from __future__ import annotations

import functools

from multinode_stacks import r1_stack
from test_inference_pool import with_layer
from variants import render, sglang_stack, variant_file

from render import runtime, stackfile

POOL_STACKS = {
    "pool-vllm-deployment": lambda: variant_file("pool"),
    "pool-sglang-rolebasedgroup": lambda: sglang_stack(),
    "pool-r1-leaderworkerset-vllm": lambda: r1_stack("leaderworkerset", "vllm", stack="pool"),
    "pool-r1-rolebasedgroup-sglang": lambda: r1_stack("rolebasedgroup", "sglang", stack="pool"),
}

# Only for the pack rules' own tests (tests/test_pool_pack.py): a StormService group, rank 0 the leader.
RULE_STACKS = {"pool-r1-stormservice-sglang": lambda: r1_stack("stormservice", "sglang", stack="pool")}


@functools.lru_cache(maxsize=None)
def pool_stack(name: str) -> stackfile.StackFile:
    """The stack file of POOL_STACKS[name] (or RULE_STACKS[name]) with the layer on (the endpoint picker image
    fixture, a Gateway of its own)."""
    return with_layer({**POOL_STACKS, **RULE_STACKS}[name]())


@functools.lru_cache(maxsize=None)
def pool_render(name: str, preview: bool = False) -> runtime.Rendered:
    sf = pool_stack(name)
    return runtime.render(sf, preview=True) if preview else render(sf)


def pool_renders() -> dict[str, runtime.Rendered]:
    return {name: pool_render(name) for name in POOL_STACKS}


# What the layer renders apart from the aibrix layer (tests/test_inference_pool.py shows the switch moves only these,
# and the smoke and warm-up Jobs, which call the model through the gateway).
LAYER_KINDS = {"InferencePool", "HTTPRoute", "ReferenceGrant", "NetworkPolicy", "Job"}


def layer_objects(name: str) -> list[dict]:
    """The objects of the pool render the layer makes or changes: the pool, its picker's, the route and grant, the
    NetworkPolicies admitting the gateway's proxies and the picker, the Jobs; the rest the tests check in the variants
    they render on the aibrix layer."""
    from conftest import k8s_objects
    return [o for o in k8s_objects(pool_render(name)) if o["kind"] in LAYER_KINDS
            or (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "endpoint-picker"]
