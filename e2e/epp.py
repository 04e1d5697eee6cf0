"""The Gateway API Inference Extension's endpoint picker (EPP, GIE v1.5.0 cmd/epp, built by `e2e/build-tools.sh gie`)
as a process of the local control plane, and the two clients of e2e/tools/gie: extproc-pick (an Envoy ext_proc
client asking it for an endpoint, as a gateway does) and eppconfig (its own config loader).

Pods get loopback addresses: kwok v0.8.0 hands a pod the next address of its node's spec.podCIDR(s), falling back
to its --cidr (cluster.POD_CIDR) only for nodes without one (pkg/kwok/controllers/pod_controller.go
funcPodIPsWith), and the node-ipam controller does not run (cluster.py), so a node created with a podCIDR in
127.0.0.0/8 keeps it. Only the nodes of this module get one (`loopback_node`): every other test's pods keep
their 198.18.0.0/16 addresses, and the fake engines answering for this module's pods listen on those loopback
addresses (Linux routes all of 127.0.0.0/8 to lo). Nothing here dials outside 127.0.0.0/8.

What the chart passes (config/charts/epplib/templates/_deployment.yaml at v1.5.0, values of
config/charts/inferencepool/values.yaml) is read from the module's own files where it is literal (`chart_args`),
and checked against them where it is transcribed (`chart_config`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import cluster

MODULE = "sigs.k8s.io/gateway-api-inference-extension"
BINARIES = ("epp", "eppconfig", "extproc-pick")
# 127.31.0.0/16 is this module's: a node of it gets 127.31.<n>.0/24 (no other test uses 127.31.x.x).
LOOPBACK_NET = ipaddress.ip_network("127.31.0.0/16")
POOL_KEY = "e2e.llm-serving.io/pool"   # cluster.BUDGET_POOL's key, values of this module's own
HEALTH_SERVICE = "inference-extension"  # the chart's probes (_deployment.yaml: grpc port 9003, service inference-extension)
START = 60 * cluster.WAIT_SCALE


def missing() -> list[str]:
    return [b for b in BINARIES if not os.access(cluster.BIN / b, os.X_OK)]


def chart_dir() -> Path:
    return cluster.go_module_dir(MODULE, "gie") / "config" / "charts"


# ---- the chart at v1.5.0 ---------------------------------------------------------------------------------------

def _template_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()]


def chart_args(pool: str, namespace: str, config_file: Path, server_type: str = "vllm") -> list[str]:
    """The epp container's args the chart renders for an InferencePool release named `pool` with the default
    values but `inferencePool.modelServerType`: pool mode, no latency predictor, one replica, flags {v: 1},
    tracing off, metrics auth on (so no --metrics-endpoint-auth=false). The engine-specific metric flags are
    taken verbatim from the template's block for that type; the rest is asserted to be there as written."""
    tpl = chart_dir() / "epplib" / "templates" / "_deployment.yaml"
    lines = _template_lines(tpl)
    for literal in ('- --pool-name', '- --pool-namespace', '- --pool-group', '- "inference.networking.k8s.io"',
                    '- --zap-encoder', '- "json"', '- --config-file',
                    '- "/config/{{ .Values.inferenceExtension.pluginsConfigFile }}"', '- --tracing=false',
                    '- --{{ $key }}', '- "{{ $value }}"'):
        assert literal in lines, f"{tpl}: no line {literal!r}: the chart's args changed"
    engine: list[str] = []
    text = tpl.read_text()
    block = re.search(r'\{\{- if eq \$modelServerType "%s" \}\}\n(.*?)\{\{- end \}\}' % re.escape(server_type), text, re.S)
    if block:  # the legacy metric flags of that type, exactly as the template writes them
        engine = [json.loads(a) if a.startswith('"') else a
                  for a in (line.strip()[2:].split(" #")[0].strip() for line in block[1].splitlines()
                            if line.strip().startswith("- "))]
    return ["--pool-name", pool, "--pool-namespace", namespace, "--pool-group", "inference.networking.k8s.io",
            *engine, "--zap-encoder", "json", "--config-file", str(config_file), "--v", "1", "--tracing=false"]


