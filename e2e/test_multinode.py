"""A model larger than one node (issue 29) through the real CLI, the real AIBrix v0.7.0 controller and the
real scheduler-plugins v0.31.8 Coscheduling plugin: DeepSeek-R1 (TP 8 x PP 2, SGLang) as a StormService role
of podGroupSize 2 on a pool of 8-GPU kwok nodes (e2e/stackfiles.py r1-stormservice, whose await is the
shortest a stack may ask for: a 60 s startup budget and 60 s before it, models[].rollout.preStartSeconds).

With one free node in the pool, fewer than the group needs, `pulumi up` creates the StormService; AIBrix makes
the PodSet, its PodGroup (minMember 2) and both pods; no pod of the group binds (the gang: the events say
the PodGroup was turned down), and `pulumi up` fails at its timeout naming the StormService. A second node
arrives: the next `pulumi up` converges (both pods bind, one a node, kwok makes them Ready, the PodSet,
RoleSet and StormService become Ready, the smoke and warm-up Jobs run), the route's endpoints are the leader
only, a third `pulumi up` changes nothing, destroy. The LeaderWorkerSet and RoleBasedGroup variants have no
controller here (stackfiles.NEEDS_CONTROLLER_WE_LACK): e2e/test_topologies.py previews them and
e2e/test_differential.py dry-runs their objects against the real API server with the pinned CRDs.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import cluster
import pytest
import stackfiles
from harness import POLICY_LAUNCHER, Pulumi, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
NAME = "r1-stormservice"
POOL_KEY, POOL = stackfiles.MULTINODE_POOL
GROUP_INDEX = "stormservice.orchestration.aibrix.ai/pod-group-index"
# Upstream's scheduler config holds a member at Permit for 10 s: the hold outlasts two of those.
HOLD = 25 * cluster.WAIT_SCALE
APPEAR = 120 * cluster.WAIT_SCALE
get = cluster.get


def add_node(index: int) -> str:
    name = f"gpu-{POOL}-{index}"
    node = cluster.node(name, cluster.GPU, {**cluster.GPU_LABELS, POOL_KEY: POOL},
                        [*cluster.GPU_TAINTS, {"key": POOL_KEY, "value": POOL, "effect": "NoSchedule"}], 210 + index)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    deadline = time.monotonic() + 20 * cluster.WAIT_SCALE
    while not cluster.true(get("node", name), "Ready"):
        assert time.monotonic() < deadline, f"node {name} not Ready (kwok)"
        time.sleep(0.5)
    return name


def group_pods(namespace: str) -> list[dict]:
    return [p for p in get("pods", "-n", namespace)["items"] if GROUP_INDEX in p["metadata"].get("labels", {})]


def events(namespace: str) -> str:
    return "\n  ".join(f"{e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['reason']}: {e['message']}"
                       for e in get("events", "-n", namespace)["items"])


@pytest.fixture
def pool():
    yield
    subprocess.run([str(cluster.BIN / "kubectl"), f"--kubeconfig={cluster.KUBECONFIG}", "delete", "nodes", "-l",
                    f"{POOL_KEY}={POOL}", "--wait=false"], capture_output=True, timeout=60)


def test_a_two_node_model_binds_as_one_group_or_not_at_all(pulumi: Pulumi, coscheduling: str, pool):
    namespace = stackfiles.init(pulumi, NAME)
    add_node(0)
    pulumi.run("preview", *POLICY, stack=NAME)
    result: dict = {}
    up = threading.Thread(target=lambda: result.update(up=pulumi.run(
        "up", "--yes", "--skip-preview", *POLICY, stack=NAME, timeout=900, check=False)))
    up.start()
    try:
        # AIBrix's PodSet makes both pods of the group and their PodGroup, then the gang holds them.
        deadline = time.monotonic() + APPEAR
        while len(group_pods(namespace)) < 2:
            assert up.is_alive(), f"pulumi up ended before the group's pods existed: {result.get('up')}"
            assert time.monotonic() < deadline, f"the group's pods were not created:\n  {events(namespace)}"
            time.sleep(1)
        (podgroup,) = get("podgroups", "-n", namespace)["items"]
        assert podgroup["spec"]["minMember"] == 2, podgroup
        pods = group_pods(namespace)
        assert {p["metadata"]["labels"].get("scheduling.x-k8s.io/pod-group") for p in pods} == \
            {podgroup["metadata"]["name"]}
        assert {p["spec"]["schedulerName"] for p in pods} == {coscheduling}
        hold = time.monotonic() + HOLD
        while time.monotonic() < hold:
            bound = [p["metadata"]["name"] for p in group_pods(namespace) if p["spec"].get("nodeName")]
            assert not bound, f"bound with one free node for a group of two: {bound}\n  {events(namespace)}"
            time.sleep(1)
        assert f"PodGroup {namespace}/{podgroup['metadata']['name']} gets rejected" in events(namespace)
        log(f"{NAME}: no pod of the group bound on one node for {HOLD:g} s")
    finally:
        up.join(timeout=900)
    # The first `pulumi up` runs into its timeout with the group still unbound, and says which workload.
    first = result["up"]
    assert first.returncode != 0, first
    assert "StormService::deepseek-r1-stormservice" in first.output, first
    assert "failed to fully initialize or become live: timed out" in " ".join(first.output.split()), first
    assert not [p for p in group_pods(namespace) if p["spec"].get("nodeName")], events(namespace)
    log(f"{NAME}: pulumi up failed at its timeout after {first.seconds:.0f} s, the group unbound")

    # A second node: the next `pulumi up` converges, the whole group on two nodes.
    add_node(1)
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=NAME, timeout=900)
    pods = group_pods(namespace)
    assert sorted(p["spec"]["nodeName"] for p in pods) == [f"gpu-{POOL}-0", f"gpu-{POOL}-1"], pods
    assert sorted(p["metadata"]["labels"][GROUP_INDEX] for p in pods) == ["0", "1"]
    # The route's Service reaches the leader (rank 0) only.
    slices = get("endpointslices", "-n", namespace, "-l", "kubernetes.io/service-name=deepseek-r1-api")["items"]
    targets = {e["targetRef"]["name"] for s in slices for e in s.get("endpoints") or []}
    (leader,) = [p["metadata"]["name"] for p in pods if p["metadata"]["labels"][GROUP_INDEX] == "0"]
    assert targets == {leader}, targets
    ss = get("stormservice", "deepseek-r1", "-n", namespace)
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in ss["status"]["conditions"]), ss["status"]

    again = pulumi.run("up", "--yes", "--skip-preview", "--expect-no-changes", *POLICY, stack=NAME, check=False)
    assert again.returncode == 0, again
    pulumi.run("destroy", "--yes", "--skip-preview", stack=NAME, timeout=900)
