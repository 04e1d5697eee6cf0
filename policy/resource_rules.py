"""Resource rules: pure functions over (resource type, props), as CrossGuard's
ResourceValidationArgs carries them, each returning violation messages that name the object."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from policy.engines import NAMES, engine_of_argv
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
    each_container,
    each_engine_container,
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
from policy.unknowns import UnknownTouched, decide, is_unknown, items_of
from policy.workloads import GPU, PodTemplateRef


@dataclass(frozen=True)
class ResourcePolicy:
    name: str
    description: str
    check: Callable[[str, dict], list[str]]


def engine_probes_are_tcp(resource_type: str, props: dict) -> list[str]:
    """Engine probes are tcpSocket: an HTTP /health may run a real generation each period and
    pollute TTFT and throughput (field report 12.4)."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        for probe in PROBES:
            out += decide(_probe_is_tcp, props, c, probe)
        return out
    return each_engine_container(resource_type, props, check)


def _probe_is_tcp(props: dict, c: dict, probe: str) -> list[str]:
    p = c.get(probe)
    if not p:
        return [f"{name_of(props)}: container {c.get('name')} has no {probe}; engines need TCP startup, readiness and liveness probes."]
    if set(p) & {"httpGet", "exec", "grpc"} or "tcpSocket" not in p:
        return [f"{name_of(props)}: container {c.get('name')} {probe} is not tcpSocket; generative health checks pollute serving (field report 12.4)."]
    return []


def startup_allowance_covers_budget(resource_type: str, props: dict) -> list[str]:
    """startupProbe periodSeconds x failureThreshold is at least the startup budget."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        budget = annotations_of(ref.template).get(STARTUP_BUDGET)
        if budget is None:
            return []
        p = c.get("startupProbe") or {}
        allowance = int(p.get("periodSeconds", 10)) * int(p.get("failureThreshold", 3))
        if allowance < int(budget):
            return [f"{name_of(props)}: container {c.get('name')} startup allowance {allowance}s is below the startup budget {budget}s; cold starts would be killed."]
        return []
    return each_engine_container(resource_type, props, check)


def model_mount_read_only(resource_type: str, props: dict) -> list[str]:
    """Engine pods mount the model from a claim, read-only at the volume and at every mount."""
    def volume_check(ref: PodTemplateRef) -> list[str]:
        model = volumes_of(ref.template).get("model")
        if model is None or "persistentVolumeClaim" not in model:
            return [f"{name_of(props)}: the engine pod has no model volume from a PersistentVolumeClaim; an emptyDir re-downloads about 156 GiB on every pod re-creation (field report 11.1)."]
        claim = model["persistentVolumeClaim"]
        if not claim.get("readOnly"):
            return [f"{name_of(props)}: model volume claim {claim.get('claimName')} is not readOnly at the volume level."]
        return []

    def mount_check(ref: PodTemplateRef, c: dict) -> list[str]:
        return [f"{name_of(props)}: container {c.get('name')} mounts the model at {m.get('mountPath')} without readOnly."
                for m in items_of(c.get("volumeMounts")) if m.get("name") == "model" and not m.get("readOnly")]

    out = []
    for ref, _ in engine_pods(resource_type, props):
        out += decide(volume_check, ref)
        for _, c in decide(lambda r: list(containers(r.template)), ref):
            out += decide(mount_check, ref, c)
    return out


def gpu_counts_match_parallel_size(resource_type: str, props: dict) -> list[str]:
    """nvidia.com/gpu requests equal limits equal the parallel size (TP x DP in the engine argv)."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        req, lim = gpu_count(c)
        if req != lim:
            out.append(f"{name_of(props)}: container {c.get('name')} requests {req} {GPU} but limits {lim}; they must be equal.")
        out += decide(_parallel_size_matches, props, c, lim)
        declared = annotations_of(ref.template).get(PARALLEL_SIZE)
        if declared is None or int(declared) != lim:
            out.append(f"{name_of(props)}: annotation {PARALLEL_SIZE}={declared} does not match the {lim} GPUs of container {c.get('name')}.")
        return out
    return each_engine_container(resource_type, props, check)


