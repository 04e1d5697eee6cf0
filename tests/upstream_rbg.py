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
              "pkg/reconciler/common.go", "internal/controller/workloads/rolebasedgroup_controller.go",
              "pkg/discovery/env_builder.go", "pkg/discovery/injector.go", "api/workloads/constants/env.go",
              "api/workloads/constants/label.go", "api/workloads/constants/annotation.go"),
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


# ---- leaderWorkerPattern: a group of pods per RoleInstance (issue 29; /work/briefs/facts-lws-rbg.md 8-10) ----
ENV_BUILDER = "pkg/discovery/env_builder.go"
ENV_CONSTANTS = "api/workloads/constants/env.go"
LABELS = "api/workloads/constants/label.go"
# buildLocalRoleVars (EnvBuilder.Build sorts them by name), then BuildLwsEnv's; mergeEnvVars (pkg/discovery/
# injector.go) puts the RBG_ ones first, then the RBG_LWP_ ones, then the template's own, so the template's
# variables may name them all.
BASE_ENV = ("RBG_COMPONENT_INDEX", "RBG_COMPONENT_NAME", "RBG_GROUP_NAME", "RBG_ROLE_INDEX", "RBG_ROLE_INSTANCE_NAME",
            "RBG_ROLE_NAME")
LWP_ENV = ("RBG_LWP_LEADER_ADDRESS", "RBG_LWP_WORKER_INDEX", "RBG_LWP_GROUP_SIZE")
COMPONENT_NAME_LABEL = "rbg.workloads.x-k8s.io/component-name"      # leader | worker
INSTANCE_NAME_LABEL = "rbg.workloads.x-k8s.io/role-instance-name"   # <rbg>-<role>-<ordinal>, every pod of a group
GANG_ANNOTATION = "rbg.workloads.x-k8s.io/group-gang-scheduling"
GANG_TIMEOUT_ANNOTATION = "rbg.workloads.x-k8s.io/group-gang-scheduling-timeout"
# api/workloads/v1alpha2/helper.go GetRestartPolicy: unset on leaderWorkerPattern means this.
LWP_DEFAULT_RESTART_POLICY = "RecreateRoleInstanceOnPodRestart"


def lwp_injected_env(rbg: str, role: str, namespace: str, instance: int, rank: int, size: int) -> list[dict]:
    """What a container of pod `rank` (0 the leader) of RoleInstance `instance` holds before its template's
    variables: the downward-API ones as the kubelet resolves them from the pod's labels, and the leader's address
    as RBG writes it, "$(RBG_ROLE_INSTANCE_NAME)-0.<service>.<namespace>", for the kubelet to expand."""
    instance_name = f"{rbg}-{role}-{instance}"
    base = {"RBG_COMPONENT_INDEX": str(0 if rank == 0 else rank - 1),
            "RBG_COMPONENT_NAME": "leader" if rank == 0 else "worker", "RBG_GROUP_NAME": rbg,
            "RBG_ROLE_INDEX": str(instance), "RBG_ROLE_INSTANCE_NAME": instance_name, "RBG_ROLE_NAME": role}
    service = _dns(f"s-{rbg}-{role}")   # GetServiceName: the Service created when no <rbg>-<role> one exists
    lwp = {"RBG_LWP_LEADER_ADDRESS": f"$(RBG_ROLE_INSTANCE_NAME)-0.{service}.{namespace}",
           "RBG_LWP_WORKER_INDEX": str(rank), "RBG_LWP_GROUP_SIZE": str(size)}
    return [{"name": n, "value": v} for n, v in (*base.items(), *lwp.items())]


SOURCE = (
    (ENV_CONSTANTS, 'EnvRBGRoleInstanceName = "RBG_ROLE_INSTANCE_NAME"'),
    (ENV_CONSTANTS, 'EnvRBGLeaderAddress = "RBG_LWP_LEADER_ADDRESS"'),
    (ENV_CONSTANTS, 'EnvRBGIndex = "RBG_LWP_WORKER_INDEX"'),
    (ENV_CONSTANTS, 'EnvRBGSize = "RBG_LWP_GROUP_SIZE"'),
    (ENV_BUILDER, 'Value: fmt.Sprintf("$(%s)-0.%s.%s", constants.EnvRBGRoleInstanceName, svcName, b.rbg.Namespace),'),
    (ENV_BUILDER, "FieldPath: fmt.Sprintf(\"metadata.labels['%s']\", constants.ComponentIndexLabelKey),"),
    ("pkg/discovery/injector.go", "merged = append(merged, existingInjectedBase...)"),
    (LABELS, 'ComponentNameLabelKey = RBGPrefix + "component-name"'),
    (LABELS, 'RoleInstanceNameLabelKey = RBGPrefix + "role-instance-name"'),
    ("api/workloads/constants/annotation.go", 'GangSchedulingAnnotationKey = RBGPrefix + "group-gang-scheduling"'),
    ("api/workloads/constants/annotation.go",
     'GangSchedulingScheduleTimeoutSecondsKey = RBGPrefix + "group-gang-scheduling-timeout"'),
    ("api/workloads/v1alpha2/helper.go", 'svcName := fmt.Sprintf("s-%s-%s", rbg.Name, role.Name)'),
    ("api/workloads/v1alpha2/helper.go", "func (r *RoleSpec) GetRestartPolicy() RestartPolicyType {"),
    ("api/workloads/v1alpha2/helper.go", "return RecreateRoleInstanceOnPodRestart"),
)
