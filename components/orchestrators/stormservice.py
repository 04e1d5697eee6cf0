"""An AIBrix StormService (field report 11.1): one RoleSet, one `server` role, maxSurge 0 at both levels;
in replica mode (autoscaled) one RoleSet per pod."""

from __future__ import annotations

import json

from components.base import AIBRIX_ORCHESTRATION_API
from components.orchestrators.base import GROUP_ROLE, GroupIdentity, Orchestrator, selector
from components.topologies import group_size
from config_model import ServedModel

ROLE_NAME = "server"


def stormservice_wait_for() -> str:
    """Ready, and the one RoleSet counted in updatedReadyReplicas: of the update revision with every
    role's pods updated AND ready (aibrix v0.7.0 pkg/controller/stormservice/sync.go updateStatus,
    utils.go isAllRoleUpdatedAndReady); Ready alone counts a RoleSet whose updated pods are not ready
    yet. Both are written with observedGeneration, which the provider compares with the generation
    before it believes either (pulumi-kubernetes v4.32.0 provider/pkg/await/condition/kubectl.go,
    jsonpath.go). A list is an AND (provider/pkg/metadata/overrides.go ReadyCondition)."""
    return json.dumps(["condition=Ready", "jsonpath={.status.updatedReadyReplicas}=1"])


def stormservice_replica_wait_for() -> str:
    """Ready alone, in replica mode: the autoscaler moves spec.replicas, so no fixed count of
    updatedReadyReplicas can be written here. Ready needs status.replicas and updatedReplicas equal to
    spec.replicas and readyReplicas at least that (aibrix v0.7.0 stormservice/sync.go updateStatus): every
    RoleSet of the update revision and RoleSet-Ready. Replica mode never updates a RoleSet in place
    (rollingUpdate deletes and creates; only inPlaceUpdate calls updateRoleSet), so a RoleSet of the
    update revision was created at it and its Ready (roleset/sync.go calculateStatus: every role's
    readyReplicas reaches its replicas) speaks of that revision's pods only."""
    return "condition=Ready"


def replica_mode(model: ServedModel) -> bool:
    """An autoscaled StormService runs in replica mode: one RoleSet per pod, counted by the top-level
    spec.replicas that AIBrix v0.7.0's PodAutoscaler scales (components/autoscaling.py)."""
    return model.orchestrator == "stormservice" and model.autoscaling.enabled