def _parallel_size_matches(props: dict, c: dict, gpus: int) -> list[str]:
    argv = argv_of(c)
    # By the flags the engine declares (policy/engines/): SGLang has no --tp or --dp, they only parse
    # as abbreviations (tests/test_engine_modules.py).
    engine = engine_of_argv(argv)
    if engine is None:
        return [f"{name_of(props)}: container {c.get('name')} has {gpus} GPUs but its argv runs none of the engines "
                f"{', '.join(NAMES)}, so its parallel size cannot be read."]
    size = engine.parallel_size_of_argv(argv)
    if gpus != size:
        return [f"{name_of(props)}: container {c.get('name')} has {gpus} GPUs but the engine argv asks for a parallel size of {size}."]
    return []


def shm_is_memory_backed(resource_type: str, props: dict) -> list[str]:
    """Engine pods get /dev/shm from a Memory emptyDir of at least 8 GiB per GPU (field report 2.1)."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        volumes = volumes_of(ref.template)
        gpus = pod_gpus(ref.template)
        shm = next((m for m in items_of(c.get("volumeMounts")) if m.get("mountPath") == "/dev/shm"), None)
        src = (volumes.get(shm.get("name")) or {}).get("emptyDir") if shm else None
        if not src or src.get("medium") != "Memory":
            return [f"{name_of(props)}: container {c.get('name')} has no Memory emptyDir at /dev/shm."]
        if quantity_gib(src.get("sizeLimit", 0)) < SHM_GIB_PER_GPU * gpus:
            return [f"{name_of(props)}: /dev/shm sizeLimit {src.get('sizeLimit')} is below {SHM_GIB_PER_GPU * gpus}Gi for {gpus} GPUs."]
        return []
    return each_engine_container(resource_type, props, check)


def _offload_gib(argv: list[str]) -> tuple[float, bool]:
    """(GiB of host memory the engine allocates for offloaded KV, whether it may keep it in /dev/shm),
    by the arithmetic of the engine's module, which the program's pods are sized with too
    (components/engines.py offload_memory_gib)."""
    engine = engine_of_argv(argv)
    if engine is None:
        return 0.0, False
    return engine.offload_gib_of_argv(argv), engine.OFFLOAD_IN_SHM


def offload_memory_covered(resource_type: str, props: dict) -> list[str]:
    """An engine that offloads KV to host memory has the memory for it: its request covers the offload
    in its argv, its limit the offload plus the 8 GiB of /dev/shm per GPU charged within it, and with
    vLLM's offload (0.33.0 maps it into /dev/shm) the /dev/shm emptyDir holds both (issue 13)."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        host, in_shm = _offload_gib(argv_of(c))
        if not host:
            return []
        res = c.get("resources") or {}
        gpus = max(gpu_count(c))
        request = quantity_gib((res.get("requests") or {}).get("memory", 0))
        limit = quantity_gib((res.get("limits") or {}).get("memory", 0))
        out = []
        if request < host:
            out.append(f"{name_of(props)}: container {c.get('name')} requests {request:g}Gi of memory, less than the "
                       f"{host:g}Gi of KV offload in its argv.")
        if limit < host + SHM_GIB_PER_GPU * gpus:
            out.append(f"{name_of(props)}: container {c.get('name')} memory limit {limit:g}Gi does not hold the "
                       f"{host:g}Gi of KV offload in its argv plus {SHM_GIB_PER_GPU * gpus}Gi of /dev/shm.")
        if in_shm:
            shm = next((m for m in items_of(c.get("volumeMounts")) if m.get("mountPath") == "/dev/shm"), None)
            src = (volumes_of(ref.template).get(shm.get("name")) or {}).get("emptyDir") or {} if shm else {}
            if quantity_gib(src.get("sizeLimit", 0)) < host + SHM_GIB_PER_GPU * gpus:
                out.append(f"{name_of(props)}: /dev/shm sizeLimit {src.get('sizeLimit')} does not hold the "
                           f"{host:g}Gi vLLM offloads there plus {SHM_GIB_PER_GPU * gpus}Gi for {gpus} GPUs.")
        return out
    return each_engine_container(resource_type, props, check)


HOST_ACCESS_REASON = "llm-serving.io/host-access-reason"


