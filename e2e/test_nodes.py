"""Node faults for real (issue 30, scenario 4): a dev stack of two engine pods (8 GPUs each, gpuBudget 16) on a
pool of three 8-GPU kwok nodes of its own (gpuPool.nodeCount 3: one spare), its sync Job on a CPU node of its own.

1. The sync Job's node is lost mid-download and, at the same time, a GPU node serving the model goes NotReady and
   is deleted, during a `pulumi up` that runs the sync Job again (modelSync.maxConcurrentRequests changed: only the
   Job changes). The sync pod is Running on a node whose kubelet died (cluster_faults.stop_heartbeats: kwok plays
   nothing there any more); both nodes are deleted. The controller-manager's pod garbage collector deletes the pods
   of a node that is gone once it has been missing for 40 s, checking every 20 s (kubernetes v1.37.2
   pkg/controller/podgc/gc_controller.go quarantineTime, gcCheckPeriod: hard-coded, no flag), marking them Failed
   with DisruptionTarget (DeletionByPodGC). The Job controller counts that pod failed (one of backoffLimit 4) and
   makes a new one, which runs on another CPU node of the Job's; `pulumi up` completes. The Deployment makes a new
   engine pod, which the scheduler puts on the pool's spare node; the other pod serves throughout.
2. `kubectl drain` of a serving node with no spare left: the PodDisruptionBudget (maxUnavailable 1) lets drain
   evict that pod (two healthy), whose replacement stays Pending (the pool's other nodes are gone, cordoned or
   full); a second drain of the node serving the last Ready pod is refused by the budget until drain's own
   --timeout. `kubectl uncordon` lets the Pending pod bind; `pulumi preview --refresh --expect-no-changes` holds.

The node lifecycle controller (node-monitor-period 5 s, grace 50 s: v1.37.2 pkg/controller/nodelifecycle/config/
v1alpha1/defaults.go; e2e/cluster.py leaves them at their defaults) taints a node reporting Ready False
node.kubernetes.io/not-ready NoSchedule and NoExecute; the pods tolerate NoExecute for 300 s (the
DefaultTolerationSeconds admission plugin), so here it is the deletion that moves them, not the taint. It marks
the pods NotReady itself only when it turns a silent node Unknown after the grace period (node_lifecycle_controller.go
monitorNodeHealth: MarkPodsNotReady on an observed Ready True -> not True), which this test does not wait for.
"""

from __future__ import annotations

import threading
import time

import cluster
import cluster_faults as faults
import pytest
from harness import POLICY_LAUNCHER, Pulumi, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
NAME = "nodes"
POOL = "nodes"
SYNC_KEY = "e2e.llm-serving.io/sync-pool"  # not the GPU pool's key: the sync Job keeps off nodes carrying that one
ENGINE = "app.kubernetes.io/component=engine"
SYNC = "app.kubernetes.io/component=model-sync"
MODEL = "deepseek-v4-flash"
BASE = 229  # node addresses 192.0.2.230-232 (GPU), 240-241 (CPU): clear of cluster.py's, test_gang's, test_multinode's, test_drift's
# The pod garbage collector: 40 s quarantine, checked every 20 s; then a new pod, scheduled and made Ready by kwok.
POD_GC = 120


def sync_node(index: int) -> str:
    # Untainted (the stack's sync Job tolerates nothing); PreferNoSchedule keeps the other scenarios' pods, which
    # select no node, off it while the shared CPU nodes have room (the scheduler's TaintToleration score).
    taint = {"key": SYNC_KEY, "value": POOL, "effect": "PreferNoSchedule"}
    return faults.add_node(f"cpu-{POOL}-{index}", cluster.CPU, {SYNC_KEY: POOL}, [taint], BASE + 10 + index)


@pytest.fixture
def pool():
    yield
    for key in (faults.POOL_KEY, SYNC_KEY):
        faults.delete_nodes(f"{key}={POOL}")


def engine_pods(namespace: str) -> list[dict]:
    return faults.live(faults.pods(namespace, ENGINE))


