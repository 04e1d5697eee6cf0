"""Autoscaling of a served model with AIBrix v0.7.0's PodAutoscaler (field report 11: AIBrix runs the
serving), created after the workload it scales.

How v0.7.0 scales (pinned in tests/upstream_aibrix.py, each with its file): strategy APA reads the
metric from every pod its target selects at http://<pod IP>:<port>/metrics, the engine's metric named
by AIBrix's own table for the pod's `model.aibrix.ai/engine` label, averages it over 180 s and asks
for ceil(pods x average / target) pods, at most twice and at least half the current count per step,
outside a 10% tolerance. It reads and writes the target's spec.replicas itself (no /scale, no HPA,
no custom-metrics adapter). A pod that does not answer yet (a cold start) counts as 0.

A StormService is scaled the same way when the PodAutoscaler names no subTargetSelector: its
top-level spec.replicas, the count of RoleSets (workload_scale.go SetDesiredReplicas, generic
path), with the pods selected by storm-service-name=<name> (getPodSelectorForRole). So an autoscaled
StormService is rendered in replica mode, one pod per RoleSet (components/orchestrators/stormservice.py), and the
autoscaler's count is a pod count as for a Deployment. Role-level scaling (subTargetSelector)
patches spec.template.spec.roles[].replicas inside a list Pulumi applies whole, and is never built.

Its cooldown windows do not delay a decision: within the scale-up window it takes the highest
recommendation, within the scale-down window the lowest (podautoscaler_controller.go
stabilizeRecommendation, the reverse of the Kubernetes HPA's windows). A longer window only scales
further, so both are set to 0 s: each decision follows the current recommendation and no
scale-down goes below what the load asks for now. v0.7.0 has no setting that waits out a 12-23 min
cold start; with kv-cache-usage the pods still cold-starting read 0 and hold the recommendation to
ceil(serving pods / target) (tests/test_autoscaling.py runs the ported algorithm).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, metadata
from components.orchestrators import orchestrator_of
from components.routing import metric_port
from components.topologies import topology_of
from config_model import ServedModel, derived

API_VERSION = "autoscaling.aibrix.ai/v1alpha1"
KIND = "PodAutoscaler"
STRATEGY = "APA"
# AIBrix's metric for each setting (pkg/metrics/metrics.go Metrics; the engine metric each reads is
# checked against the pinned engines in tests/test_autoscaling.py).
AIBRIX_METRIC = {"kv-cache-usage": "kv_cache_usage_perc", "queue-length": "num_requests_waiting",
                 "ttft": "time_to_first_token_seconds"}
DEFAULT_TARGET = {"kv-cache-usage": 0.8, "queue-length": 4.0}
# APA scales up only when the pods' average exceeds target x (1 + this): v0.7.0's default
# (pkg/controller/podautoscaler/context/context.go NewBaseScalingContext; no annotation is rendered).
UP_TOLERANCE = 0.1
# pkg/controller/podautoscaler/types/annotations.go
ANN_SCALE_UP_COOLDOWN = "autoscaling.aibrix.ai/scale-up-cooldown-window"
ANN_SCALE_DOWN_COOLDOWN = "autoscaling.aibrix.ai/scale-down-cooldown-window"
COOLDOWN = "0s"
# The program owns the workload's replicas only at creation; then the autoscaler does. With
# ignoreChanges, pulumi-kubernetes v4.32.0 (provider/pkg/await/await.go handleSSAIgnoreFields) drops
# spec.replicas from its server-side apply when another manager owns it, else re-sends the live value.
# So switching autoscaling on never fights the autoscaler: the update keeps the live count and the
# PodAutoscaler, created after the workload, takes it from there.
IGNORE_REPLICAS = ["spec.replicas"]

# Switching autoscaling off in one `pulumi up` takes two things (field report: the README's two-step
# workaround, `kubectl delete podautoscaler` then PULUMI_K8S_ENABLE_PATCH_FORCE):
#
# 1. The autoscaler gone before the workload takes the configured spec.replicas. The engine deletes a
#    resource the program dropped only after every create and update (pulumi/pulumi v3.259.0
#    step_generator.go: deletes are generated once the program has registered everything), and until
#    then AIBrix v0.7.0 resyncs every 10 s (podautoscaler_controller.go DefaultResyncInterval) and
#    writes its own count back (workload_scale.go SetDesiredReplicas). So the PodAutoscaler is owned
#    (ownerReferences, blockOwnerDeletion) by a ConfigMap that names the switch, registered for every
#    model that can autoscale and before its workload. Flipping the switch replaces that ConfigMap,
#    delete first: pulumi-kubernetes deletes with foreground propagation and waits until the object is
#    gone (v4.32.0 provider/pkg/metadata/overrides.go DeletionPropagation, await.go Deletion), which
#    the garbage collector allows only once every blocking dependent is deleted (kubernetes v1.37.2
#    pkg/controller/garbagecollector/garbagecollector.go processDeletingDependentsItem). The workload
#    depends on the ConfigMap, so its update starts after that. The PodAutoscaler has no finalizer.
#    The engine's own delete of it at the end finds nothing and succeeds (await.go Deletion:
#    nilIfGVKDeleted on NotFound).
# 2. The apply of spec.replicas forced: AIBrix wrote it with a plain Update (workload_scale.go
#    s.client.Update), so its manager still owns the field after the PodAutoscaler is gone and server-side
#    apply stops on the conflict. pulumi.com/patchForce forces that one apply (await.go patchForce: the
#    annotation first). Set whenever autoscaling is off: the program is then the only writer of the
#    workload's fields it declares.
SWITCH_DATA_KEY = "autoscaling"
PATCH_FORCE = {"pulumi.com/patchForce": "true"}


def can_autoscale(model: ServedModel) -> bool:
    return refusal(model) is None


def switch_name(model: ServedModel) -> str:
    return derived.bounded(f"{model.name}-autoscaling")


def workload_annotations(model: ServedModel) -> dict[str, str]:
    """What the model's Deployment or StormService carries for the switch (item 2 above)."""
    return dict(PATCH_FORCE) if can_autoscale(model) and not model.autoscaling.enabled else {}