def chart_config(server_type: str = "vllm") -> str:
    """default-plugins.yaml as config/charts/epplib/templates/_config.yaml renders it with the default values but
    inferencePool.modelServerType (protocol http: no parser plugin; no latency predictor). Transcribed; every
    line of it is asserted to stand in the template as written."""
    lines = ["apiVersion: inference.networking.x-k8s.io/v1alpha1", "kind: EndpointPickerConfig", "plugins:",
             "- type: queue-scorer", "- type: kv-cache-utilization-scorer", "- type: prefix-cache-scorer",
             "- type: metrics-data-source", "  parameters:", '    scheme: "http"', '    path: "/metrics"',
             "    insecureSkipVerify: true", "- type: core-metrics-extractor"]
    if server_type != "vllm":   # {{- if ne $modelServerType "vllm" }} parameters: defaultEngine: <type | quote>
        lines += ["  parameters:", f"    defaultEngine: {json.dumps(server_type)}"]
    lines += ["schedulingProfiles:", "- name: default", "  plugins:", "  - pluginRef: queue-scorer", "    weight: 2",
              "  - pluginRef: kv-cache-utilization-scorer", "    weight: 2", "  - pluginRef: prefix-cache-scorer",
              "    weight: 3"]
    tpl = chart_dir() / "epplib" / "templates" / "_config.yaml"
    have = set(_template_lines(tpl))
    templated = {'scheme: "http"': 'scheme: {{ .Values.inferenceExtension.metricsDataSource.scheme | default "http" | quote }}',
                 'path: "/metrics"': 'path: {{ .Values.inferenceExtension.metricsDataSource.path | default "/metrics" | quote }}',
                 "insecureSkipVerify: true": "insecureSkipVerify: {{ .Values.inferenceExtension.metricsDataSource.insecureSkipVerify | default true }}",
                 f"defaultEngine: {json.dumps(server_type)}": "defaultEngine: {{ $modelServerType | quote }}"}
    for line in lines:
        want = templated.get(line.strip(), line.strip())
        assert want in have, f"{tpl}: no line {want!r}: the chart's config changed"
    return "\n".join(lines) + "\n"


# ---- nodes and pods with loopback addresses ----------------------------------------------------------------------

@contextlib.contextmanager
def loopback_node(name: str, pool: str, subnet: int, index: int, gpu: bool = False) -> Iterator[ipaddress.IPv4Network]:
    """A kwok node of its own pool (label and taint POOL_KEY=<pool>; an 8-GPU H20 node as cluster.py's with gpu)
    whose pods get 127.31.<subnet>.x; deleted after."""
    cidr = ipaddress.ip_network(f"127.31.{subnet}.0/24")
    taints = [{"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}]
    node = cluster.node(name, cluster.GPU if gpu else cluster.CPU,
                        {**(cluster.GPU_LABELS if gpu else {}), POOL_KEY: pool},
                        [*(cluster.GPU_TAINTS if gpu else []), *taints],
                        230 + index)   # 192.0.2.231+: clear of the fixed nodes' and the other tests' addresses
    node["spec"].update(podCIDR=str(cidr), podCIDRs=[str(cidr)])
    cluster.kubectl("apply", "-f", "-", input=json.dumps(node))
    try:
        deadline = time.monotonic() + 20 * cluster.WAIT_SCALE
        while not cluster.true(cluster.get("node", name), "Ready"):
            assert time.monotonic() < deadline, f"node {name} not Ready (kwok) within {20 * cluster.WAIT_SCALE:g} s"
            time.sleep(0.3)
        yield cidr
    finally:
        cluster.kubectl("delete", "node", name, "--wait=false")


def pinned(pool: str) -> dict:
    """What a pod spec needs to land on a CPU loopback_node of the pool."""
    return {"nodeSelector": {POOL_KEY: pool},
            "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": pool, "effect": "NoSchedule"}]}


def sa_kubeconfig(namespace: str, service_account: str, path: Path) -> Path:
    """A kubeconfig of the cluster with a token of the ServiceAccount (TokenRequest): what the pod would run as."""
    token = cluster.kubectl("create", "token", service_account, "-n", namespace, "--duration=1h").strip()
    path.write_text(cluster.kubeconfig(cluster.recorded_ports()["apiserver"], token))
    return path


def ready_pods(namespace: str, selector: str, count: int, cidr: ipaddress.IPv4Network, seconds: float = 30) -> dict[str, str]:
    """name -> podIP once `count` pods of the selector are Running and Ready with an address in cidr."""
    deadline = time.monotonic() + seconds * cluster.WAIT_SCALE
    while True:
        pods = cluster.get("pods", "-n", namespace, "-l", selector)["items"]
        ips = {p["metadata"]["name"]: p["status"].get("podIP", "") for p in pods
               if p["status"].get("phase") == "Running" and cluster.true(p, "Ready") and p["status"].get("podIP")}
        if len(ips) == count:
            break
        assert time.monotonic() < deadline, f"{count} Ready pods {selector} in {namespace}: {ips} after {seconds:g} s"
        time.sleep(0.3)
    stray = {n: ip for n, ip in ips.items() if ipaddress.ip_address(ip) not in cidr}
    assert not stray, f"pods outside their node's podCIDR {cidr} (kwok ignored spec.podCIDR?): {stray}"
    return ips


