"""An RBG RoleBasedGroup (field report 12): the storage version v1alpha2, one `server` role, standalone
pattern."""

from __future__ import annotations

from components.orchestrators.base import Orchestrator
from config_model import ServedModel

ROLE_NAME = "server"


def rolebasedgroup_wait_for() -> str:
    """Ready. Known limit: right after a spec change the controller writes Ready (with the new
    observedGeneration) from the previous revision's role status until the role workload observes
    the change (rbg v0.7.0 pkg/reconciler/common.go ConstructWorkloadRoleStatus keeps the last known
    status; internal/controller/workloads/rolebasedgroup_controller.go updateRBGStatus copies a role
    status only when replicas or readyReplicas change). No field of the RBG status tells the new
    revision apart, so the day-2 Jobs must wait for the endpoint themselves."""
    return "condition=Ready"


def rolebasedgroup_spec(model: ServedModel, template: dict) -> dict:
    return {"roles": [{
        "name": ROLE_NAME, "replicas": model.replicas,
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}},
        "standalonePattern": {"template": template}}]}


class RoleBasedGroup(Orchestrator):
    name = "rolebasedgroup"
    api_version = "workloads.x-k8s.io/v1alpha2"
    kind = "RoleBasedGroup"
    # RoleBasedGroup -> RoleInstanceSet -> RoleInstance -> pod (RBG v0.7.0, the role's default workload).
    pod_controller = "RoleInstance"

    def spec(self, model: ServedModel, template: dict) -> dict:
        return rolebasedgroup_spec(model, template)

    def wait_for(self, model: ServedModel) -> str:
        return rolebasedgroup_wait_for()

    def autoscale_refusal(self, model: ServedModel) -> str | None:
        return ("AIBrix v0.7.0's PodAutoscaler reads and writes its target's spec.replicas (pkg/controller/"
                "podautoscaler/workload_scale.go), which a RoleBasedGroup does not have (replicas per role), and "
                "its controller's ClusterRole grants nothing on workloads.x-k8s.io (config/rbac/controller-manager/"
                "role.yaml)")


ORCHESTRATOR = RoleBasedGroup()
