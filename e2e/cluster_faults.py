"""Node and drift faults for issue 30's scenarios 2 and 4 (e2e/test_drift.py, e2e/test_nodes.py), injected for real
on the local control plane (e2e/cluster.py), every wait bounded (times E2E_WAIT_SCALE).

Nodes: a pool of kwok nodes of the test's own (a label, and a taint only its stack tolerates), so the scenarios
that share the cluster under `make e2e` neither land there nor count them, deleted after.

A node that stops heartbeating, as kwok v0.8.0 lets one: kwok holds each managed node's Lease in kube-node-lease
and plays the node's and its pods' stages only while it holds it (pkg/kwok/controllers/controller.go
initNodeLeaseController: readOnlyFunc = !nodeLeases.Held(node); node_controller.go and pod_controller.go
watchResources skip a read-only node and its pods). Another holder with a lease that has not expired keeps it
from taking the lease back (node_lease_controller.go tryAcquireOrRenew), so writing another holderIdentity
into the Lease, renewTime left as kwok last wrote it, is a kubelet that died: nothing renews the lease or plays
the node's or its pods' stages again. Removing the kwok.x-k8s.io/node annotation would not do: its informer
drops the update without a Deleted event (pkg/utils/informer/informer.go newCacheInformer), kwok keeps holding
the lease, and after the node is deleted it creates the lease again (node_lease_controller.go sync). The Ready
condition itself is written as a kubelet reports one it can no longer serve with (KubeletNotReady); kwok's
node-initialize stage would turn it True again on a node it still managed (e2e/kwok/node-initialize.yaml).
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import cluster
import yaml

POOL_KEY = "e2e.llm-serving.io/pool"  # the key of cluster.BUDGET_POOL and of the other tests' pools
# Not kwok's holder identity (the controller's --id): kwok cannot hold a lease this holds until it expires.
DEAD_HOLDER = "e2e-node-down"
DEAD_LEASE_SECONDS = 3600
GPU_KEY = "nvidia.com/gpu"
# The dev stack's secrets (its header); values are made per run and never printed.
SECRETS = ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey")

kubectl, get = cluster.kubectl, cluster.get


def wait_until(what: str, check, seconds: float, every: float = 0.5):
    """check()'s first truthy value; an assertion naming `what` after `seconds` (times E2E_WAIT_SCALE)."""
    deadline = time.monotonic() + seconds * cluster.WAIT_SCALE
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {seconds * cluster.WAIT_SCALE:g} s"
        time.sleep(every)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- the stack ---------------------------------------------------------------------------------------------

def gpu_pool(pool: str, node_count: int | None = None) -> dict:
    """gpuPool pinned to the test's nodes, as a user points a stack at a pool (config_model/infra.py GpuPool)."""
    out = {"gpuType": "H20", "nodeSelector": {"nvidia.com/gpu.product": cluster.GPU_LABELS["nvidia.com/gpu.product"],
                                              POOL_KEY: pool},
           "tolerations": [{"key": GPU_KEY, "operator": "Exists", "effect": "NoSchedule"},
                           {"key": POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}]}
    if node_count is not None:
        out["nodeCount"] = node_count
    return out


def init_stack(pulumi, name: str, config: dict, consumer_keys: tuple[str, ...] = ()) -> str:
    """Pulumi.<name>.yaml in the project copy: the dev stack's file with `config` over it (llm-serving: keys
    without the prefix) and its own namespace; `pulumi stack init` and every secret from standard input.
    Returns the namespace."""
    namespace = f"e2e-{name}"[:63]
    stack = yaml.safe_load((cluster.ROOT / "Pulumi.dev.yaml").read_text())
    stack["config"].update({f"llm-serving:{k}": copy.deepcopy(v) for k, v in config.items()})
    stack["config"]["llm-serving:namespace"] = namespace
    Path(pulumi.project / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    pulumi.run("stack", "init", name, "--secrets-provider", "passphrase")
    for key in SECRETS:
        pulumi.set_secret(f"llm-serving:{key}", secrets.token_hex(16), stack=name)
    for consumer in consumer_keys:
        pulumi.run("config", "set", "--secret", "--path", f"llm-serving:consumerKeys.{consumer}", stack=name,
                   stdin=secrets.token_hex(16))
    return namespace


# ---- nodes -------------------------------------------------------------------------------------------------

def add_node(name: str, resources: dict, labels: dict, taints: list, index: int, ready: bool = True) -> str:
    """A kwok node (cluster.node, addresses 192.0.2.<index + 1>); with `ready`, waits until kwok made it Ready."""
    kubectl("apply", "-f", "-", input=json.dumps(cluster.node(name, resources, labels, taints, index)))
    if ready:
        wait_until(f"node {name} Ready (kwok)", lambda: cluster.true(get("node", name), "Ready"), 20)
    return name


def add_gpu_node(pool: str, index: int, base: int) -> str:
    taint = {"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}
    return add_node(f"gpu-{pool}-{index}", cluster.GPU, {**cluster.GPU_LABELS, POOL_KEY: pool},
                    [*cluster.GPU_TAINTS, taint], base + index)


def delete_nodes(selector: str) -> None:
    """Cleanup, never failing: every node of the pool, without waiting."""
    subprocess.run([str(cluster.BIN / "kubectl"), f"--kubeconfig={cluster.KUBECONFIG}", "delete", "nodes", "-l",
                    selector, "--wait=false"], capture_output=True, timeout=60)


def stop_heartbeats(node: str) -> dict:
    """The node's kubelet dies: its Lease goes to another holder (module docstring), so kwok renews nothing and
    plays no stage of the node or its pods from now on. Returns the lease as it was."""
    before = get("lease", node, "-n", "kube-node-lease")
    kubectl("patch", "lease", node, "-n", "kube-node-lease", "--type=merge", "-p", json.dumps(
        {"spec": {"holderIdentity": DEAD_HOLDER, "leaseDurationSeconds": DEAD_LEASE_SECONDS}}))
    return before


def renew_lease(node: str) -> None:
    """The lease's renewTime moved on by its new holder: the node lifecycle controller takes a renewal for a
    heartbeat (v1.37.2 node_lifecycle_controller.go tryUpdateNodeHealth), so the node stays Ready and schedulable
    while kwok plays nothing there; without it the node turns Unknown node-monitor-grace-period (50 s) after
    kwok's last renewal."""
    t = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kubectl("patch", "lease", node, "-n", "kube-node-lease", "--type=merge", "-p",
            json.dumps({"spec": {"holderIdentity": DEAD_HOLDER, "renewTime": t}}))


def report_not_ready(node: str) -> None:
    """Ready False, as a kubelet whose container runtime is gone reports it (pkg/kubelet/nodestatus setters.go
    ReadyCondition: reason KubeletNotReady)."""
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                 "message": "container runtime is down (e2e: injected)", "lastHeartbeatTime": now(),
                 "lastTransitionTime": now()}
    kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p",
            json.dumps({"status": {"conditions": [condition]}}))


