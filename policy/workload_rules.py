"""Rules over how workloads hold and give back GPUs: the sync Job and DaemonSets off the GPUs,
rollouts that never add GPU pods, custom resources Pulumi waits for, Jobs re-run when unready."""

from __future__ import annotations

from policy.manifests import (
    BUILTIN,
    STARTUP_BUDGET,
    annotations_of,
    containers,
    each_container,
    env_value,
    gpu_count,
    kind_of,
    name_of,
    pod_gpus,
    templates,
)
from policy.unknowns import decide, each, known_or_unknown
from policy.workloads import GPU_RESOURCES, PodTemplateRef, gpu_resource_names, rbg_role_template


def model_sync_stays_off_gpus(resource_type: str, props: dict) -> list[str]:
    """The sync Job requests no GPU and is kept off GPU nodes (field report 3.2)."""
    if kind_of(resource_type) != "Job":
        return []

    def gpu_check(ref: PodTemplateRef) -> list[str]:
        held = [c for _, c in containers(ref.template) if max(gpu_count(c))]
        if held:
            return [f"{name_of(props)}: a Job must not request {', '.join(gpu_resource_names(held[0]))}; downloads and "
                    "checks run on CPU nodes."]
        return []

    def affinity_check(ref: PodTemplateRef) -> list[str]:
        # Which keys it must exclude depends on the stack's GPU pods: jobs_avoid_every_gpu_pool.
        terms = _required_terms(ref.template)
        if not terms or not all(any(e.get("operator") == "DoesNotExist" for e in t.get("matchExpressions") or []) for t in terms):
            return [f"{name_of(props)}: the Job needs a required node affinity that excludes GPU nodes (DoesNotExist on the GPU pool labels)."]
        return []

    def toleration_check(ref: PodTemplateRef) -> list[str]:
        if any(t.get("key") in GPU_RESOURCES for t in (ref.template.get("spec") or {}).get("tolerations") or []):
            return [f"{name_of(props)}: the Job tolerates the GPU taint; it must never land on a GPU node."]
        return []

    out = []
    for ref in templates(resource_type, props):
        for check in (gpu_check, affinity_check, toleration_check):
            out += decide(check, ref)
    return out


def _required_terms(template: dict) -> list[dict]:
    spec = template.get("spec") or {}
    return list((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])


def jobs_avoid_every_gpu_pool(manifests: list[tuple[str, dict]]) -> list[str]:
    """Every Job of the stack is kept off the nodes of every GPU pod the stack runs: each term of its
    required node affinity (terms are ORed: any one lets a node in) has DoesNotExist on every label
    key a GPU pod's nodeSelector requires, the GPU pool's and each model's own pool's alike. The
    per-resource sync-off-gpu sees a Job alone and only that some DoesNotExist is there; a model
    whose node pool is labelled by another key than the GPU pool's would take a Job the GPU pool's
    keys do not keep out."""
    pools: dict[str, str] = {}    # label key -> the first GPU workload whose pods select on it

    def gpu_keys(resource_type: str, props: dict, ref: PodTemplateRef) -> list[tuple[str, str]]:
        if not pod_gpus(ref.template):
            return []
        selector = (ref.template.get("spec") or {}).get("nodeSelector") or {}
        return [(key, name_of(props)) for key in selector]

    for resource_type, props in manifests:
        if kind_of(resource_type) == "Job":
            continue
        for ref in templates(resource_type, props):
            for key, owner in decide(gpu_keys, resource_type, props, ref):
                pools.setdefault(key, owner)

    def check(props: dict, ref: PodTemplateRef) -> list[str]:
        out = []
        for term in _required_terms(ref.template) or [{}]:
            excluded = {e.get("key") for e in term.get("matchExpressions") or [] if e.get("operator") == "DoesNotExist"}
            out += [f"{name_of(props)}: its node affinity lets in nodes labelled {key}, which {owner}'s GPU pods "
                    f"select; add {{key: {key}, operator: DoesNotExist}} to every nodeSelectorTerm."
                    for key, owner in sorted(pools.items()) if key not in excluded]
        return list(dict.fromkeys(out))

    out = []
    for resource_type, props in manifests:
        if kind_of(resource_type) == "Job":
            for ref in templates(resource_type, props):
                out += decide(check, props, ref)
    return out


NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def daemonsets_hold_no_gpus(resource_type: str, props: dict) -> list[str]:
    """A DaemonSet (the engine image pre-pull on the GPU pool) requests no GPU: its pods follow the
    node count, which no GPU budget can bound. Each container also sets NVIDIA_VISIBLE_DEVICES=void:
    an engine image sets it to all, and the NVIDIA container runtime would then hand a GPU-less
    container every GPU of the node, GPUs the device plugin gave the engine pods
    (tests/upstream_nvidia_container_toolkit.py)."""
    if kind_of(resource_type) != "DaemonSet":
        return []

    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        if max(gpu_count(c)):
            out.append(f"{name_of(props)}: container {c.get('name')} of a DaemonSet requests {', '.join(gpu_resource_names(c))}; a pod per node "
                       "is a GPU count no budget bounds.")
        if env_value(c, NVIDIA_VISIBLE_DEVICES) != "void":
            out.append(f"{name_of(props)}: container {c.get('name')} must set {NVIDIA_VISIBLE_DEVICES}=void, or the "
                       "NVIDIA runtime hands it the node's GPUs when its image asks for all.")
        return out
    return each_container(resource_type, props, check)


# Surge pods a GPU Deployment's rollout may start (models[].rollout.maxSurge, opt-in): the Deployment
# controller never exceeds maxSurge, and gpu-budget counts it. Other kinds roll without: field report
# 11.2 saw a controller overshoot its count.
DEPLOYMENT_SURGE_PODS = 1


def rollout_never_adds_gpus(resource_type: str, props: dict) -> list[str]:
    """A GPU workload rolls without surge pods, but for a Deployment's one surge pod, which the budget
    counts; a Deployment also waits at least the startup budget before declaring the rollout stuck."""
    allowed = DEPLOYMENT_SURGE_PODS if kind_of(resource_type) == "Deployment" else 0

    def surge_check(ref: PodTemplateRef) -> list[str]:
        if pod_gpus(ref.template) and ref.surge > allowed:
            also = f" (a Deployment may surge {allowed} pod, which gpu-budget counts)" if allowed else ""
            return [f"{name_of(props)}: the rollout at {ref.path or 'the pod'} may start {ref.surge} extra pod(s) of "
                    f"{pod_gpus(ref.template)} GPUs{also}; use Recreate or maxSurge 0."]
        return []

    def deadline_check(ref: PodTemplateRef) -> list[str]:
        budget = annotations_of(ref.template).get(STARTUP_BUDGET)
        if kind_of(resource_type) == "Deployment" and budget is not None and pod_gpus(ref.template):
            deadline = (props.get("spec") or {}).get("progressDeadlineSeconds", 600)
            if int(deadline) < int(budget):
                return [f"{name_of(props)}: progressDeadlineSeconds {deadline} is below the startup budget {budget}s."]
        return []

    out = []
    for ref in templates(resource_type, props):
        out += decide(surge_check, ref) + decide(deadline_check, ref)
    return out


def _has_gpu_pods(resource_type: str, props: dict) -> bool:
    return any(decide(lambda r: [pod_gpus(r.template) > 0], ref) == [True] for ref in templates(resource_type, props))


def custom_workloads_are_awaited(resource_type: str, props: dict) -> list[str]:
    """Pulumi does not wait for a custom resource unless it carries pulumi.com/waitFor; without it
    `pulumi up` would report success while the engine is still cold."""
    if kind_of(resource_type) in BUILTIN or not _has_gpu_pods(resource_type, props):
        return []

    def check() -> list[str]:
        annotations = (props.get("metadata") or {}).get("annotations") or {}
        if "pulumi.com/waitFor" not in annotations:
            return [f"{name_of(props)}: a GPU custom resource needs a pulumi.com/waitFor annotation (e.g. condition=Ready)."]
        if "pulumi.com/skipAwait" in annotations:
            return [f"{name_of(props)}: pulumi.com/skipAwait makes `pulumi up` return before the engine is ready."]
        return []
    return decide(check)


