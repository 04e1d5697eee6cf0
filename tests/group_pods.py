"""The pods each controller makes of a rendered multi-node workload (issue 29), with the labels the controller
adds and the controller on their ownerReferences, for the tests that evaluate NetworkPolicies (tests/netpol.py)
and disruption budgets (tests/upstream_kubernetes.py) over a rendered stack. What each controller does is read
at its pinned tag (the files named below), written here from those sources and not from the program's own
constants, so a label the program expects and the controller never sets fails a test:

- LeaderWorkerSet (kubernetes-sigs/lws v0.10.0): group g's leader `<lws>-<g>` from leaderTemplate, owned by the
  leader StatefulSet `<lws>` (replicas = groups); its workers `<lws>-<g>-<i>` from workerTemplate, owned by the
  worker StatefulSet `<lws>-<g>` (replicas size - 1, itself owned by the leader pod: pkg/controllers/
  pod_controller.go constructWorkerStatefulSetApplyConfiguration). Labels (api/leaderworkerset/v1/
  leaderworkerset_types.go; pkg/webhooks/pod_webhook.go Default): name, worker-index ("0" for the leader),
  group-index, group-key (one per group) on every pod.
- RoleBasedGroup leaderWorkerPattern (sgl-project/rbg v0.7.0): one RoleInstance `<rbg>-<role>-<g>` per replica,
  owning its pods `<instance>-<i>`; the leader is the template with leaderTemplatePatch applied
  (pkg/reconciler/roleinstanceset_reconciler.go). Labels (api/workloads/constants/label.go,
  InitComponentPodLabels): component-name leader|worker, component-index, role-instance-name.
- StormService role with podGroupSize (vllm-project/aibrix v0.7.0): one PodSet per replica owning its pods
  `<podset>-<i>`, all from the role's one template (pkg/controller/podset/podset_controller.go
  createPodFromTemplate), labelled podset-name and pod-group-index.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.workloads import containers

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
RBG_COMPONENT_NAME = "rbg.workloads.x-k8s.io/component-name"
RBG_COMPONENT_INDEX = "rbg.workloads.x-k8s.io/component-index"
RBG_INSTANCE_NAME = "rbg.workloads.x-k8s.io/role-instance-name"
SS_PODSET_NAME = "stormservice.orchestration.aibrix.ai/podset-name"
SS_POD_GROUP_INDEX = "stormservice.orchestration.aibrix.ai/pod-group-index"

# The controller kind on each group pod's ownerReferences, and whether the disruption controller can read
# its count (a built-in StatefulSet through its lister; the others' CRDs have no /scale:
# ../shared/crds rbg/workloads.x-k8s.io_roleinstances.yaml, aibrix/orchestration.aibrix.ai_podsets.yaml).
OWNERS = {"LeaderWorkerSet": (("apps/v1", "StatefulSet"), ("apps/v1", "StatefulSet")),
          "RoleBasedGroup": (("workloads.x-k8s.io/v1alpha2", "RoleInstance"),) * 2,
          "StormService": (("orchestration.aibrix.ai/v1alpha1", "PodSet"),) * 2}


@dataclass(frozen=True)
class GroupPod:
    name: str
    namespace: str
    group: int                      # the replica (group) it belongs to
    rank: int                       # 0: the leader
    labels: dict[str, str]
    ports: dict[str, int]           # container port name -> number
    owner: tuple[str, str, str, int]   # (apiVersion, kind, name, that controller's replicas)

    @property
    def leader(self) -> bool:
        return self.rank == 0


def _ports(template: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for _, c in containers(template) for p in c.get("ports") or [] if "name" in p}


def _pod(obj: dict, name: str, g: int, rank: int, template: dict, extra: dict[str, str],
         owner: tuple[str, str, str, int]) -> GroupPod:
    labels = {**(template.get("metadata", {}).get("labels") or {}), **extra}
    return GroupPod(name, obj["metadata"]["namespace"], g, rank, labels, _ports(template), owner)


def group_pods(obj: dict) -> list[GroupPod]:
    """Every pod the controller makes of `obj` at steady state; [] for a workload that runs no groups."""
    kind, name, spec = obj["kind"], obj["metadata"]["name"], obj.get("spec") or {}
    pods = []
    if kind == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        replicas, size = spec.get("replicas", 1), lwt.get("size", 1)
        (leader_api, leader_kind), (worker_api, worker_kind) = OWNERS[kind]
        for g in range(replicas):
            common = {LWS_NAME: name, LWS_GROUP_INDEX: str(g), LWS_GROUP_KEY: f"key-{name}-{g}"}
            pods.append(_pod(obj, f"{name}-{g}", g, 0, lwt.get("leaderTemplate") or lwt["workerTemplate"],
                             {**common, LWS_WORKER_INDEX: "0"}, (leader_api, leader_kind, name, replicas)))
            pods += [_pod(obj, f"{name}-{g}-{i}", g, i, lwt["workerTemplate"], {**common, LWS_WORKER_INDEX: str(i)},
                          (worker_api, worker_kind, f"{name}-{g}", size - 1)) for i in range(1, size)]
    elif kind == "RoleBasedGroup":
        for role in spec["roles"]:
            lwp = role.get("leaderWorkerPattern")
            if lwp is None:
                continue
            api, ctrl = OWNERS[kind][0]
            for g in range(role.get("replicas", 1)):
                instance = f"{name}-{role['name']}-{g}"
                for i in range(lwp.get("size", 1)):
                    template = lwp["template"]
                    if i == 0:
                        patch = (lwp.get("leaderTemplatePatch") or {}).get("metadata", {}).get("labels") or {}
                        template = {**template, "metadata": {**template.get("metadata", {}), "labels": {
                            **(template.get("metadata", {}).get("labels") or {}), **patch}}}
                    pods.append(_pod(obj, f"{instance}-{i}", g, i, template, {
                        RBG_COMPONENT_NAME: "leader" if i == 0 else "worker", RBG_COMPONENT_INDEX: str(i),
                        RBG_INSTANCE_NAME: instance}, (api, ctrl, instance, 1)))
    elif kind == "StormService":
        for role in spec["template"]["spec"]["roles"]:
            size = role.get("podGroupSize") or 1
            if size <= 1:
                continue
            api, ctrl = OWNERS[kind][0]
            for g in range(role.get("replicas", 1)):
                podset = f"{name}-roleset-{role['name']}-{g}"
                pods += [_pod(obj, f"{podset}-{i}", g, i, role["template"],
                              {SS_PODSET_NAME: podset, SS_POD_GROUP_INDEX: str(i)}, (api, ctrl, podset, size))
                         for i in range(size)]
    return pods
