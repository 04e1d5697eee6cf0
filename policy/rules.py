"""Policy rules as pure functions over (resource type, properties).

Resource rules take what CrossGuard's `ResourceValidationArgs` carries (`resource_type`, camelCase
`props`) and return violation messages, each a full sentence naming the object. Stack rules take
every resource with its options. The tests run them on every rendered stack; a CrossGuard pack can
wrap the same functions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from policy.workloads import GPU, PodTemplateRef, containers, gpu_count, pod_gpus, pod_templates

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL)", re.IGNORECASE)
ROLE = "llm-serving.io/role"
PARALLEL_SIZE = "llm-serving.io/parallel-size"
STARTUP_BUDGET = "llm-serving.io/startup-budget-seconds"
SHM_GIB_PER_GPU = 8
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


@dataclass(frozen=True)
class ResourcePolicy:
    name: str
    description: str
    check: Callable[[str, dict], list[str]]


def _kind(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def _name(props: dict) -> str:
    meta = props.get("metadata") or {}
    return f"{props.get('kind', '?')} {meta.get('namespace', '-')}/{meta.get('name', '?')}"


def _templates(resource_type: str, props: dict) -> list[PodTemplateRef]:
    if not resource_type.startswith("kubernetes:"):
        return []
    return pod_templates(_kind(resource_type), props)


def _annotations(template: dict) -> dict:
    return (template.get("metadata") or {}).get("annotations") or {}


def _volumes(template: dict) -> dict[str, dict]:
    return {v.get("name"): v for v in (template.get("spec") or {}).get("volumes") or []}


def _is_engine(template: dict) -> bool:
    return _annotations(template).get(ROLE) == "engine" or pod_gpus(template) > 0


def _engine_containers(template: dict) -> list[dict]:
    return [c for g, c in containers(template) if g == "containers" and (max(gpu_count(c)) > 0 or c.get("name") == "engine")]


def _engine_pods(resource_type: str, props: dict) -> Iterator[tuple[PodTemplateRef, list[dict]]]:
    """Engine pod templates of a workload, with their engine containers."""
    for ref in _templates(resource_type, props):
        if _is_engine(ref.template):
            yield ref, _engine_containers(ref.template)


def _quantity_gib(q: Any) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Gi|Mi|Ti)?", str(q))
    if not m:
        return 0.0
    return float(m.group(1)) * {"Gi": 1, "Mi": 1 / 1024, "Ti": 1024, None: 1 / 1024 ** 3}[m.group(2)]


def engine_probes_are_tcp(resource_type: str, props: dict) -> list[str]:
    """Engine probes are tcpSocket: an HTTP /health may run a real generation each period and
    pollute TTFT and throughput (field report 12.4)."""
    out = []
    for _, engine_containers in _engine_pods(resource_type, props):
        for c in engine_containers:
            for probe in PROBES:
                p = c.get(probe)
                if not p:
                    out.append(f"{_name(props)}: container {c.get('name')} has no {probe}; engines need TCP startup, readiness and liveness probes.")
                elif set(p) & {"httpGet", "exec", "grpc"} or "tcpSocket" not in p:
                    out.append(f"{_name(props)}: container {c.get('name')} {probe} is not tcpSocket; generative health checks pollute serving (field report 12.4).")
    return out


def startup_allowance_covers_budget(resource_type: str, props: dict) -> list[str]:
    """startupProbe periodSeconds x failureThreshold is at least the startup budget."""
    out = []
    for ref, engine_containers in _engine_pods(resource_type, props):
        budget = _annotations(ref.template).get(STARTUP_BUDGET)
        if budget is None:
            continue
        for c in engine_containers:
            p = c.get("startupProbe") or {}
            allowance = int(p.get("periodSeconds", 10)) * int(p.get("failureThreshold", 3))
            if allowance < int(budget):
                out.append(f"{_name(props)}: container {c.get('name')} startup allowance {allowance}s is below the startup budget {budget}s; cold starts would be killed.")
    return out


def model_mount_read_only(resource_type: str, props: dict) -> list[str]:
    """Engine pods mount the model from a claim, read-only at the volume and at every mount."""
    out = []
    for ref, _ in _engine_pods(resource_type, props):
        model = _volumes(ref.template).get("model")
        if model is None or "persistentVolumeClaim" not in model:
            out.append(f"{_name(props)}: the engine pod has no model volume from a PersistentVolumeClaim; an emptyDir re-downloads about 156 GiB on every pod re-creation (field report 11.1).")
            continue
        if not model["persistentVolumeClaim"].get("readOnly"):
            out.append(f"{_name(props)}: model volume claim {model['persistentVolumeClaim'].get('claimName')} is not readOnly at the volume level.")
        for _, c in containers(ref.template):
            for m in c.get("volumeMounts") or []:
                if m.get("name") == "model" and not m.get("readOnly"):
                    out.append(f"{_name(props)}: container {c.get('name')} mounts the model at {m.get('mountPath')} without readOnly.")
    return out


def gpu_counts_match_parallel_size(resource_type: str, props: dict) -> list[str]:
    """nvidia.com/gpu requests equal limits equal the parallel size (TP x DP in the engine argv)."""
    out = []
    for ref, engine_containers in _engine_pods(resource_type, props):
        declared = _annotations(ref.template).get(PARALLEL_SIZE)
        for c in engine_containers:
            req, lim = gpu_count(c)
            if req != lim:
                out.append(f"{_name(props)}: container {c.get('name')} requests {req} {GPU} but limits {lim}; they must be equal.")
            argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
            size = _flag(argv, "--tensor-parallel-size", "--tp") * _flag(argv, "--data-parallel-size", "--dp")
            if lim != size:
                out.append(f"{_name(props)}: container {c.get('name')} has {lim} GPUs but the engine argv asks for a parallel size of {size}.")
            if declared is None or int(declared) != lim:
                out.append(f"{_name(props)}: annotation {PARALLEL_SIZE}={declared} does not match the {lim} GPUs of container {c.get('name')}.")
    return out


def _flag(argv: list[str], *names: str) -> int:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return int(argv[i + 1])
            if a.startswith(n + "="):
                return int(a.split("=", 1)[1])
    return 1


def shm_is_memory_backed(resource_type: str, props: dict) -> list[str]:
    """Engine pods get /dev/shm from a Memory emptyDir of at least 8 GiB per GPU (field report 2.1)."""
    out = []
    for ref, engine_containers in _engine_pods(resource_type, props):
        volumes = _volumes(ref.template)
        gpus = pod_gpus(ref.template)
        for c in engine_containers:
            shm = next((m for m in c.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"), None)
            src = (volumes.get(shm.get("name")) or {}).get("emptyDir") if shm else None
            if not src or src.get("medium") != "Memory":
                out.append(f"{_name(props)}: container {c.get('name')} has no Memory emptyDir at /dev/shm.")
            elif _quantity_gib(src.get("sizeLimit", 0)) < SHM_GIB_PER_GPU * gpus:
                out.append(f"{_name(props)}: /dev/shm sizeLimit {src.get('sizeLimit')} is below {SHM_GIB_PER_GPU * gpus}Gi for {gpus} GPUs.")
    return out


def images_pinned_by_digest(resource_type: str, props: dict) -> list[str]:
    out = []
    for ref in _templates(resource_type, props):
        for _, c in containers(ref.template):
            if not DIGEST.search(str(c.get("image", ""))):
                out.append(f"{_name(props)}: container {c.get('name')} image {c.get('image')!r} is not pinned by digest.")
    return out


def no_privileged_containers(resource_type: str, props: dict) -> list[str]:
    out = []
    for ref in _templates(resource_type, props):
        for _, c in containers(ref.template):
            sc = c.get("securityContext") or {}
            if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True):
                out.append(f"{_name(props)}: container {c.get('name')} must set privileged false and allowPrivilegeEscalation false.")
    return out


def secrets_only_by_reference(resource_type: str, props: dict) -> list[str]:
    """Credentials reach containers only through secretKeyRef, never as literal env values."""
    out = []
    for ref in _templates(resource_type, props):
        for _, c in containers(ref.template):
            for e in c.get("env") or []:
                if SECRET_NAME.search(e.get("name", "")) and "secretKeyRef" not in (e.get("valueFrom") or {}):
                    out.append(f"{_name(props)}: container {c.get('name')} env {e.get('name')} looks like a credential but is not a secretKeyRef.")
    return out


def model_sync_stays_off_gpus(resource_type: str, props: dict) -> list[str]:
    """The sync Job requests no GPU and is kept off GPU nodes (field report 3.2)."""
    if _kind(resource_type) != "Job":
        return []
    out = []
    for ref in _templates(resource_type, props):
        spec = ref.template.get("spec") or {}
        if any(max(gpu_count(c)) for _, c in containers(ref.template)):
            out.append(f"{_name(props)}: a Job must not request {GPU}; downloads and checks run on CPU nodes.")
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        if not terms or not all(any(e.get("operator") == "DoesNotExist" for e in t.get("matchExpressions") or []) for t in terms):
            out.append(f"{_name(props)}: the Job needs a required node affinity that excludes GPU nodes (DoesNotExist on the GPU pool labels).")
        if any(t.get("key") == GPU for t in spec.get("tolerations") or []):
            out.append(f"{_name(props)}: the Job tolerates the GPU taint; it must never land on a GPU node.")
    return out


def rollout_never_adds_gpus(resource_type: str, props: dict) -> list[str]:
    """A GPU workload of any kind rolls without surge pods; a Deployment also waits at least the
    startup budget before declaring the rollout stuck."""
    out = []
    for ref in _templates(resource_type, props):
        if pod_gpus(ref.template) == 0:
            continue
        if ref.surge:
            out.append(f"{_name(props)}: the rollout at {ref.path or 'the pod'} may start {ref.surge} extra pod(s) of "
                       f"{pod_gpus(ref.template)} GPUs; use Recreate or maxSurge 0.")
        budget = _annotations(ref.template).get(STARTUP_BUDGET)
        if _kind(resource_type) == "Deployment" and budget is not None:
            deadline = (props.get("spec") or {}).get("progressDeadlineSeconds", 600)
            if int(deadline) < int(budget):
                out.append(f"{_name(props)}: progressDeadlineSeconds {deadline} is below the startup budget {budget}s.")
    return out


BUILTIN_WORKLOADS = {"Deployment", "StatefulSet", "ReplicaSet", "Job", "Pod"}


def custom_workloads_are_awaited(resource_type: str, props: dict) -> list[str]:
    """Pulumi does not wait for a custom resource unless it carries pulumi.com/waitFor; without it
    `pulumi up` would report success while the engine is still cold."""
    if _kind(resource_type) in BUILTIN_WORKLOADS or not any(pod_gpus(r.template) for r in _templates(resource_type, props)):
        return []
    annotations = (props.get("metadata") or {}).get("annotations") or {}
    if "pulumi.com/waitFor" not in annotations:
        return [f"{_name(props)}: a GPU custom resource needs a pulumi.com/waitFor annotation (e.g. condition=Ready)."]
    if "pulumi.com/skipAwait" in annotations:
        return [f"{_name(props)}: pulumi.com/skipAwait makes `pulumi up` return before the engine is ready."]
    return []


SGLANG_HEALTH = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"


def no_generative_health_checks(resource_type: str, props: dict) -> list[str]:
    """An SGLang engine runs with /health generation off (field report 12.4), whatever probes say."""
    out = []
    for _, engine_containers in _engine_pods(resource_type, props):
        for c in engine_containers:
            argv = " ".join(str(a) for a in (c.get("command") or []) + (c.get("args") or []))
            if "sglang" not in argv:
                continue
            env = {e.get("name"): e for e in c.get("env") or []}
            if (env.get(SGLANG_HEALTH) or {}).get("value") != "0":
                out.append(f"{_name(props)}: SGLang container {c.get('name')} must set {SGLANG_HEALTH}=0.")
    return out


# Kinds whose own labels AIBrix v0.7.0's model router watches to create a `<model>-router` route.
ROUTER_WATCHED_KINDS = {"Deployment", "RayClusterFleet", "LeaderWorkerSet", "ModelAdapter"}


def no_router_owned_routes(resource_type: str, props: dict) -> list[str]:
    """The model label belongs on pods, not on a watched workload: else AIBrix creates a route the
    workload owns, shared by every workload with that label and deleted with any of them (11.2)."""
    if _kind(resource_type) not in ROUTER_WATCHED_KINDS:
        return []
    out = []
    labels = (props.get("metadata") or {}).get("labels") or {}
    if "model.aibrix.ai/name" in labels:
        out.append(f"{_name(props)}: carries model.aibrix.ai/name at its top level; AIBrix would create a shared "
                   "HTTPRoute that deleting this workload removes. Keep the label on the pod template only.")
    for ref in _templates(resource_type, props):
        # Ray workers are not engines: AIBrix must not discover them as model pods (11.2).
        if ".workerGroupSpecs[" in ref.path and "model.aibrix.ai/name" in ((ref.template.get("metadata") or {}).get("labels") or {}):
            out.append(f"{_name(props)}: Ray worker pods at {ref.path} carry model.aibrix.ai/name; only the head serves.")
    return out


LOOPBACK = ("localhost", "127.", "::1")


def _env_value(container: dict, name: str) -> str | None:
    return next((e.get("value") for e in container.get("env") or [] if e.get("name") == name), None)


def _argv(container: dict) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def pd_wiring(resource_type: str, props: dict) -> list[str]:
    """The field report's "looked like P/D but was not" causes (11.3), on every engine pod:
    Ray executor, loopback side channel across pods, wrong AIBrix connector type, implicit KV
    failure policy."""
    out = []
    for ref, engine_containers in _engine_pods(resource_type, props):
        pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
        across_pods = "roleset-name" in pod_labels and pod_labels.get("role-name") in ("prefill", "decode")
        for c in engine_containers:
            argv = _argv(c)
            if _flag_value(argv, "--distributed-executor-backend") == "ray":
                out.append(f"{_name(props)}: container {c.get('name')} uses the Ray executor for a single-node engine; "
                           "use mp (the Ray executor produced garbage tokens, field report 11.3).")
            transfer = _flag_value(argv, "--kv-transfer-config")
            if transfer is None:
                continue
            kv = json.loads(transfer)
            if "kv_load_failure_policy" not in kv:
                out.append(f"{_name(props)}: container {c.get('name')} leaves kv_load_failure_policy implicit; set it.")
            if across_pods:
                host = _env_value(c, "VLLM_NIXL_SIDE_CHANNEL_HOST")
                if not host or host.startswith(LOOPBACK):
                    out.append(f"{_name(props)}: container {c.get('name')} NIXL side channel host is {host or 'unset (loopback)'}; "
                               "the other side cannot connect across pods (set 0.0.0.0).")
                if kv.get("kv_connector") == "NixlConnector" and pod_labels.get("model.aibrix.ai/kv-connector-type") != "shfs":
                    out.append(f"{_name(props)}: vLLM NixlConnector pods need model.aibrix.ai/kv-connector-type=shfs "
                               "(AIBrix's nixl agent is for Neuron and its prefill response is not read by GPU vLLM).")
    return out


def aibrix_profiles_schema(resource_type: str, props: dict) -> list[str]:
    """model.aibrix.ai/config is the profiles schema; the old top-level routingStrategy does not route
    ordinary requests into P/D reliably (field report 11.3)."""
    out = []
    for ref in _templates(resource_type, props):
        raw = _annotations(ref.template).get("model.aibrix.ai/config")
        if raw is None:
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            out.append(f"{_name(props)}: model.aibrix.ai/config is not JSON.")
            continue
        if not isinstance(doc.get("profiles"), dict) or not doc["profiles"] or "routingStrategy" in doc:
            out.append(f"{_name(props)}: model.aibrix.ai/config must be {{\"profiles\": {{\"default\": {{...}}}}}}, "
                       "not the top-level routingStrategy form.")
    return out


def capabilities_minimal(resource_type: str, props: dict) -> list[str]:
    """The only capability ever added is IPC_LOCK, and only for a container that requests RDMA devices."""
    out = []
    for ref in _templates(resource_type, props):
        for _, c in containers(ref.template):
            added = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
            limits = (c.get("resources") or {}).get("limits") or {}
            rdma = any(k.startswith("rdma/") or "rdma" in k for k in limits)
            if added - {"IPC_LOCK"} or (added and not rdma):
                out.append(f"{_name(props)}: container {c.get('name')} adds {sorted(added)}; only IPC_LOCK, only with RDMA devices.")
    return out


RESOURCE_POLICIES = [
    ResourcePolicy("engine-probes-tcp", "Engine startup, readiness and liveness probes are tcpSocket.", engine_probes_are_tcp),
    ResourcePolicy("startup-allowance", "Startup probe allowance covers the startup budget.", startup_allowance_covers_budget),
    ResourcePolicy("model-read-only", "The model is mounted read-only at the volume and every mount.", model_mount_read_only),
    ResourcePolicy("gpu-parallel-size", "GPU requests equal limits equal the engine parallel size.", gpu_counts_match_parallel_size),
    ResourcePolicy("shm-memory", "/dev/shm is a Memory emptyDir sized per GPU.", shm_is_memory_backed),
    ResourcePolicy("image-digest", "Every container image is pinned by digest.", images_pinned_by_digest),
    ResourcePolicy("no-privileged", "No privileged container or privilege escalation.", no_privileged_containers),
    ResourcePolicy("secret-refs", "Credentials only through secretKeyRef.", secrets_only_by_reference),
    ResourcePolicy("sync-off-gpu", "The model sync Job stays off GPU nodes.", model_sync_stays_off_gpus),
    ResourcePolicy("rollout-gpus", "GPU rollouts never add pods and wait for the startup budget.", rollout_never_adds_gpus),
    ResourcePolicy("custom-resources-awaited", "GPU custom resources carry pulumi.com/waitFor.", custom_workloads_are_awaited),
    ResourcePolicy("no-generative-health", "SGLang runs with /health generation disabled.", no_generative_health_checks),
    ResourcePolicy("no-router-owned-routes", "Watched workloads carry no top-level model label.", no_router_owned_routes),
    ResourcePolicy("pd-wiring", "P/D: mp executor, side channel off loopback across pods, shfs, explicit KV failure policy.", pd_wiring),
    ResourcePolicy("aibrix-profiles-schema", "AIBrix model config uses the profiles schema.", aibrix_profiles_schema),
    ResourcePolicy("capabilities-minimal", "Only IPC_LOCK is added, and only with RDMA.", capabilities_minimal),
]


# ---- stack rules: every resource, with options ----

@dataclass(frozen=True)
class StackResource:
    type: str
    name: str
    props: dict
    options: dict        # protect, retainOnDelete, customTimeouts{create,update}, ...
    provider: str
    custom: bool = True


def gpu_total(resources: list[StackResource]) -> int:
    total = 0
    for r in resources:
        for ref in _templates(r.type, r.props):
            total += (ref.replicas + ref.extra_pods) * pod_gpus(ref.template)
    return total


def gpus_within_budget(resources: list[StackResource], budget: int) -> list[str]:
    total = gpu_total(resources)
    return [] if total <= budget else [f"The stack needs {total} GPUs at peak (rollouts included) but its budget is {budget}."]


def _seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration or "")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 0


def await_timeouts_cover_rollout(resources: list[StackResource]) -> list[str]:
    """Pulumi's 10-minute default await fails a 12-minute cold start: every GPU workload carries
    customTimeouts covering its progress deadline (Deployment) or its startup budget (others)."""
    out = []
    for r in resources:
        refs = [t for t in _templates(r.type, r.props) if pod_gpus(t.template)]
        if not refs or _kind(r.type) == "Job":
            continue
        if _kind(r.type) == "Deployment":
            need, what = int((r.props.get("spec") or {}).get("progressDeadlineSeconds", 600)), "progressDeadlineSeconds"
        else:
            need = max(int(_annotations(t.template).get(STARTUP_BUDGET, 600)) for t in refs)
            what = "the startup budget"
        timeouts = r.options.get("customTimeouts") or {}
        for op in ("create", "update"):
            if _seconds(timeouts.get(op, "")) < need:
                out.append(f"{_name(r.props)}: Pulumi {op} timeout {timeouts.get(op, '10m (default)')} is below {what} {need}.")
    return out


def data_is_protected(resources: list[StackResource], environment: str) -> list[str]:
    """Outside dev, the weights bucket survives `pulumi destroy`."""
    if environment == "dev":
        return []
    return [f"Bucket {r.name} must be protected and retained on delete in {environment}."
            for r in resources if r.type == "aws:s3/bucket:Bucket"
            and not (r.options.get("protect") and r.options.get("retainOnDelete"))]


def only_sync_jobs_write_models(resources: list[StackResource]) -> list[str]:
    """A model claim (any claim of the model-volume component, or any volume named `model`) is
    mounted writable only by Jobs; everything else reads it read-only at volume and mount."""
    model_claims = {(r.props.get("metadata") or {}).get("name") for r in resources
                    if _kind(r.type) == "PersistentVolumeClaim"
                    and ((r.props.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component") == "model-volume"}
    out = []
    for r in resources:
        if _kind(r.type) == "Job":
            continue
        for ref in _templates(r.type, r.props):
            for v in _volumes(ref.template).values():
                claim = v.get("persistentVolumeClaim")
                if claim is None or not (v.get("name") == "model" or claim.get("claimName") in model_claims):
                    continue
                mounts = [m for _, c in containers(ref.template) for m in c.get("volumeMounts") or [] if m.get("name") == v.get("name")]
                if not claim.get("readOnly") or not all(m.get("readOnly") for m in mounts):
                    out.append(f"{_name(r.props)}: mounts model claim {claim.get('claimName')} writable; only the sync Job may write the model path.")
    return out


def routes_have_reference_grants(resources: list[StackResource]) -> list[str]:
    """Every HTTPRoute backend in another namespace is allowed by a ReferenceGrant there; without
    one the gateway answers 503 (RefNotPermitted)."""
    grants = [(r.props.get("metadata") or {}, r.props.get("spec") or {}) for r in resources
              if _kind(r.type) == "ReferenceGrant"]

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
        if _kind(r.type) != "HTTPRoute":
            continue
        route_ns = (r.props.get("metadata") or {}).get("namespace")
        for rule in (r.props.get("spec") or {}).get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                backend_ns = ref.get("namespace", route_ns)
                if backend_ns != route_ns and not allowed(route_ns, backend_ns, ref.get("kind", "Service"), ref.get("name")):
                    out.append(f"{_name(r.props)}: backend {backend_ns}/{ref.get('name')} has no ReferenceGrant "
                               f"from HTTPRoutes in {route_ns}; the gateway would answer 503.")
    return out


def _model_path(argv: list[str]) -> str | None:
    """The positional model of `vllm serve <path>`."""
    return argv[argv.index("serve") + 1] if "serve" in argv[:-1] else None


def _roleset_engines(resources: list[StackResource]) -> dict[str, dict[str, list[dict]]]:
    """roleset-name -> role-name -> engine containers, over every workload of the stack."""
    out: dict[str, dict[str, list[dict]]] = {}
    for r in resources:
        for ref, engine_containers in _engine_pods(r.type, r.props):
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
        p, d = _argv(roles["prefill"][0]), _argv(roles["decode"][0])
        if _model_path(p) != _model_path(d):
            out.append(f"P/D roleset {roleset}: prefill and decode serve different model paths "
                       f"({_model_path(p)} vs {_model_path(d)}).")
        for flag in ("--served-model-name", "--kv-cache-dtype", "--block-size", "--max-model-len"):
            if _flag_value(p, flag) != _flag_value(d, flag):
                out.append(f"P/D roleset {roleset}: prefill and decode differ in {flag} "
                           f"({_flag_value(p, flag)} vs {_flag_value(d, flag)}).")
        ptp, dtp = int(_flag_value(p, "--tensor-parallel-size") or 1), int(_flag_value(d, "--tensor-parallel-size") or 1)
        if dtp < ptp:
            out.append(f"P/D roleset {roleset}: decode TP {dtp} is below prefill TP {ptp}; the transfer plan needs decode TP >= prefill TP.")
    return out


def explicit_providers_only(resources: list[StackResource]) -> list[str]:
    """Every custom resource names its provider; default providers are disabled in Pulumi.yaml."""
    return [f"{r.type} {r.name} has no explicit provider ({r.provider or 'default'}); pass one."
            for r in resources if r.custom and not r.type.startswith("pulumi:providers:")
            and (not r.provider or "::default" in r.provider)]
