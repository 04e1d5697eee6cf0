"""RBG v0.7.0 behaviour the stacks depend on (github.com/sgl-project/rbg, tag v0.7.0): the one place a
maintainer re-checks when bumping Platform.rbg_version."""

from __future__ import annotations

TAG = "v0.7.0"

# Compared with config_model Platform.rbg_version by tests/test_upstream_releases.py.
PORTED_FROM = {
    "repo": "sgl-project/rbg", "release": TAG, "component": "rbg",
    "files": ("pkg/utils/service_utils.go", "api/workloads/v1alpha2/helper.go",
              "api/workloads/v1alpha2/rolebasedgroup_types.go", "api/workloads/constants/external.go",
              "pkg/reconciler/workload_reconciler.go", "pkg/reconciler/roleinstanceset_reconciler.go",
              "pkg/reconciler/roleinstance/sync/instance_scale.go", "pkg/reconciler/roleinstance/core/instance_core.go",
              "pkg/reconciler/common.go", "internal/controller/workloads/rolebasedgroup_controller.go"),
}


def _dns(name: str) -> str:
    return name[:63].rstrip("-") if len(name) > 63 else name


def role_service_names(rbg: str, role: str) -> set[str]:
    """Headless Service of a role (pkg/utils/service_utils.go GetCompatibleHeadlessServiceName): an
    existing Service named GetWorkloadName `<rbg>-<role>` is taken over as the role's Service, else
    GetServiceName `s-<rbg>-<role>` is created (api/workloads/v1alpha2/helper.go; both cut to 63
    characters and trailing '-')."""
    return {_dns(f"{rbg}-{role}"), _dns(f"s-{rbg}-{role}")}


# The controller ownerReference on a role's pods, which the Kubernetes disruption controller follows
# (tests/upstream_kubernetes.py). A role without the rbg.workloads.x-k8s.io/role-workload-type
# annotation runs as a RoleInstanceSet (api/workloads/v1alpha2/rolebasedgroup_types.go GetWorkloadType,
# constants/external.go RoleInstanceSetWorkloadType; pkg/reconciler/workload_reconciler.go
# NewWorkloadReconciler); a standalone role's RoleInstanceSet makes one RoleInstance per replica with one
# component of size 1 (pkg/reconciler/roleinstanceset_reconciler.go
# constructRoleInstanceTemplateFromStandalonePattern; roleinstanceset/*/ NewControllerRef(set)); the
# RoleInstance creates the pod (pkg/reconciler/roleinstance/sync/instance_scale.go createPods ->
# core/instance_core.go NewUpdatePods: GetPodFromTemplate(..., NewControllerRef(instance, RoleInstance))).
# Whether RoleInstance has /scale is read from its CRD (../shared/crds/rbg), not stated here.
ROLE_WORKLOAD_TYPE_ANNOTATION = "rbg.workloads.x-k8s.io/role-workload-type"
STANDALONE_POD_CONTROLLER = ("workloads.x-k8s.io/v1alpha2", "RoleInstance")


# Known limit, not closable from the RBG status (components/orchestrators/rolebasedgroup.py rolebasedgroup_wait_for):
# pkg/reconciler/common.go ConstructWorkloadRoleStatus keeps the last known role status while the role
# workload's observedGeneration is behind, and internal/controller/workloads/rolebasedgroup_controller.go
# updateRBGStatus writes Ready and observedGeneration = generation from it.
