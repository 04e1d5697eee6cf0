"""One pod-template builder for every engine workload (Deployment today; StormService,
RayClusterFleet and RoleBasedGroup embed the same PodTemplateSpec).

Probes, mounts, GPU resources, /dev/shm and the model-ready gate are decided here and only here,
as plain camelCase dicts, so the policy tests read exactly what the cluster receives.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from config_model import CompileCache, GpuPool
from config_model.resources import GIB, MILLI, EngineResources, cpu_text, memory_text
from policy.engines import ENGINES
from policy.ephemeral_storage import ENGINE_WRITABLE, SIDECAR_WRITABLE, with_ephemeral_storage

PROBE_PERIOD_SECONDS = 10
SCRIPTS_MOUNT = "/opt/llm-serving"
CACHE_MOUNT = "/var/cache/llm-serving"
READY_MARKER = ".llm-serving-ready.json"
# Beside the marker: digests of files verified earlier, so a Job retry re-hashes only what changed.
DIGEST_CACHE = ".llm-serving-digests.json"

ANNOTATION_PREFIX = "llm-serving.io"
ANN_PARALLEL_SIZE = f"{ANNOTATION_PREFIX}/parallel-size"
ANN_STARTUP_BUDGET = f"{ANNOTATION_PREFIX}/startup-budget-seconds"
ANN_ROLE = f"{ANNOTATION_PREFIX}/role"
ANN_CACHE_KEY = f"{ANNOTATION_PREFIX}/compile-cache-key"   # one per engine container: <prefix>-<container>


@dataclass(frozen=True)
class ModelMount:
    claim_name: str
    mount_path: str            # model root inside the container, e.g. /models
    directory: str             # the model's directory under the root
    revision: str
    expected_shard_count: int | None     # None: as many as the checkpoint's index names (model_files.py)
    manifest_sha256: str | None = None   # models[].manifestSha256: the gate refuses a marker recording another

    @property
    def model_path(self) -> str:
        return f"{self.mount_path}/{revision_path(self.directory, self.revision)}"


def revision_path(directory: str, revision: str) -> str:
    """Where one revision of a model lives under the volume root. Each revision has its own place, so a
    sync of the next one never writes into files that running pods of the current one read (issue 12),
    and a rollback finds its files still there. A revision is a label value: never '/', '.' or '..'."""
    return f"{directory}/{revision}"


@dataclass(frozen=True)
class EngineContainer:
    """One engine process: its own container, port, GPUs and cache directory. A pod holds one
    (combined, P/D fleet heads) or two (same-pod 4P+4D)."""

    name: str                  # container and port name (at most 15 characters)
    command: list[str]
    args: list[str]
    env: dict[str, str]
    port: int
    gpus: int
    api_key_env: str
    extra_ports: dict[str, int] = field(default_factory=dict)       # e.g. the NIXL side channel
    extra_resources: dict[str, str] = field(default_factory=dict)   # e.g. RDMA devices
    add_capabilities: tuple[str, ...] = ()                          # e.g. IPC_LOCK with RDMA
    offload_memory_gib: int = 0   # host memory of offloaded KV (models[].kvCacheOffload), GiB
    offload_shm_gib: int = 0      # the part of it the engine keeps in /dev/shm, GiB
    # Consumers' keys (issue 21), kept out of the compile-cache key (no key changes what is compiled):
    # argv words after the rest, plain variables, and (variable, data key) of the consumer-keys Secret.
    key_args: tuple[str, ...] = ()
    key_env: tuple[tuple[str, str], ...] = ()
    key_refs: tuple[tuple[str, str], ...] = ()
    # A pod of a group spanning nodes (issue 29; components/group.py): argv words after the rest, out of the
    # compile-cache key like key_args; variables read from the pod's own fields (name, downward API path);
    # the variable holding the pod's rank, which splits the compile cache per rank; and whether the engine
    # serves a port at all (a vLLM worker rank runs --headless: no port, no probe, nothing to drain).
    group_args: tuple[str, ...] = ()
    field_env: tuple[tuple[str, str], ...] = ()
    rank_env: str | None = None
    serves_http: bool = True


@dataclass(frozen=True)
class EnginePodSpec:
    name: str
    labels: dict[str, str]
    image: Any                 # pulumi.Input[str]: a mirror reference may only be known at deploy time
    image_digest: str          # sha256:..., what the image reference resolves to
    cuda_version: str | None
    engines: list[EngineContainer]
    parallel_size: int         # GPUs each engine drives (TP x DP)
    gpu_pool: GpuPool
    resources: EngineResources   # the model's CPU, memory, /dev/shm, node pool and GPU resource name
    model: ModelMount
    compile_cache: CompileCache
    startup_budget_seconds: int
    termination_grace_seconds: int
    api_key_secret: str
    scripts_config_map: str
    annotations: dict[str, str] = field(default_factory=dict)
    image_pull_secrets: list[str] = field(default_factory=list)
    sidecars: list[dict] = field(default_factory=list)   # e.g. the same-pod P/D proxy
    drain_timeout_seconds: int = 120   # preStop waits this long for in-flight requests (the gateway timeout)
    consumer_keys_secret: str | None = None   # the Secret of EngineContainer.key_refs


def compile_cache_key(image_digest: str, gpu_architecture: str, cuda_version: str | None, driver_version: str | None,
                      command: list[str], args: list[str], env: dict[str, str]) -> str:
    """Directory name of the JIT cache. A cache built by another image, CUDA, driver, GPU
    architecture or set of startup parameters is not reusable and may be wrong (field report 12.2)."""
    digest = image_digest.removeprefix("sha256:")[:12]
    rest = hashlib.sha256(json.dumps([cuda_version, driver_version, command, args, sorted(env.items())])
                          .encode()).hexdigest()[:12]
    return f"{gpu_architecture}-{digest}-{rest}"


def startup_failure_threshold(budget_seconds: int) -> int:
    return math.ceil(budget_seconds / PROBE_PERIOD_SECONDS)


def tcp_probe(port: str, failure_threshold: int, period: int = PROBE_PERIOD_SECONDS, timeout: int = 3) -> dict:
    # TCP, never HTTP /health: a generative health check sends a real prefill every probe and
    # pollutes throughput and TTFT (field report 12.4). TCP only says the port accepts connections;
    # end-to-end correctness is the smoke test's job.
    return {"tcpSocket": {"port": port}, "periodSeconds": period, "timeoutSeconds": timeout,
            "failureThreshold": failure_threshold, "successThreshold": 1}


# The UID every container of ours runs as when its image allows it (only vendor engine and UI
# images run as root, each with a recorded scanner exception).
NON_ROOT_UID = 10001


def container_security(non_root: bool = False) -> dict:
    """Every container: never privileged, no escalation, no capabilities. Our own tools also run
    as a non-root UID on a read-only root filesystem (writable paths are emptyDirs)."""
    security: dict = {"privileged": False, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if non_root:
        security.update(runAsNonRoot=True, runAsUser=NON_ROOT_UID, runAsGroup=NON_ROOT_UID,
                        readOnlyRootFilesystem=True)
    return security


def job_pod_security() -> dict:
    return {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True, "runAsUser": NON_ROOT_UID,
            "runAsGroup": NON_ROOT_UID, "fsGroup": NON_ROOT_UID}


def cpu_job_pod(pool: GpuPool, containers: list[dict], volumes: list[dict], init_containers: list[dict] | None = None,
                image_pull_secrets: list[str] | tuple[str, ...] = (), model_label_keys: tuple[str, ...] = ()) -> dict:
    """The pod of every CPU Job (sync, mirror, smoke, warm-up, load test): never retried in place,
    no API token, our non-root UID, and never on a GPU node (the pool's, or a model's own: model_label_keys,
    config_model/resources.py model_node_label_keys)."""
    pod: dict = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": job_pod_security(),
        "affinity": off_gpu_affinity(pool, model_label_keys),
    }
    if init_containers:
        pod["initContainers"] = init_containers
    pod["containers"] = containers
    pod["volumes"] = volumes
    if image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in image_pull_secrets]
    return with_ephemeral_storage(pod)   # read-only roots: logs and emptyDirs only


# The label NVIDIA's GPU feature discovery puts on every GPU node: what marks a GPU node when the
# pool has no selector of its own.
GPU_NODE_LABEL = "nvidia.com/gpu.present"


def off_gpu_affinity(pool: GpuPool, model_label_keys: tuple[str, ...] = ()) -> dict:
    """For CPU Jobs: nodes lacking the GPU pool's selector labels and the label keys of every model's
    own node pool (models[].nodeSelector), so never a GPU node."""
    keys = sorted({*(pool.node_selector or {}), *model_label_keys}) or [GPU_NODE_LABEL]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": k, "operator": "DoesNotExist"} for k in keys]}]}}}


def _gib(n: int) -> str:
    return f"{n}Gi"


def _cache_volume(cache: CompileCache) -> dict:
    if cache.claim is not None:
        return {"name": "compile-cache", "persistentVolumeClaim": {"claimName": cache.claim}}
    return {"name": "compile-cache", "emptyDir": {"sizeLimit": _gib(cache.size_gib)}}


def cache_env() -> dict[str, str]:
    """Every cache either engine writes at start or on a first request, pointed at the keyed cache
    volume, so the JIT work of field report 8.2 and 12.2 is paid once per key, not per start. The same
    set for both engines, each engine's own variables from its module (policy/engines/): each ignores
    the other's. Where each variable is read, at which pinned version, is in tests/upstream_<project>.py;
    tests/test_engine_caches.py runs the upstream code with this env and checks every resolved path
    lies under the mount."""
    return {
        # vLLM's VLLM_CACHE_ROOT default and anything else that honours XDG.
        "XDG_CACHE_HOME": CACHE_MOUNT,
        "HF_HOME": f"{CACHE_MOUNT}/huggingface",
        **{k: v for e in ENGINES for k, v in e.cache_env(CACHE_MOUNT).items()},
        # DeepGEMM's own variable (vLLM reads it; SGLang sets it from SGLANG_DG_CACHE_DIR, the same path).
        "DG_JIT_CACHE_DIR": f"{CACHE_MOUNT}/deep_gemm",
        # SGLang 0.5.17 JIT kernels and tvm-ffi's C++ extension builds (~/.cache/tvm-ffi).
        "TVM_FFI_CACHE_DIR": f"{CACHE_MOUNT}/tvm-ffi",
        # TileLang (DeepSeek-V4 kernels of both engines): ~/.tilelang/cache otherwise.
        "TILELANG_CACHE_DIR": f"{CACHE_MOUNT}/tilelang",
        "TRITON_CACHE_DIR": f"{CACHE_MOUNT}/triton",
        "TORCHINDUCTOR_CACHE_DIR": f"{CACHE_MOUNT}/inductor",
        # The CUDA driver's PTX JIT cache (~/.nv/ComputeCache otherwise).
        "CUDA_CACHE_PATH": f"{CACHE_MOUNT}/nv",
        # FlashInfer appends .cache/flashinfer to this base (JIT modules and downloaded cubins).
        "FLASHINFER_WORKSPACE_BASE": f"{CACHE_MOUNT}/flashinfer",
    }


def pinned_manifest_args(digest: str | None) -> list[str]:
    """The verifier's and the gate's flag for a pinned manifest; none when the stack pins nothing."""
    return ["--manifest-sha256", digest] if digest else []


def expected_shards_args(count: int | None) -> list[str]:
    """The shard count the stack gives; none: the verifier and the gate take the checkpoint's index's
    count, or one for a single model.safetensors (components/scripts/model_files.py weight_files)."""
    return ["--expected-shards", str(count)] if count is not None else []


def model_gate_container(spec: EnginePodSpec, model_volume_mount: dict) -> dict:
    """Init container that checks, never downloads: the ready marker of the sync Job must name the
    expected revision and manifest digest, every verified file must keep its size and every shard must
    be present. Otherwise it fails with what is missing and
    the GPUs are never handed to an incomplete model (field report 3.2, 13)."""
    m = spec.model
    return {
        "name": "model-gate",
        "image": spec.image,
        "command": ["python3", f"{SCRIPTS_MOUNT}/model_gate.py"],
        "args": ["--model-dir", m.model_path, "--revision", m.revision,
                 *expected_shards_args(m.expected_shard_count), "--marker", READY_MARKER,
                 *pinned_manifest_args(m.manifest_sha256)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        # Only reads: runs as our non-root UID on a read-only root, unlike the engine beside it.
        "securityContext": container_security(non_root=True),
        "volumeMounts": [model_volume_mount,
                         {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True}],
    }


def cache_key_annotation(container: str) -> str:
    return f"{ANN_CACHE_KEY}-{container}"


def share_of(total: int, share: int, unit: int) -> int:
    """One engine's part of a pod's CPU (millicores) or memory (bytes): all of it for one engine; for
    several, an equal part floored to a whole `unit` (a core, a GiB), as the pool's whole numbers always were."""
    return total if share == 1 else total // share // unit * unit


