"""An RBG RoleBasedGroup (field report 12): the storage version v1alpha2, one `server` role, standalone
pattern."""

from __future__ import annotations

from components.orchestrators.base import GroupIdentity, Orchestrator
from components.topologies import group_size
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


# ---- a model spanning nodes (issue 29; facts read at rbg v0.7.0, pinned in tests/upstream_rbg.py) ----
# leaderWorkerPattern runs each replica as a RoleInstance of `size` pods built from `template`, the leader's
# with leaderTemplatePatch applied as a strategic merge patch (pkg/reconciler/roleinstanceset_reconciler.go
# constructRoleInstanceTemplateByLeaderWorkerPattern), and injects RBG_LWP_LEADER_ADDRESS and
# RBG_LWP_WORKER_INDEX (pkg/discovery/env_builder.go BuildLwsEnv). Gang scheduling is an annotation of the
# RBG (api/workloads/constants/annotation.go); the controller's --scheduler-name picks scheduler-plugins (its
# default) or Volcano, and it creates ONE pod group for the whole RBG, minMember the sum of size x replicas
# (helper.go GetGroupSize): every replica is scheduled together.
COMPONENT_LABEL = "rbg.workloads.x-k8s.io/component-name"
INSTANCE_LABEL = "rbg.workloads.x-k8s.io/role-instance-name"
GANG_ANNOTATION = "rbg.workloads.x-k8s.io/group-gang-scheduling"
GANG_TIMEOUT_ANNOTATION = "rbg.workloads.x-k8s.io/group-gang-scheduling-timeout"
RECREATE_INSTANCE = "RecreateRoleInstanceOnPodRestart"


def rolebasedgroup_group_spec(model: ServedModel, templates: dict[str, dict]) -> dict:
    """The worker pod as the pattern's template, and the leader's labels (its route and AIBrix labels) as
    the leader's patch: for SGLang the two pods differ in nothing else (policy/engines/sglang.py group_args).
    RecreateRoleInstanceOnPodRestart is the default for this pattern (api/workloads/v1alpha2/helper.go
    GetRestartPolicy) and written out, as the failure domain depends on it."""
    leader, worker = templates["leader"], templates["worker"]
    leader_labels = {k: v for k, v in leader["metadata"]["labels"].items()
                     if worker["metadata"]["labels"].get(k) != v}
    return {"roles": [{
        "name": ROLE_NAME, "replicas": model.replicas,
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}},
        "leaderWorkerPattern": {"size": group_size(model), "restartPolicy": RECREATE_INSTANCE, "template": worker,
                                "leaderTemplatePatch": {"metadata": {"labels": leader_labels}}}}]}


class RoleBasedGroup(Orchestrator):
    name = "rolebasedgroup"
    api_version = "workloads.x-k8s.io/v1alpha2"
    kind = "RoleBasedGroup"
    # RoleBasedGroup -> RoleInstanceSet -> RoleInstance -> pod (RBG v0.7.0, the role's default workload).
    pod_controller = "RoleInstance"
    group_engines = frozenset({"sglang"})
    group_label = INSTANCE_LABEL
    group_restart = ("RecreateRoleInstanceOnPodRestart: a pod in phase Failed or a restarted container recreates "
                     "the whole RoleInstance (every pod of the group), once the instance has been Ready and no "
                     "update is under way (rbg v0.7.0 pkg/reconciler/roleinstance/sync/instance_scale.go "
                     "shouldRecreateInstance); a deleted pod is replaced alone, and a crash before the group was "
                     "first Ready restarts only that container")
    # For plan.md (render/multinode_md.py): what the controller makes of a group workload and what the cluster
    # needs for it, with each gang scheduler's pod group; {name}, {nodes}, {last}, {workers}, {pods} filled in there.
    group_creates = ('a RoleInstanceSet `{name}-server` with one RoleInstance per group (`{name}-server-<i>`), '
                     'each making its leader pod `<instance>-0` and its {workers} `<instance>-1` on (rbg v0.7.0 '
                     'pkg/reconciler/roleinstanceset_reconciler.go '
                     'constructRoleInstanceTemplateByLeaderWorkerPattern)')
    controller_needs = 'RBG v0.7.0 (its RoleInstanceSet and RoleInstance CRDs)'
    gang_objects = {
        'coscheduling': ('RBG creates ONE scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) `{name}` '
                             'for the whole RoleBasedGroup, minMember replicas x size = {pods}: every group is '
                             'scheduled together with the others (rbg v0.7.0 api/workloads/v1alpha2/helper.go '
                             'GetGroupSize, pkg/scheduler/k8s-scheduler-plugin/manager.go)'),
        'volcano': ('RBG creates ONE Volcano PodGroup `{name}` for the whole RoleBasedGroup, minMember '
                        'replicas x size = {pods} (rbg v0.7.0 pkg/scheduler/volcano/manager.go)'),
    }
    gang_needs = {
        'coscheduling': ('scheduler-plugins as a second scheduler with the Coscheduling plugin and its '
                             'PodGroup CRD installed before the RBG (else the RBG\'s reconcile fails: "scheduling '
                             'plugin podgroups.scheduling.x-k8s.io not ready"), and the RBG controller run with '
                             '--scheduler-name scheduler-plugins (its default)'),
        'volcano': 'Volcano, and the RBG controller run with --scheduler-name volcano',
    }

    def spec(self, model: ServedModel, template: dict) -> dict:
        return rolebasedgroup_spec(model, template)

    def wait_for(self, model: ServedModel) -> str:
        return rolebasedgroup_wait_for()

    def group_refusal(self, engine: str) -> str:
        return "this program runs only SGLang on a RoleBasedGroup (field report 12)"

    def group_spec(self, model: ServedModel, templates: dict[str, dict], gang: object) -> dict:
        return rolebasedgroup_group_spec(model, templates)

    def group_annotations(self, model: ServedModel, gang: object) -> dict[str, str]:
        if getattr(gang, "scheduler", None) not in self.gang_schedulers:
            return {}
        out = {GANG_ANNOTATION: "true"}
        if gang.timeout_seconds is not None:
            out[GANG_TIMEOUT_ANNOTATION] = str(gang.timeout_seconds)
        return out

    def group_identity(self, model: ServedModel, namespace: str) -> GroupIdentity:
        return GroupIdentity(rank="$(RBG_LWP_WORKER_INDEX)", rank_env="RBG_LWP_WORKER_INDEX",
                             leader_address="$(RBG_LWP_LEADER_ADDRESS)")

    def leader_selector(self, model: ServedModel) -> dict[str, str]:
        return {COMPONENT_LABEL: "leader"}

    def autoscale_refusal(self, model: ServedModel) -> str | None:
        return ("AIBrix v0.7.0's PodAutoscaler reads and writes its target's spec.replicas (pkg/controller/"
                "podautoscaler/workload_scale.go), which a RoleBasedGroup does not have (replicas per role), and "
                "its controller's ClusterRole grants nothing on workloads.x-k8s.io (config/rbac/controller-manager/"
                "role.yaml)")


ORCHESTRATOR = RoleBasedGroup()