def ready_status(node: str) -> str | None:
    conditions = (get("node", node).get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), None)


def taints(node: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in get("node", node)["spec"].get("taints") or []}


def node_goes_not_ready(node: str) -> None:
    """stop_heartbeats, then Ready False; kwok's own informer may still see the lease as its for a moment, and
    would turn the node Ready again (node-initialize): the condition is written until it stays False 2 s."""
    stop_heartbeats(node)
    deadline = time.monotonic() + 20 * cluster.WAIT_SCALE
    while True:
        report_not_ready(node)
        time.sleep(2)
        if ready_status(node) == "False":
            return
        assert time.monotonic() < deadline, f"node {node}: kwok kept turning it Ready after its lease was taken"


def mark_running(namespace: str, pod: str) -> None:
    """What a kubelet reports once a pod's containers started (kwok does nothing on a node it no longer holds)."""
    spec = get("pod", pod, "-n", namespace)["spec"]
    t = now()
    status = {"phase": "Running", "startTime": t,
              "conditions": [{"type": c, "status": "True", "lastTransitionTime": t}
                             for c in ("Initialized", "PodScheduled")],
              "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                                     "restartCount": 0, "started": True, "state": {"running": {"startedAt": t}}}
                                    for c in spec["containers"]]}
    kubectl("patch", "pod", pod, "-n", namespace, "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": status}))


def drain(node: str, timeout_s: int) -> subprocess.CompletedProcess:
    """`kubectl drain` as an operator runs it, its own --timeout bounding it; the output kept for the report."""
    return subprocess.run([str(cluster.BIN / "kubectl"), f"--kubeconfig={cluster.KUBECONFIG}", "drain", node,
                           "--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout_s}s"],
                          capture_output=True, text=True, timeout=timeout_s + 30)


# ---- pods and events ---------------------------------------------------------------------------------------

def live(items: list[dict]) -> list[dict]:
    return [o for o in items if not o["metadata"].get("deletionTimestamp")]


def pods(namespace: str, selector: str) -> list[dict]:
    return get("pods", "-n", namespace, "-l", selector)["items"]


def ready(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running" and cluster.true(pod, "Ready")


def events(namespace: str, kind: str | None = None) -> list[str]:
    return [f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['reason']}: {e.get('message', '')}"
            for e in get("events", "-n", namespace)["items"] if kind is None or e["involvedObject"]["kind"] == kind]


# ---- drift -------------------------------------------------------------------------------------------------

def preview_steps(result) -> dict[str, dict]:
    """`pulumi preview --json`'s program steps by URN (pkg/backend/display/json.go: steps[].op, urn, diffReasons;
    the refresh steps are not among them); the CLI's first log line is the command."""
    text = result.output.split("\n", 1)[1]
    start = text.index("\n{") + 1 if not text.startswith("{") else 0  # stderr's warnings share the log
    doc, _ = json.JSONDecoder().raw_decode(text[start:])
    return {s["urn"]: s for s in doc.get("steps") or [] if s.get("op") not in ("same", "read", "refresh")}


def managers(kind: str, name: str, namespace: str) -> dict[str, str]:
    """manager -> operation (and subresource) of the object's managedFields: who owns what after a hand edit."""
    obj = get(kind, name, "-n", namespace, "--show-managed-fields")
    return {f["manager"]: f["operation"] + (f"/{f['subresource']}" if f.get("subresource") else "")
            for f in obj["metadata"].get("managedFields") or []}