def serving(namespace: str) -> list[dict]:
    return [p for p in engine_pods(namespace) if faults.ready(p)]


def test_node_loss_and_drain(pulumi: Pulumi, pool):
    started = time.monotonic()
    gpu = [faults.add_gpu_node(POOL, i, BASE) for i in range(3)]
    sync_nodes = [sync_node(0)]
    namespace = faults.init_stack(pulumi, NAME, {
        "gpuBudget": 16, "gpuPool": faults.gpu_pool(POOL, node_count=3), "modelSync": {"nodeSelector": {SYNC_KEY: POOL}},
        "models": [{**_dev_model(), "replicas": 2}],
        # Its data claim would take one of the cluster's static volumes for good (Retain, e2e/cluster.py STORAGE_POOL).
        "operations": {"openWebUI": {"enabled": False}}})
    try:
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=NAME, timeout=600)
        log(f"{NAME}: first up {up.seconds:.1f} s")
        pods = serving(namespace)
        assert len(pods) == 2 and len({p["spec"]["nodeName"] for p in pods}) == 2, [p["metadata"]["name"] for p in pods]
        (spare,) = set(gpu) - {p["spec"]["nodeName"] for p in pods}
        # What keeps a silent node's pods bound for 300 s (plan.md says so): the DefaultTolerationSeconds admission
        # plugin's tolerations, on by default in kube-apiserver v1.37.2.
        tolerations = {(t["key"], t.get("effect"), t.get("tolerationSeconds")) for t in pods[0]["spec"]["tolerations"]}
        assert {("node.kubernetes.io/not-ready", "NoExecute", 300),
                ("node.kubernetes.io/unreachable", "NoExecute", 300)} <= tolerations, tolerations
        lost, kept = pods[0], pods[1]

        # The sync Job runs again in this `pulumi up`; its node's kubelet is dead before the pod binds there.
        faults.stop_heartbeats(sync_nodes[0])
        pulumi.run("config", "set", "--path", "llm-serving:modelSync.maxConcurrentRequests", "10", "--type", "int",
                   stack=NAME)
        result: dict = {}
        second = threading.Thread(target=lambda: result.update(up=pulumi.run(
            "up", "--yes", "--skip-preview", *POLICY, stack=NAME, timeout=600, check=False)))
        second.start()
        try:
            def bound_sync_pod():
                faults.renew_lease(sync_nodes[0])  # schedulable until the pod binds, however slow this up is
                return next((p for p in faults.live(faults.pods(namespace, SYNC))
                             if p["spec"].get("nodeName") == sync_nodes[0] and p["status"].get("phase") == "Pending"), None)
            downloading = faults.wait_until("the new sync pod bound to its node", bound_sync_pod, 90)
            faults.mark_running(namespace, downloading["metadata"]["name"])
            log(f"{NAME}: sync pod {downloading['metadata']['name']} Running on {sync_nodes[0]}")

            # The GPU node serving one engine pod goes NotReady.
            faults.node_goes_not_ready(lost["spec"]["nodeName"])
            faults.wait_until("the node lifecycle controller's not-ready NoExecute taint",
                              lambda: ("node.kubernetes.io/not-ready", "NoExecute") in faults.taints(lost["spec"]["nodeName"]),
                              20)
            seen = cluster.kubectl("get", "nodes", "-l", f"{faults.POOL_KEY}={POOL}")
            log(f"{NAME}: {lost['spec']['nodeName']} NotReady and tainted:\n{seen}")

            # Both nodes are deleted (the cloud's node controller, an autoscaler or an operator does it).
            t0 = time.monotonic()
            cluster.kubectl("delete", "node", lost["spec"]["nodeName"], sync_nodes[0], "--wait=false")
            sync_nodes.append(sync_node(1))
            gone = {lost["metadata"]["name"], downloading["metadata"]["name"]}
            kept_down = []

            def replaced():
                now_serving = serving(namespace)
                names = {p["metadata"]["name"] for p in now_serving}
                if kept["metadata"]["name"] not in names:
                    kept_down.append(time.monotonic() - t0)
                on_spare = [p for p in now_serving if p["spec"]["nodeName"] == spare]
                left = gone & {p["metadata"]["name"] for p in faults.pods(namespace, f"{ENGINE}") +
                               faults.pods(namespace, SYNC)}
                return not left and len(now_serving) == 2 and on_spare and kept["metadata"]["name"] in names
            faults.wait_until("the lost pods deleted and the engine back on the spare node", replaced, POD_GC, every=1)
            converged = time.monotonic() - t0
            assert not kept_down, f"the other engine pod was not Ready {kept_down[0]:.0f} s after the node was deleted"
            log(f"{NAME}: engine back on {spare} {converged:.0f} s after the node was deleted")
            log(cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide"))
        finally:
            second.join(timeout=600)
        up = result["up"]
        assert up.returncode == 0, up
        log(f"{NAME}: pulumi up with the sync node lost {up.seconds:.1f} s")
        job = faults.live(cluster.get("jobs", "-n", namespace, "-l", SYNC)["items"])
        assert [(j["status"].get("succeeded"), j["status"].get("failed")) for j in job] == [(1, 1)], \
            [j["status"] for j in job]
        done = faults.pods(namespace, SYNC)
        assert [p["spec"]["nodeName"] for p in done] == [sync_nodes[1]], [p["metadata"]["name"] for p in done]

        _drain(namespace, spare, kept)
        again = pulumi.run("preview", "--refresh", "--expect-no-changes", *POLICY, stack=NAME, check=False)
        assert again.returncode == 0, again
        log(f"{NAME}: the whole scenario {time.monotonic() - started:.0f} s")
    finally:
        pulumi.run("destroy", "--yes", "--skip-preview", stack=NAME, timeout=600, check=False)


def _drain(namespace: str, spare: str, kept: dict) -> None:
    """No spare node left: the first drain evicts one pod (two healthy, maxUnavailable 1), whose replacement stays
    Pending; the second is refused by the budget until drain's own timeout; uncordon lets the Pending pod bind."""
    first = kept["spec"]["nodeName"]
    out = faults.drain(first, 30)
    log(f"{NAME}: kubectl drain {first} -> {out.returncode}\n{out.stdout}{out.stderr}")
    assert out.returncode == 0, out.stderr
    assert f"evicting pod {namespace}/{kept['metadata']['name']}" in out.stdout + out.stderr
    pending = faults.wait_until("the evicted pod's replacement Pending", lambda: [
        p for p in engine_pods(namespace) if p["status"].get("phase") == "Pending" and not p["spec"].get("nodeName")], 20)
    faults.wait_until("the scheduler's FailedScheduling event", lambda: [
        e for e in faults.events(namespace, "Pod") if pending[0]["metadata"]["name"] in e and "FailedScheduling" in e], 20)
    assert [p["spec"]["nodeName"] for p in serving(namespace)] == [spare]

    blocked = faults.drain(spare, 15)
    log(f"{NAME}: kubectl drain {spare} -> {blocked.returncode}\n{blocked.stdout}{blocked.stderr}")
    assert blocked.returncode != 0, blocked.stdout
    assert "Cannot evict pod as it would violate the pod's disruption budget" in blocked.stderr, blocked.stderr
    assert [p["spec"]["nodeName"] for p in serving(namespace)] == [spare], "the last serving pod was evicted"

    t0 = time.monotonic()
    for node in (first, spare):
        cluster.kubectl("uncordon", node)
    faults.wait_until("the Pending pod bound and Ready after uncordon", lambda: len(serving(namespace)) == 2, 30)
    log(f"{NAME}: both pods Ready {time.monotonic() - t0:.0f} s after uncordon")


def _dev_model() -> dict:
    import yaml
    return yaml.safe_load((cluster.ROOT / "Pulumi.dev.yaml").read_text())["config"]["llm-serving:models"][0]
