"""What runs a served model's own engine pods, one module per orchestrator (deployment, stormservice,
rolebasedgroup, leaderworkerset): the workload's kind and spec, what `pulumi up` waits for, which controller owns the pods,
whether it has Recreate or may surge, what the autoscaler scales, and how it runs a model spanning nodes
(a group of pods per replica: components/group.py). Everything that depends on the
orchestrator asks `orchestrator_of(model)` instead of comparing the name. A new orchestrator is a module
here, its entry in ORCHESTRATORS and its name in config_model/serving.py's Literal.

The P/D fleets (orchestrator rayclusterfleet) are the topology's own workloads (components/topologies/,
components/disaggregated.py), not a model workload, so they have no entry: orchestrator_of refuses them.
"""

from __future__ import annotations

from components.orchestrators import deployment, leaderworkerset, rolebasedgroup, stormservice
from components.orchestrators.base import Orchestrator, rollout_deadline_seconds, selector
from components.topologies import topology_of
from config_model import ServedModel

__all__ = ["FLEET_KIND", "ORCHESTRATORS", "Orchestrator", "engine_pod_kinds", "orchestrator_of", "rollout_deadline_seconds",
           "rollout_strategy", "selector"]

ORCHESTRATORS: dict[str, Orchestrator] = {o.name: o for o in (deployment.ORCHESTRATOR, stormservice.ORCHESTRATOR,
                                                              rolebasedgroup.ORCHESTRATOR,
                                                              leaderworkerset.ORCHESTRATOR)}


def orchestrator_of(model: ServedModel) -> Orchestrator:
    return ORCHESTRATORS[model.orchestrator]


def rollout_strategy(model: ServedModel) -> str:
    """The stack file's models[].rollout.strategy, else the orchestrator's (RollingUpdate for the P/D fleets)."""
    if model.rollout.strategy is not None:
        return model.rollout.strategy
    orchestrator = ORCHESTRATORS.get(model.orchestrator)
    return orchestrator.default_strategy(model) if orchestrator is not None else "RollingUpdate"


FLEET_KIND = "RayClusterFleet"   # components/disaggregated.py DisaggregatedEngine


def engine_pod_kinds(model: ServedModel) -> frozenset[str]:
    """The kinds of the workloads this program renders that own a served model's engine pods: its own
    workload's (a same-pod P/D pair always runs in a Deployment: components/disaggregated.py) and the P/D
    fleets'. What a scanner that reads only built-in kinds can see of them (components/scanner_exceptions.py)."""
    t = topology_of(model)
    kinds = {"Deployment" if t.same_pod else ORCHESTRATORS[model.orchestrator].kind} if t.model_workload else set()
    return frozenset(kinds | ({FLEET_KIND} if t.fleets else set()))
