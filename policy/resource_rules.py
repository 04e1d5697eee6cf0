"""Resource rules: pure functions over (resource type, props), as CrossGuard's
ResourceValidationArgs carries them, each returning violation messages that name the object."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from policy.manifests import (
    BUILTIN,
    DIGEST,
    LOOPBACK,
    PARALLEL_SIZE,
    PROBES,
    SECRET_NAME,
    SHM_GIB_PER_GPU,
    STARTUP_BUDGET,
    annotations_of,
    argv_of,
    containers,
    engine_pods,
    env_value,
    flag_value,
    gpu_count,
    kind_of,
    name_of,
    pod_gpus,
    quantity_gib,
    templates,
    volumes_of,
)
from policy.workloads import GPU


@dataclass(frozen=True)
class ResourcePolicy:
    name: str
    description: str
    check: Callable[[str, dict], list[str]]


def engine_probes_are_tcp(resource_type: str, props: dict) -> list[str]:
    """Engine probes are tcpSocket: an HTTP /health may run a real generation each period and
    pollute TTFT and throughput (field report 12.4)."""
    out = []
    for _, engine_containers in engine_pods(resource_type, props):
        for c in engine_containers:
            for probe in PROBES:
                p = c.get(probe)
                if not p:
                    out.append(f"{name_of(props)}: container {c.get('name')} has no {probe}; engines need TCP startup, readiness and liveness probes.")
                elif set(p) & {"httpGet", "exec", "grpc"} or "tcpSocket" not in p:
                    out.append(f"{name_of(props)}: container {c.get('name')} {probe} is not tcpSocket; generative health checks pollute serving (field report 12.4).")
    return out


def startup_allowance_covers_budget(resource_type: str, props: dict) -> list[str]:
    """startupProbe periodSeconds x failureThreshold is at least the startup budget."""
    out = []
    for ref, engine_containers in engine_pods(resource_type, props):
        budget = annotations_of(ref.template).get(STARTUP_BUDGET)
        if budget is None:
            continue
        for c in engine_containers:
            p = c.get("startupProbe") or {}
            allowance = int(p.get("periodSeconds", 10)) * int(p.get("failureThreshold", 3))
            if allowance < int(budget):
                out.append(f"{name_of(props)}: container {c.get('name')} startup allowance {allowance}s is below the startup budget {budget}s; cold starts would be killed.")
    return out


def model_mount_read_only(resource_type: str, props: dict) -> list[str]:
    """Engine pods mount the model from a claim, read-only at the volume and at every mount."""
    out = []
    for ref, _ in engine_pods(resource_type, props):
        model = volumes_of(ref.template).get("model")
        if model is None or "persistentVolumeClaim" not in model:
            out.append(f"{name_of(props)}: the engine pod has no model volume from a PersistentVolumeClaim; an emptyDir re-downloads about 156 GiB on every pod re-creation (field report 11.1).")
            continue
        if not model["persistentVolumeClaim"].get("readOnly"):
            out.append(f"{name_of(props)}: model volume claim {model['persistentVolumeClaim'].get('claimName')} is not readOnly at the volume level.")
        for _, c in containers(ref.template):
            for m in c.get("volumeMounts") or []:
                if m.get("name") == "model" and not m.get("readOnly"):
                    out.append(f"{name_of(props)}: container {c.get('name')} mounts the model at {m.get('mountPath')} without readOnly.")
    return out


def gpu_counts_match_parallel_size(resource_type: str, props: dict) -> list[str]:
    """nvidia.com/gpu requests equal limits equal the parallel size (TP x DP in the engine argv)."""
    out = []
    for ref, engine_containers in engine_pods(resource_type, props):
        declared = annotations_of(ref.template).get(PARALLEL_SIZE)
        for c in engine_containers:
            req, lim = gpu_count(c)
            if req != lim:
                out.append(f"{name_of(props)}: container {c.get('name')} requests {req} {GPU} but limits {lim}; they must be equal.")
            argv = argv_of(c)
            size = (int(flag_value(argv, "--tensor-parallel-size", "--tp") or 1)
                    * int(flag_value(argv, "--data-parallel-size", "--dp") or 1))
            if lim != size:
                out.append(f"{name_of(props)}: container {c.get('name')} has {lim} GPUs but the engine argv asks for a parallel size of {size}.")
            if declared is None or int(declared) != lim:
                out.append(f"{name_of(props)}: annotation {PARALLEL_SIZE}={declared} does not match the {lim} GPUs of container {c.get('name')}.")
    return out


def shm_is_memory_backed(resource_type: str, props: dict) -> list[str]:
    """Engine pods get /dev/shm from a Memory emptyDir of at least 8 GiB per GPU (field report 2.1)."""
    out = []
    for ref, engine_containers in engine_pods(resource_type, props):
        volumes = volumes_of(ref.template)
        gpus = pod_gpus(ref.template)
        for c in engine_containers:
            shm = next((m for m in c.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"), None)
            src = (volumes.get(shm.get("name")) or {}).get("emptyDir") if shm else None
            if not src or src.get("medium") != "Memory":
                out.append(f"{name_of(props)}: container {c.get('name')} has no Memory emptyDir at /dev/shm.")
            elif quantity_gib(src.get("sizeLimit", 0)) < SHM_GIB_PER_GPU * gpus:
                out.append(f"{name_of(props)}: /dev/shm sizeLimit {src.get('sizeLimit')} is below {SHM_GIB_PER_GPU * gpus}Gi for {gpus} GPUs.")
    return out


HOST_ACCESS_REASON = "llm-serving.io/host-access-reason"


def no_host_access(resource_type: str, props: dict) -> list[str]:
    """No host network, PID or IPC namespace and no hostPath volume, unless the pod template documents
    why (an RDMA setup that needs it) in the llm-serving.io/host-access-reason annotation."""
    out = []
    for ref in templates(resource_type, props):
        if annotations_of(ref.template).get(HOST_ACCESS_REASON):
            continue
        spec = ref.template.get("spec") or {}
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(field):
                out.append(f"{name_of(props)}: {field} is on; remove it, or document the RDMA need in {HOST_ACCESS_REASON}.")
        for v in spec.get("volumes") or []:
            if "hostPath" in v:
                out.append(f"{name_of(props)}: volume {v.get('name')} is a hostPath; use a claim, or document the need "
                           f"in {HOST_ACCESS_REASON}.")
    return out


def images_pinned_by_digest(resource_type: str, props: dict) -> list[str]:
    out = []
    for ref in templates(resource_type, props):
        for _, c in containers(ref.template):
            if not DIGEST.search(str(c.get("image", ""))):
                out.append(f"{name_of(props)}: container {c.get('name')} image {c.get('image')!r} is not pinned by digest.")
    return out


def no_privileged_containers(resource_type: str, props: dict) -> list[str]:
    out = []
    for ref in templates(resource_type, props):
        for _, c in containers(ref.template):
            sc = c.get("securityContext") or {}
            if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True):
                out.append(f"{name_of(props)}: container {c.get('name')} must set privileged false and allowPrivilegeEscalation false.")
    return out


def _points_to_a_file(env: dict) -> bool:
    """`*_FILE` / `*_PATH` variables holding an absolute path name a mounted Secret file, not a secret."""
    name, value = env.get("name", ""), env.get("value")
    return name.endswith(("_FILE", "_PATH")) and isinstance(value, str) and value.startswith("/")


def secrets_only_by_reference(resource_type: str, props: dict) -> list[str]:
    """Credentials reach containers only through secretKeyRef or mounted Secret files, never as
    literal env values."""
    out = []
    for ref in templates(resource_type, props):
        for _, c in containers(ref.template):
            for e in c.get("env") or []:
                if (SECRET_NAME.search(e.get("name", "")) and "secretKeyRef" not in (e.get("valueFrom") or {})
                        and not _points_to_a_file(e)):
                    out.append(f"{name_of(props)}: container {c.get('name')} env {e.get('name')} looks like a credential but is not a secretKeyRef.")
    return out


def model_sync_stays_off_gpus(resource_type: str, props: dict) -> list[str]:
    """The sync Job requests no GPU and is kept off GPU nodes (field report 3.2)."""
    if kind_of(resource_type) != "Job":
        return []
    out = []
    for ref in templates(resource_type, props):
        spec = ref.template.get("spec") or {}
        if any(max(gpu_count(c)) for _, c in containers(ref.template)):
            out.append(f"{name_of(props)}: a Job must not request {GPU}; downloads and checks run on CPU nodes.")
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        if not terms or not all(any(e.get("operator") == "DoesNotExist" for e in t.get("matchExpressions") or []) for t in terms):
            out.append(f"{name_of(props)}: the Job needs a required node affinity that excludes GPU nodes (DoesNotExist on the GPU pool labels).")
        if any(t.get("key") == GPU for t in spec.get("tolerations") or []):
            out.append(f"{name_of(props)}: the Job tolerates the GPU taint; it must never land on a GPU node.")
    return out


def rollout_never_adds_gpus(resource_type: str, props: dict) -> list[str]:
    """A GPU workload of any kind rolls without surge pods; a Deployment also waits at least the
    startup budget before declaring the rollout stuck."""
    out = []
    for ref in templates(resource_type, props):
        if pod_gpus(ref.template) == 0:
            continue
        if ref.surge:
            out.append(f"{name_of(props)}: the rollout at {ref.path or 'the pod'} may start {ref.surge} extra pod(s) of "
                       f"{pod_gpus(ref.template)} GPUs; use Recreate or maxSurge 0.")
        budget = annotations_of(ref.template).get(STARTUP_BUDGET)
        if kind_of(resource_type) == "Deployment" and budget is not None:
            deadline = (props.get("spec") or {}).get("progressDeadlineSeconds", 600)
            if int(deadline) < int(budget):
                out.append(f"{name_of(props)}: progressDeadlineSeconds {deadline} is below the startup budget {budget}s.")
    return out


def custom_workloads_are_awaited(resource_type: str, props: dict) -> list[str]:
    """Pulumi does not wait for a custom resource unless it carries pulumi.com/waitFor; without it
    `pulumi up` would report success while the engine is still cold."""
    if kind_of(resource_type) in BUILTIN or not any(pod_gpus(r.template) for r in templates(resource_type, props)):
        return []
    annotations = (props.get("metadata") or {}).get("annotations") or {}
    if "pulumi.com/waitFor" not in annotations:
        return [f"{name_of(props)}: a GPU custom resource needs a pulumi.com/waitFor annotation (e.g. condition=Ready)."]
    if "pulumi.com/skipAwait" in annotations:
        return [f"{name_of(props)}: pulumi.com/skipAwait makes `pulumi up` return before the engine is ready."]
    return []


SGLANG_HEALTH = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"


def no_generative_health_checks(resource_type: str, props: dict) -> list[str]:
    """An SGLang engine runs with /health generation off (field report 12.4), whatever probes say."""
    out = []
    for _, engine_containers in engine_pods(resource_type, props):
        for c in engine_containers:
            argv = " ".join(str(a) for a in (c.get("command") or []) + (c.get("args") or []))
            if "sglang" not in argv:
                continue
            env = {e.get("name"): e for e in c.get("env") or []}
            if (env.get(SGLANG_HEALTH) or {}).get("value") != "0":
                out.append(f"{name_of(props)}: SGLang container {c.get('name')} must set {SGLANG_HEALTH}=0.")
    return out


# Kinds whose own labels AIBrix v0.7.0's model router watches to create a `<model>-router` route.
ROUTER_WATCHED_KINDS = {"Deployment", "RayClusterFleet", "LeaderWorkerSet", "ModelAdapter"}


def no_router_owned_routes(resource_type: str, props: dict) -> list[str]:
    """The model label belongs on pods, not on a watched workload: else AIBrix creates a route the
    workload owns, shared by every workload with that label and deleted with any of them (11.2)."""
    if kind_of(resource_type) not in ROUTER_WATCHED_KINDS:
        return []
    out = []
    labels = (props.get("metadata") or {}).get("labels") or {}
    if "model.aibrix.ai/name" in labels:
        out.append(f"{name_of(props)}: carries model.aibrix.ai/name at its top level; AIBrix would create a shared "
                   "HTTPRoute that deleting this workload removes. Keep the label on the pod template only.")
    for ref in templates(resource_type, props):
        # Ray workers are not engines: AIBrix must not discover them as model pods (11.2).
        if ".workerGroupSpecs[" in ref.path and "model.aibrix.ai/name" in ((ref.template.get("metadata") or {}).get("labels") or {}):
            out.append(f"{name_of(props)}: Ray worker pods at {ref.path} carry model.aibrix.ai/name; only the head serves.")
    return out


def pd_wiring(resource_type: str, props: dict) -> list[str]:
    """The field report's "looked like P/D but was not" causes (11.3), on every engine pod:
    Ray executor, loopback side channel across pods, wrong AIBrix connector type, implicit KV
    failure policy."""
    out = []
    for ref, engine_containers in engine_pods(resource_type, props):
        pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
        across_pods = "roleset-name" in pod_labels and pod_labels.get("role-name") in ("prefill", "decode")
        for c in engine_containers:
            argv = argv_of(c)
            if flag_value(argv, "--distributed-executor-backend") == "ray":
                out.append(f"{name_of(props)}: container {c.get('name')} uses the Ray executor for a single-node engine; "
                           "use mp (the Ray executor produced garbage tokens, field report 11.3).")
            transfer = flag_value(argv, "--kv-transfer-config")
            if transfer is None:
                continue
            kv = json.loads(transfer)
            if "kv_load_failure_policy" not in kv:
                out.append(f"{name_of(props)}: container {c.get('name')} leaves kv_load_failure_policy implicit; set it.")
            if across_pods:
                host = env_value(c, "VLLM_NIXL_SIDE_CHANNEL_HOST")
                if not host or host.startswith(LOOPBACK):
                    out.append(f"{name_of(props)}: container {c.get('name')} NIXL side channel host is {host or 'unset (loopback)'}; "
                               "the other side cannot connect across pods (set 0.0.0.0).")
                if kv.get("kv_connector") == "NixlConnector" and pod_labels.get("model.aibrix.ai/kv-connector-type") != "shfs":
                    out.append(f"{name_of(props)}: vLLM NixlConnector pods need model.aibrix.ai/kv-connector-type=shfs "
                               "(AIBrix's nixl agent is for Neuron and its prefill response is not read by GPU vLLM).")
    return out


def aibrix_profiles_schema(resource_type: str, props: dict) -> list[str]:
    """model.aibrix.ai/config is the profiles schema; the old top-level routingStrategy does not route
    ordinary requests into P/D reliably (field report 11.3)."""
    out = []
    for ref in templates(resource_type, props):
        raw = annotations_of(ref.template).get("model.aibrix.ai/config")
        if raw is None:
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            out.append(f"{name_of(props)}: model.aibrix.ai/config is not JSON.")
            continue
        if not isinstance(doc.get("profiles"), dict) or not doc["profiles"] or "routingStrategy" in doc:
            out.append(f"{name_of(props)}: model.aibrix.ai/config must be {{\"profiles\": {{\"default\": {{...}}}}}}, "
                       "not the top-level routingStrategy form.")
    return out


def capabilities_minimal(resource_type: str, props: dict) -> list[str]:
    """The only capability ever added is IPC_LOCK, and only for a container that requests RDMA devices."""
    out = []
    for ref in templates(resource_type, props):
        for _, c in containers(ref.template):
            added = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
            limits = (c.get("resources") or {}).get("limits") or {}
            rdma = any(k.startswith("rdma/") or "rdma" in k for k in limits)
            if added - {"IPC_LOCK"} or (added and not rdma):
                out.append(f"{name_of(props)}: container {c.get('name')} adds {sorted(added)}; only IPC_LOCK, only with RDMA devices.")
    return out


RESOURCE_POLICIES = [
    ResourcePolicy("engine-probes-tcp", "Engine startup, readiness and liveness probes are tcpSocket.", engine_probes_are_tcp),
    ResourcePolicy("startup-allowance", "Startup probe allowance covers the startup budget.", startup_allowance_covers_budget),
    ResourcePolicy("model-read-only", "The model is mounted read-only at the volume and every mount.", model_mount_read_only),
    ResourcePolicy("gpu-parallel-size", "GPU requests equal limits equal the engine parallel size.", gpu_counts_match_parallel_size),
    ResourcePolicy("shm-memory", "/dev/shm is a Memory emptyDir sized per GPU.", shm_is_memory_backed),
    ResourcePolicy("image-digest", "Every container image is pinned by digest.", images_pinned_by_digest),
    ResourcePolicy("no-privileged", "No privileged container or privilege escalation.", no_privileged_containers),
    ResourcePolicy("no-host-access", "No host network, PID, IPC or hostPath without a documented reason.", no_host_access),
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
