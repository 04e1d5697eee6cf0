"""Rules over the engine pods themselves: TCP probes, the startup allowance, the read-only model
mount, GPUs equal to the parallel size, /dev/shm and the KV offload it must hold, and health checks
that generate nothing."""

from __future__ import annotations

from policy.engines import NAMES, engine_of_argv
from policy.manifests import (
    PARALLEL_SIZE,
    PROBES,
    SHM_GIB_PER_GPU,
    STARTUP_BUDGET,
    annotations_of,
    argv_of,
    containers,
    each_engine_container,
    engine_pods,
    env_value,
    gpu_count,
    name_of,
    pod_gpus,
    quantity_gib,
    volumes_of,
)
from policy.unknowns import decide, items_of
from policy.workloads import PodTemplateRef, gpu_resource_names


def _serves_http(c: dict) -> bool:
    """Whether the engine container's argv opens a port (its engine module says: vLLM --headless does not);
    raises UnknownTouched when the argv is unknown."""
    argv = argv_of(c)
    engine = engine_of_argv(argv)
    return engine is None or engine.serves_http(argv)


def engine_probes_are_tcp(resource_type: str, props: dict) -> list[str]:
    """Engine probes are tcpSocket: an HTTP /health may run a real generation each period and
    pollute TTFT and throughput (field report 12.4). An engine that serves no port (vLLM --headless) runs
    only as a worker of a group (issue 29: a LeaderWorkerSet workerTemplate, RBG's worker view) and has no
    probe, which could never pass; anywhere else it would serve nothing and is refused."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        if not _serves_http(c):
            if not ref.group_worker:
                return [f"{name_of(props)}: container {c.get('name')} at {ref.path or 'the pod'} runs its engine "
                        "headless, which serves no port and no /health; only a group's worker pod may, beside a "
                        "leader that serves."]
            return [f"{name_of(props)}: container {c.get('name')} at {ref.path} runs headless and serves no port, "
                    f"so its {probe} could never pass; a headless worker has no probes."
                    for probe in PROBES if c.get(probe)]
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
        if budget is None or not _serves_http(c):
            return []   # a headless group worker has no probe to kill it (engine_probes_are_tcp)
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
    """GPU requests (nvidia.com/gpu or another policy/workloads.py GPU_RESOURCES name) equal limits equal
    the engine's GPUs on one node: the parallel size in its argv (TP x PP x DP) over the nodes it spans
    (--nnodes, issue 29: every pod of a group holds one node's share). The parallel-size annotation states
    the whole engine's."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        req, lim = gpu_count(c)
        if req != lim:
            out.append(f"{name_of(props)}: container {c.get('name')} requests {req} {', '.join(gpu_resource_names(c))} but limits {lim}; they must be equal.")
        out += decide(_parallel_size_matches, props, ref, c, lim)
        nodes = decide(lambda: [_nodes(c)]) or [1]
        declared = annotations_of(ref.template).get(PARALLEL_SIZE)
        if declared is None or int(declared) != lim * nodes[0]:
            spans = f" on each of its {nodes[0]} nodes" if nodes[0] > 1 else ""
            out.append(f"{name_of(props)}: annotation {PARALLEL_SIZE}={declared} does not match the {lim} GPUs of container {c.get('name')}{spans}.")
        return out
    return each_engine_container(resource_type, props, check)


def _nodes(c: dict) -> int:
    argv = argv_of(c)
    engine = engine_of_argv(argv)
    return 1 if engine is None else engine.nodes_of_argv(argv)


def _parallel_size_matches(props: dict, ref: PodTemplateRef, c: dict, gpus: int) -> list[str]:
    argv = argv_of(c)
    # By the flags the engine declares (policy/engines/): SGLang has no --tp or --dp, they only parse
    # as abbreviations (tests/test_engine_modules.py).
    engine = engine_of_argv(argv)
    if engine is None:
        return [f"{name_of(props)}: container {c.get('name')} has {gpus} GPUs but its argv runs none of the engines "
                f"{', '.join(NAMES)}, so its parallel size cannot be read."]
    size, nodes = engine.parallel_size_of_argv(argv), engine.nodes_of_argv(argv)
    if nodes == 1:
        if gpus != size:
            return [f"{name_of(props)}: container {c.get('name')} has {gpus} GPUs but the engine argv asks for a parallel size of {size}."]
        return []
    if size % nodes:
        return [f"{name_of(props)}: container {c.get('name')} at {ref.path}: the engine argv's parallel size {size} is "
                f"not a whole number of GPUs on each of its {nodes} nodes (--nnodes)."]
    if gpus != engine.gpus_per_node_of_argv(argv):
        return [f"{name_of(props)}: container {c.get('name')} at {ref.path} has {gpus} GPUs but the engine argv asks for "
                f"{engine.gpus_per_node_of_argv(argv)} on each of its {nodes} nodes (parallel size {size})."]
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