def engine_memory(res: EngineResources, offload_gib: int, share: int) -> tuple[int, int]:
    """(request, limit) of one engine container in bytes. Several engines in one pod share the model's
    per-pod memory; offloaded KV comes on top of it, in request and limit alike, pinned host memory or
    /dev/shm: a Memory emptyDir is charged within the containers' limits (k8s.io/api v0.33.0
    core/v1/types.go EmptyDirVolumeSource.SizeLimit: "the minimum value between the SizeLimit specified
    here and the sum of memory limits of all containers in a pod")."""
    return (share_of(res.memory_request, share, GIB) + offload_gib * GIB,
            share_of(res.memory_limit, share, GIB) + offload_gib * GIB)


def shm_size(res: EngineResources, engines: list[EngineContainer]) -> int:
    """/dev/shm of an engine pod in bytes: the model's, plus what each engine's KV offload keeps there."""
    return res.shm + sum(e.offload_shm_gib for e in engines) * GIB


# The shared key's entry in its Secret (components/secrets.py API_KEY_SECRET; the ops Jobs mount it as a
# file of this name).
API_KEY_ENTRY = "api-key"


def secret_env(var: str, secret_name: str, key: str = API_KEY_ENTRY) -> dict:
    """A container variable read from a Secret entry at container start: the one way a key reaches a
    container's environment (field report 3.2: never in YAML, images or Git)."""
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}}