def no_host_access(resource_type: str, props: dict) -> list[str]:
    """No host network, PID or IPC namespace and no hostPath volume, unless the pod template documents
    why (an RDMA setup that needs it) in the llm-serving.io/host-access-reason annotation."""
    def documented(ref: PodTemplateRef) -> list[bool]:
        return [bool(annotations_of(ref.template).get(HOST_ACCESS_REASON))]

    def namespace_check(ref: PodTemplateRef, field: str) -> list[str]:
        if (ref.template.get("spec") or {}).get(field):
            return [f"{name_of(props)}: {field} is on; remove it, or document the RDMA need in {HOST_ACCESS_REASON}."]
        return []

    def volume_check(v: dict) -> list[str]:
        if "hostPath" in v:
            return [f"{name_of(props)}: volume {v.get('name')} is a hostPath; use a claim, or document the need "
                    f"in {HOST_ACCESS_REASON}."]
        return []

    out = []
    for ref in templates(resource_type, props):
        if decide(documented, ref) != [False]:
            continue  # documented, or undecided during preview
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            out += decide(namespace_check, ref, field)
        for v in decide(lambda r: items_of((r.template.get("spec") or {}).get("volumes")), ref):
            out += decide(volume_check, v)
    return out


def images_pinned_by_digest(resource_type: str, props: dict) -> list[str]:
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        if not DIGEST.search(str(c.get("image", ""))):
            return [f"{name_of(props)}: container {c.get('name')} image {c.get('image')!r} is not pinned by digest."]
        return []
    return each_container(resource_type, props, check)


def no_privileged_containers(resource_type: str, props: dict) -> list[str]:
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True):
            return [f"{name_of(props)}: container {c.get('name')} must set privileged false and allowPrivilegeEscalation false."]
        return []
    return each_container(resource_type, props, check)


def _points_to_a_file(env: dict) -> bool:
    """`*_FILE` / `*_PATH` variables holding an absolute path name a mounted Secret file, not a secret."""
    name, value = str(env.get("name", "")), env.get("value")
    if is_unknown(value):
        raise UnknownTouched()
    return name.endswith(("_FILE", "_PATH")) and isinstance(value, str) and value.startswith("/")


def secrets_only_by_reference(resource_type: str, props: dict) -> list[str]:
    """Credentials reach containers only through secretKeyRef or mounted Secret files, never as
    literal env values."""
    def env_check(c: dict, e: dict) -> list[str]:
        if (SECRET_NAME.search(str(e.get("name", ""))) and "secretKeyRef" not in (e.get("valueFrom") or {})
                and not _points_to_a_file(e)):
            return [f"{name_of(props)}: container {c.get('name')} env {e.get('name')} looks like a credential but is not a secretKeyRef."]
        return []

    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        for e in items_of(c.get("env")):
            out += decide(env_check, c, e)
        return out
    return each_container(resource_type, props, check)


def model_sync_stays_off_gpus(resource_type: str, props: dict) -> list[str]:
    """The sync Job requests no GPU and is kept off GPU nodes (field report 3.2)."""
    if kind_of(resource_type) != "Job":
        return []

    def gpu_check(ref: PodTemplateRef) -> list[str]:
        if any(max(gpu_count(c)) for _, c in containers(ref.template)):
            return [f"{name_of(props)}: a Job must not request {GPU}; downloads and checks run on CPU nodes."]
        return []

    def affinity_check(ref: PodTemplateRef) -> list[str]:
        spec = ref.template.get("spec") or {}
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        if not terms or not all(any(e.get("operator") == "DoesNotExist" for e in t.get("matchExpressions") or []) for t in terms):
            return [f"{name_of(props)}: the Job needs a required node affinity that excludes GPU nodes (DoesNotExist on the GPU pool labels)."]
        return []

    def toleration_check(ref: PodTemplateRef) -> list[str]:
        if any(t.get("key") == GPU for t in (ref.template.get("spec") or {}).get("tolerations") or []):
            return [f"{name_of(props)}: the Job tolerates the GPU taint; it must never land on a GPU node."]
        return []

    out = []
    for ref in templates(resource_type, props):
        for check in (gpu_check, affinity_check, toleration_check):
            out += decide(check, ref)
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
            out.append(f"{name_of(props)}: container {c.get('name')} of a DaemonSet requests {GPU}; a pod per node "
                       "is a GPU count no budget bounds.")
        if env_value(c, NVIDIA_VISIBLE_DEVICES) != "void":
            out.append(f"{name_of(props)}: container {c.get('name')} must set {NVIDIA_VISIBLE_DEVICES}=void, or the "
                       "NVIDIA runtime hands it the node's GPUs when its image asks for all.")
        return out
    return each_container(resource_type, props, check)


