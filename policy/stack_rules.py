"""Stack rules: checks over every resource of a stack with its options (protect, customTimeouts,
provider), as CrossGuard's StackValidationPolicy sees them."""

from __future__ import annotations

import re
from dataclasses import dataclass

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


@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    props: dict
    options: dict        # protect, retainOnDelete, customTimeouts{create,update}, ...
    provider: str
    custom: bool = True
    parent: str = ""


def gpu_total(resources: list[StackResource]) -> int:
    total = 0
    for r in resources:
        for ref in templates(r.type, r.props):
            total += (ref.replicas + ref.extra_pods) * pod_gpus(ref.template)
    return total


def gpus_within_budget(resources: list[StackResource], budget: int) -> list[str]:
    total = gpu_total(resources)
    return [] if total <= budget else [f"The stack needs {total} GPUs at peak (rollouts included) but its budget is {budget}; raise llm-serving:gpuBudget or lower replicas."]


def _seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration or "")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 0


def await_timeouts_cover_rollout(resources: list[StackResource]) -> list[str]:
    """Pulumi's 10-minute default await fails a 12-minute cold start: every GPU workload carries
    customTimeouts covering its progress deadline (Deployment) or its startup budget (others)."""
    out = []
    for r in resources:
        refs = [t for t in templates(r.type, r.props) if pod_gpus(t.template)]
        if not refs or kind_of(r.type) == "Job":
            continue
        if kind_of(r.type) == "Deployment":
            need, what = int((r.props.get("spec") or {}).get("progressDeadlineSeconds", 600)), "progressDeadlineSeconds"
        else:
            need = max(int(annotations_of(t.template).get(STARTUP_BUDGET, 600)) for t in refs)
            what = "the startup budget"
        timeouts = r.options.get("customTimeouts") or {}
        for op in ("create", "update"):
            if _seconds(timeouts.get(op, "")) < need:
                out.append(f"{name_of(r.props)}: Pulumi {op} timeout {timeouts.get(op, '10m (default)')} is below {what} {need}.")
    return out


def data_is_protected(resources: list[StackResource], environment: str, check_retain: bool = True) -> list[str]:
    """Outside dev, the weights bucket is versioned and survives `pulumi destroy` (protect, and
    retainOnDelete where the checker can see it: CrossGuard cannot)."""
    if environment == "dev":
        return []
    out = []
    versioned_parents = {r.parent for r in resources if r.type == "aws:s3/bucketVersioning:BucketVersioning"
                         and ((r.props.get("versioningConfiguration") or {}).get("status") == "Enabled")}
    for r in resources:
        if r.type != "aws:s3/bucket:Bucket":
            continue
        if not r.options.get("protect") or (check_retain and not r.options.get("retainOnDelete")):
            out.append(f"Bucket {r.name} must be protected{' and retained on delete' if check_retain else ''} in "
                       f"{environment}: set protect (and retain_on_delete) so `pulumi destroy` keeps the weights.")
        if r.parent not in versioned_parents:
            out.append(f"Bucket {r.name} must have versioning enabled in {environment}.")
    return out


def only_sync_jobs_write_models(resources: list[StackResource]) -> list[str]:
    """A model claim (any claim of the model-volume component, or any volume named `model`) is
    mounted writable only by Jobs; everything else reads it read-only at volume and mount."""
    model_claims = {(r.props.get("metadata") or {}).get("name") for r in resources
                    if kind_of(r.type) == "PersistentVolumeClaim"
                    and ((r.props.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component") == "model-volume"}
    out = []
    for r in resources:
        if kind_of(r.type) == "Job":
            continue
        for ref in templates(r.type, r.props):
            for v in volumes_of(ref.template).values():
                claim = v.get("persistentVolumeClaim")
                if claim is None or not (v.get("name") == "model" or claim.get("claimName") in model_claims):
                    continue
                mounts = [m for _, c in containers(ref.template) for m in c.get("volumeMounts") or [] if m.get("name") == v.get("name")]
                if not claim.get("readOnly") or not all(m.get("readOnly") for m in mounts):
                    out.append(f"{name_of(r.props)}: mounts model claim {claim.get('claimName')} writable; only the sync Job may write the model path.")
    return out


def routes_have_reference_grants(resources: list[StackResource]) -> list[str]:
    """Every HTTPRoute backend in another namespace is allowed by a ReferenceGrant there; without
    one the gateway answers 503 (RefNotPermitted)."""
    grants = [(r.props.get("metadata") or {}, r.props.get("spec") or {}) for r in resources
              if kind_of(r.type) == "ReferenceGrant"]

    def allowed(route_ns: str, backend_ns: str, kind: str, name: str) -> bool:
        for meta, spec in grants:
            if meta.get("namespace") != backend_ns:
                continue
            from_ok = any(f.get("kind") == "HTTPRoute" and f.get("namespace") == route_ns for f in spec.get("from") or [])
            to_ok = any(t.get("kind") == kind and t.get("name", name) == name for t in spec.get("to") or [])
            if from_ok and to_ok:
                return True
        return False

    out = []
    for r in resources:
        if kind_of(r.type) != "HTTPRoute":
            continue
        route_ns = (r.props.get("metadata") or {}).get("namespace")
        for rule in (r.props.get("spec") or {}).get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                backend_ns = ref.get("namespace", route_ns)
                if backend_ns != route_ns and not allowed(route_ns, backend_ns, ref.get("kind", "Service"), ref.get("name")):
                    out.append(f"{name_of(r.props)}: backend {backend_ns}/{ref.get('name')} has no ReferenceGrant "
                               f"from HTTPRoutes in {route_ns}; the gateway would answer 503.")
    return out


def _model_path(argv: list[str]) -> str | None:
    """The positional model of `vllm serve <path>`."""
    return argv[argv.index("serve") + 1] if "serve" in argv[:-1] else None


def _roleset_engines(resources: list[StackResource]) -> dict[str, dict[str, list[dict]]]:
    """roleset-name -> role-name -> engine containers, over every workload of the stack."""
    out: dict[str, dict[str, list[dict]]] = {}
    for r in resources:
        for ref, engine_containers in engine_pods(r.type, r.props):
            pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
            if "roleset-name" in pod_labels:
                role = pod_labels.get("role-name", "")
                out.setdefault(pod_labels["roleset-name"], {}).setdefault(role, []).extend(engine_containers)
    return out


def pd_rolesets_are_complete_and_matched(resources: list[StackResource]) -> list[str]:
    """Every P/D roleset has both roles; both sides serve the same model with the same TP, KV dtype
    and block size; decode TP is at least prefill TP."""
    out = []
    for roleset, roles in sorted(_roleset_engines(resources).items()):
        if set(roles) == {"combined"}:
            continue
        missing = {"prefill", "decode"} - set(roles)
        if missing:
            out.append(f"P/D roleset {roleset} has no {' or '.join(sorted(missing))} pods; AIBrix only pairs complete rolesets.")
            continue
        p, d = argv_of(roles["prefill"][0]), argv_of(roles["decode"][0])
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


def explicit_providers_only(resources: list[StackResource]) -> list[str]:
    """Every custom resource names its provider; default providers are disabled in Pulumi.yaml."""
    return [f"{r.type} {r.name} has no explicit provider ({r.provider or 'default'}); pass one."
            for r in resources if r.custom and not r.type.startswith("pulumi:providers:")
            and (not r.provider or "::default" in r.provider)]
