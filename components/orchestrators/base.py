"""What every orchestrator answers, with a Deployment-like default where one exists."""

from __future__ import annotations

from components.engines import startup_budget_seconds
from components.pod_template import PRE_START_ALLOWANCE_SECONDS
from config_model import ServedModel

WAIT_FOR = "pulumi.com/waitFor"


def selector(model: ServedModel) -> dict[str, str]:
    """The labels the model's own workload selects its pods by."""
    return {"app.kubernetes.io/name": model.name, "app.kubernetes.io/component": "engine"}


def rollout_deadline_seconds(model: ServedModel) -> int:
    """Progress deadline and Pulumi await timeout: the startup budget plus image pull and model
    gate. Pulumi's 10-minute default would fail every 12-minute cold start."""
    return startup_budget_seconds(model) + PRE_START_ALLOWANCE_SECONDS


class Orchestrator:
    name: str
    api_version: str
    kind: str
    # The controller on each engine pod's ownerReferences (components/operations.py disruption_budget).
    pod_controller: str
    # A Recreate strategy exists (else it always rolls, maxSurge 0).
    has_recreate: bool = False
    # Its rollout may add a surge pod, which gpuBudget counts (models[].rollout.maxSurge).
    may_surge: bool = False
    # A custom resource (pulumi waits on WAIT_FOR) rather than a built-in kind the provider awaits itself.
    custom_resource: bool = True

    def default_strategy(self, model: ServedModel) -> str:
        """How the workload replaces pods when models[].rollout.strategy is unset: without Recreate it rolls."""
        return "RollingUpdate"

    def spec(self, model: ServedModel, template: dict) -> dict:
        raise NotImplementedError

    def wait_for(self, model: ServedModel) -> str | None:
        """The pulumi.com/waitFor annotation of a custom resource; None for a built-in kind."""
        return None

    def autoscaler_owns_replicas(self, model: ServedModel) -> bool:
        """After creation the autoscaler owns spec.replicas (components/autoscaling.py IGNORE_REPLICAS)."""
        return False

    def autoscale_target(self, model: ServedModel) -> dict | None:
        """The scaleTargetRef of AIBrix's PodAutoscaler; None where autoscale_refusal says why not."""
        return None

    def autoscale_refusal(self, model: ServedModel) -> str | None:
        return None
