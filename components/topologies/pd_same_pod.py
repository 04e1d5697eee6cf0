"""Same-pod 4P+4D: one Deployment pod with a prefill and a decode engine on half the GPUs each and
our proxy in front (field report 9; components/disaggregated.py SamePodPdEngine). Functional
validation only (9.4)."""

from __future__ import annotations

from components.ops_commands import SmokeRoute
from components.topologies.base import Topology
from config_model import ServedModel

# Memory (request, limit) of the proxy container, GiB, and its CPU (request, limit), cores.
PROXY_MEMORY_GIB = (4, 8)
PROXY_CPU = (2, 4)


class PdSamePod(Topology):
    name = "pd-same-pod"
    same_pod = True
    engines_per_pod = 2
    sidecar_memory_gib = PROXY_MEMORY_GIB[1]
    sidecar_cpu = PROXY_CPU[0]
    transfers_kv = True
    autoscale_refusal = ("topology pd-same-pod is for functional validation only and cannot scale prefill and decode "
                         "independently (field report 9.5)")
    route = "same-pod"
    supported = frozenset({("vllm", "deployment")})
    plan_note = ("Same-pod 4P+4D is for functional validation only: field report 9.4 measured 3.7-12.1% of "
                 "the TP=8 output throughput. The proxy is ours (components/scripts/pd_proxy.py), not the "
                 "image's: it passes the API key on, serves /v1/models and /metrics, and returns the decode's "
                 "answer unchanged, so non-streaming responses keep the reasoning content (9.5).")
    smoke_proves = ("the combined checks through our proxy, and that the pod's decode engine counted new NIXL "
                    "transfers with none failed.")

    def metric_port(self, model: ServedModel) -> int:
        """The proxy serves no /metrics: the decode engine, which holds the running requests and the KV
        cache the plugin's load scores read."""
        return model.same_pod.decode_port

    def engine_metric_ports(self, model: ServedModel) -> tuple[int, ...]:
        return (model.same_pod.prefill_port, model.same_pod.decode_port)

    def smoke_route(self, model: ServedModel) -> SmokeRoute:
        sp = model.same_pod
        return SmokeRoute(self.route, prefill_port=sp.prefill_port, decode_port=sp.decode_port)


TOPOLOGY = PdSamePod()