def _engine_container(spec: EnginePodSpec, engine: EngineContainer, model_mount: dict, share: int) -> tuple[dict, str]:
    pool = spec.gpu_pool
    cache_key = compile_cache_key(spec.image_digest, pool.gpu_architecture, spec.cuda_version, pool.driver_version,
                                  engine.command, engine.args, engine.env)
    env = [{"name": k, "value": v} for k, v in sorted({**cache_env(), **engine.env, **dict(engine.key_env)}.items())]
    env += [{"name": var, "valueFrom": {"fieldRef": {"fieldPath": path}}} for var, path in engine.field_env]
    env.append(secret_env(engine.api_key_env, spec.api_key_secret))
    env += [secret_env(var, spec.consumer_keys_secret, key) for var, key in engine.key_refs]
    gpu, res = str(engine.gpus), spec.resources
    memory_request, memory_limit = engine_memory(res, engine.offload_memory_gib, share)
    requests = {"cpu": cpu_text(share_of(res.cpu_request, share, MILLI)), "memory": memory_text(memory_request),
                res.gpu_resource_name: gpu, **engine.extra_resources}
    limits = {"cpu": cpu_text(share_of(res.cpu_limit, share, MILLI)), "memory": memory_text(memory_limit),
              res.gpu_resource_name: gpu, **engine.extra_resources}
    security = container_security()
    if engine.add_capabilities:
        security["capabilities"]["add"] = list(engine.add_capabilities)
    # Each rank of a group compiles its own shard (a pipeline stage, a tensor slice): its own directory.
    cache_mount = ({"subPath": cache_key} if engine.rank_env is None
                   else {"subPathExpr": f"{cache_key}/node-$({engine.rank_env})"})
    container = {
        "name": engine.name,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": engine.command,
        "args": engine.args + list(engine.group_args) + list(engine.key_args),
        "env": env,
        "resources": {"requests": requests, "limits": limits},
        "securityContext": security,
        "volumeMounts": [
            model_mount,
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "compile-cache", "mountPath": CACHE_MOUNT, **cache_mount},
            {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
        ],
    }
    if engine.serves_http:
        container |= {
            "ports": [{"name": engine.name, "containerPort": engine.port, "protocol": "TCP"}] + [
                {"name": n, "containerPort": p, "protocol": "TCP"} for n, p in sorted(engine.extra_ports.items())],
            "startupProbe": tcp_probe(engine.name, startup_failure_threshold(spec.startup_budget_seconds)),
            "readinessProbe": tcp_probe(engine.name, 3),
            "livenessProbe": tcp_probe(engine.name, 4, period=15, timeout=5),
            # Let endpoints drop the pod, then let in-flight requests finish before SIGTERM.
            "lifecycle": {"preStop": {"exec": {"command": [
                "python3", f"{SCRIPTS_MOUNT}/drain.py", "--port", str(engine.port),
                "--timeout", str(spec.drain_timeout_seconds)]}}},
        }
    return container, cache_key