def stormservice_spec(model: ServedModel, template: dict) -> dict:
    """Pooled mode: one RoleSet (replicas 1) with one role serving the whole model per pod. Pooled
    mode updates that one RoleSet in place, which then rolls its role pods by the role's strategy:
    RollingUpdate at this level would replace the only RoleSet, every pod at once (aibrix v0.7.0
    pkg/controller/stormservice/sync.go rollingUpdate "for replica mode", inPlaceUpdate "in pooled
    mode").

    Replica mode (autoscaled): spec.replicas RoleSets of one pod each. Top-level RollingUpdate deletes
    outdated RoleSets down to spec.replicas - maxUnavailable ready ones, then creates new ones up to
    spec.replicas + maxSurge (sync.go rollingUpdate, utils.go MinAvailable/MaxSurge); with maxSurge 0 the
    pod, and GPU, count never rises. InPlaceUpdate here would update every RoleSet at once, each rolling
    its only pod: all pods down together. The role keeps maxSurge 0 too, which the budget reads.

    Switching modes changes spec.replicas, and v0.7.0 scales before it rolls out (sync.go scaling):
    at replicas 1 one RoleSet replaces one; at N, pooled -> replica starts N-1 RoleSets beside the
    pooled N pods (README: switch at replicas 1)."""
    no_surge = {"maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}
    replicas = replica_mode(model)
    return {
        "replicas": model.replicas if replicas else 1,
        "selector": {"matchLabels": selector(model)},
        # maxSurge 0 in both modes: scaling() creates RoleSets up to spec.replicas + maxSurge (stormservice/sync.go).
        "updateStrategy": {"type": "RollingUpdate" if replicas else "InPlaceUpdate", **no_surge},
        "template": {"metadata": {"labels": selector(model)}, "spec": {"roles": [{
            "name": ROLE_NAME, "replicas": 1 if replicas else model.replicas, "stateful": False,
            "updateStrategy": no_surge, "template": template}]}},
    }


# ---- a model spanning nodes (issue 29; facts read at aibrix v0.7.0, pinned in tests/upstream_aibrix.py) ----
# A role with podGroupSize > 1 makes one PodSet per replica, and the PodSet its pods from the role's one
# template (pkg/controller/roleset/rolesyncer.go GetRoleSyncer, podset/podset_controller.go
# createPodFromTemplate), with POD_GROUP_INDEX and PODSET_NAME injected, hostname = pod name and subdomain =
# the StormService's headless Service: the leader is <podset>-0.<stormservice>.<namespace>.
GROUP_INDEX_LABEL = "stormservice.orchestration.aibrix.ai/pod-group-index"
PODSET_LABEL = "stormservice.orchestration.aibrix.ai/podset-name"


def stormservice_group_spec(model: ServedModel, template: dict, size: int, gang: object) -> dict:
    """Pooled mode, the role's replicas counting groups (roleset/sync.go calculateStatusFromPodSets) and its
    maxUnavailable too (podset_rollsyncer.go Rollout). Gang: one scheduler-plugins PodGroup per PodSet, whose
    minMember AIBrix copies as given and never derives (podset_controller.go reconcilePodGroup), so it is
    the group's size here."""
    # One template for every rank: the role label of the leader's would be wrong on the others.
    labels = {k: v for k, v in template["metadata"]["labels"].items() if k != GROUP_ROLE}
    spec = stormservice_spec(model, {**template, "metadata": {**template["metadata"], "labels": labels}})
    role = spec["template"]["spec"]["roles"][0]
    role["podGroupSize"] = size
    if getattr(gang, "scheduler", None) == "coscheduling":
        strategy = {"minMember": size}
        if gang.timeout_seconds is not None:
            strategy["scheduleTimeoutSeconds"] = gang.timeout_seconds
        role["schedulingStrategy"] = {"coschedulingSchedulingStrategy": strategy}
    return spec


class StormService(Orchestrator):
    name = "stormservice"
    api_version = AIBRIX_ORCHESTRATION_API
    kind = "StormService"
    pod_controller = "RoleSet"
    # With podGroupSize > 1 the RoleSet makes PodSets, and each PodSet its pods (podset_controller.go).
    group_pod_controller = "PodSet"
    group_engines = frozenset({"sglang"})
    group_label = PODSET_LABEL
    group_restart = ("AIBrix v0.7.0 replaces only a pod that is gone, under the same name "
                     "(pkg/controller/podset/podset_controller.go handleReplaceUnhealthy), deleting the group's pods "
                     "whose containers restarted first; a group whose container restarts in place, with every pod "
                     "still there, is left as it is, and a pod in phase Failed is never replaced (its name is "
                     "taken). The route reaches rank 0 only, and the group serves again once every rank has "
                     "rejoined its leader")
    # For plan.md (render/multinode_md.py): what the controller makes of a group workload and what the cluster
    # needs for it, with each gang scheduler's pod group; {name}, {nodes}, {last}, {workers}, {pods} filled in there.
    group_creates = ('one RoleSet whose role `server` (podGroupSize {nodes}) makes one PodSet per group, and each '
                     'PodSet its {nodes} pods `<podset>-0` to `<podset>-{last}`; pod 0 is the leader, reached as '
                     "`<podset>-0.{name}.<namespace>` through the StormService's headless Service (aibrix v0.7.0 "
                     'pkg/controller/roleset/rolesyncer.go GetRoleSyncer, podset/podset_controller.go)')
    controller_needs = ('AIBrix v0.7.0 with the PodSet CRD (podsets.orchestration.aibrix.ai, in its core CRD '
                        'bundle)')
    gang_objects = {
        'coscheduling': ('AIBrix creates one scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) per '
                             "PodSet, that is per group, with the role's minMember {nodes} as this program writes "
                             'it (aibrix v0.7.0 pkg/controller/podset/podset_controller.go reconcilePodGroup); '
                             'without the PodGroup CRD it skips this silently and the group is not ganged'),
    }
    gang_needs = {
        'coscheduling': ("scheduler-plugins v0.31.8 (the version AIBrix v0.7.0's go.mod pins) as a second "
                             'scheduler with the Coscheduling plugin, and its PodGroup CRD '
                             "(podgroups.scheduling.x-k8s.io); the AIBrix controller's RBAC on podgroups: "
                             "config/rbac/controller-manager/role.yaml grants it, the v0.7.0 Helm chart's "
                             'rbac.yaml does not'),
    }

    def spec(self, model: ServedModel, template: dict) -> dict:
        return stormservice_spec(model, template)

    def wait_for(self, model: ServedModel) -> str:
        return stormservice_replica_wait_for() if replica_mode(model) else stormservice_wait_for()

    def autoscaler_owns_replicas(self, model: ServedModel) -> bool:
        return replica_mode(model)

    def autoscale_target(self, model: ServedModel) -> dict | None:
        """The whole object: without subTargetSelector AIBrix v0.7.0 scales its top-level spec.replicas
        (replica mode, components/autoscaling.py). Role-level scaling stays out: v0.7.0 patches
        spec.template.spec.roles[].replicas (workload_scale.go setDesiredReplicasForRole), inside a list
        Pulumi applies whole at every update and cannot leave to the autoscaler (pulumi-kubernetes v4.32.0
        provider/pkg/await/await.go: ignoreChanges cannot name a field inside a list)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "name": model.name}

    def group_refusal(self, engine: str) -> str:
        return ("AIBrix v0.7.0 builds every pod of a group from the role's one template (podset_controller.go "
                "createPodFromTemplate), and vLLM 0.33.0's worker ranks run --headless with no port a TCP probe "
                "could reach (vllm/entrypoints/cli/serve.py run_headless): the group would never be Ready")

    def group_spec(self, model: ServedModel, templates: dict[str, dict], gang: object) -> dict:
        return stormservice_group_spec(model, templates["leader"], group_size(model), gang)

    def group_identity(self, model: ServedModel, namespace: str) -> GroupIdentity:
        return GroupIdentity(rank="$(POD_GROUP_INDEX)", rank_env="POD_GROUP_INDEX",
                             # The StormService's name is the model's: only PODSET_NAME is injected first.
                             leader_address=f"$(PODSET_NAME)-0.{model.name}.{namespace}")

    def leader_selector(self, model: ServedModel) -> dict[str, str]:
        return {GROUP_INDEX_LABEL: "0"}


ORCHESTRATOR = StormService()
