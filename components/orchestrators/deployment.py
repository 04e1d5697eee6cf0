"""A Deployment (field report 5): Recreate at one pod, else RollingUpdate one pod at a time."""

from __future__ import annotations

from components.orchestrators.base import Orchestrator, rollout_deadline_seconds, selector
from components.topologies import peak_replicas
from config_model import ServedModel


class Deployment(Orchestrator):
    name = "deployment"
    api_version = "apps/v1"
    kind = "Deployment"
    pod_controller = "ReplicaSet"
    has_recreate = True
    may_surge = True
    custom_resource = False

    def group_refusal(self, engine: str) -> str:
        return ("a Deployment's pods are independent replicas: nothing creates, schedules or restarts a group of them "
                "together, or tells a pod its rank and its leader's address")

    def default_strategy(self, model: ServedModel) -> str:
        """A Deployment that never runs more than one pod recreates it, since Recreate creates the new pod
        only once the old one has stopped (kubernetes pkg/controller/deployment/recreate.go rolloutRecreate
        waits for oldPodsRunning to be false), so its GPUs are free for it; a RollingUpdate would create the
        new pod beside the terminating old one, Pending for the GPUs the old pod still holds through its
        drain. With more pods, or a surge pod, it rolls: one pod at a time (maxUnavailable) while the others
        serve, where Recreate would take the model fully down."""
        return "RollingUpdate" if model.rollout.max_surge or peak_replicas(model) > 1 else "Recreate"

    def spec(self, model: ServedModel, template: dict) -> dict:
        strategy_type = model.rollout.strategy or self.default_strategy(model)
        if strategy_type == "Recreate":
            strategy: dict = {"type": "Recreate"}
        else:
            # maxSurge 0 (the default): a pod goes down before its replacement starts, so the GPU count never
            # rises. maxSurge 1 only where the stack file asks and gpuBudget counts it (stacks/rules/capacity.py).
            strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": model.rollout.max_surge,
                                                                   "maxUnavailable": model.rollout.max_unavailable}}
        return {"replicas": model.replicas, "selector": {"matchLabels": selector(model)}, "strategy": strategy,
                "progressDeadlineSeconds": rollout_deadline_seconds(model), "revisionHistoryLimit": 5,
                "template": template}

    def autoscaler_owns_replicas(self, model: ServedModel) -> bool:
        return model.autoscaling.enabled

    def autoscale_target(self, model: ServedModel) -> dict | None:
        return {"apiVersion": self.api_version, "kind": self.kind, "name": model.name}


ORCHESTRATOR = Deployment()
