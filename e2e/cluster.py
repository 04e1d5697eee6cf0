#!/usr/bin/env python3
"""A local control plane for the e2e (issue 17): everything on 127.0.0.1, nothing else to install.

    python3 e2e/cluster.py up | down | status

`up` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from .e2e/bin/ (built by
`make e2e-tools`), registers fake GPU and CPU nodes that kwok keeps Ready, installs the CRDs the stacks use
from ../shared/crds and writes .e2e/kubeconfig (contexts e2e, gpu-dev, gpu-staging, gpu-prod). State, logs and
pid files live in .e2e/cluster/; `down` stops every process and removes that state. Ports are fixed on
127.0.0.1 and overridable with E2E_<NAME>_PORT (see PORTS). Python 3.11 standard library only.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

import controllers  # noqa: E402  (e2e/, beside this file)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("E2E_BIN", ROOT / ".e2e" / "bin")).resolve()  # as e2e/build-tools.sh
# A second cluster beside the first (another clone, a parallel test): its own state dir, kubeconfig and ports.
STATE = Path(os.environ.get("E2E_CLUSTER_DIR", ROOT / ".e2e" / "cluster")).resolve()
LOGS, PIDS = STATE / "logs", STATE / "pids"
KUBECONFIG = Path(os.environ.get("E2E_KUBECONFIG", ROOT / ".e2e" / "kubeconfig")).resolve()
ADMIN_KUBECONFIG = STATE / "admin.kubeconfig"  # what the components use: the user's file is theirs to edit
CERT_DIR = STATE / "apiserver-certs"  # kube-apiserver writes its self-signed apiserver.crt/.key here
CRDS = Path(os.environ.get("E2E_CRDS", ROOT.parent / "shared" / "crds"))
KWOK_STAGES = ROOT / "e2e" / "kwok"
CONTEXTS = ("e2e", "gpu-dev", "gpu-staging", "gpu-prod")  # Pulumi.<stack>.yaml name the gpu-* ones

# 26257 (CockroachDB) and 2379/6443/10257/10259 (a real cluster on this machine) are avoided on purpose.
PORT_DEFAULTS = {"etcd": 23790, "etcd_peer": 23800, "apiserver": 26443, "controller_manager": 26444,
                 "scheduler": 26445, "kuberay_metrics": 26446, "kuberay_health": 26447,
                 "aibrix_metrics": 26448, "aibrix_health": 26449}
PORTS = {k: int(os.environ.get(f"E2E_{k.upper()}_PORT", v)) for k, v in PORT_DEFAULTS.items()}
# Every wait is bounded; E2E_WAIT_SCALE stretches them all on a slow or busy machine.
WAIT_SCALE = float(os.environ.get("E2E_WAIT_SCALE", "1"))
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")  # start order
# The workload controllers that could be built (e2e/controllers.py), started once their CRDs are Established:
# each decides at start-up which of its controllers run. KubeRay first: AIBrix's fleets create RayClusters.
WORKLOAD_CONTROLLERS = ("kuberay", "aibrix")
# Started only by the tests that ask (e2e/coscheduling.py: its port is not in PORTS, which `up` holds all of;
# e2e/epp.py, with its config under the state directory), never by `up`; `down` stops them with the rest.
ON_DEMAND = ("kube-scheduler-plugins", "epp")

# Fake nodes. Pod and node IPs are invented by kwok: they come from RFC 2544/5737 test ranges, routed nowhere,
# so a stray dial fails instead of reaching a real host. Service IPs are 10.0.0.0/24 (envtest's range).
POD_CIDR = "198.18.0.0/16"
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")  # kwok manages only nodes carrying it
GPU = {"nvidia.com/gpu": "8", "cpu": "192", "memory": "2048Gi", "pods": "110", "ephemeral-storage": "10Ti"}
CPU = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "1Ti"}
# The GPU pool's labels and taint are config_model/infra.py GpuPool's defaults (plus GPU feature discovery's
# nvidia.com/gpu.present); the CPU label is what Pulumi.prod.yaml's modelSync.nodeSelector asks for.
GPU_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H20", "nvidia.com/gpu.present": "true"}
CPU_LABELS = {"node-role.example.com/cpu": "true"}
GPU_TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
# One more GPU node of its own pool, tainted so that nothing else lands there: the day-2 scenarios that must
# run on exactly the stack's budget (e2e/test_day2.py budget_pool) pin their stack to it while the other
# scenarios run beside them (make e2e runs two pytest workers). Eight GPU nodes in the shared pool leave room
# for the largest variant (hybrid, 24 GPUs) beside the dev stack and a P/D day-2 stack.
BUDGET_POOL = ("e2e.llm-serving.io/pool", "budget")
BUDGET_NODE = "gpu-budget"
NODES = [(f"gpu-{i}", GPU, GPU_LABELS, GPU_TAINTS) for i in range(8)] + \
        [(BUDGET_NODE, GPU, {**GPU_LABELS, BUDGET_POOL[0]: BUDGET_POOL[1]},
          [*GPU_TAINTS, {"key": BUDGET_POOL[0], "value": BUDGET_POOL[1], "effect": "NoSchedule"}])] + \
        [(f"cpu-{i}", CPU, CPU_LABELS, []) for i in range(2)]

# kube-controller-manager: only what the stacks need. Left out on purpose: the cloud controllers
# (cloud-node-lifecycle, node-route, service-lb), node-ipam (kwok hands out pod IPs), attach-detach and
# expander (no real volumes), HPA (no metrics API), the CSR and bootstrap-token controllers (no kubelets).
# None of the ones kept dials a pod or node address. Names: cmd/kube-controller-manager/names/controller_names.go.
CONTROLLERS = [
    "deployment-controller", "replicaset-controller", "statefulset-controller", "daemonset-controller",
    "job-controller", "cronjob-controller", "ttl-after-finished-controller", "garbage-collector-controller",
    "namespace-controller", "serviceaccount-controller", "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
    "persistentvolume-binder-controller", "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller", "ephemeral-volume-controller", "disruption-controller",
    "endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller",
    "node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller",
    "service-cidr-controller",
]


# Claims without a volume of their own (Open WebUI's data, the load test's results) ask the default
# StorageClass; no provisioner runs here, so a pool of static volumes in that class stands in for one: the
# controller-manager's PV binder binds each claim to the smallest that fits (pkg/controller/volume/
# persistentvolume/index.go findBestMatchForClaim). Retain: a released volume is not handed to another claim.
STORAGE_CLASS = "e2e-standard"
STORAGE_POOL = 24


# What AIBrix v0.7.0's install leaves that the stacks (platform.install false) refer to: the route of each model
# lives in aibrix-system and hangs off its Gateway (config/gateway/gateway.yaml, kustomize prefix "aibrix-"); the
# NetworkPolicies name the Envoy Gateway namespace. No Envoy runs: the objects only have to exist.
PLATFORM = [
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "aibrix-system"}}),
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "envoy-gateway-system"}}),
    ("/apis/gateway.networking.k8s.io/v1/gatewayclasses", {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "aibrix-eg"},
        "spec": {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}}),
    ("/apis/gateway.networking.k8s.io/v1/namespaces/aibrix-system/gateways", {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "aibrix-eg", "namespace": "aibrix-system"},
        "spec": {"gatewayClassName": "aibrix-eg", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}}),
]


def storage_objects() -> list[tuple[str, dict]]:
    """(collection path, object), as PLATFORM."""
    objs: list[tuple[str, dict]] = [("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"})]
    for i in range(STORAGE_POOL):
        objs.append(("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"e2e-pool-{i:02d}"},
            "spec": {"capacity": {"storage": "2Ti"}, "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                     "storageClassName": STORAGE_CLASS, "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": f"/e2e/pool/{i:02d}"}}}))
    return objs


class Failure(Exception):
    """A step of `up` failed: the message names what and the log to read."""


T0 = time.monotonic()


def step(msg: str) -> None:
    print(f"[cluster {time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


# ---- processes ---------------------------------------------------------------------------------------------

def argv(pid: int) -> list[bytes]:
    """The process's arguments, none for a zombie or a process that is gone."""
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return []
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return []


