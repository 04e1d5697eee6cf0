"""LeaderWorkerSet v0.10.0 behaviour the stacks depend on (github.com/kubernetes-sigs/lws, tag v0.10.0, commit
2161f38ff333f9e24d3c44adef7cd5d9787cac00): the one place a maintainer re-checks when the LeaderWorkerSet
release moves (components/orchestrators/leaderworkerset.py; the CRD in ../shared/crds/lws is the same tag).

Read with `git -C <mirror> show v0.10.0:<path>`. The controller cannot run here (its Go module's zip is refused
by the proxy: /work/briefs/facts-lws-rbg.md section 7), so its behaviour is pinned as text: SOURCE holds, for
each fact, the line of the file it comes from, and tests/test_multinode_upstream.py finds each line at the tag
where the mirror is present.
"""

from __future__ import annotations

TAG = "v0.10.0"

PORTED_FROM = {
    "repo": "kubernetes-sigs/lws", "release": TAG,
    "not_deployed": "no stack installs the LeaderWorkerSet controller (components/platform.py); the LeaderWorkerSet "
                    "objects are rendered for this release and validated against its CRD (../shared/crds/lws)",
    "files": ("api/leaderworkerset/v1/leaderworkerset_types.go", "pkg/utils/pod/pod_utils.go",
              "pkg/webhooks/pod_webhook.go", "pkg/webhooks/leaderworkerset_webhook.go",
              "pkg/controllers/leaderworkerset_controller.go", "pkg/controllers/pod_controller.go",
              "pkg/schedulerprovider/interface.go", "pkg/schedulerprovider/volcano_provider.go",
              "docs/examples/sample/gang-scheduling/lws-sample-volcano.yaml"),
}

TYPES = "api/leaderworkerset/v1/leaderworkerset_types.go"
POD_UTILS = "pkg/utils/pod/pod_utils.go"
LWS_CONTROLLER = "pkg/controllers/leaderworkerset_controller.go"
POD_CONTROLLER = "pkg/controllers/pod_controller.go"

# ---- what the pod webhook puts into every container, first and in this order (AddLWSVariables,
# addEnvVarsIfNotExists: a variable of the template with the same name is dropped) ----
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
INJECTED_ENV = (LEADER_ADDRESS_ENV, GROUP_SIZE_ENV, WORKER_INDEX_ENV)

# ---- labels (types.go) ----
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
# "0" on the leader, 1..size-1 on the workers; the leader pods are name=<lws>,worker-index=0 (status.hpaPodSelector).
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
# sha1 of <namespace>/<leader pod name>: one value per group, on every pod of it.
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"

# ---- restart and startup policies (types.go; the CRD defaults them) ----
RESTART_POLICIES = ("Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None")
DEFAULT_RESTART_POLICY = "RecreateGroupOnPodRestart"
# pod_controller.go handleRestartPolicy: only these two recreate the group (deleting its leader, foreground).
GROUP_RECREATING = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")
STARTUP_POLICIES = ("LeaderCreated", "LeaderReady")
DEFAULT_STARTUP_POLICY = "LeaderCreated"

# ---- gang scheduling: a controller option, Volcano only (pkg/schedulerprovider/interface.go); one Volcano
# PodGroup per group, minMember = size, or 1 with startupPolicy LeaderReady (volcano_provider.go). The controller
# never sets schedulerName: the templates must (the sample's comment). ----
GANG_PROVIDERS = frozenset({"volcano"})
VOLCANO_SCHEDULER_NAME = "volcano"


def volcano_min_member(size: int, startup_policy: str) -> int:
    """pkg/schedulerprovider/volcano_provider.go CreatePodGroupIfNotExists."""
    return 1 if startup_policy == "LeaderReady" else size


def leader_address(lws: str, group: int, subdomain: str, namespace: str) -> str:
    """AddLWSVariables: "%s-%s.%s.%s" of the name label, the group-index label, the pod's subdomain and namespace.
    With subdomainPolicy Shared both StatefulSets' serviceName is the LWS's name, so the subdomain is <lws>."""
    return f"{lws}-{group}.{subdomain}.{namespace}"


