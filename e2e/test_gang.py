"""Gang scheduling for real (issue 29): scheduler-plugins' Coscheduling plugin (v0.31.8, the release AIBrix
v0.7.0's controller builds PodGroups for) on kwok nodes binds a PodGroup's pods all together or not at all.

Two pods of a PodGroup with minMember 2, each asking for all of a node's GPUs, while one node of their pool
has free GPUs: kube-scheduler alone would bind one of them; the Coscheduling plugin holds the first at Permit
and releases it when the second finds no node, so neither binds. A second node arrives: both bind, one a node.

The test's nodes are a pool of their own (a label, and a taint only its pods tolerate), so the other scenarios
that share the cluster under `make e2e` neither land there nor count them, and their free GPUs are exactly the
test's. Bounded waits scale with E2E_WAIT_SCALE, as cluster.py's.
"""
from __future__ import annotations

import json
import time
import uuid

import cluster
import coscheduling as gang
import pytest

POOL_KEY = "e2e.llm-serving.io/pool"  # the key of cluster.BUDGET_POOL, another value
GPUS = cluster.GPU["nvidia.com/gpu"]  # each pod asks for all of a node's
# Upstream's scheduler-config.yaml holds a gang member at Permit for 10 s (permitWaitingTimeSeconds): the
# window outlasts two of those, so a group released late would show here.
HOLD = 25 * cluster.WAIT_SCALE
BIND = 60 * cluster.WAIT_SCALE


kubectl, get = cluster.kubectl, cluster.get


def apply(obj: dict) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(obj))


def add_node(name: str, pool: str, index: int) -> None:
    taint = {"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}
    # Addresses 192.0.2.201+: clear of the fixed nodes' (cluster.node numbers them from 1).
    apply(cluster.node(name, cluster.GPU, {POOL_KEY: pool}, [taint], 200 + index))
    deadline = time.monotonic() + 20 * cluster.WAIT_SCALE
    while not cluster.true(get("node", name), "Ready"):
        assert time.monotonic() < deadline, f"node {name} not Ready (kwok) within {20 * cluster.WAIT_SCALE:g} s"
        time.sleep(0.5)


def member(name: str, ns: str, group: str, pool: str, scheduler: str) -> dict:
    gpus = {"nvidia.com/gpu": GPUS}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {gang.POD_GROUP_LABEL: group}},
            "spec": {"schedulerName": scheduler, "nodeSelector": {POOL_KEY: pool},
                     "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}],
                     "containers": [{"name": "engine", "image": "registry.invalid/vllm:1",
                                     "resources": {"requests": gpus, "limits": gpus}}]}}


def why(ns: str, group: str) -> str:
    """What the PodGroup and the namespace's events say: every assertion message ends with it."""
    pg = get("podgroup", group, "-n", ns)
    events = [f"{e['involvedObject']['name']}: {e['reason']} ({source(e)}): {e['message']}"
              for e in get("events", "-n", ns)["items"]]
    return f"\nPodGroup status: {pg.get('status')}\nevents:\n  " + "\n  ".join(events)


def source(event: dict) -> str:
    return event.get("reportingComponent") or event.get("source", {}).get("component", "")


@pytest.fixture
def ns(coscheduling):
    name = f"e2e-gang-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    deadline = time.monotonic() + 20 * cluster.WAIT_SCALE  # the default ServiceAccount (admission needs it)
    while "default" not in kubectl("get", "serviceaccounts", "-n", name, "-o", "name"):
        assert time.monotonic() < deadline, "namespace's default ServiceAccount not created"
        time.sleep(0.5)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def pool():
    name = f"gang-{uuid.uuid4().hex[:6]}"
    yield name
    kubectl("delete", "nodes", "-l", f"{POOL_KEY}={name}", "--wait=false")


def test_podgroup_binds_all_members_or_none(coscheduling, ns, pool):
    group = "engine"
    apply({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": group, "namespace": ns}, "spec": {"minMember": 2}})
    add_node(f"{pool}-0", pool, 0)
    names = ("engine-0", "engine-1")
    for name in names:
        apply(member(name, ns, group, pool, coscheduling))

    # One node, room for one member: neither binds for the whole window.
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        pods = [get("pod", n, "-n", ns) for n in names]
        bound = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}
        assert not bound, f"bound with one node for a group of 2: {bound}{why(ns, group)}"
        time.sleep(0.5)
    assert all(p["status"]["phase"] == "Pending" for p in pods), why(ns, group)
    # Not merely ignored, and not merely too big: the second scheduler placed one member (held at Permit), the
    # other found no node, and the Coscheduling plugin turned the group down and released the held one
    # (pkg/coscheduling/coscheduling.go PostFilter: "PodGroup <ns>/<name> gets rejected due to Pod <pod> is
    # unschedulable even after PostFilter"; the waiting pod is rejected with "optimistic rejection in
    # PostFilter"). kube-scheduler, given the same two pods, binds one of them.
    failed = [e["message"] for e in get("events", "-n", ns)["items"]
              if e["reason"] == "FailedScheduling" and source(e) == coscheduling]
    assert any(f"PodGroup {ns}/{group} gets rejected" in m for m in failed), \
        f"no FailedScheduling event of {coscheduling} naming the PodGroup{why(ns, group)}"
    assert any("optimistic rejection in PostFilter" in m for m in failed), \
        f"no member was held at Permit and released{why(ns, group)}"

    # A second node: the whole group binds, one member a node.
    add_node(f"{pool}-1", pool, 1)
    deadline = time.monotonic() + BIND
    while True:
        pods = [get("pod", n, "-n", ns) for n in names]
        nodes = sorted(p["spec"].get("nodeName", "") for p in pods)
        if all(nodes):
            break
        assert time.monotonic() < deadline, f"not both bound within {BIND:g} s: {nodes}{why(ns, group)}"
        time.sleep(0.5)
    assert nodes == [f"{pool}-0", f"{pool}-1"], why(ns, group)
    scheduled = {e["involvedObject"]["name"] for e in get("events", "-n", ns)["items"]
                 if e["reason"] == "Scheduled" and source(e) == coscheduling}
    assert scheduled == set(names), f"Scheduled events of {coscheduling}: {scheduled}{why(ns, group)}"