def rollout_never_adds_gpus(resource_type: str, props: dict) -> list[str]:
    """A GPU workload of any kind rolls without surge pods; a Deployment also waits at least the
    startup budget before declaring the rollout stuck."""
    def surge_check(ref: PodTemplateRef) -> list[str]:
        if pod_gpus(ref.template) and ref.surge:
            return [f"{name_of(props)}: the rollout at {ref.path or 'the pod'} may start {ref.surge} extra pod(s) of "
                    f"{pod_gpus(ref.template)} GPUs; use Recreate or maxSurge 0."]
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


def no_generative_health_checks(resource_type: str, props: dict) -> list[str]:
    """An engine runs with the environment its module requires: SGLang with /health generation off
    (field report 12.4, SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0), whatever probes say."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        engine = engine_of_argv(argv_of(c))
        if engine is None:
            return []
        return [f"{name_of(props)}: {engine.DISPLAY_NAME} container {c.get('name')} must set {name}={value}."
                for name, value in engine.ENV.items() if env_value(c, name) != value]
    return each_engine_container(resource_type, props, check)


# Kinds whose own labels AIBrix v0.7.0's model router watches to create a `<model>-router` route.
ROUTER_WATCHED_KINDS = {"Deployment", "RayClusterFleet", "LeaderWorkerSet", "ModelAdapter"}
MODEL_LABEL = "model.aibrix.ai/name"


def no_router_owned_routes(resource_type: str, props: dict) -> list[str]:
    """The model label belongs on pods, not on a watched workload: else AIBrix creates a route the
    workload owns, shared by every workload with that label and deleted with any of them (11.2)."""
    if kind_of(resource_type) not in ROUTER_WATCHED_KINDS:
        return []

    def top_level() -> list[str]:
        if MODEL_LABEL in ((props.get("metadata") or {}).get("labels") or {}):
            return [f"{name_of(props)}: carries {MODEL_LABEL} at its top level; AIBrix would create a shared "
                    "HTTPRoute that deleting this workload removes. Keep the label on the pod template only."]
        return []

    def worker(ref: PodTemplateRef) -> list[str]:
        # Ray workers are not engines: AIBrix must not discover them as model pods (11.2).
        if ".workerGroupSpecs[" in ref.path and MODEL_LABEL in ((ref.template.get("metadata") or {}).get("labels") or {}):
            return [f"{name_of(props)}: Ray worker pods at {ref.path} carry {MODEL_LABEL}; only the head serves."]
        return []

    out = decide(top_level)
    for ref in templates(resource_type, props):
        out += decide(worker, ref)
    return out


def pd_wiring(resource_type: str, props: dict) -> list[str]:
    """The field report's "looked like P/D but was not" causes (11.3), on every engine pod:
    Ray executor, loopback side channel across pods, wrong AIBrix connector type, implicit KV
    failure policy."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        argv = argv_of(c)
        if flag_value(argv, "--distributed-executor-backend") == "ray":
            out.append(f"{name_of(props)}: container {c.get('name')} uses the Ray executor for a single-node engine; "
                       "use mp (the Ray executor produced garbage tokens, field report 11.3).")
        transfer = flag_value(argv, "--kv-transfer-config")
        if transfer is None:
            return out
        try:
            kv = json.loads(transfer)
        except ValueError:
            return out + [f"{name_of(props)}: container {c.get('name')} --kv-transfer-config is not JSON."]
        if not isinstance(kv, dict):
            return out + [f"{name_of(props)}: container {c.get('name')} --kv-transfer-config is not a JSON object."]
        if "kv_load_failure_policy" not in kv:
            out.append(f"{name_of(props)}: container {c.get('name')} leaves kv_load_failure_policy implicit; set it.")
        return out + decide(_across_pods_wiring, props, ref, c, kv)
    return each_engine_container(resource_type, props, check)


def _across_pods_wiring(props: dict, ref: PodTemplateRef, c: dict, kv: dict) -> list[str]:
    pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
    if not ("roleset-name" in pod_labels and pod_labels.get("role-name") in ("prefill", "decode")):
        return []
    out = []
    host = env_value(c, "VLLM_NIXL_SIDE_CHANNEL_HOST")
    if not host or str(host).startswith(LOOPBACK):
        out.append(f"{name_of(props)}: container {c.get('name')} NIXL side channel host is {host or 'unset (loopback)'}; "
                   "the other side cannot connect across pods (set 0.0.0.0).")
    if kv.get("kv_connector") == "NixlConnector" and pod_labels.get("model.aibrix.ai/kv-connector-type") != "shfs":
        out.append(f"{name_of(props)}: vLLM NixlConnector pods need model.aibrix.ai/kv-connector-type=shfs "
                   "(AIBrix's nixl agent is for Neuron and its prefill response is not read by GPU vLLM).")
    return out