def injected_env(lws: str, group: int, namespace: str, size: int, worker_index: int) -> list[dict]:
    """The variables the webhook puts first into a container of worker `worker_index` of group `group`
    (subdomainPolicy Shared): the leader's address, the size annotation, the worker-index label."""
    return [{"name": LEADER_ADDRESS_ENV, "value": leader_address(lws, group, lws, namespace)},
            {"name": GROUP_SIZE_ENV, "value": str(size)}, {"name": WORKER_INDEX_ENV, "value": str(worker_index)}]


# ---- the defaulting webhook fills rolloutStrategy.rollingUpdateConfiguration; the CRD cannot (no default on the
# rolloutStrategy object), and the controller dereferences it unconditionally: a LeaderWorkerSet that omits it
# panics the controller when the webhook is not there (why components/orchestrators/leaderworkerset.py writes it). ----
ROLLING_UPDATE_DEREFERENCED = (
    (LWS_CONTROLLER, "*lws.Spec.RolloutStrategy.RollingUpdateConfiguration.Partition"),
    (LWS_CONTROLLER, "&lws.Spec.RolloutStrategy.RollingUpdateConfiguration.MaxSurge"),
    (LWS_CONTROLLER, "&lws.Spec.RolloutStrategy.RollingUpdateConfiguration.MaxUnavailable"),
)

# Each fact above as the line of source it comes from: (file at TAG, text the file holds).
SOURCE = (
    (TYPES, 'LwsLeaderAddress string = "LWS_LEADER_ADDRESS"'),
    (TYPES, 'LwsGroupSize string = "LWS_GROUP_SIZE"'),
    (TYPES, 'LwsWorkerIndex string = "LWS_WORKER_INDEX"'),
    (POD_UTILS, "addEnvVarsIfNotExists(&pod.Spec.Containers[i], leaderAddressEnvVar, sizeEnvVar, workerIndexEnvVar)"),
    (POD_UTILS, 'Value: fmt.Sprintf("%s-%s.%s.%s", lwsName, groupIndex, pod.Spec.Subdomain, pod.ObjectMeta.Namespace)'),
    (TYPES, f'SetNameLabelKey string = "{NAME_LABEL}"'),
    (TYPES, f'GroupIndexLabelKey string = "{GROUP_INDEX_LABEL}"'),
    (TYPES, f'WorkerIndexLabelKey string = "{WORKER_INDEX_LABEL}"'),
    (TYPES, f'GroupUniqueHashLabelKey string = "{GROUP_KEY_LABEL}"'),
    (TYPES, '// +kubebuilder:default=RecreateGroupOnPodRestart'),
    (TYPES, '// +kubebuilder:validation:Enum={Default,RecreateGroupOnPodRestart,RecreateGroupAfterStart,None}'),
    (TYPES, '// +kubebuilder:default=LeaderCreated'),
    (POD_CONTROLLER, "if policy != leaderworkerset.RecreateGroupOnPodRestart && policy != "
                     "leaderworkerset.RecreateGroupAfterStart {"),
    (POD_CONTROLLER, "if !podutils.ContainerRestarted(pod) && !podutils.PodDeleted(pod) {"),
    ("pkg/schedulerprovider/interface.go", 'SupportedSchedulerProviders = sets.New("volcano")'),
    ("pkg/schedulerprovider/volcano_provider.go", "MinMember:    *lws.Spec.LeaderWorkerTemplate.Size,"),
    ("pkg/schedulerprovider/volcano_provider.go", "if lws.Spec.StartupPolicy == leaderworkerset.LeaderReadyStartupPolicy {"),
    ("docs/examples/sample/gang-scheduling/lws-sample-volcano.yaml", "schedulerName: volcano"),
    *ROLLING_UPDATE_DEREFERENCED,
)
