"""Resource rules: pure functions over (resource type, props), as CrossGuard's
ResourceValidationArgs carries them, each returning violation messages that name the object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from policy.ephemeral_storage import ephemeral_storage_bounded  # noqa: F401  (policy.rules re-exports every rule)
from policy.pod_rules import (  # noqa: F401  (policy.rules re-exports every rule)
    engine_probes_are_tcp,
    gpu_counts_match_parallel_size,
    model_mount_read_only,
    no_generative_health_checks,
    offload_memory_covered,
    shm_is_memory_backed,
    startup_allowance_covers_budget,
)
from policy.routing_rules import (  # noqa: F401  (policy.rules re-exports every rule)
    MODEL_LABEL,
    ROUTER_WATCHED_KINDS,
    aibrix_profiles_schema,
    endpoint_picker_probes_grpc,
    gateway_never_resends_generations,
    inference_pools_have_their_picker,
    inference_pools_select_serving_pods,
    no_router_owned_routes,
    pd_wiring,
    routes_reach_inference_pools,
)
from policy.security_rules import (  # noqa: F401  (policy.rules re-exports every rule)
    HOST_ACCESS_REASON,
    capabilities_minimal,
    images_pinned_by_digest,
    no_host_access,
    no_privileged_containers,
    secrets_only_by_reference,
)
from policy.workload_rules import (  # noqa: F401  (policy.rules re-exports every rule)
    NVIDIA_VISIBLE_DEVICES,
    custom_workloads_are_awaited,
    daemonsets_hold_no_gpus,
    group_patches_touch_metadata_only,
    jobs_avoid_every_gpu_pool,
    jobs_rerun_when_unready,
    model_sync_stays_off_gpus,
    rollout_never_adds_gpus,
)


@dataclass(frozen=True)
class ResourcePolicy:
    name: str
    description: str
    check: Callable[[str, dict], list[str]]


RESOURCE_POLICIES = [
    ResourcePolicy("engine-probes-tcp", "Engine startup, readiness and liveness probes are tcpSocket; an engine serving "
                   "no port (vLLM --headless) only as a group's worker, unprobed.", engine_probes_are_tcp),
    ResourcePolicy("startup-allowance", "Startup probe allowance covers the startup budget.", startup_allowance_covers_budget),
    ResourcePolicy("model-read-only", "The model is mounted read-only at the volume and every mount.", model_mount_read_only),
    ResourcePolicy("gpu-parallel-size", "GPU requests equal limits equal the engine parallel size over the nodes it "
                   "spans (--nnodes).", gpu_counts_match_parallel_size),
    ResourcePolicy("shm-memory", "/dev/shm is a Memory emptyDir sized per GPU.", shm_is_memory_backed),
    ResourcePolicy("offload-memory", "KV offload in the engine argv is covered by memory and /dev/shm.",
                   offload_memory_covered),
    ResourcePolicy("image-digest", "Every container image is pinned by digest.", images_pinned_by_digest),
    ResourcePolicy("no-privileged", "No privileged container or privilege escalation.", no_privileged_containers),
    ResourcePolicy("no-host-access", "No host network, PID, IPC or hostPath without a documented reason.", no_host_access),
    ResourcePolicy("secret-refs", "Credentials only through secretKeyRef; engine API keys in argv only as $(VAR) of one.",
                   secrets_only_by_reference),
    ResourcePolicy("sync-off-gpu", "The model sync Job stays off GPU nodes.", model_sync_stays_off_gpus),
    ResourcePolicy("daemonsets-no-gpu", "DaemonSets request no GPU and hide the node's GPUs (NVIDIA_VISIBLE_DEVICES=void).",
                   daemonsets_hold_no_gpus),
    ResourcePolicy("rollout-gpus", "GPU rollouts add no pods but a Deployment's one surge pod (which gpu-budget "
                   "counts) and wait for the startup budget.", rollout_never_adds_gpus),
    ResourcePolicy("custom-resources-awaited", "GPU custom resources carry pulumi.com/waitFor.", custom_workloads_are_awaited),
    ResourcePolicy("no-generative-health", "SGLang runs with /health generation disabled.", no_generative_health_checks),
    ResourcePolicy("no-router-owned-routes", "Watched workloads carry no top-level model label; Ray and group workers "
                   "carry none either.", no_router_owned_routes),
    ResourcePolicy("pd-wiring", "P/D: mp executor, side channel off loopback across pods, shfs, explicit KV failure policy.", pd_wiring),
    ResourcePolicy("aibrix-profiles-schema", "AIBrix model config uses the profiles schema.", aibrix_profiles_schema),
    ResourcePolicy("gateway-no-resend", "Gateway retries (BackendTrafficPolicy, routes an EnvoyPatchPolicy adds) only "
                   "unsent requests (connect-failure, refused-stream), no per-try timeout, no active HTTP health check.",
                   gateway_never_resends_generations),
    ResourcePolicy("endpoint-picker-probes", "The endpoint picker's readiness and liveness probes are grpc on its health "
                   "port (it serves no HTTP health).", endpoint_picker_probes_grpc),
    ResourcePolicy("jobs-rerun", "Awaited Jobs are replaced when unready, so a retry reruns them; unawaited Jobs are not.",
                   jobs_rerun_when_unready),
    ResourcePolicy("group-patches", "RoleBasedGroup template patches change pod labels and annotations only.",
                   group_patches_touch_metadata_only),
    ResourcePolicy("capabilities-minimal", "Only IPC_LOCK is added, and only with RDMA.", capabilities_minimal),
    ResourcePolicy("ephemeral-storage", "Every container, custom resources' included, has an ephemeral-storage request "
                   "and limit; a pod's limits hold its disk emptyDirs' sizeLimits.", ephemeral_storage_bounded),
]
