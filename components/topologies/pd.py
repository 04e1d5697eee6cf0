"""P/D on two AIBrix RayClusterFleets, prefill and decode, each RayCluster one head-only engine pod
(field report 11.2; components/disaggregated.py DisaggregatedEngine). No workload of the model's
own: the fleets are all its pods."""

from __future__ import annotations

from components.topologies.base import Topology

# The gateway plugin's P/D strategy (aibrix v0.7.0 pkg/plugins/gateway/algorithms, registered "pd").
PD_STRATEGY = "pd"


class Pd(Topology):
    name = "pd"
    model_workload = False
    fleets = True
    routing_strategy = PD_STRATEGY
    transfers_kv = True
    autoscale_refusal = ("topology pd runs prefill and decode on two RayClusterFleets, one PodAutoscaler each (AIBrix "
                         "v0.7.0 keys a PodAutoscaler to one target, podautoscaler_controller.go buildScalingTargetKey): "
                         "they would scale the pair's sides apart, which this program does not build")
    route = "pd"
    supported = frozenset({("vllm", "rayclusterfleet")})
    plan_note = ("P/D on two RayClusterFleets. Compare at a fixed GPU total: the field report (11.4) measured P/D "
                 "48.9-73.0% lower in output tokens/s/GPU than combined; its value is tail latency on long prompts.")
    smoke_proves = ("the combined checks, and that the gateway chose a prefill/decode pair (prefill-target-pod and "
                    "target-pod in the two fleets), the decode's successful NIXL transfers grew and no transfer "
                    "failed or expired (a failed load is recomputed, which is not P/D).")


TOPOLOGY = Pd()