def aibrix_profiles_schema(resource_type: str, props: dict) -> list[str]:
    """model.aibrix.ai/config is the profiles schema; the old top-level routingStrategy does not route
    ordinary requests into P/D reliably (field report 11.3)."""
    def check(ref: PodTemplateRef) -> list[str]:
        raw = annotations_of(ref.template).get("model.aibrix.ai/config")
        if raw is None:
            return []
        try:
            doc = json.loads(str(raw))
        except ValueError:
            return [f"{name_of(props)}: model.aibrix.ai/config is not JSON."]
        if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), dict) or not doc["profiles"] or "routingStrategy" in doc:
            return [f"{name_of(props)}: model.aibrix.ai/config must be {{\"profiles\": {{\"default\": {{...}}}}}}, "
                    "not the top-level routingStrategy form."]
        return []
    out = []
    for ref in templates(resource_type, props):
        out += decide(check, ref)
    return out


def capabilities_minimal(resource_type: str, props: dict) -> list[str]:
    """The only capability ever added is IPC_LOCK, and only for a container that requests RDMA devices."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        added = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
        limits = (c.get("resources") or {}).get("limits") or {}
        rdma = any(str(k).startswith("rdma/") or "rdma" in str(k) for k in limits)
        if added - {"IPC_LOCK"} or (added and not rdma):
            return [f"{name_of(props)}: container {c.get('name')} adds {sorted(added)}; only IPC_LOCK, only with RDMA devices."]
        return []
    return each_container(resource_type, props, check)


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


RESOURCE_POLICIES = [
    ResourcePolicy("engine-probes-tcp", "Engine startup, readiness and liveness probes are tcpSocket.", engine_probes_are_tcp),
    ResourcePolicy("startup-allowance", "Startup probe allowance covers the startup budget.", startup_allowance_covers_budget),
    ResourcePolicy("model-read-only", "The model is mounted read-only at the volume and every mount.", model_mount_read_only),
    ResourcePolicy("gpu-parallel-size", "GPU requests equal limits equal the engine parallel size.", gpu_counts_match_parallel_size),
    ResourcePolicy("shm-memory", "/dev/shm is a Memory emptyDir sized per GPU.", shm_is_memory_backed),
    ResourcePolicy("offload-memory", "KV offload in the engine argv is covered by memory and /dev/shm.",
                   offload_memory_covered),
    ResourcePolicy("image-digest", "Every container image is pinned by digest.", images_pinned_by_digest),
    ResourcePolicy("no-privileged", "No privileged container or privilege escalation.", no_privileged_containers),
    ResourcePolicy("no-host-access", "No host network, PID, IPC or hostPath without a documented reason.", no_host_access),
    ResourcePolicy("secret-refs", "Credentials only through secretKeyRef.", secrets_only_by_reference),
    ResourcePolicy("sync-off-gpu", "The model sync Job stays off GPU nodes.", model_sync_stays_off_gpus),
    ResourcePolicy("daemonsets-no-gpu", "DaemonSets request no GPU and hide the node's GPUs (NVIDIA_VISIBLE_DEVICES=void).",
                   daemonsets_hold_no_gpus),
    ResourcePolicy("rollout-gpus", "GPU rollouts never add pods and wait for the startup budget.", rollout_never_adds_gpus),
    ResourcePolicy("custom-resources-awaited", "GPU custom resources carry pulumi.com/waitFor.", custom_workloads_are_awaited),
    ResourcePolicy("no-generative-health", "SGLang runs with /health generation disabled.", no_generative_health_checks),
    ResourcePolicy("no-router-owned-routes", "Watched workloads carry no top-level model label.", no_router_owned_routes),
    ResourcePolicy("pd-wiring", "P/D: mp executor, side channel off loopback across pods, shfs, explicit KV failure policy.", pd_wiring),
    ResourcePolicy("aibrix-profiles-schema", "AIBrix model config uses the profiles schema.", aibrix_profiles_schema),
    ResourcePolicy("jobs-rerun", "Awaited Jobs are replaced when unready, so a retry reruns them; unawaited Jobs are not.",
                   jobs_rerun_when_unready),
    ResourcePolicy("capabilities-minimal", "Only IPC_LOCK is added, and only with RDMA.", capabilities_minimal),
]
