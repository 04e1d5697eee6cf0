"""What every topology answers, with the combined topology's answers as the defaults.

A topology is a fixed set of workloads per served model: the model's own workload (run by
models[].orchestrator: the combined engine, or the same-pod 4P+4D pod) and/or two RayClusterFleets
(prefill and decode, paired by a roleset). The flags below say which; everything counted from them
(GPU workloads, steady pods, pod controllers, images) is derived here once, so a topology module only
states what differs. The rules of the count itself (peak GPUs, autoscaler growth) are
policy/gpu_accounting.py's, shared with the policy pack.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.engines import engine_of, parallel_size
from components.ops_commands import SmokeRoute
from config_model import ServedModel, derived
from policy import gpu_accounting
from policy.engines import vllm

# The image key of the fleets' pods: vLLM with Ray, which KubeRay needs in the head (field report 11.3).
FLEET_IMAGE_KEY = "vllmRay"
# The fleets always run vLLM (components/disaggregated.py fleet_engine_args).
FLEET_ENGINE = vllm
# KubeRay v1.2.1 utils.PodGenerateName: a head pod is named <RayCluster name, cut to 50>-head-<5>,
# and AIBrix v0.7.0 names a fleet's RayClusters <fleet>-<random>-<random> (GenerateName).
RAY_POD_PREFIX_MAX = 50
# The prompt length of a P/D smoke probe, in words (components/scripts/route_evidence.py probe_words).
PD_PROBE_WORDS = 512


@dataclass(frozen=True)
class GpuWorkload:
    """One workload of a served model, for GPU accounting: pods at steady state, the extra pods a
    rollout or a known controller overshoot may add, and GPUs per pod."""

    name: str
    pods: int
    extra_pods: int
    gpus_per_pod: int

    @property
    def peak_gpus(self) -> int:
        return gpu_accounting.peak_gpus(self.pods, self.extra_pods, self.gpus_per_pod)


def peak_replicas(model: ServedModel) -> int:
    """Pods the model's own workload may run at steady state: its replicas, or as many as its
    autoscaler may make, whichever is more."""
    return gpu_accounting.scaled_pods(model.replicas,
                                      model.autoscaling.max_replicas if model.autoscaling.enabled else None)


def roleset_name(model: ServedModel) -> str:
    """The roleset-name label pairing a model's P/D sides."""
    return model.pd.roleset_name or derived.default_roleset(model.name)