def jobs_rerun_when_unready(resource_type: str, props: dict) -> list[str]:
    """An awaited Job carries pulumi.com/replaceUnready: else a failed Job stays failed in state and every
    later `pulumi up` fails at once on it, even after the cause is fixed (pulumi/pulumi-kubernetes v4.32.0,
    provider/pkg/provider/provider.go Diff). A Job Pulumi does not await (pulumi.com/skipAwait: the load
    test) never fails a `pulumi up`, and must not carry it: Diff would replace it, and cut short the run,
    at every later `pulumi up` while it is still running (checker/job/check.go: not Complete is unready)."""
    if kind_of(resource_type) != "Job":
        return []

    def check() -> list[str]:
        annotations = (props.get("metadata") or {}).get("annotations") or {}
        rerun = annotations.get("pulumi.com/replaceUnready") == "true"
        if annotations.get("pulumi.com/skipAwait") == "true":
            if rerun:
                return [f"{name_of(props)}: a Job with pulumi.com/skipAwait must not set pulumi.com/replaceUnready: "
                        "every later `pulumi up` would replace it while it runs."]
            return []
        if not rerun:
            return [f"{name_of(props)}: set the annotation pulumi.com/replaceUnready: \"true\" so a retried `pulumi up` "
                    "replaces a failed Job instead of failing on it again."]
        return []
    return decide(check)


# What a template patch may change: the pod's metadata maps, which decide no GPU, argv, probe or mount.
PATCHABLE_METADATA = ("labels", "annotations")


def _patch_problem(where: str, patch) -> list[str]:
    if not patch:
        return []
    if not isinstance(patch, dict):
        return [f"{where} is not a patch of pod metadata"]
    meta = patch.get("metadata") or {}
    touched = sorted(k for k in patch if k != "metadata")
    touched += sorted(f"metadata.{k}" for k in (meta if isinstance(meta, dict) else {"(not a map)": 0})
                      if k not in PATCHABLE_METADATA)
    touched += sorted(f"metadata.{k} directive {d}" for k in PATCHABLE_METADATA
                      for d in ((meta.get(k) or {}) if isinstance(meta, dict) else {}) if str(d).startswith("$"))
    return [f"{where} touches {', '.join(touched)}"] if touched else []


def group_patches_touch_metadata_only(resource_type: str, props: dict) -> list[str]:
    """A RoleBasedGroup's template patches (leaderWorkerPattern leaderTemplatePatch and workerTemplatePatch,
    templateRef.patch) change the pods' labels and annotations only, and a templateRef names a role template
    of the group: the pack reads the pods from the template with only those applied (policy/workloads.py), so
    a patch that gave the leader or the workers other resources, argv, probes or volumes would escape the GPU
    count and every pod rule. What this program renders patches labels only (components/orchestrators/
    rolebasedgroup.py)."""
    if kind_of(resource_type) != "RoleBasedGroup":
        return []
    spec = props.get("spec") or {}

    def check(i: int, role: dict) -> list[str]:
        out = []
        for pattern_key in ("standalonePattern", "leaderWorkerPattern"):
            pattern = role.get(pattern_key)
            if not pattern:
                continue
            at = f"spec.roles[{i}].{pattern_key}"
            patches = [(f"{at}.{key}", pattern.get(key)) for key in ("leaderTemplatePatch", "workerTemplatePatch")]
            ref = pattern.get("templateRef")
            if ref:
                if rbg_role_template(spec, ref.get("name")) is None:
                    out.append(f"{at}.templateRef names {ref.get('name')!r}, which no spec.roleTemplates entry is")
                patches.append((f"{at}.templateRef.patch", ref.get("patch")))
            for where, patch in patches:
                out += _patch_problem(where, patch)
        return [f"{name_of(props)}: {problem}; a template patch may change only the pods' metadata.labels and "
                "metadata.annotations, so that the pods the pack checks and counts are the template's." for problem in out]

    out = []
    for i, role in enumerate(each(known_or_unknown(lambda: spec.get("roles")))):
        out += decide(check, i, role)
    return out
