"""Engine images pulled onto the GPU nodes while the sync Job runs (issue 13, time to serving).

The engine image is about 14 GB and took 127 s to pull (field report 12.2); an engine pod that pulls
it itself holds its GPUs through the pull. One DaemonSet per distinct engine image runs that very
reference (the same mirror and digest as the engine pods, so the kubelet caches what they pull) on
every node of the GPU pool, requesting no GPU; where models run the image on node pools of their own
(models[].nodeSelector, tolerations), one DaemonSet per image and pool. It depends on the image mirror
and the pull secrets only: never on the sync Job, and no engine waits on it.

Its one container is the engine image itself, idle: a container that uses an image keeps it from the
kubelet's image garbage collection (kubernetes/kubernetes pkg/kubelet/images/image_gc_manager.go
freeSpace: an image in use has a current lastUsed and is skipped), so the image stays on the node
for the next engine pod too. It runs `python3`, which the engine image is known to have (the model
gate init container runs its script with it); the command replaces the image's ENTRYPOINT (the
server). `-S -B`: no site-packages scan and no bytecode writes on the read-only root.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels, metadata
from components.pod_template import GPU_NODE_LABEL, container_security, job_pod_security
from components.scanner_exceptions import DIGEST_PINNED, scanner_exceptions
from components.topologies import pod_resources, topology_of
from config_model import GpuPool, ImageRef, ServedModel
from config_model.resources import EngineResources, node_pool_key
from policy.ephemeral_storage import with_ephemeral_storage

COMPONENT = "image-prepull"
# A GPU-less container of an image that sets NVIDIA_VISIBLE_DEVICES=all (the CUDA base images do)
# would otherwise be handed every GPU of the node by the NVIDIA container runtime on a node where it
# is the default runtime; "void" makes it behave like runc (tests/upstream_nvidia_container_toolkit.py).
NO_GPU_ENV = {"NVIDIA_VISIBLE_DEVICES": "void"}
# Exits at once on SIGTERM: as PID 1 with the default disposition the kernel drops the signal, so a
# handler is installed; SIGTERM is blocked first and taken by sigwait, since one delivered between the
# handler and a pause() would leave pause() waiting for the grace period's SIGKILL (seen under load).
IDLE_COMMAND = ["python3", "-S", "-B", "-c",
                "import signal as s; s.pthread_sigmask(s.SIG_BLOCK, {s.SIGTERM}); "
                "s.signal(s.SIGTERM, s.default_int_handler); s.sigwait({s.SIGTERM})"]
# Each GPU node runs one such pod per DaemonSet beside its engine pods: stacks/rules/capacity.py node_memory counts it.
MEMORY_MIB = 32
CPU_MILLI = 10
RESOURCES = {"cpu": f"{CPU_MILLI}m", "memory": f"{MEMORY_MIB}Mi"}
# pulumi-kubernetes awaits a DaemonSet until every scheduled pod is ready (tests/upstream_pulumi_kubernetes.py):
# one GPU node that is NotReady, full or slow to pull would fail `pulumi up` for an optimisation the
# engine pods do without. The engines' own awaiters report what matters.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
# The pre-pull has no availability to keep: on a new image every node starts pulling it at once.
UPDATE_STRATEGY = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": 0}}
SCANNER_EXCEPTIONS = {
    "CKV_K8S_8": "an idle holder of the engine image serves nothing, so there is nothing for a liveness probe to check",
    "CKV_K8S_9": "an idle holder of the engine image serves nothing, so there is no readiness to report to anyone",
    **DIGEST_PINNED,
}


def engine_image_keys(models: list[ServedModel], named: dict[str, ImageRef]) -> list[str]:
    """The stack-file keys of every image an engine pod of these models runs (what stacks/program.py gives
    each topology), one key per distinct image reference: one DaemonSet each. A key the stack lacks is left
    out (the config rules refuse the stack)."""
    keys = [key for m in models for key in topology_of(m).image_keys(m)]
    distinct: dict[str, str] = {}
    for key in keys:
        if key in named:
            distinct.setdefault(f"{named[key].upstream}@{named[key].digest}", key)
    return sorted(distinct.values())


def daemonset_name(image_key: str, pool_tag: str = "") -> str:
    """`vllmRay` -> `image-prepull-vllm-ray`; on a model's own node pool, `image-prepull-vllm-ray-<tag>`."""
    return f"{COMPONENT}-{re.sub(r'(?<!^)(?=[A-Z])', '-', image_key).lower()}" + (f"-{pool_tag}" if pool_tag else "")


