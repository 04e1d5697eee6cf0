"""e2e/cluster.py for real: the control plane comes up, kwok's nodes and pods behave, nothing listens beyond
loopback, and `down` leaves no process. Runs under `make e2e` (not `make test`: it needs .e2e/bin).

A cluster that is already up (E2E_CLUSTER_RUNNING=1, or conftest.py's session cluster) is used and left running,
and the tests that take it down skip; otherwise the module starts its own and ends with `down`.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from e2e import cluster

CLUSTER_PY = Path(cluster.__file__)
REUSE = os.environ.get("E2E_CLUSTER_RUNNING") == "1"
GPU_PRODUCT = ("nvidia.com/gpu.product", "NVIDIA-H20")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def run_cluster(cmd: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, CLUSTER_PY, cmd], capture_output=True, text=True, timeout=180,
                          env=None if env is None else os.environ | env)


kubectl, get = cluster.kubectl, cluster.get


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


def quantities(resources: dict) -> dict:
    """Resource quantities as numbers: the server canonicalises them (2048Gi comes back as 2Ti)."""
    return {k: float(m[1]) * SUFFIX[m[2]] for k, v in resources.items()
            if (m := re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", v))}


def eventually(check, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while not (result := check()):
        assert time.monotonic() < deadline, f"not within {seconds} s: {check.__doc__}"
        time.sleep(0.5)
    return result


@pytest.fixture(scope="module")
def up():
    """True when this module started the cluster (and so may take it down)."""
    if REUSE or cluster.healthy():
        assert cluster.healthy(), "E2E_CLUSTER_RUNNING=1 but no healthy cluster: python3 e2e/cluster.py up"
        yield False
        return
    r = run_cluster("up")
    assert r.returncode == 0, r.stdout + r.stderr
    yield True
    run_cluster("down")


@pytest.fixture(scope="module")
def ns(up):
    name = f"e2e-cluster-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    # Pods need the namespace's default ServiceAccount (ServiceAccount admission): the controller makes it.
    eventually(lambda: "default" in kubectl("get", "serviceaccounts", "-n", name, "-o", "name"), 20)
    yield name
    if not up:
        kubectl("delete", "namespace", name, "--wait=false")


def apply(obj: dict) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(obj))


def test_nodes_ready_with_the_declared_pools(up):
    nodes = {n["metadata"]["name"]: n for n in get("nodes")["items"]}
    assert sorted(nodes) == sorted(name for name, *_ in cluster.NODES)
    for name, resources, labels, taints in cluster.NODES:
        n = nodes[name]
        assert condition(n, "Ready").get("status") == "True", (name, n["status"].get("conditions"))
        for field in ("capacity", "allocatable"):
            assert quantities(n["status"][field]) == quantities(resources), (name, field, n["status"][field])
        assert labels.items() <= n["metadata"]["labels"].items(), name
        assert [{k: t[k] for k in ("key", "value", "effect")} for t in n["spec"].get("taints", [])] == taints
        # kwok renews the node's lease: what keeps node-lifecycle-controller from marking it NotReady.
        renewed = get("lease", name, "-n", "kube-node-lease")["spec"]["renewTime"]
        assert datetime.now(timezone.utc) - datetime.fromisoformat(renewed) < timedelta(seconds=60), renewed
    gpu = [n for n in nodes.values() if n["metadata"]["labels"].get(GPU_PRODUCT[0]) == GPU_PRODUCT[1]]
    assert len(gpu) == 9 and all(n["status"]["allocatable"]["nvidia.com/gpu"] == "8" for n in gpu)
    assert all("nvidia.com/gpu" not in n["status"]["capacity"] for n in nodes.values() if n not in gpu)


def test_gpu_deployment_becomes_ready(ns):
    labels = {"app": "engine"}
    apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "engine", "namespace": ns},
           "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
               "metadata": {"labels": labels},
               "spec": {"nodeSelector": dict([GPU_PRODUCT]), "tolerations": [GPU_TOLERATION],
                        "initContainers": [{"name": "model-gate", "image": "registry.invalid/gate:1"}],
                        "containers": [{"name": "engine", "image": "registry.invalid/vllm:1", "resources": {
                            "requests": {"cpu": "64", "memory": "320Gi", "nvidia.com/gpu": "8"},
                            "limits": {"nvidia.com/gpu": "8"}}}]}}}})
    kubectl("rollout", "status", "deployment/engine", "-n", ns, "--timeout=30s")
    [pod] = get("pods", "-n", ns, "-l", "app=engine")["items"]
    node = get("node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"].get(GPU_PRODUCT[0]) == GPU_PRODUCT[1]
    assert pod["status"]["phase"] == "Running" and condition(pod, "Ready")["status"] == "True"
    [init] = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0
    assert all(c["ready"] and "running" in c["state"] for c in pod["status"]["containerStatuses"])
    # The pod IP is kwok's invention, from the pod CIDR cluster.py gives it; the host IP is the node's.
    assert pod["status"]["hostIP"] in {a["address"] for a in node["status"]["addresses"]}


def test_scheduler_refuses_more_gpus_than_a_node_has(ns):
    apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "too-big", "namespace": ns},
           "spec": {"tolerations": [GPU_TOLERATION], "containers": [{
               "name": "engine", "image": "registry.invalid/vllm:1",
               "resources": {"requests": {"nvidia.com/gpu": "9"}, "limits": {"nvidia.com/gpu": "9"}}}]}})

    def unschedulable():
        """the scheduler marks the 9-GPU pod Unschedulable"""
        c = condition(get("pod", "too-big", "-n", ns), "PodScheduled")
        return c if c.get("reason") == "Unschedulable" else None
    assert "nvidia.com/gpu" in eventually(unschedulable, 20)["message"]


def test_job_completes_on_a_cpu_node(ns):
    off_gpu = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": GPU_PRODUCT[0], "operator": "DoesNotExist"}]}]}}}
    apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sync", "namespace": ns},
           "spec": {"backoffLimit": 0, "template": {"spec": {
               "restartPolicy": "Never", "affinity": off_gpu, "containers": [
                   {"name": "download", "image": "registry.invalid/aws-cli:1",
                    "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}},
                   {"name": "verify", "image": "registry.invalid/python:1",
                    "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}}}})
    kubectl("wait", "--for=condition=Complete", "job/sync", "-n", ns, "--timeout=30s")
    [pod] = get("pods", "-n", ns, "-l", "job-name=sync")["items"]
    assert pod["status"]["phase"] == "Succeeded"
    assert all(c["state"]["terminated"]["exitCode"] == 0 for c in pod["status"]["containerStatuses"])
    assert GPU_PRODUCT[0] not in get("node", pod["spec"]["nodeName"])["metadata"]["labels"]


def test_crds_established_at_the_files_versions(up):
    served = {c["metadata"]["name"]: c for c in get("crd")["items"]}
    files = cluster.crd_files()
    assert any("kuberay/v1.2.1" in str(f) for f in files), "AIBrix v0.7.0 needs KubeRay v1.2.1's CRDs"
    assert any(f.name == "gateway.envoyproxy.io_envoypatchpolicies.yaml" for f in files), \
        "the stacks' EnvoyPatchPolicy needs Envoy Gateway v1.2.8's CRD (from its Go module)"
    for f in files:
        # A module's file may hold many CRDs (istio.io/api's customresourcedefinitions.gen.yaml): each is installed.
        # The pure-Python loader takes 30 s here.
        for want in (d for d in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader) if d):
            crd = served.get(want["metadata"]["name"])
            assert crd, f"{f}: {want['metadata']['name']} not installed"
            assert condition(crd, "Established").get("status") == "True", f
            # The release the file comes from, not another one of the same name.
            assert [v["name"] for v in crd["spec"]["versions"]] == [v["name"] for v in want["spec"]["versions"]], f
            ann = "controller-gen.kubebuilder.io/version"
            assert crd["metadata"].get("annotations", {}).get(ann) == want["metadata"].get("annotations", {}).get(ann)


def test_kubeconfig_contexts_verify_the_server(up):
    config = yaml.safe_load(cluster.KUBECONFIG.read_text())
    assert config["current-context"] == "e2e"
    assert {c["name"] for c in config["contexts"]} >= {"e2e", "gpu-dev", "gpu-staging", "gpu-prod"}
    [c] = config["clusters"]
    assert "insecure-skip-tls-verify" not in c["cluster"]
    for ctx in ("gpu-dev", "gpu-prod"):
        assert kubectl("--context", ctx, "get", "--raw", "/readyz").strip() == "ok"


def sockets(flags: str) -> list[tuple[str, str, set[int]]]:
    """(local, peer, pids) of every TCP and UDP socket `ss -tu<flags>` lists"""
    out = subprocess.run(["ss", "-Htunp" + flags], capture_output=True, text=True, check=True).stdout
    # Columns with -t and -u: Netid State Recv-Q Send-Q Local Peer Process.
    return [(f[4], f[5], {int(p) for p in re.findall(r"pid=(\d+)", line)})
            for line in out.splitlines() if (f := line.split())]


def host(addr: str) -> str:
    return addr.rsplit(":", 1)[0].strip("[]").split("%")[0]


def test_only_loopback_listeners_and_peers(up):
    ours = cluster.our_processes()
    assert set(ours.values()) == {*cluster.ORDER, *cluster.controller_binaries()}
    listening = [(local, pids & ours.keys()) for local, _, pids in sockets("l") if pids & ours.keys()]
    assert listening
    bad = [(local, [ours[p] for p in pids]) for local, pids in listening if host(local) not in ("127.0.0.1", "::1")]
    assert not bad, f"listening beyond loopback: {bad}"
    # Every port cluster.py recorded is held by one of its processes.
    ports = {int(local.rsplit(":", 1)[1]) for local, _ in listening}
    assert set(cluster.recorded_ports().values()) <= ports
    # Nothing dials an address off this machine (kwok's invented pod and node IPs included).
    peers = [(peer, [ours[p] for p in pids & ours.keys()]) for _, peer, pids in sockets("a")
             if pids & ours.keys() and host(peer) not in ("127.0.0.1", "::1", "*", "0.0.0.0", "::")]
    assert not peers, f"connections beyond loopback: {peers}"


@pytest.mark.skipif(not shutil.which("go"), reason="go not on PATH")
def test_kwok_stages_are_the_pinned_modules(up):
    version, kwok_dir = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", "sigs.k8s.io/kwok"], cwd=cluster.ROOT / "e2e/tools/kwok",
        capture_output=True, text=True, check=True).stdout.split()
    copies = sorted(cluster.KWOK_STAGES.glob("*.yaml"))
    assert copies
    for copy in copies:
        text = copy.read_text()
        copied_from, upstream = re.match(r"# Verbatim copy of sigs\.k8s\.io/kwok@(\S+) (\S+) ", text).groups()
        assert copied_from == version, f"{copy}: copied from {copied_from}, go.mod pins {version}"
        assert text.split("\n", 2)[2] == Path(kwok_dir, upstream).read_text(), copy


def test_down_leaves_no_process(up):
    if not up:
        pytest.skip("the running cluster belongs to whoever started it")
    pids = cluster.our_processes()
    r = run_cluster("down")
    assert r.returncode == 0, r.stdout + r.stderr
    names = {*cluster.ORDER, *cluster.controller_binaries(), "kubectl"}  # the binaries are named as the components
    left = []
    for d in Path("/proc").iterdir():
        try:
            argv0 = (d / "cmdline").read_bytes().split(b"\0")[0].decode()
        except (OSError, UnicodeDecodeError):
            continue
        if Path(argv0).name in names and argv0.startswith(str(cluster.BIN)):
            left.append((d.name, argv0))
    assert not left, f"left behind: {left}"
    assert not any(Path(f"/proc/{p}").exists() and cluster.ours(p) for p in pids)
    assert not cluster.STATE.exists() and not cluster.KUBECONFIG.exists()
    assert all(cluster.port_free(p) for p in cluster.PORTS.values())
    again = run_cluster("down")
    assert again.returncode == 0 and "not running" in again.stdout


def test_up_refuses_a_taken_port_and_a_missing_binary(up):
    if not up:
        pytest.skip("needs the cluster down")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_cluster("up", {"E2E_APISERVER_PORT": str(port)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"127.0.0.1:{port}" in r.stderr and f"pid {os.getpid()}" in r.stderr, r.stderr
    r = run_cluster("up", {"E2E_BIN": str(cluster.ROOT / ".e2e" / "no-such-bin")})
    assert r.returncode == 2 and "make e2e-tools" in r.stderr, r.stderr
    assert not cluster.STATE.exists()