def engine_pod_template(spec: EnginePodSpec) -> dict:
    res = spec.resources
    model_mount = {"name": "model", "mountPath": spec.model.mount_path, "readOnly": True}
    annotations = {
        ANN_ROLE: "engine",
        ANN_PARALLEL_SIZE: str(spec.parallel_size),
        ANN_STARTUP_BUDGET: str(spec.startup_budget_seconds),
    }
    engines = []
    for engine in spec.engines:
        container, cache_key = _engine_container(spec, engine, model_mount, share=len(spec.engines))
        engines.append(container)
        annotations[cache_key_annotation(engine.name)] = cache_key
    annotations.update(spec.annotations)
    pod_spec: dict = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": spec.termination_grace_seconds,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "nodeSelector": dict(sorted(res.node_selector.items())),
        "tolerations": [t.model_dump(exclude_none=True) for t in res.tolerations],
        "initContainers": [model_gate_container(spec, model_mount)],
        "containers": engines + list(spec.sidecars),
        "volumes": [
            # Read-only twice: the claim here and the mount above (field report 3.3).
            {"name": "model", "persistentVolumeClaim": {"claimName": spec.model.claim_name, "readOnly": True}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": memory_text(shm_size(res, spec.engines))}},
            _cache_volume(spec.compile_cache),
            {"name": "scripts", "configMap": {"name": spec.scripts_config_map, "defaultMode": 0o555}},
        ],
    }
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec.image_pull_secrets]
    writable = {**{s["name"]: SIDECAR_WRITABLE for s in spec.sidecars}, **{e.name: ENGINE_WRITABLE for e in spec.engines}}
    return {"metadata": {"labels": dict(spec.labels), "annotations": annotations},
            "spec": with_ephemeral_storage(pod_spec, writable)}