def prepull_pools(models: list[ServedModel], named: dict[str, ImageRef],
                  pool: GpuPool) -> dict[str, list[tuple[str, EngineResources]]]:
    """Per image key of engine_image_keys: (pool tag, the node pool of models running it) for every distinct
    node pool (selector and tolerations) they run it on. The tag is empty for gpuPool's own pool, and for an
    image that runs on one pool only, so a stack without per-model pools keeps its DaemonSet names."""
    canonical: dict[str, str] = {}
    for key in engine_image_keys(models, named):
        canonical[f"{named[key].upstream}@{named[key].digest}"] = key
    gpu_pool_key = node_pool_key(pool.node_selector or {}, pool.tolerations)
    found: dict[str, dict[tuple, EngineResources]] = {}
    for m in models:
        res = pod_resources(pool, m)
        for key in topology_of(m).image_keys(m):
            if key in named:
                image = canonical[f"{named[key].upstream}@{named[key].digest}"]
                found.setdefault(image, {}).setdefault(res.pool_key, res)
    out: dict[str, list[tuple[str, EngineResources]]] = {}
    for image, pools in sorted(found.items()):
        out[image] = [("" if len(pools) == 1 or key == gpu_pool_key else _pool_tag(key), res)
                      for key, res in pools.items()]
    return out


def _pool_tag(pool_key: tuple) -> str:
    return hashlib.sha256(repr(pool_key).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class ImagePrePullArgs:
    namespace: str
    gpu_pool: GpuPool
    images: dict[str, Any]          # stack-file image key -> the engine pods' reference (pulumi.Input[str])
    image_pull_secrets: list[str] = field(default_factory=list)
    # image key -> (pool tag, node pool) of every pool it runs on (prepull_pools); a key left out runs on gpuPool.
    pools: dict[str, list[tuple[str, EngineResources]]] = field(default_factory=dict)


def prepull_pod_spec(image: Any, pool: GpuPool | EngineResources,
                     image_pull_secrets: list[str] | tuple[str, ...] = ()) -> dict:
    """On the node pool's nodes (its selector and tolerations, as the engine pods), without a GPU."""
    pod: dict = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 5,
        "securityContext": job_pod_security(),
        "nodeSelector": dict(sorted((pool.node_selector or {}).items())),
        "tolerations": [t.model_dump(exclude_none=True) for t in pool.tolerations],
        "containers": [{
            "name": "hold",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": list(IDLE_COMMAND),
            "env": [{"name": k, "value": v} for k, v in sorted(NO_GPU_ENV.items())],
            "resources": {"requests": dict(RESOURCES), "limits": dict(RESOURCES)},
            "securityContext": container_security(non_root=True),
        }],
    }
    if not pool.node_selector:
        # A pool without a selector of its own: GPU nodes are those the CPU Jobs avoid, never every node.
        pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_NODE_LABEL, "operator": "Exists"}]}]}}}
    if image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in image_pull_secrets]
    return with_ephemeral_storage(pod)   # idle on a read-only root: its logs (image layers are the node's imagefs)


def prepull_daemonset(name: str, namespace: str, image: Any, pool: GpuPool | EngineResources,
                      image_pull_secrets: list[str] | tuple[str, ...] = ()) -> dict:
    """The DaemonSet as plain camelCase dicts: metadata and spec."""
    # Not app.kubernetes.io/part-of on the pods: the engines admit this stack's pods by that label
    # (components/network.py), and an idle holder of an image has no one to talk to.
    pod_labels = {k: v for k, v in labels(name, COMPONENT).items() if k != "app.kubernetes.io/part-of"}
    return {
        "metadata": {**metadata(name, namespace, COMPONENT),
                     "annotations": {**SKIP_AWAIT, **scanner_exceptions(SCANNER_EXCEPTIONS)}},
        "spec": {
            "selector": {"matchLabels": dict(pod_labels)},
            "updateStrategy": UPDATE_STRATEGY,
            "template": {"metadata": {"labels": pod_labels},
                         "spec": prepull_pod_spec(image, pool, image_pull_secrets)},
        },
    }


class ImagePrePull(Component):
    """One pre-pull DaemonSet per distinct engine image and node pool."""

    def __init__(self, name: str, args: ImagePrePullArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:images:ImagePrePull", name, opts)
        self.daemonsets = {}
        for key, image in sorted(args.images.items()):
            for tag, pool in args.pools.get(key) or [("", args.gpu_pool)]:
                ds_name = daemonset_name(key, tag)
                manifest = prepull_daemonset(ds_name, args.namespace, image, pool, args.image_pull_secrets)
                self.daemonsets[ds_name] = k8s.apps.v1.DaemonSet(
                    f"{name}-{key}" + (f"-{tag}" if tag else ""), metadata=manifest["metadata"], spec=manifest["spec"],
                    opts=self.child_opts())
        self.register_outputs({"daemonSets": sorted(self.daemonsets)})
