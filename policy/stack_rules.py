"""Stack rules: checks over every resource of a stack with its options (protect, customTimeouts,
provider), as CrossGuard's StackValidationPolicy sees them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from policy.gpu_accounting import peak_gpus, scaled_pods
from policy.manifests import (
    STARTUP_BUDGET,
    annotations_of,
    argv_of,
    containers,
    engine_pods,
    flag_value,
    kind_of,
    name_of,
    pod_gpus,
    templates,
    volumes_of,
)
from policy.unknowns import decide, is_unknown, items_of, known_or_unknown, mapping
from policy.workloads import rollout_waves


@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    props: dict
    options: dict        # protect, retainOnDelete, customTimeouts{create,update}, ...
    provider: str
    custom: bool = True
    parent: str = ""


# An AIBrix PodAutoscaler (autoscaling.aibrix.ai/v1alpha1): v0.7.0 reads and writes its target's
# spec.replicas (pkg/controller/podautoscaler/workload_scale.go), up to spec.maxReplicas.
PODAUTOSCALER = "PodAutoscaler"

WorkloadKey = tuple[str, str, str]   # (kind, namespace, name)

# The role-name label of a hybrid model's combined pods (components/topologies/hybrid.py writes it):
# AIBrix routes a short prompt to them, so their roleset has no prefill or decode side to pair.
COMBINED_ROLE = "combined"


def workload_key(resource_type: str, props: dict) -> WorkloadKey:
    """Raises UnknownTouched when the name or namespace is unknown."""
    meta = mapping(props.get("metadata"))
    return (kind_of(resource_type), str(meta.get("namespace") or ""), str(meta.get("name")))


def is_autoscaler(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:") and kind_of(resource_type) == PODAUTOSCALER


def autoscaler_target(resource_type: str, props: dict) -> tuple[WorkloadKey, Any] | None:
    """(target key, maxReplicas) of a PodAutoscaler; the target's namespace is the autoscaler's own
    unless the reference names one (workload_scale.go: `ns := ref.Namespace; if ns == "" { ns =
    pa.Namespace }`). Raises UnknownTouched when the reference is unknown."""
    if not is_autoscaler(resource_type):
        return None
    spec = mapping(props.get("spec"))
    ref = mapping(spec.get("scaleTargetRef"))
    namespace = ref.get("namespace") or mapping(props.get("metadata")).get("namespace") or ""
    return (str(ref.get("kind")), str(namespace), str(ref.get("name"))), spec.get("maxReplicas")


def grown_to(props: dict, max_replicas: Any) -> dict:
    """The workload as its autoscaler may grow it: spec.replicas raised to maxReplicas. Raises
    UnknownTouched when either count is unknown."""
    spec = mapping(props.get("spec"))
    return {**props, "spec": {**spec, "replicas": scaled_pods(int(spec.get("replicas", 1)), int(max_replicas))}}


def workload_gpus(resource_type: str, props: dict, max_replicas: Any = None) -> Any:
    """GPUs a workload holds at peak, rollout surge and known overshoot included; with an autoscaler's
    maxReplicas, as the autoscaler may grow it (spec.replicas raised to that). UNKNOWN when a count it
    depends on is unknown (preview)."""
    if max_replicas is not None:
        props = known_or_unknown(lambda: grown_to(props, max_replicas))
        if is_unknown(props):
            return props
    total: Any = 0
    for ref in templates(resource_type, props):
        total = total + known_or_unknown(lambda r=ref: peak_gpus(r.replicas, r.extra_pods, pod_gpus(r.template)))
    return total


def workload_gpu_text(resource_type: str, props: dict, max_replicas: Any = None) -> str:
    """`<Kind ns/name> holds N GPUs at peak (P pods of G GPUs)`, a group's pods counted each (issue 29), for
    a budget message on the workload that passes it; raises UnknownTouched when a count is unknown."""
    if max_replicas is not None:
        props = grown_to(props, max_replicas)
    pods: dict[int, int] = {}
    for ref in templates(resource_type, props):
        gpus = pod_gpus(ref.template)
        if gpus:
            pods[gpus] = pods.get(gpus, 0) + int(ref.replicas + ref.extra_pods)
    parts = ", ".join(f"{n} pod{'s' if n != 1 else ''} of {g} GPUs" for g, n in sorted(pods.items()))
    return f"{name_of(props)} holds {sum(g * n for g, n in pods.items())} GPUs at peak ({parts})"


def _targets(r: StackResource) -> list[tuple[WorkloadKey, Any]]:
    """[(target key, maxReplicas)] of a PodAutoscaler, [] for anything else or an unknown reference."""
    def target() -> list[tuple[WorkloadKey, Any]]:
        found = autoscaler_target(r.type, r.props)
        return [found] if found else []
    return decide(target)


def autoscaled(resources: list[StackResource]) -> dict[WorkloadKey, Any]:
    """Target key -> the largest maxReplicas any PodAutoscaler of the stack gives it."""
    out: dict[WorkloadKey, Any] = {}
    for r in resources:
        for key, most in _targets(r):
            out[key] = most if key not in out else known_or_unknown(lambda a=out[key], b=most: max(int(a), int(b)))
    return out


def gpu_total(resources: list[StackResource]) -> Any:
    scaled = autoscaled(resources)

    def gpus(r: StackResource) -> Any:
        key = known_or_unknown(lambda: workload_key(r.type, r.props))
        return workload_gpus(r.type, r.props, None if is_unknown(key) else scaled.get(key))
    return sum((gpus(r) for r in resources), 0)


def unmatched_autoscalers(resources: list[StackResource]) -> list[str]:
    """A PodAutoscaler whose target is not in the stack: its GPUs could not be counted."""
    present = {k for r in resources if templates(r.type, r.props) for k in decide(lambda r=r: [workload_key(r.type, r.props)])}
    return [f"{name_of(r.props)} scales {key[0]} {key[1]}/{key[2]}, which this stack does not declare; the GPUs "
            "it may add cannot be counted against the budget."
            for r in resources for key, _ in _targets(r) if key not in present]


def budget_message(total: int, budget: int, partial: bool = False) -> list[str]:
    if total <= budget:
        return []
    if partial:
        return [f"The workloads registered so far need {total} GPUs at peak (rollouts included) but the stack's "
                f"budget is {budget}; raise llm-serving:gpuBudget or lower replicas."]
    return [f"The stack needs {total} GPUs at peak (rollouts included) but its budget is {budget}; raise llm-serving:gpuBudget or lower replicas."]


def gpus_within_budget(resources: list[StackResource], budget: int) -> list[str]:
    return decide(lambda: budget_message(gpu_total(resources), int(budget))) + unmatched_autoscalers(resources)


def _seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration or "")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 0


def await_timeouts_cover_rollout(resources: list[StackResource]) -> list[str]:
    """Pulumi's 10-minute default await fails a 12-minute cold start: every GPU workload carries
    customTimeouts covering one cold start on create (its progress deadline for a Deployment, its
    startup budget otherwise) and every wave of cold starts its rollout strategy runs in a row on
    update (replicas N with maxUnavailable k: ceil(N/k) waves)."""
    def check(r: StackResource) -> list[str]:
        refs = [t for t in templates(r.type, r.props) if pod_gpus(t.template)]
        if not refs or kind_of(r.type) == "Job":
            return []
        if kind_of(r.type) == "Deployment":
            one, what = int((r.props.get("spec") or {}).get("progressDeadlineSeconds", 600)), "progressDeadlineSeconds"
        else:
            one = max(int(annotations_of(t.template).get(STARTUP_BUDGET, 600)) for t in refs)
            what = "the startup budget"
        waves = rollout_waves(kind_of(r.type), r.props)
        timeouts = r.options.get("customTimeouts") or {}
        out = []
        for op, need in (("create", one), ("update", one * waves)):
            if _seconds(timeouts.get(op, "")) < need:
                rolled = f" x {waves} rollout waves" if op == "update" and waves > 1 else ""
                out.append(f"{name_of(r.props)}: Pulumi {op} timeout {timeouts.get(op, '10m (default)')} is below "
                           f"{what} {one}{rolled} = {need}s.")
        return out
    return [m for r in resources for m in decide(check, r)]


# What keeps the weights when `pulumi destroy` runs outside dev: the bucket and every resource that
# configures it, since destroying the configuration first (versioning, encryption, the public-access
# block) leaves a protected but exposed or unversioned bucket behind.
BUCKET = "aws:s3/bucket:Bucket"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
BUCKET_PARTS = (BUCKET, VERSIONING, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")


def bucket_part_protected(resource_type: str, name: str, props: dict, options: dict, environment: str,
                          check_retain: bool = True) -> list[str]:
    """One weights-bucket resource outside dev: protected (and retained where the checker sees it),
    and versioning, when this is the versioning resource, Enabled."""
    if environment == "dev" or resource_type not in BUCKET_PARTS:
        return []
    out = []
    what = "Bucket" if resource_type == BUCKET else resource_type.rsplit(":", 1)[-1]
    if not options.get("protect") or (check_retain and not options.get("retainOnDelete")):
        out.append(f"{what} {name} must be protected{' and retained on delete' if check_retain else ''} in "
                   f"{environment}: set protect (and retain_on_delete) so `pulumi destroy` keeps the weights.")
    if resource_type == VERSIONING:
        out += decide(lambda: [] if (props.get("versioningConfiguration") or {}).get("status") == "Enabled"
                      else [f"{what} {name} must keep versioning Enabled in {environment}."])
    return out


def data_is_protected(resources: list[StackResource], environment: str, check_retain: bool = True) -> list[str]:
    """Outside dev, the weights bucket is versioned and survives `pulumi destroy` (protect, and
    retainOnDelete where the checker can see it: CrossGuard cannot), and so does every resource that
    configures it."""
    if environment == "dev":
        return []
    out = []
    versioned_parents = {r.parent for r in resources if r.type == VERSIONING
                         and decide(lambda r=r: [(r.props.get("versioningConfiguration") or {}).get("status")]) != ["Suspended"]}
    for r in resources:
        out += bucket_part_protected(r.type, r.name, r.props, r.options, environment, check_retain)
        if r.type == BUCKET and r.parent not in versioned_parents:
            out.append(f"Bucket {r.name} must have versioning enabled in {environment}.")
    return out


def only_sync_jobs_write_models(resources: list[StackResource]) -> list[str]:
    """A model claim (any claim of the model-volume component, or any volume named `model`) is
    mounted writable only by Jobs; everything else reads it read-only at volume and mount."""
    def claim_name(r: StackResource) -> list[str]:
        meta = r.props.get("metadata") or {}
        if kind_of(r.type) == "PersistentVolumeClaim" and (meta.get("labels") or {}).get("app.kubernetes.io/component") == "model-volume":
            return [meta.get("name")]
        return []
    model_claims = {n for r in resources for n in decide(claim_name, r)}

    def check(r: StackResource, ref: Any, v: dict) -> list[str]:
        claim = v.get("persistentVolumeClaim")
        if claim is None or not (v.get("name") == "model" or claim.get("claimName") in model_claims):
            return []
        mounts = [m for _, c in containers(ref.template) for m in items_of(c.get("volumeMounts")) if m.get("name") == v.get("name")]
        if not claim.get("readOnly") or not all(m.get("readOnly") for m in mounts):
            return [f"{name_of(r.props)}: mounts model claim {claim.get('claimName')} writable; only the sync Job may write the model path."]
        return []

    out = []
    for r in resources:
        if kind_of(r.type) == "Job":
            continue
        for ref in templates(r.type, r.props):
            for v in decide(lambda t: list(volumes_of(t.template).values()), ref):
                out += decide(check, r, ref, v)
    return out


def routes_have_reference_grants(resources: list[StackResource]) -> list[str]:
    """Every HTTPRoute backend in another namespace is allowed by a ReferenceGrant there; without
    one the gateway answers 503 (RefNotPermitted)."""
    grants = [g for r in resources if kind_of(r.type) == "ReferenceGrant"
              for g in decide(lambda r=r: [(mapping(r.props.get("metadata")), mapping(r.props.get("spec")))])]

    def allowed(route_ns: str, backend_ns: str, kind: str, name: str) -> bool:
        for meta, spec in grants:
            if decide(lambda: [meta.get("namespace") == backend_ns]) != [True]:
                continue
            from_ok = decide(lambda: [any(f.get("kind") == "HTTPRoute" and f.get("namespace") == route_ns
                                          for f in spec.get("from") or [])]) == [True]
            to_ok = decide(lambda: [any(t.get("kind") == kind and t.get("name", name) == name
                                        for t in spec.get("to") or [])]) == [True]
            if from_ok and to_ok:
                return True
        return False

    def check(r: StackResource, ref: dict) -> list[str]:
        route_ns = (r.props.get("metadata") or {}).get("namespace")
        backend_ns = ref.get("namespace", route_ns)
        if backend_ns != route_ns and not allowed(route_ns, backend_ns, ref.get("kind", "Service"), ref.get("name")):
            return [f"{name_of(r.props)}: backend {backend_ns}/{ref.get('name')} has no ReferenceGrant "
                    f"from HTTPRoutes in {route_ns}; the gateway would answer 503."]
        return []

    out = []
    for r in resources:
        if kind_of(r.type) != "HTTPRoute":
            continue
        backend_refs = decide(lambda r=r: [b for rule in (r.props.get("spec") or {}).get("rules") or []
                                           for b in rule.get("backendRefs") or []])
        for ref in backend_refs:
            out += decide(check, r, ref)
    return out


def _model_path(argv: list[str]) -> str | None:
    """The positional model of `vllm serve <path>`."""
    return argv[argv.index("serve") + 1] if "serve" in argv[:-1] else None


def _roleset_engines(resources: list[StackResource]) -> dict[str, dict[str, list[dict]]]:
    """roleset-name -> role-name -> engine containers, over every workload of the stack."""
    out: dict[str, dict[str, list[dict]]] = {}

    def add(ref: Any, engine_containers: list[dict]) -> list[None]:
        pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
        if "roleset-name" in pod_labels:
            role = str(pod_labels.get("role-name", ""))
            out.setdefault(str(pod_labels["roleset-name"]), {}).setdefault(role, []).extend(engine_containers)
        return []

    for r in resources:
        for ref, engine_containers in engine_pods(r.type, r.props):
            decide(add, ref, engine_containers)
    return out


def _sides_match(roleset: str, prefill: dict, decode: dict) -> list[str]:
    out = []
    p, d = argv_of(prefill), argv_of(decode)
    if _model_path(p) != _model_path(d):
        out.append(f"P/D roleset {roleset}: prefill and decode serve different model paths "
                   f"({_model_path(p)} vs {_model_path(d)}).")
    for flag in ("--served-model-name", "--kv-cache-dtype", "--block-size", "--max-model-len"):
        if flag_value(p, flag) != flag_value(d, flag):
            out.append(f"P/D roleset {roleset}: prefill and decode differ in {flag} "
                       f"({flag_value(p, flag)} vs {flag_value(d, flag)}).")
    ptp, dtp = int(flag_value(p, "--tensor-parallel-size") or 1), int(flag_value(d, "--tensor-parallel-size") or 1)
    if dtp < ptp:
        out.append(f"P/D roleset {roleset}: decode TP {dtp} is below prefill TP {ptp}; the transfer plan needs decode TP >= prefill TP.")
    return out


def pd_rolesets_are_complete_and_matched(resources: list[StackResource]) -> list[str]:
    """Every P/D roleset has both roles; both sides serve the same model with the same TP, KV dtype
    and block size; decode TP is at least prefill TP."""
    out = []
    for roleset, roles in sorted(_roleset_engines(resources).items()):
        if set(roles) == {COMBINED_ROLE}:
            continue
        missing = {"prefill", "decode"} - set(roles)
        if missing:
            out.append(f"P/D roleset {roleset} has no {' or '.join(sorted(missing))} pods; AIBrix only pairs complete rolesets.")
            continue
        out += decide(_sides_match, roleset, roles["prefill"][0], roles["decode"][0])
    return out


def is_default_provider(provider_urn: str) -> bool:
    """Default providers are named `default` or `default_<version>` (pulumi/pulumi v3.259.0,
    pkg/resource/deploy/providers/provider.go ProviderRequest.DefaultName); the analyzer is given the
    provider's URN, whose last segment is that name."""
    return provider_urn.rsplit("::", 1)[-1].startswith("default")