class Topology:
    name: str
    # The model's own workload, named after it and run by models[].orchestrator.
    model_workload: bool = True
    # That workload is the same-pod 4P+4D pod (components/disaggregated.py SamePodPdEngine), not the
    # combined engine (components/combined.py CombinedEngine).
    same_pod: bool = False
    # Two RayClusterFleets, prefill and decode (components/disaggregated.py DisaggregatedEngine).
    fleets: bool = False
    # Engine containers in one pod of the model's own workload, sharing its GPUs and memory.
    engines_per_pod: int = 1
    # Memory limit of the pod's containers besides the engines, GiB, and their CPU request, cores.
    sidecar_memory_gib: int = 0
    sidecar_cpu: int = 0
    # routing strategy when models[].routingStrategy is unset (components/routing.py).
    routing_strategy: str = "prefix-cache"
    # KV moves between engines over NIXL (the dashboards show its transfers).
    transfers_kv: bool = False
    # Why this program does not autoscale the topology; None: it may, if the orchestrator can.
    autoscale_refusal: str | None = None
    # What the smoke Job proves of the route (components/scripts/route_evidence.py ROUTES).
    route: str
    # (engine, orchestrator) pairs the field report validated for this topology.
    supported: frozenset[tuple[str, str]]
    # plan.md: a note on the topology (None: nothing to add) and what its smoke test proves.
    plan_note: str | None = None
    smoke_proves: str

    def gpus_per_pod(self, model: ServedModel) -> int:
        """GPUs of one pod of the model's own workload (a fleet pod holds one engine's parallel size)."""
        if model.gpus_per_pod is not None:
            return model.gpus_per_pod
        return parallel_size(model) * self.engines_per_pod

    def group_size(self, model: ServedModel) -> int:
        """Pods one replica of the model's own workload spans: the engine's GPUs over the pod's, at least 1
        (a gpusPerPod that does not divide them is refused by stacks/rules/multinode.py)."""
        return max(1, parallel_size(model) * self.engines_per_pod // self.gpus_per_pod(model))

    def fleet_replicas(self, model: ServedModel) -> int:
        """RayClusters of each fleet side, one head-only pod each."""
        return model.replicas

    def fleet_routing_config(self, model: ServedModel) -> dict | None:
        """routingConfig of the fleet pods' AIBrix profile."""
        return None

    def combined_pod_labels(self, model: ServedModel) -> tuple[tuple[str, str], ...]:
        """Labels the combined pods carry besides the model's own."""
        return ()

    def combined_routing_config(self, model: ServedModel) -> dict | None:
        """routingConfig of the combined pods' profile, when it is not their own strategy's plain one."""
        return None

    def gpu_workloads(self, model: ServedModel) -> list[GpuWorkload]:
        out = []
        if self.model_workload:
            rollout, group = model.rollout, self.group_size(model)
            surge = 0 if rollout.strategy == "Recreate" else rollout.max_surge
            # Every pod of every group: replicas x pods per group, each of gpus_per_pod (issue 29).
            out.append(GpuWorkload(model.name, peak_replicas(model) * group, surge * group, self.gpus_per_pod(model)))
        if self.fleets:
            pairs, per_pod = self.fleet_replicas(model), self.gpus_per_pod(model)
            # The pair's overshoot reserve sits on the prefill side; either fleet may use it.
            out.append(GpuWorkload(derived.fleet_name(model.name, "prefill"), pairs, model.pd.rollout_overshoot_pods,
                                   per_pod))
            out.append(GpuWorkload(derived.fleet_name(model.name, "decode"), pairs, 0, per_pod))
        return out

    def steady_engine_pods(self, model: ServedModel) -> int:
        """Engine pods when nothing rolls out: the model's own (an autoscaled model counts its
        minReplicas), plus one pod per RayCluster of each fleet side (head only)."""
        own = model.autoscaling.min_replicas if model.autoscaling.enabled else model.replicas
        return ((own * self.group_size(model) if self.model_workload else 0)
                + (len(derived.FLEET_SIDES) * self.fleet_replicas(model) if self.fleets else 0))

    def engine_image_key(self, model: ServedModel) -> str:
        """The stack-file image key of the model's own workload, or of the fleets without one."""
        return engine_of(model).IMAGE_KEY if self.model_workload else FLEET_IMAGE_KEY

    def image_keys(self, model: ServedModel) -> list[str]:
        """The stack-file image keys of every engine pod, the model's own workload first."""
        return ([engine_of(model).IMAGE_KEY] if self.model_workload else []) + ([FLEET_IMAGE_KEY] if self.fleets else [])

    def metric_port(self, model: ServedModel) -> int:
        """Where the gateway plugin reads a pod's engine metrics: the engine's own port."""
        return engine_of(model).PORT

    def engine_metric_ports(self, model: ServedModel) -> tuple[int, ...]:
        """Where each engine of a pod of the model's own workload serves /metrics."""
        return (engine_of(model).PORT,)

    def smoke_probe_words(self, model: ServedModel) -> int:
        return PD_PROBE_WORDS

    def smoke_route(self, model: ServedModel) -> SmokeRoute:
        """What the smoke Job must see of the route through the gateway (route_evidence.py)."""
        if not self.fleets:
            return SmokeRoute(self.route)
        port = FLEET_ENGINE.PORT
        return SmokeRoute(self.route, f"{model.name}-prefill-"[:RAY_POD_PREFIX_MAX],
                          f"{model.name}-decode-"[:RAY_POD_PREFIX_MAX], port, port, self.smoke_probe_words(model))