def set_ready(namespace: str, pod: str, ready: bool) -> None:
    """The pod's Ready condition as a failing (or passing again) readiness probe leaves it. kwok's pod-ready stage
    selects Pending pods only (e2e/kwok/pod-ready.yaml), so it does not set a Running pod back."""
    status = cluster.get("pod", pod, "-n", namespace)["status"]
    for c in status["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "True" if ready else "False"
    for c in status["containerStatuses"]:
        c["ready"] = ready
    cluster.kubectl("patch", "pod", pod, "-n", namespace, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {k: status[k] for k in ("conditions", "containerStatuses")}}))


# ---- the EPP process --------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port: int, service: str = HEALTH_SERVICE) -> str:
    """grpc.health.v1.Health/Check on the EPP's plaintext health port: SERVING, NOT_SERVING, or the error."""
    import grpc
    status = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
    request = b"\x0a" + bytes([len(service)]) + service.encode()   # HealthCheckRequest{service = 1}
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            answer = check(request, timeout=2)
        except grpc.RpcError as e:
            return f"error {e.code().name}"
    return status.get(answer[1] if answer[:1] == b"\x08" else 0, "UNKNOWN")


class Epp:
    """One EPP process on loopback ports of its own: grpc (ext_proc), grpc-health, metrics."""

    def __init__(self, name: str, args: list[str], env: dict[str, str] | None = None):
        self.name, self.grpc, self.health_port, self.metrics = f"epp-{name}", free_port(), free_port(), free_port()
        # The ports last: pflag keeps the last of a repeated flag, so these win over any the args carry.
        self.argv = [cluster.BIN / "epp", *args, "--grpc-port", str(self.grpc), "--grpc-health-port",
                     str(self.health_port), "--metrics-port", str(self.metrics)]
        # KUBECONFIG: ctrl.GetConfig's fallback (the EPP has no --kubeconfig flag); NAMESPACE and POD_NAME as the
        # chart's Deployment sets them from the downward API.
        self.env = {**os.environ, "KUBECONFIG": str(cluster.ADMIN_KUBECONFIG), **(env or {})}
        self.proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.grpc}"

    @property
    def log(self) -> Path:
        return cluster.LOGS / f"{self.name}.log"

    def tail(self, n: int = 25) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""

    def start(self) -> Epp:
        self.proc = cluster.start(self.name, self.argv, self.env)
        return self

    def listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.grpc)) == 0

    def wait_serving(self, seconds: float = START) -> float:
        """Seconds until the health service says SERVING (the pool synced: runner/health.go) and the ext_proc
        port accepts connections (a runnable of its own, which the manager may start after the health one)."""
        t0 = time.monotonic()
        last = ""
        while (last := health(self.health_port)) != "SERVING" or not self.listening():
            assert self.proc.poll() is None, f"{self.name} exited {self.proc.returncode}:\n{self.tail()}"
            assert time.monotonic() - t0 < seconds, f"{self.name} not SERVING within {seconds:g} s ({last}):\n{self.tail()}"
            time.sleep(0.2)
        return time.monotonic() - t0

    def peers(self) -> set[str]:
        """The addresses the EPP has TCP connections to (the API server, the pods it scrapes)."""
        out = subprocess.run(["ss", "-Htnp"], capture_output=True, text=True, check=True).stdout
        return {line.split()[4].rsplit(":", 1)[0].strip("[]") for line in out.splitlines()
                if f"pid={self.proc.pid}," in line}

    def exited(self, seconds: float = 30) -> int:
        """The exit code of an EPP expected to refuse to start."""
        try:
            return self.proc.wait(timeout=seconds * cluster.WAIT_SCALE)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {seconds:g} s:\n{self.tail()}") from None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        (cluster.PIDS / f"{self.name}.pid").unlink(missing_ok=True)

    def __enter__(self) -> Epp:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def pick(addr: str, model: str, prompt: str = "hello", headers: tuple[str, ...] = ()) -> dict:
    """What the EPP answers a gateway's ext_proc exchange for a chat completion (extproc-pick's JSON)."""
    argv = [cluster.BIN / "extproc-pick", "-addr", addr, "-model", model, "-prompt", prompt, "-timeout", "10s"]
    for h in headers:
        argv += ["-H", h]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, f"extproc-pick -addr {addr}: exit {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


def endpoint(answer: dict) -> str:
    """The endpoint picked: the header and the envoy.lb metadata must agree."""
    header = (answer.get("headers") or {}).get("x-gateway-destination-endpoint", "")
    meta = (answer.get("dynamicMetadata") or {}).get("envoy.lb", {}).get("x-gateway-destination-endpoint", "")
    assert header == meta, f"header {header!r} and envoy.lb metadata {meta!r} disagree: {answer}"
    return header


def eppconfig(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([cluster.BIN / "eppconfig", path], capture_output=True, text=True, timeout=30)