def ours(pid: int) -> bool:
    """One of the components, with this clone's state dir in its arguments (pids get reused, clones coexist)."""
    args = argv(pid)
    return bool(args) and Path(args[0].decode(errors="replace")).name in (*ORDER, *controller_binaries(),
                                                                          *ON_DEMAND) and \
        any(f"{STATE}/".encode() in a for a in args[1:])  # the whole directory: not .e2e/cluster-2


def controller_binaries() -> tuple[str, ...]:
    return tuple(str(controllers.CONTROLLERS[n]["binary"]) for n in WORKLOAD_CONTROLLERS)


def our_processes() -> dict[int, str]:
    """pid -> component name: the pid files, plus a /proc sweep so a lost pid file leaves nothing behind."""
    pids = [int(f.read_text().strip() or 0) for f in PIDS.glob("*.pid")] if PIDS.is_dir() else []
    pids += [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]
    return {pid: Path(args[0].decode()).name for pid in dict.fromkeys(pids) if ours(pid) and (args := argv(pid))}


def stop(procs: dict[int, str], grace: float = 5.0) -> list[int]:
    """Stops clients first, then kube-apiserver, then etcd: SIGTERM to each process group (every component leads
    its own: start_new_session), SIGKILL after grace. All at once, etcd waits for the apiserver's watch streams
    and the apiserver for etcd, and `down` takes seconds instead of one."""
    def signal_all(pids: list[int], sig: int) -> None:
        for pid in filter(ours, pids):  # not a pid that has exited and been reused
            try:
                os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
            except ProcessLookupError:
                pass

    last = ("kube-apiserver", "etcd")
    stages = [[p for p, n in procs.items() if n not in last]] + [[p for p, n in procs.items() if n == x] for x in last]
    for stage in stages:
        for sig, bound in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            signal_all(stage, sig)
            deadline = time.monotonic() + bound
            while any(ours(p) for p in stage) and time.monotonic() < deadline:
                time.sleep(0.05)
    return [p for p in procs if ours(p)]