def autoscaling_switch(name: str, namespace: str, model: ServedModel,
                       opts: pulumi.ResourceOptions | None = None) -> k8s.core.v1.ConfigMap:
    """The PodAutoscaler's owner (item 1 above). Replaced when the switch flips: replace_on_changes, so
    not even a provider with enableConfigMapMutable updates it in place; delete first, as its name stays."""
    return k8s.core.v1.ConfigMap(
        name, metadata=metadata(switch_name(model), namespace, "autoscaling-switch"),
        data={SWITCH_DATA_KEY: "on" if model.autoscaling.enabled else "off"},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["data"], delete_before_replace=True)))


def refusal(model: ServedModel) -> str | None:
    """Why v0.7.0 (or this program around it) cannot autoscale this model; None when it can."""
    refused = topology_of(model).autoscale_refusal
    if refused is not None:
        return refused
    return orchestrator_of(model).autoscale_refusal(model)


def target_value(model: ServedModel) -> float:
    a = model.autoscaling
    return a.target_value if a.target_value is not None else DEFAULT_TARGET.get(a.metric, 0.0)


def _number(value: float) -> str:
    """0.8 -> "0.8", 4.0 -> "4": the CRD's targetValue is a string AIBrix parses with ParseFloat."""
    return format(value, "g")


def scale_target(model: ServedModel) -> dict:
    """The workload the autoscaler scales, named after the model, in the autoscaler's own namespace: what
    its orchestrator answers (components/orchestrators/; a StormService without subTargetSelector is
    scaled by its top-level spec.replicas)."""
    target = orchestrator_of(model).autoscale_target(model)
    if target is None:
        raise ValueError(f"{model.name}: {refusal(model)}")
    return target


def podautoscaler_spec(model: ServedModel) -> dict:
    a = model.autoscaling
    return {
        "scaleTargetRef": scale_target(model),
        "minReplicas": a.min_replicas,
        "maxReplicas": a.max_replicas,
        "scalingStrategy": STRATEGY,
        # One source: v0.7.0 refuses more (api/autoscaling/v1alpha1 GetPaMetricSources). Pod sources need
        # protocol, port and path set (podautoscaler_controller.go validatePodMetricSource); the fetcher
        # itself reads /metrics on this port.
        "metricsSources": [{"metricSourceType": "pod", "protocolType": "http", "port": str(metric_port(model)),
                            "path": "/metrics", "targetMetric": AIBRIX_METRIC[a.metric],
                            "targetValue": _number(target_value(model))}],
    }


def annotations() -> dict[str, str]:
    return {ANN_SCALE_UP_COOLDOWN: COOLDOWN, ANN_SCALE_DOWN_COOLDOWN: COOLDOWN}


@dataclass(frozen=True)
class AutoscalerArgs:
    namespace: str
    model: ServedModel
    target: pulumi.Resource       # the workload; the autoscaler is created after it
    switch: k8s.core.v1.ConfigMap  # autoscaling_switch: the autoscaler's owner


def owner_references(model: ServedModel, uid: pulumi.Input[str]) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "name": switch_name(model), "uid": uid,
             "blockOwnerDeletion": True}]


class ModelAutoscaler(Component):
    def __init__(self, name: str, args: AutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:serving:Autoscaler", name, opts)
        m = args.model
        # Named as the workload it scales: another kind, so no clash, and valid wherever the model name is.
        meta = {**metadata(m.name, args.namespace, "autoscaler"), "annotations": annotations(),
                "ownerReferences": owner_references(m, args.switch.metadata.apply(lambda meta: meta.uid))}
        self.autoscaler = k8s.apiextensions.CustomResource(
            f"{name}-podautoscaler", api_version=API_VERSION, kind=KIND, metadata=meta,
            spec=podautoscaler_spec(m), opts=self.child_opts(depends_on=[args.target, args.switch]))
        self.register_outputs({"target": m.name})
