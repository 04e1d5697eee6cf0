"""A LeaderWorkerSet (kubernetes-sigs/lws v0.10.0, leaderworkerset.x-k8s.io/v1) for a model spanning
nodes: replicas groups of `size` pods, a leader template and a worker template (facts read at that tag,
pinned in tests/upstream_lws.py). It runs only such models; a model that fits one node runs on the
orchestrators the field report validated."""

from __future__ import annotations

from components.orchestrators.base import GroupIdentity, Orchestrator
from components.topologies import group_size
from config_model import ServedModel

API_VERSION = "leaderworkerset.x-k8s.io/v1"
# The pod webhook labels the leader worker-index "0" and every pod of a group with its group-key
# (pkg/webhooks/pod_webhook.go Default), and injects LWS_LEADER_ADDRESS (<lws>-<group>.<lws>.<namespace>)
# and LWS_WORKER_INDEX into every container (pkg/utils/pod/pod_utils.go AddLWSVariables).
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
RECREATE_GROUP = "RecreateGroupOnPodRestart"


def leaderworkerset_spec(model: ServedModel, templates: dict[str, dict]) -> dict:
    """Every default the controller depends on written out: without the LWS defaulting webhook an omitted
    rollingUpdateConfiguration stays nil and the controller dereferences it (pkg/controllers/
    leaderworkerset_controller.go rollingUpdateParameters), and the failure domain depends on restartPolicy.
    maxUnavailable and maxSurge count groups; surge 0 keeps the GPU count flat during a rollout. startupPolicy
    LeaderCreated creates the workers with the leader, so a gang scheduler sees the whole group at once
    (LeaderReady would make Volcano's minMember 1: pkg/schedulerprovider/volcano_provider.go)."""
    return {
        "replicas": model.replicas,
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {"size": group_size(model), "restartPolicy": RECREATE_GROUP,
                                 "leaderTemplate": templates["leader"], "workerTemplate": templates["worker"]},
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "partition": 0, "maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}},
        "networkConfig": {"subdomainPolicy": "Shared"},
    }


class LeaderWorkerSet(Orchestrator):
    name = "leaderworkerset"
    api_version = API_VERSION
    kind = "LeaderWorkerSet"
    # LeaderWorkerSet -> leader StatefulSet -> leader pod -> worker StatefulSet -> worker pods.
    pod_controller = "StatefulSet"
    single_node = False
    group_engines = frozenset({"vllm", "sglang"})
    group_label = GROUP_KEY_LABEL
    group_restart = ("RecreateGroupOnPodRestart: a restarted container or a deleted pod (eviction, drain, node loss) "
                     "anywhere in a group deletes its leader, and the whole group is created again (lws v0.10.0 "
                     "pkg/controllers/pod_controller.go handleRestartPolicy); a pod Failed without a container "
                     "restart is not seen")
    # For plan.md (render/multinode_md.py): what the controller makes of a group workload and what the cluster
    # needs for it, with each gang scheduler's pod group; {name}, {nodes}, {last}, {workers}, {pods} filled in there.
    group_creates = ("per group a leader pod (`{name}-<group>`, from the LeaderWorkerSet's leader StatefulSet) and "
                     'a worker StatefulSet `{name}-<group>` of its {workers} (`{name}-<group>-1` on), all behind '
                     'the headless Service `{name}` (lws v0.10.0 pkg/controllers/leaderworkerset_controller.go, '
                     'pod_controller.go)')
    controller_needs = ('the LeaderWorkerSet v0.10.0 controller and CRD with its webhooks (the pod webhook, '
                        'failurePolicy Fail, sets the group labels and LWS_LEADER_ADDRESS / LWS_WORKER_INDEX; the '
                        'controller rotates their certificates itself, no cert-manager)')
    # v0.10.0's only gang provider is Volcano, chosen in the controller's configuration
    # (pkg/schedulerprovider/interface.go SupportedSchedulerProviders), never on the object.
    gang_objects = {
        'volcano': ('the LeaderWorkerSet controller, run with gangSchedulingManagement.schedulerProvider: '
                        'volcano, creates one Volcano PodGroup (scheduling.volcano.sh/v1beta1) per group and '
                        'revision, minMember {nodes}, owned by the leader pod (lws v0.10.0 '
                        'pkg/schedulerprovider/volcano_provider.go); nothing on the object asks for it'),
    }
    gang_needs = {
        'volcano': ("Volcano running as the pods' scheduler, and the LeaderWorkerSet controller configured "
                        'with gangSchedulingManagement.schedulerProvider: volcano and RBAC on '
                        'scheduling.volcano.sh podgroups (its Helm value and config/components/volcano)'),
    }

    def spec(self, model: ServedModel, template: dict) -> dict:
        raise ValueError(f"{model.name}: a LeaderWorkerSet runs models spanning nodes only")

    def group_spec(self, model: ServedModel, templates: dict[str, dict], gang: object) -> dict:
        return leaderworkerset_spec(model, templates)

    def wait_for(self, model: ServedModel) -> str:
        """Available: every one of spec.replicas groups ready and, partition 0, every group updated
        (leaderworkerset_controller.go updateConditions, reason AllGroupsReady), written with
        observedGeneration. readyReplicas alone would count surge groups."""
        return "condition=Available"

    def group_identity(self, model: ServedModel, namespace: str) -> GroupIdentity:
        return GroupIdentity(rank="$(LWS_WORKER_INDEX)", rank_env="LWS_WORKER_INDEX",
                             leader_address="$(LWS_LEADER_ADDRESS)")

    def leader_selector(self, model: ServedModel) -> dict[str, str]:
        return {WORKER_INDEX_LABEL: "0"}

    def autoscale_refusal(self, model: ServedModel) -> str | None:
        return "this program does not autoscale a model spanning nodes (stacks/rules/multinode.py)"


ORCHESTRATOR = LeaderWorkerSet()