def start(name: str, args: list, env: dict | None = None) -> subprocess.Popen:
    log = open(LOGS / f"{name}.log", "ab")
    proc = subprocess.Popen([str(a) for a in args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env, cwd=STATE)
    log.close()
    (PIDS / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc


def port_holder(port: int) -> str:
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    m = re.search(r'users:\(\("([^"]+)",pid=(\d+)', out)
    return f"{m[1]} (pid {m[2]})" if m else "another process"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine, a listener is not
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# ---- the API -----------------------------------------------------------------------------------------------

def http(url: str, ctx: ssl.SSLContext, token: str | None = None, method: str = "GET", body=None,
         timeout: float = 3) -> tuple[int, bytes]:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    # No ProxyHandler from the environment: loopback never goes through an HTTPS_PROXY.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def insecure() -> ssl.SSLContext:
    # Only for controller-manager's and scheduler's /healthz: their serving certs are generated in memory.
    return ssl._create_unverified_context()


class Api:
    """The apiserver as the admin token sees it, verifying its self-signed serving certificate."""

    def __init__(self, port: int, token: str):
        self.base, self.token = f"https://127.0.0.1:{port}", token
        self.ctx = ssl.create_default_context(cafile=str(CERT_DIR / "apiserver.crt"))

    def get(self, path: str) -> dict:
        status, data = http(self.base + path, self.ctx, self.token)
        if status != 200:
            raise Failure(f"GET {path}: HTTP {status} {data[:200]!r}")
        return json.loads(data)

    def create(self, path: str, obj: dict) -> None:
        status, data = http(self.base + path, self.ctx, self.token, "POST", obj)
        if status != 201:
            raise Failure(f"creating {obj['kind']} {obj['metadata']['name']}: HTTP {status} {data[:300]!r}")

    def ready(self) -> bool:
        return http(self.base + "/readyz", self.ctx, self.token)[0] == 200


def true(obj: dict, condition: str) -> bool:
    return any(c["type"] == condition and c["status"] == "True" for c in obj.get("status", {}).get("conditions") or [])


def kubectl(*args: str, input: str | None = None) -> str:
    """kubectl against the e2e cluster, for the tests: its output, or an assertion naming the command."""
    r = subprocess.run([BIN / "kubectl", f"--kubeconfig={KUBECONFIG}", *args], input=input, capture_output=True,
                       text=True, timeout=90)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r.stdout


def get(*args: str) -> dict:
    return json.loads(kubectl("get", *args, "-o", "json"))


def wait_for(what: str, check, seconds: float, log: str, procs: dict[str, subprocess.Popen]) -> None:
    """Polls check() until true; fails after `seconds` (times E2E_WAIT_SCALE) or as soon as a component exits."""
    deadline, last = time.monotonic() + seconds * WAIT_SCALE, None
    while True:
        for name, p in procs.items():
            if p.poll() is not None:
                raise Failure(f"{name} exited with code {p.returncode} while waiting for {what}; "
                              f"see {rel(LOGS / (name + '.log'))}")
        try:
            if check():
                return
        except (OSError, Failure, ValueError) as e:  # not up yet: connection refused, no cert yet, 404 ...
            last = e
        if time.monotonic() > deadline:
            raise Failure(f"{what} not within {seconds * WAIT_SCALE:g} s{f' ({last})' if last else ''}; "
                          f"see {log}")
        time.sleep(0.2)


# ---- what `up` writes --------------------------------------------------------------------------------------

def kubeconfig(port: int, token: str, contexts=CONTEXTS) -> str:
    ca = base64.b64encode((CERT_DIR / "apiserver.crt").read_bytes()).decode()
    return json.dumps({  # JSON is YAML: kubectl, client-go and the Pulumi provider all read it
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                 "certificate-authority-data": ca}}],
        "users": [{"name": "e2e-admin", "user": {"token": token}}],
        "contexts": [{"name": c, "context": {"cluster": "e2e", "user": "e2e-admin"}} for c in contexts],
        "current-context": contexts[0]}, indent=1) + "\n"


