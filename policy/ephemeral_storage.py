"""Ephemeral storage of every container the program renders (issue 30): one rule, applied by every pod
builder (components/pod_template.py engine_pod_template and cpu_job_pod, components/prepull.py,
components/openwebui.py) and checked by the pack on every pod template, custom resources' included.

How the kubelet charges it (k8s.io/kubernetes v1.37.2 pkg/kubelet/eviction/eviction_manager.go):
- containerEphemeralStorageLimitEviction: a container whose logs plus writable layer exceed its own limit;
- podEphemeralStorageLimitEviction: a pod whose usage (containers, logs and local volumes) exceeds the sum of
  its containers' limits (resourcehelper.PodLimits: init containers count as the largest of them);
- emptyDirLimitEviction: a pod whose emptyDir exceeds that emptyDir's sizeLimit.
Local volumes are pkg/volume/util/util.go IsLocalEphemeralVolume: a disk-medium emptyDir, a ConfigMap, a
gitRepo; not a Memory emptyDir (the engines' /dev/shm is charged to memory), a Secret or a claim.

So each container gets: its logs' allowance, plus its writable layer's allowance, plus its share of each
disk emptyDir it mounts (the sizeLimit split evenly between the pod's containers that mount it; an init
container, which runs alone, the whole). The pod's limits then sum to at least its emptyDirs' sizeLimits
plus every container's logs and writable layer, so an emptyDir that fills is evicted as that emptyDir
(the message names it) rather than as the pod's total, and the scheduler reserves the disk the pod may
use. Request equals limit but for the writable-layer allowances of the vendor images below.
"""

from __future__ import annotations

from math import ceil

from policy import quantity
from policy.manifests import each_container, name_of, templates, volumes_of
from policy.unknowns import decide, items_of
from policy.workloads import PodTemplateRef

RESOURCE = "ephemeral-storage"
MIB, GIB = 2**20, 2**30
# The kubelet keeps containerLogMaxFiles (5) files of containerLogMaxSize (10Mi) per container by default
# (k8s.io/kubernetes v1.37.2 pkg/kubelet/apis/config/v1beta1/defaults.go): 50Mi, with the rest of 64Mi for
# the pod's ConfigMap volumes (the scripts, a CA bundle: kilobytes), also charged to the pod.
LOGS = 64 * MIB
# Writable-layer allowances (request, limit) of containers that do not run on a read-only root. None is
# measured (kwok runs no container): they are allowances, to be replaced by what a real node shows
# (`kubectl get --raw /api/v1/nodes/<node>/proxy/stats/summary`, the container's rootfs.usedBytes).
# vLLM and SGLang as root write runtime sockets and kernels under /tmp and /root beside the cache volume
# (every JIT cache is pointed at the cache mount: pod_template.py cache_env, tests/test_engine_caches.py).
ENGINE_WRITABLE = (2 * GIB, 10 * GIB)
# The same-pod P/D proxy: a Python script of the engine image, nothing it writes on purpose.
SIDECAR_WRITABLE = (0, 1 * GIB)
# OpenWebUI writes its static build and caches under /app at start (its data is on its claim).
OPENWEBUI_WRITABLE = (1 * GIB, 4 * GIB)


def text(n: int) -> str:
    """A quantity in whole Gi where it is one, else in Mi rounded up."""
    return f"{n // GIB}Gi" if n % GIB == 0 else f"{ceil(n / MIB)}Mi"


def disk_empty_dirs(volumes: list[dict]) -> dict[str, int]:
    """Name -> sizeLimit in bytes of each emptyDir on the node's disk (not medium Memory). An emptyDir
    without a sizeLimit is bounded by nothing but the pod's limits: refused here, every one of ours has one."""
    out = {}
    for v in volumes:
        src = v.get("emptyDir")
        if src is None or src.get("medium") == "Memory":
            continue
        if "sizeLimit" not in src:
            raise ValueError(f"emptyDir {v.get('name')} has no sizeLimit")
        out[v["name"]] = quantity.value(quantity.parse_field(src["sizeLimit"]))
    return out


