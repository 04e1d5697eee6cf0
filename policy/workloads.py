"""Find the pod templates inside any workload manifest, whatever its kind.

Policies and the plan read pods through this one function, so a new workload kind (StormService
roles, RayClusterFleet head and workers, RoleBasedGroup roles) is taught here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from policy import gpu_accounting
from policy.unknowns import UNKNOWN, UnknownTouched, decide, each, is_unknown, known_or_unknown

GPU = "nvidia.com/gpu"
# Every extended resource the pack counts as a GPU, whatever the vendor's device plugin: NVIDIA
# (NVIDIA/k8s-device-plugin), AMD (ROCm/k8s-device-plugin) and Intel (intel/intel-device-plugins-for-
# kubernetes cmd/gpu_plugin: i915 and xe). A fixed list, not one the stack declares: the per-resource
# rules (GPU-free DaemonSets and Jobs) see one manifest alone, and a workload of another program, or one
# registered before the stack's facts, must be counted by the budget all the same. A model's
# gpuResourceName must be one of these (config_model/resources.py), so nothing the program renders
# escapes the count; a new vendor is one entry here.
GPU_RESOURCES = (GPU, "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")


@dataclass(frozen=True)
class PodTemplateRef:
    path: str             # dotted path of the template inside the manifest
    template: dict        # the PodTemplateSpec (metadata + spec)
    replicas: int         # pods this template runs at steady state
    surge: int            # extra pods the rollout strategy allows
    overshoot: int = 0    # extra pods a controller is known to start anyway (annotation, field report 11.2)
    # Variables the controller puts into every container of these pods itself, which $(VAR) in their argv and
    # env may name (issue 29: a group pod's rank and leader address; GROUP_ENV).
    injected_env: tuple[str, ...] = ()
    # A template only the workers of a group run (a LeaderWorkerSet workerTemplate beside its leaderTemplate): a vLLM
    # worker rank runs --headless and serves no port (policy/pod_rules.py). Not StormService's one template or
    # RBG's leaderWorkerPattern template, which the leader runs too.
    group_worker: bool = False
    # Labels the group's leader carries beside the template's (RBG's labels-only leaderTemplatePatch): its served
    # name, which the template of every pod leaves out (render/update_impact.py reads it).
    leader_labels: tuple[tuple[str, str], ...] = ()

    @property
    def extra_pods(self) -> int:
        return self.surge + self.overshoot


# ---- what each controller injects into the containers of a group's pods (issue 29) ----
# AIBrix v0.7.0, a role with podGroupSize > 1: PODSET_NAME, POD_GROUP_INDEX, POD_GROUP_SIZE first in every
# container (pkg/controller/podset/podset_controller.go createPodFromTemplate), then the roleset's own
# (pkg/controller/roleset/utils.go injectContainerEnvVars).
STORMSERVICE_GROUP_ENV = ("PODSET_NAME", "POD_GROUP_INDEX", "POD_GROUP_SIZE", "STORM_SERVICE_NAME", "ROLESET_NAME",
                          "ROLESET_INDEX", "ROLE_NAME", "ROLE_TEMPLATE_HASH", "ROLE_REPLICA_INDEX")
# LWS v0.10.0, at the front of every container (pkg/utils/pod/pod_utils.go AddLWSVariables, by its pod webhook).
LWS_GROUP_ENV = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")
# RBG v0.7.0 leaderWorkerPattern: its variables before the pod's own (pkg/discovery/injector.go mergeEnvVars;
# env_builder.go buildLocalRoleVars, BuildLwsEnv).
RBG_GROUP_ENV = ("RBG_GROUP_NAME", "RBG_ROLE_NAME", "RBG_ROLE_INDEX", "RBG_ROLE_INSTANCE_NAME", "RBG_COMPONENT_NAME",
                 "RBG_COMPONENT_INDEX", "RBG_LWP_LEADER_ADDRESS", "RBG_LWP_WORKER_INDEX", "RBG_LWP_GROUP_SIZE")


def _int(value: Any, default: int) -> Any:
    """An integer field; an unknown one stays unknown (counts built on it are unknown too)."""
    if value is None:
        return default
    return UNKNOWN if is_unknown(value) else int(value)


def _surge(value: Any, replicas: Any) -> Any:
    """maxSurge as pods (policy/gpu_accounting.py surge_pods); UNKNOWN when it is unknown."""
    if is_unknown(value):
        return UNKNOWN
    return gpu_accounting.surge_pods(value, replicas)


def _deployment_surge(spec: dict) -> Any:
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    replicas = _int(spec.get("replicas"), 1)
    return _surge((strategy.get("rollingUpdate") or {}).get("maxSurge", "25%"), replicas)


def _count(read, default: int) -> Any:
    """An integer read from a manifest: its value, the default when absent, UNKNOWN when unknown."""
    return known_or_unknown(lambda: _int(read(), default))


def _stormservice_templates(spec: dict) -> list[PodTemplateRef]:
    """Roles of spec.template; a missing role or top-level maxSurge is counted as one pod, since
    the AIBrix CRD sets no default and its controller was seen to overshoot (field report 11.2)."""
    role_sets = _count(lambda: spec.get("replicas"), 1)
    top_surge = known_or_unknown(lambda: (spec.get("updateStrategy") or {}).get("maxSurge", 1))
    refs = []
    roles = each(known_or_unknown(lambda: ((spec.get("template") or {}).get("spec") or {}).get("roles")))

    def role_ref(i: int, role: dict) -> list[PodTemplateRef]:
        # With podGroupSize, replicas and maxSurge count groups of that many pods (aibrix v0.7.0
        # pkg/controller/roleset/sync.go calculateStatusFromPodSets, podset_rollsyncer.go Rollout).
        group = _count(lambda: role.get("podGroupSize"), 1)
        replicas = _count(lambda: role.get("replicas"), 1)
        role_surge = known_or_unknown(lambda: (role.get("updateStrategy") or {}).get("maxSurge", 1))
        surge = known_or_unknown(lambda: _surge(role_surge, replicas) * role_sets + _surge(top_surge, role_sets) * replicas)
        injected = STORMSERVICE_GROUP_ENV if not is_unknown(group) and group > 1 else ()
        return [PodTemplateRef(f"spec.template.spec.roles[{i}].template", _template(role), replicas * role_sets * group,
                               known_or_unknown(lambda: surge * group), injected_env=injected)]

    for i, role in enumerate(roles):
        refs += decide(role_ref, i, role)
    return refs


def _rayclusterfleet_templates(manifest: dict) -> list[PodTemplateRef]:
    """The head and worker groups of every RayCluster of the fleet. An unset maxSurge counts as one
    pod; the fleet's declared overshoot (llm-serving.io/rollout-overshoot-pods) is added too."""
    spec = manifest.get("spec") or {}
    clusters = _count(lambda: spec.get("replicas"), 1)
    surge_clusters = known_or_unknown(
        lambda: _surge(((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 1), clusters))
    overshoot_clusters = _count(lambda: ((manifest.get("metadata") or {}).get("annotations") or {})
                                .get("llm-serving.io/rollout-overshoot-pods"), 0)
    ray = known_or_unknown(lambda: (spec.get("template") or {}).get("spec") or {})
    head = known_or_unknown(lambda: ray.get("headGroupSpec") or {})
    refs = [PodTemplateRef("spec.template.spec.headGroupSpec.template", _template(head), clusters, surge_clusters,
                           overshoot_clusters)]

    def group_ref(i: int, group: dict) -> list[PodTemplateRef]:
        per_cluster = _count(lambda: group.get("replicas"), 0) * _count(lambda: group.get("numOfHosts"), 1)
        return [PodTemplateRef(f"spec.template.spec.workerGroupSpecs[{i}].template", _template(group),
                               per_cluster * clusters, per_cluster * surge_clusters, per_cluster * overshoot_clusters)]

    for i, group in enumerate(each(known_or_unknown(lambda: ray.get("workerGroupSpecs")))):
        refs += decide(group_ref, i, group)
    return refs


def _rolebasedgroup_templates(spec: dict) -> list[PodTemplateRef]:
    """Standalone and leader-worker roles; the CRD defaults maxSurge to 0."""
    def role_ref(i: int, role: dict) -> list[PodTemplateRef]:
        replicas = _count(lambda: role.get("replicas"), 1)
        surge = known_or_unknown(
            lambda: _surge(((role.get("rolloutStrategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 0), replicas))
        if "standalonePattern" in role:
            pattern = known_or_unknown(lambda: role["standalonePattern"] or {})
            path = f"spec.roles[{i}].standalonePattern"
            return [PodTemplateRef(_rbg_path(path, pattern), rbg_pattern_template(spec, pattern), replicas, surge)]
        if "leaderWorkerPattern" in role:
            # Every pod of an instance runs the role's template, with leaderTemplatePatch for the leader and
            # workerTemplatePatch for the size - 1 workers, each a strategic merge patch (rbg v0.7.0
            # pkg/reconciler/roleinstanceset_reconciler.go constructRoleInstanceTemplateByLeaderWorkerPattern).
            # policy/workload_rules.py group_patches_touch_metadata_only refuses a patch that touches anything but
            # the pods' labels and annotations (one giving the leader other resources, argv or probes would escape
            # the GPU count and every pod rule), so the template is every pod's, the leader's included: not a
            # group_worker view (a headless vLLM template would leave the leader serving nothing). One reference
            # per template, as render/ keys the templates by path.
            lwp = known_or_unknown(lambda: role["leaderWorkerPattern"] or {})
            size = _count(lambda: lwp.get("size"), 1)
            path = _rbg_path(f"spec.roles[{i}].leaderWorkerPattern", lwp)
            leader = known_or_unknown(lambda: ((lwp.get("leaderTemplatePatch") or {}).get("metadata") or {}).get("labels") or {})
            return [PodTemplateRef(path, rbg_pattern_template(spec, lwp), replicas * size, known_or_unknown(lambda: surge * size),
                                   injected_env=RBG_GROUP_ENV,
                                   leader_labels=() if is_unknown(leader) else tuple(sorted(leader.items())))]
        return []

    refs = []
    for i, role in enumerate(each(known_or_unknown(lambda: spec.get("roles")))):
        refs += decide(role_ref, i, role)
    return refs


def rbg_worker_views(spec: dict) -> list[tuple[str, Any]]:
    """(path, template) of what the workers of each leaderWorkerPattern role run, as far as the pack reads it: the
    template with workerTemplatePatch's labels and annotations (patched)."""
    out = []
    for i, role in enumerate(each(known_or_unknown(lambda: spec.get("roles")))):
        lwp = role.get("leaderWorkerPattern")
        if lwp:
            out.append((f"{_rbg_path(f'spec.roles[{i}].leaderWorkerPattern', lwp)} with workerTemplatePatch",
                        known_or_unknown(lambda: patched(rbg_pattern_template(spec, lwp), lwp.get("workerTemplatePatch")))))
    return out


def _rbg_path(pattern_path: str, pattern: dict) -> str:
    return f"{pattern_path}.templateRef" if "templateRef" in pattern else f"{pattern_path}.template"


def rbg_role_template(spec: dict, name: Any) -> Any:
    """spec.roleTemplates[name].template, None when no role template has that name."""
    found = [t for t in each(known_or_unknown(lambda: spec.get("roleTemplates"))) if t.get("name") == name]
    return found[0].get("template") or {} if found else None


def rbg_pattern_template(spec: dict, pattern: dict) -> Any:
    """A pattern's pod template: its own, or the role template its templateRef names with the ref's patch
    (rbg v0.7.0 api/workloads/v1alpha2/helper.go GetResolvedTemplate); {} when it names none (refused by
    group_patches_touch_metadata_only), UNKNOWN when unknown."""
    def resolve() -> Any:
        if "templateRef" not in pattern:
            return _template(pattern)
        ref = pattern["templateRef"] or {}
        base = rbg_role_template(spec, ref.get("name"))
        return {} if base is None else patched(base, ref.get("patch"))
    return known_or_unknown(resolve)


def patched(template: Any, patch: Any) -> Any:
    """template with a strategic merge patch's metadata.labels and .annotations merged in (maps merge, a null
    value deletes the key); the rest of the patch is not applied (group_patches_touch_metadata_only refuses it).
    Only the metadata is UNKNOWN when the patch or the template's metadata is."""
    if not patch:
        return template

    def metadata() -> dict:
        meta = dict(template.get("metadata") or {})
        for key in ("labels", "annotations"):
            change = (patch.get("metadata") or {}).get(key)
            if change:
                merged = {**(meta.get(key) or {}), **change}
                meta[key] = {k: v for k, v in merged.items() if v is not None}
        return meta
    return {**template, "metadata": known_or_unknown(metadata)}


def _leaderworkerset_templates(spec: dict) -> list[PodTemplateRef]:
    """replicas groups of `size` pods: one leader (leaderTemplate, else workerTemplate) and size - 1 workers.
    maxSurge counts groups, 0 when unset (CRD default; lws v0.10.0 api/leaderworkerset/v1)."""
    groups = _count(lambda: spec.get("replicas"), 1)
    lwt = known_or_unknown(lambda: spec.get("leaderWorkerTemplate") or {})
    size = _count(lambda: lwt.get("size"), 1)
    surge = known_or_unknown(lambda: _surge(
        ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("maxSurge", 0), groups))
    leader_path = "leaderTemplate" if lwt.get("leaderTemplate") else "workerTemplate"
    leader = known_or_unknown(lambda: lwt.get(leader_path) or {})
    refs = [PodTemplateRef(f"spec.leaderWorkerTemplate.{leader_path}", leader, groups, surge,
                           injected_env=LWS_GROUP_ENV)]
    workers = known_or_unknown(lambda: (size - 1) * groups)
    refs.append(PodTemplateRef("spec.leaderWorkerTemplate.workerTemplate",
                               known_or_unknown(lambda: lwt.get("workerTemplate") or {}), workers,
                               known_or_unknown(lambda: (size - 1) * surge), injected_env=LWS_GROUP_ENV,
                               group_worker=True))
    return refs


# ---- the labels a controller gives each pod of a group, beside its template's (issue 29) ----
# What a Service's or an InferencePool's selector matches at run time: the leader apart from the workers. LWS v0.10.0
# pkg/webhooks/pod_webhook.go Default: name and worker-index ("0" the leader, 1..size-1 the workers); RBG v0.7.0
# api/workloads/constants/label.go InitComponentPodLabels: component-name leader | worker; AIBrix v0.7.0
# pkg/controller/podset/podset_controller.go createPodFromTemplate: pod-group-index 0..podGroupSize-1, rank 0 the
# leader (tests/group_pods.py makes the pods from the same sources).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
RBG_COMPONENT_LABEL = "rbg.workloads.x-k8s.io/component-name"
STORMSERVICE_GROUP_INDEX_LABEL = "stormservice.orchestration.aibrix.ai/pod-group-index"


@dataclass(frozen=True)
class PodView:
    """The pods of one template as their controller labels them, a group's leader and its workers apart."""
    where: str            # the template's path, and which of its pods
    labels: dict
    template: dict
    worker: bool          # a group's non-leader pods (a Ray worker group's too): they serve no model


def pod_views(kind: str, manifest: dict) -> list[PodView]:
    """Every pod template's pods with the labels they run with; raises UnknownTouched when a template, its labels
    or the workload's name is unknown."""
    def view(where: str, template: dict, extra: dict, worker: bool = False) -> PodView:
        return PodView(where, {**((template.get("metadata") or {}).get("labels") or {}), **extra}, template, worker)
    out = []
    for ref in pod_templates(kind, manifest):
        if kind == "LeaderWorkerSet":
            if ref.group_worker and known_or_unknown(lambda r=ref: r.replicas == 0) is True:
                continue   # size 1: no worker pods
            name = (manifest.get("metadata") or {}).get("name")
            out.append(view(ref.path, ref.template, {LWS_NAME_LABEL: name, LWS_WORKER_INDEX_LABEL: "1" if ref.group_worker
                                                     else "0"}, ref.group_worker))
        elif kind == "RoleBasedGroup" and ".leaderWorkerPattern" in ref.path:
            out.append(view(f"{ref.path} (the leader, with leaderTemplatePatch)", ref.template,
                            {**dict(ref.leader_labels), RBG_COMPONENT_LABEL: "leader"}))
        elif kind == "StormService" and ref.injected_env:   # a role with podGroupSize > 1
            out += [view(f"{ref.path} (rank 0)", ref.template, {STORMSERVICE_GROUP_INDEX_LABEL: "0"}),
                    view(f"{ref.path} (ranks 1 and up)", ref.template, {STORMSERVICE_GROUP_INDEX_LABEL: "1"}, True)]
        else:
            out.append(view(ref.path, ref.template, {}, ".workerGroupSpecs[" in ref.path))
    if kind == "RoleBasedGroup":
        out += [view(path, t, {RBG_COMPONENT_LABEL: "worker"}, True) for path, t in rbg_worker_views(manifest.get("spec") or {})]
    return out


def _template(holder: dict) -> Any:
    """holder.template, {} when absent, UNKNOWN when unknown."""
    return known_or_unknown(lambda: holder.get("template") or {})


# The kinds pod_templates reads pods from.
POD_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "Pod", "StormService",
                       "RoleBasedGroup", "RayClusterFleet", "LeaderWorkerSet"})


def pod_templates(kind: str, manifest: dict) -> list[PodTemplateRef]:
    """Every pod template of a workload. Never raises on unknown values: a template, count or surge
    that is unknown during preview is UNKNOWN in the result, so only the checks that need it wait."""
    try:
        return _pod_templates(kind, manifest)
    except UnknownTouched:
        return []


def _pod_templates(kind: str, manifest: dict) -> list[PodTemplateRef]:
    spec = manifest.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        surge = known_or_unknown(lambda: _deployment_surge(spec)) if kind == "Deployment" else 0
        return [PodTemplateRef("spec.template", _template(spec), known_or_unknown(lambda: _int(spec.get("replicas"), 1)),
                               surge)]
    if kind == "DaemonSet":
        # One pod per matching node: a count no manifest states, so none is counted here, and
        # resource_rules.daemonsets_hold_no_gpus refuses a GPU in one (the budget could not bound it).
        return [PodTemplateRef("spec.template", _template(spec), 0, 0)]
    if kind == "Job":
        return [PodTemplateRef("spec.template", _template(spec), known_or_unknown(lambda: _int(spec.get("parallelism"), 1)),
                               0)]
    if kind == "Pod":
        return [PodTemplateRef("", {"metadata": manifest.get("metadata") or {}, "spec": spec}, 1, 0)]
    if kind == "StormService":
        return _stormservice_templates(spec)
    if kind == "RoleBasedGroup":
        return _rolebasedgroup_templates(spec)
    if kind == "RayClusterFleet":
        return _rayclusterfleet_templates(manifest)
    if kind == "LeaderWorkerSet":
        return _leaderworkerset_templates(spec)
    return []


def containers(template: dict) -> Iterator[tuple[str, dict]]:
    """(group, container) pairs; raises UnknownTouched when the template or its spec is unknown,
    skips a container list that is unknown."""
    spec = template.get("spec") or {}
    for group in ("initContainers", "containers"):
        for c in each(known_or_unknown(lambda: spec.get(group))):
            yield group, c


def gpu_count(container: dict) -> tuple[int, int]:
    """(requested, limited) GPUs of a container, summed over every GPU_RESOURCES name."""
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    return (sum(_int(requests.get(name), 0) for name in GPU_RESOURCES),
            sum(_int(limits.get(name), 0) for name in GPU_RESOURCES))


def gpu_resource_names(container: dict) -> list[str]:
    """The GPU_RESOURCES names a container requests or limits, for the messages."""
    res = container.get("resources") or {}
    held = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    return [name for name in GPU_RESOURCES if name in held] or [GPU]


def pod_gpus(template: dict) -> int:
    return sum(max(gpu_count(c)) for group, c in containers(template) if group == "containers")


def rollout_waves(kind: str, manifest: dict) -> int:
    """Cold starts in a row when an update replaces every pod with maxSurge 0, per level
    (policy/gpu_accounting.py rollout_waves). An unset maxUnavailable counts as one pod, the slowest
    case, except where the API defaults it (Deployment: 25%). Raises UnknownTouched on unknown counts."""
    waves = gpu_accounting.rollout_waves
    spec = manifest.get("spec") or {}
    if kind == "Deployment":
        strategy = spec.get("strategy") or {}
        if strategy.get("type") == "Recreate":
            return 1
        return waves(_int(spec.get("replicas"), 1), (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%"))
    if kind == "StormService":
        role_sets = waves(_int(spec.get("replicas"), 1), (spec.get("updateStrategy") or {}).get("maxUnavailable", 1))
        roles = ((spec.get("template") or {}).get("spec") or {}).get("roles") or []
        return role_sets * max([waves(_int(r.get("replicas"), 1), (r.get("updateStrategy") or {}).get("maxUnavailable", 1))
                                for r in roles] or [1])
    if kind == "RoleBasedGroup":
        return max([waves(_int(r.get("replicas"), 1),
                          ((r.get("rolloutStrategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", 1))
                    for r in spec.get("roles") or []] or [1])
    if kind == "RayClusterFleet":
        return waves(_int(spec.get("replicas"), 1),
                     ((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", 1))
    if kind == "LeaderWorkerSet":
        # Groups roll maxUnavailable groups at a time (CRD default 1; a percentage of spec.replicas rounded
        # down: lws v0.10.0 pkg/controllers/leaderworkerset_controller.go rollingUpdateParameters,
        # GetScaledValueFromIntOrPercent(..., false)), every pod of a group at once.
        return waves(_int(spec.get("replicas"), 1),
                     ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("maxUnavailable", 1))
    return 1