def node(name: str, resources: dict, labels: dict, taints: list, index: int) -> dict:
    # A Node keeps the status it is created with (pkg/registry/core/node/strategy.go): kwok's node-initialize
    # stage then keeps capacity, allocatable and the addresses and adds the conditions. Both address types: with
    # one missing, that stage replaces the list with what it knows (empty without --node-ip/--node-name).
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": dict([KWOK_ANNOTATION]),
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok", **labels}},
            "spec": {"taints": taints},
            "status": {"capacity": resources, "allocatable": resources,
                       "addresses": [{"type": "InternalIP", "address": f"192.0.2.{index + 1}"},
                                     {"type": "Hostname", "address": name}]}}


def crd_dirs() -> list[Path]:
    """The CRD directories the stacks need; KubeRay and Gateway API at the versions AIBrix v0.7.0 bundles."""
    bundled = dict(re.findall(r'"(\w+)": "(v[\d.]+)"', (ROOT / "components" / "platform.py").read_text()
                              .split("AIBRIX_BUNDLED", 1)[1].split("\n", 1)[0]))
    dirs = [CRDS / d for d in ("aibrix", f"kuberay/{bundled['kuberay']}", "rbg", "lws",
                               f"gateway-api/{bundled['gatewayApi']}-standard", "gateway-api-inference-extension",
                               "gateway-api-inference-extension/v1.5.0-experimental", "prometheus-operator",
                               "envoy-gateway")]
    missing = [rel(d) for d in dirs if not d.is_dir()]
    if missing:
        raise Failure(f"CRD directories missing: {', '.join(missing)} (E2E_CRDS points elsewhere?)")
    return dirs


def go_module_dir(module: str, wrapper: str | None = None) -> Path:
    """Where the go command has a module (downloading it first): `module` at the version the wrapper
    e2e/tools/<wrapper> requires, or `module` given as path@version."""
    cwd = ROOT / "e2e" / "tools" / wrapper if wrapper else ROOT
    done = subprocess.run(["go", "mod", "download", "-json", module], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise Failure(f"go mod download -json {module} in {rel(cwd)} failed: {done.stderr.strip()}")
    return Path(json.loads(done.stdout)["Dir"])


def module_crd_files() -> list[Path]:
    """CRDs ../shared/crds lacks, from the Go module of the release the cluster runs, as the render reads
    them (apivalidation/module_crds.py, the one list; standard library only, so loaded here by path)."""
    spec = importlib.util.spec_from_file_location("module_crds", ROOT / "apivalidation" / "module_crds.py")
    module_crds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module_crds)
    return [go_module_dir(f"{module}@{version}") / file for module, version, file in module_crds.MODULE_CRDS.values()]


def crd_files() -> list[Path]:
    return sorted(f for d in crd_dirs() for f in d.glob("*.yaml")) + module_crd_files()