def with_ephemeral_storage(pod: dict, writable: dict[str, tuple[int, int]] | None = None) -> dict:
    """The pod spec with an ephemeral-storage request and limit on every container (init ones too), by the
    rule above. `writable`: the (request, limit) allowance of each container by name that does not run on a
    read-only root; one that is missing there is refused, so no writer goes without an allowance."""
    writable = writable or {}
    disks = disk_empty_dirs(pod.get("volumes") or [])
    app = pod.get("containers") or []
    mounts = {n: sum(1 for c in app if any(m["name"] == n for m in c.get("volumeMounts") or [])) for n in disks}
    for group in ("initContainers", "containers"):
        for c in pod.get(group) or []:
            read_only = (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is True
            if not read_only and c["name"] not in writable:
                raise ValueError(f"container {c['name']} writes its root filesystem: give its writable-layer allowance")
            request, limit = (0, 0) if read_only else writable[c["name"]]
            volumes = sum(disks[n] if group == "initContainers" else ceil(disks[n] / mounts[n])
                          for n in dict.fromkeys(m["name"] for m in c.get("volumeMounts") or []) if n in disks)
            # A copy: two containers of one pod may share one resources dict (the sync Job's).
            resources = c["resources"] = {k: dict(v) for k, v in (c.get("resources") or {}).items()}
            resources.setdefault("requests", {})[RESOURCE] = text(LOGS + request + volumes)
            resources.setdefault("limits", {})[RESOURCE] = text(LOGS + limit + volumes)
    return pod


def _bytes(value: object) -> int | None:
    q = quantity.try_parse_field(value)
    return None if q is None else quantity.value(q)


def pod_totals(pod: dict) -> tuple[int, int]:
    """(request, limit) of a pod spec's ephemeral storage as the scheduler and the kubelet count it: the sum of
    its containers', or its largest init container's where that is larger (k8s.io/component-helpers
    resource/helpers.go PodRequests, PodLimits; no init container of ours restarts)."""
    def total(group: str, kind: str) -> list[int]:
        return [_bytes(((c.get("resources") or {}).get(kind) or {}).get(RESOURCE)) or 0
                for c in pod.get(group) or []]
    return tuple(max(sum(total("containers", k)), max(total("initContainers", k), default=0))
                 for k in ("requests", "limits"))  # type: ignore[return-value]


def ephemeral_storage_bounded(resource_type: str, props: dict) -> list[str]:
    """Every container of every pod template has an ephemeral-storage request and limit, and a pod's
    containers' limits hold its disk emptyDirs' sizeLimits (else the pod is evicted for its total first)."""
    def container_check(ref: PodTemplateRef, c: dict) -> list[str]:
        res = c.get("resources") or {}
        missing = [k for k in ("requests", "limits") if (res.get(k) or {}).get(RESOURCE) is None]
        return [f"{name_of(props)}: container {c.get('name')} has no {RESOURCE} {' or '.join(missing)}; "
                "without them the scheduler reserves no disk for it and nothing but an emptyDir's sizeLimit bounds it."
                ] if missing else []

    def pod_check(ref: PodTemplateRef) -> list[str]:
        spec = ref.template.get("spec") or {}
        limits = [_bytes(((c.get("resources") or {}).get("limits") or {}).get(RESOURCE))
                  for c in items_of(spec.get("containers"))]
        sizes = [_bytes((v.get("emptyDir") or {}).get("sizeLimit")) for v in volumes_of(ref.template).values()
                 if "emptyDir" in v and (v.get("emptyDir") or {}).get("medium") != "Memory"]
        if None in limits or not sizes:
            return []   # a missing limit is reported per container
        if sum(limits) < sum(s or 0 for s in sizes):
            return [f"{name_of(props)}: the containers' {RESOURCE} limits at {ref.path or 'the pod'} sum to "
                    f"{text(sum(limits))}, less than its disk emptyDirs' sizeLimits ({text(sum(s or 0 for s in sizes))}): "
                    "the kubelet would evict the pod for its total before any emptyDir for its own limit."]
        return []

    out = each_container(resource_type, props, container_check)
    for ref in templates(resource_type, props):
        out += decide(pod_check, ref)
    return out
