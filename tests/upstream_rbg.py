"""RBG v0.7.0 behaviour the stacks depend on (github.com/sgl-project/rbg, tag v0.7.0): the one place a
maintainer re-checks when bumping Platform.rbg_version."""

from __future__ import annotations

TAG = "v0.7.0"


def _dns(name: str) -> str:
    return name[:63].rstrip("-") if len(name) > 63 else name


def role_service_names(rbg: str, role: str) -> set[str]:
    """Headless Service of a role (pkg/utils/service_utils.go GetCompatibleHeadlessServiceName): an
    existing Service named GetWorkloadName `<rbg>-<role>` is taken over as the role's Service, else
    GetServiceName `s-<rbg>-<role>` is created (api/workloads/v1alpha2/helper.go; both cut to 63
    characters and trailing '-')."""
    return {_dns(f"{rbg}-{role}"), _dns(f"s-{rbg}-{role}")}


def rbg_ready_after_spec_change(role_replicas: int, last_status: dict) -> dict:
    """What the controller writes right after a spec change, before the role workload observes it:
    pkg/reconciler/common.go ConstructWorkloadRoleStatus returns the last known role status when
    observedGeneration < generation; internal/controller/workloads/rolebasedgroup_controller.go
    updateRBGStatus sets Ready when every role's replicas equal spec and readyReplicas, and writes
    observedGeneration = generation in the same patch. Returns the status as the awaiter sees it."""
    ready = last_status["replicas"] == role_replicas and last_status["replicas"] == last_status["readyReplicas"]
    return {"observedGeneration": "current",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "roleStatuses": [dict(last_status)]}