def explicit_providers_only(resources: list[StackResource]) -> list[str]:
    """Every custom resource uses an explicit provider (default providers are disabled in
    Pulumi.yaml). The engine gives every custom resource a provider reference, a default one when the
    program passed none; the root stack and components have none, and providers are not provided."""
    return [f"{r.type} {r.name} uses the default provider ({r.provider or 'none passed'}); pass an explicit one."
            for r in resources if r.custom and not r.type.startswith("pulumi:providers:")
            and r.type != "pulumi:pulumi:Stack" and (not r.provider or is_default_provider(r.provider))]


def _denies_all_egress(spec: dict) -> bool:
    """Selects every pod (podSelector {}), lists Egress (explicitly: without policyTypes a policy with no egress
    rule is Ingress only, k8s.io/api networking/v1 types.go PolicyTypes) and allows nothing."""
    selector = mapping(spec.get("podSelector"))
    return (not selector.get("matchLabels") and not selector.get("matchExpressions")
            and "Egress" in items_of(spec.get("policyTypes")) and not items_of(spec.get("egress")))


def namespaces_deny_egress(resources: list[StackResource]) -> list[str]:
    """Every namespace where the stack runs pods has a NetworkPolicy denying egress by default: without one a
    compromised engine or Job reaches anything the cluster network reaches (the cloud metadata service, other
    namespaces, the internet)."""
    running: dict[str, str] = {}
    denied: set[str] = set()
    for r in resources:
        if not r.type.startswith("kubernetes:"):
            continue
        known = decide(lambda r=r: [str(mapping(r.props.get("metadata")).get("namespace") or "")])
        if not known:
            continue
        ns = known[0]
        if kind_of(r.type) == "NetworkPolicy":
            if decide(lambda r=r: [True] if _denies_all_egress(mapping(r.props.get("spec"))) else []):
                denied.add(ns)
        elif decide(lambda r=r: templates(r.type, r.props)):
            running.setdefault(ns, name_of(r.props))
    return [f"Namespace {ns} runs pods ({first} among them) and no NetworkPolicy there denies egress by default "
            "(podSelector {}, policyTypes [Egress], no egress rule): networkPolicy.egress.enabled is off or the "
            "policy is missing." for ns, first in sorted(running.items()) if ns not in denied]