def component_args(token_file: Path) -> dict[str, list]:
    p, k = PORTS, ADMIN_KUBECONFIG
    etcd = f"http://127.0.0.1:{p['etcd']}"
    peer = f"http://127.0.0.1:{p['etcd_peer']}"
    delegated = [f"--kubeconfig={k}", f"--authentication-kubeconfig={k}", f"--authorization-kubeconfig={k}",
                 "--leader-elect=false", "--bind-address=127.0.0.1"]
    return {
        "etcd": [BIN / "etcd", "--name=e2e", f"--data-dir={STATE / 'etcd'}", f"--listen-client-urls={etcd}",
                 f"--advertise-client-urls={etcd}", f"--listen-peer-urls={peer}",
                 f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=e2e={peer}", "--unsafe-no-fsync",
                 "--log-level=warn"],
        # controller-runtime pkg/internal/testing/controlplane/apiserver.go (envtest) flags, plus service-account
        # signing so the controllers' own tokens work. --endpoint-reconciler-type=none: since v1.37 the default
        # (lease) reconciler refuses a loopback advertise address (pkg/controlplane/instance.go ValidateIP), and
        # nothing in this cluster dials the `kubernetes` Service anyway.
        "kube-apiserver": [
            BIN / "kube-apiserver", f"--etcd-servers={etcd}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none", f"--secure-port={p['apiserver']}",
            f"--cert-dir={CERT_DIR}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true", "--authorization-mode=RBAC",
            f"--token-auth-file={token_file}", f"--service-account-issuer=https://127.0.0.1:{p['apiserver']}",
            f"--service-account-key-file={STATE / 'sa.pub'}",
            f"--service-account-signing-key-file={STATE / 'sa.key'}"],
        "kube-controller-manager": [
            BIN / "kube-controller-manager", *delegated, f"--secure-port={p['controller_manager']}",
            f"--controllers={','.join(CONTROLLERS)}", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={STATE / 'sa.key'}",
            f"--root-ca-file={CERT_DIR / 'apiserver.crt'}", "--cluster-name=e2e"],
        "kube-scheduler": [BIN / "kube-scheduler", *delegated, f"--secure-port={p['scheduler']}"],
        # kwok v0.8.0 (pkg/kwok/cmd/root.go): its server (logs/exec/port-forward/metrics) starts only with
        # --server-address or --node-port, so neither is set and it listens nowhere; v0.8.0 has no CNI mode.
        # --node-lease-duration-seconds turns on node leases, which the heartbeat-with-lease stage expects.
        "kwok": [BIN / "kwok", f"--kubeconfig={k}", *(f"--config={f}" for f in sorted(KWOK_STAGES.glob("*.yaml"))),
                 f"--manage-nodes-with-annotation-selector={'='.join(KWOK_ANNOTATION)}",
                 "--node-lease-duration-seconds=40", f"--cidr={POD_CIDR}"],
    }


# ---- commands ----------------------------------------------------------------------------------------------

def recorded_ports() -> dict[str, int]:
    return json.loads((STATE / "ports.json").read_text())


def admin_token() -> str:
    return (STATE / "tokens.csv").read_text().split(",", 1)[0]


def healthy() -> bool:
    try:
        running = set(our_processes().values())
        return running >= set(ORDER) and Api(recorded_ports()["apiserver"], admin_token()).ready()
    except (OSError, ValueError, KeyError, ssl.SSLError):
        return False


