"""Combined: one engine pod does prefill and decode (field report 5, 7, 11.1, 12), on a Deployment,
an AIBrix StormService or an RBG RoleBasedGroup (components/combined.py CombinedEngine). Every
answer is the default one of components/topologies/base.py."""

from __future__ import annotations

from components.topologies.base import Topology


class Combined(Topology):
    name = "combined"
    route = "combined"
    # vLLM on a plain pod (5) and on a StormService (11.1), SGLang on a RoleBasedGroup (12).
    supported = frozenset({("vllm", "deployment"), ("vllm", "stormservice"), ("sglang", "rolebasedgroup")})
    smoke_proves = ("/v1/models, a deterministic chat answer, streaming and the parsers, through the gateway; the "
                    "gateway's plugin picked the pod (routing-strategy and target-pod headers).")


TOPOLOGY = Combined()
