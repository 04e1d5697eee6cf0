"""What every orchestrator answers, with a Deployment-like default where one exists."""

from __future__ import annotations

from dataclasses import dataclass

from components.engines import startup_budget_seconds
from config_model import ServedModel

WAIT_FOR = "pulumi.com/waitFor"
# The label every pod of a group carries with its role in it, leader or worker, where the orchestrator
# builds the two from templates of their own (components/group.py).
GROUP_ROLE = "llm-serving.io/group-role"


def selector(model: ServedModel) -> dict[str, str]:
    """The labels the model's own workload selects its pods by."""
    return {"app.kubernetes.io/name": model.name, "app.kubernetes.io/component": "engine"}


def rollout_deadline_seconds(model: ServedModel) -> int:
    """Progress deadline and Pulumi await timeout: the startup budget plus what comes before it (scheduling,
    image pull, model gate: models[].rollout.preStartSeconds). Pulumi's 10-minute default would fail every
    12-minute cold start."""
    return startup_budget_seconds(model) + model.rollout.pre_start_seconds


@dataclass(frozen=True)
class GroupIdentity:
    """How a pod of a group learns its place, as argv expressions Kubernetes expands from the variables the
    controller injects: its rank (and the variable holding it) and its leader's address."""

    rank: str
    rank_env: str
    leader_address: str


class Orchestrator:
    name: str
    api_version: str
    kind: str
    # The controller on each engine pod's ownerReferences (components/operations.py disruption_budget), and on a
    # group's pods where another creates them.
    pod_controller: str

    @property
    def group_pod_controller(self) -> str:
        return self.pod_controller
    # A Recreate strategy exists (else it always rolls, maxSurge 0).
    has_recreate: bool = False
    # Its rollout may add a surge pod, which gpuBudget counts (models[].rollout.maxSurge).
    may_surge: bool = False
    # A custom resource (pulumi waits on WAIT_FOR) rather than a built-in kind the provider awaits itself.
    custom_resource: bool = True
    # Runs a model whose engine fits one node, one pod per replica.
    single_node: bool = True
    # Engines it runs as a group of pods per replica across nodes (issue 29), and why not where it cannot.
    group_engines: frozenset[str] = frozenset()

    def default_strategy(self, model: ServedModel) -> str:
        """How the workload replaces pods when models[].rollout.strategy is unset: without Recreate it rolls."""
        return "RollingUpdate"

    # The label the controller puts on every pod of one group, with a value of its own per group
    # (components/group.py group_affinity), and the labels only a group's leader carries (the route's Service).
    group_label: str = ""
    # What happens to a group when one of its pods fails, for plan.md and docs (the failure domain).
    group_restart: str = ""
    # plan.md's words (render/multinode_md.py): what the controller makes of a group workload, what the cluster
    # needs for it, and per gang scheduler the pod group it creates and what that needs.
    group_creates: str = ""
    controller_needs: str = ""
    gang_objects: dict[str, str] = {}
    gang_needs: dict[str, str] = {}

    @property
    def gang_schedulers(self) -> frozenset[str]:
        """Gang schedulers (config_model GangScheduling.scheduler) whose pod group its controller creates."""
        return frozenset(self.gang_objects)

    def spec(self, model: ServedModel, template: dict) -> dict:
        raise NotImplementedError

    def group_spec(self, model: ServedModel, templates: dict[str, dict], gang: object) -> dict:
        """The workload of a model spanning nodes: `templates` are the leader's and the workers' pods
        (components/group.py), `gang` the pool's GangScheduling."""
        raise ValueError(f"{self.name} runs no group of pods per replica (stacks/rules/multinode.py refuses it)")

    def group_refusal(self, engine: str) -> str:
        """Why it cannot run this engine's model across nodes (an engine not in group_engines)."""
        return "it has no group of pods per replica"

    def group_annotations(self, model: ServedModel, gang: object) -> dict[str, str]:
        """Annotations of the workload itself that ask for gang scheduling, where that is how the controller
        takes it."""
        return {}

    def group_identity(self, model: ServedModel, namespace: str) -> GroupIdentity:
        raise ValueError(f"{self.name} runs no group of pods per replica (stacks/rules/multinode.py refuses it)")

    def leader_selector(self, model: ServedModel) -> dict[str, str]:
        """Labels that select only the leaders of the model's groups."""
        return {}

    def group_wait_for(self, model: ServedModel) -> str | None:
        return self.wait_for(model)

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