def up() -> int:
    if STATE.exists() or our_processes():
        if healthy():
            step(f"cluster already up: https://127.0.0.1:{recorded_ports()['apiserver']}, kubeconfig {rel(KUBECONFIG)}")
            return 0
        step("stale state of an earlier cluster: cleaning it up first")
        if down() != 0:
            return 1
    missing = [n for n in (*ORDER, "kubectl", *controller_binaries()) if not os.access(BIN / n, os.X_OK)]
    if missing:
        print(f"error: missing {', '.join(rel(BIN / n) for n in missing)}: build with `make e2e-tools`",
              file=sys.stderr)
        return 2
    for name, port in PORTS.items():
        if not port_free(port):
            print(f"error: port 127.0.0.1:{port} ({name}, E2E_{name.upper()}_PORT) is taken by {port_holder(port)}",
                  file=sys.stderr)
            return 2
    try:
        crds = crd_files()
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    for d in (LOGS, PIDS, STATE / "kwok-home"):
        d.mkdir(parents=True, exist_ok=True)
    (STATE / "ports.json").write_text(json.dumps(PORTS) + "\n")
    procs: dict[str, subprocess.Popen] = {}
    apply = failed = None
    try:
        # The service-account key pair (kube-apiserver verifies and signs, controller-manager signs).
        subprocess.run(["openssl", "genrsa", "-out", STATE / "sa.key", "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", STATE / "sa.key", "-pubout", "-out", STATE / "sa.pub"],
                       check=True, capture_output=True)
        token = secrets.token_hex(24)
        token_file = STATE / "tokens.csv"
        token_file.write_text(f'{token},e2e-admin,e2e-admin,"system:masters"\n')
        token_file.chmod(0o600)
        args = component_args(token_file)

        procs["etcd"] = start("etcd", args["etcd"])
        wait_for("etcd /health", lambda: json.loads(
            http(f"http://127.0.0.1:{PORTS['etcd']}/health", insecure())[1]).get("health") == "true",
            10, rel(LOGS / "etcd.log"), procs)
        step("etcd ready")

        # Installing the CRDs is most of `up`: the apiserver converts and deep-copies their schemas (the rbg ones
        # are 3 MB each) on every status update, and a third of its CPU went to the garbage collector. GOGC=400
        # (measured here: up in 14 s instead of 20 s) for about 2.5 GB of memory instead of 1.2 GB.
        procs["kube-apiserver"] = start("kube-apiserver", args["kube-apiserver"],
                                        os.environ | {"GOGC": os.environ.get("E2E_APISERVER_GOGC", "400")})
        api = None

        def apiserver_ready() -> bool:
            nonlocal api
            api = api or Api(PORTS["apiserver"], token)  # its cert exists once it serves
            return api.ready()
        wait_for("kube-apiserver /readyz", apiserver_ready, 20, rel(LOGS / "kube-apiserver.log"), procs)
        step("kube-apiserver ready")
        ADMIN_KUBECONFIG.write_text(kubeconfig(PORTS["apiserver"], token, ("e2e",)))
        ADMIN_KUBECONFIG.chmod(0o600)

        # KWOK's HOME is private: it would load ~/.kwok/kwok.yaml first (pkg/config/flags.go loadConfig).
        kwok_env = {k: v for k, v in os.environ.items() if not k.startswith("KWOK_")} | {
            "HOME": str(STATE / "kwok-home")}
        for name in ORDER[2:]:
            procs[name] = start(name, args[name], kwok_env if name == "kwok" else None)
        # The CRDs go in while the controllers start; server-side apply: some are too big for the
        # last-applied annotation of a client-side apply.
        apply = subprocess.Popen(
            [BIN / "kubectl", f"--kubeconfig={ADMIN_KUBECONFIG}", "apply", "--server-side", "--force-conflicts",
             *(a for f in crds for a in ("-f", f))],
            stdout=subprocess.DEVNULL, stderr=open(LOGS / "kubectl-apply-crds.log", "wb"))
        for i, n in enumerate(NODES):
            api.create("/api/v1/nodes", node(*n, i))
        step(f"{len(procs) - 2} components started, {len(NODES)} nodes registered, {len(crds)} CRDs applying")

        for name, port in (("kube-controller-manager", "controller_manager"), ("kube-scheduler", "scheduler")):
            wait_for(f"{name} /healthz", lambda port=port: http(
                f"https://127.0.0.1:{PORTS[port]}/healthz", insecure())[0] == 200, 20, rel(LOGS / f"{name}.log"),
                procs)
        # The default ServiceAccount proves the controller-manager's controllers run with their own tokens.
        wait_for("ServiceAccount default/default", lambda: api.get(
            "/api/v1/namespaces/default/serviceaccounts/default"), 20, rel(LOGS / "kube-controller-manager.log"),
            procs)
        step("kube-controller-manager and kube-scheduler ready")

        def nodes_ready() -> bool:
            items = api.get("/api/v1/nodes")["items"]
            return len(items) == len(NODES) and all(true(n, "Ready") for n in items)
        wait_for("nodes Ready", nodes_ready, 20, rel(LOGS / "kwok.log"), procs)
        step(f"{len(NODES)} nodes Ready")

        try:
            rc = apply.wait(timeout=60 * WAIT_SCALE)
        except subprocess.TimeoutExpired:
            apply.kill()
            rc = "timeout"
        if rc != 0:
            raise Failure(f"kubectl apply of the CRDs failed ({rc}); see {rel(LOGS / 'kubectl-apply-crds.log')}")
        step(f"{len(crds)} CRDs applied")
        want = {re.search(r"^  name: (\S+)", f.read_text(), re.M)[1] for f in crds}

        def crds_established() -> bool:
            items = api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
            return want <= {c["metadata"]["name"] for c in items if true(c, "Established")}
        wait_for("CRDs Established", crds_established, 20, rel(LOGS / "kube-apiserver.log"), procs)
        step(f"{len(want)} CRDs Established")

        for path, obj in storage_objects():
            api.create(path, obj)
        step(f"default StorageClass {STORAGE_CLASS} with {STORAGE_POOL} volumes")
        for path, obj in PLATFORM:
            api.create(path, obj)
        step("AIBrix's namespace and Gateway as its install leaves them")

        for name in WORKLOAD_CONTROLLERS:
            procs[name] = start(name, controllers.command(
                name, BIN, ADMIN_KUBECONFIG, PORTS[f"{name}_metrics"], PORTS[f"{name}_health"]),
                os.environ | controllers.CONTROLLERS[name]["env"])
        for name in WORKLOAD_CONTROLLERS:
            health = f"http://127.0.0.1:{PORTS[f'{name}_health']}{controllers.CONTROLLERS[name]['readyz']}"
            wait_for(f"{name} {health}", lambda health=health: http(health, insecure())[0] == 200, 20,
                     rel(LOGS / f"{name}.log"), procs)
        step(f"workload controllers ready: {', '.join(WORKLOAD_CONTROLLERS)}")

        KUBECONFIG.write_text(kubeconfig(PORTS["apiserver"], token))
        KUBECONFIG.chmod(0o600)
    except (Exception, KeyboardInterrupt) as e:  # whatever it is, nothing started may outlive a failed up
        failed = e
        if not isinstance(e, (Failure, KeyboardInterrupt)):
            traceback.print_exc()
    if failed is None:
        step(f"cluster up in {time.monotonic() - T0:.1f} s: kubectl --kubeconfig {rel(KUBECONFIG)} get nodes")
        return 0
    # Stop what was started; the logs stay in .e2e/cluster/logs for reading (the next up or down removes them).
    print(f"error: {failed if str(failed) else type(failed).__name__}", file=sys.stderr)
    for name, p in procs.items():
        if p.poll() is not None:
            tail = (LOGS / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
            print(f"--- last lines of {rel(LOGS / (name + '.log'))}:", *tail, sep="\n", file=sys.stderr)
    if apply and apply.poll() is None:
        apply.kill()
    left = stop(our_processes())
    shutil.rmtree(PIDS, ignore_errors=True)
    KUBECONFIG.unlink(missing_ok=True)
    print(f"cluster-up failed; stopped what it started{f' except {left}' if left else ''}", file=sys.stderr)
    return 1


def down() -> int:
    procs = our_processes()
    if not procs and not STATE.exists() and not KUBECONFIG.exists():
        step("cluster not running")
        return 0
    left = stop(procs)
    if left:
        print(f"error: processes {left} survived SIGKILL", file=sys.stderr)
        return 1
    shutil.rmtree(STATE, ignore_errors=True)
    KUBECONFIG.unlink(missing_ok=True)
    step(f"cluster down: stopped {', '.join(sorted(procs.values())) or 'nothing'}, removed {rel(STATE)}")
    return 0


def status() -> int:
    procs = {name: pid for pid, name in our_processes().items()}
    for name in ORDER:
        print(f"{name:24} {'pid ' + str(procs[name]) if name in procs else 'not running'}")
    if not healthy():
        print("cluster: not up")
        return 1
    api = Api(recorded_ports()["apiserver"], admin_token())
    ready = sum(true(n, "Ready") for n in api.get("/api/v1/nodes")["items"])
    print(f"cluster: up at {api.base}, {ready} nodes Ready, kubeconfig {rel(KUBECONFIG)}")
    return 0


if __name__ == "__main__":
    commands = {"up": up, "down": down, "status": status}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]]())
