"""Fault injection for the e2e (issue 30): signals to the real Pulumi CLI and the plugins it leaves behind, an
update held at a chosen point, and a kube-apiserver process of our own that a test stops and starts.

Every wait here is bounded and everything started is stopped by whoever started it (context managers).
Facts about the CLI are from pulumi v3.276.0's source (/work/briefs/i30-pulumi.md cites the files):
- the plugins run in process groups of their own (pkg/resource/plugin/plugin.go, cmdutil.RegisterProcessGroup,
  sdk/go/common/util/cmdutil/child_unix.go Setpgid), so a SIGKILL of the CLI orphans them, and the Kubernetes
  provider exits only when its engine health check fails, up to 5 minutes later (pkg@v3.215.0
  resource/provider/main.go rpcutil.Healthcheck): `kill_cli` kills them itself;
- the file backend's lock is `<state>/.pulumi/locks/organization/<project>/<stack>/<uuid>.json`
  (pkg/backend/diy/lock.go) and the checkpoint `<state>/.pulumi/stacks/<project>/<stack>.json`
  (pkg/backend/diy/store.go), {"checkpoint": {"latest": {"resources", "pending_operations"}}}
  (sdk/go/common/apitype/core.go DeploymentV3).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import cluster
from harness import BIN, KUBECONFIG, PYTHON, ROOT, Pulumi, Result

PROJECT = "llm-serving"
GATE = "e2e.llm-serving.io/hold"


def kubectl(*args: str, check: bool = True, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([str(BIN / "kubectl"), f"--kubeconfig={KUBECONFIG}", *args], input=input, capture_output=True,
                       text=True, timeout=timeout)
    assert not check or r.returncode == 0, f"kubectl {' '.join(args)} -> {r.returncode}: {r.stderr}"
    return r


def wait_until(what: str, check, seconds: float, every: float = 0.5):
    """check() until it returns something true; AssertionError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds * cluster.WAIT_SCALE
    while not (found := check()):
        assert time.monotonic() < deadline, f"not within {seconds * cluster.WAIT_SCALE:g} s: {what}"
        time.sleep(every)
    return found


# ---- the CLI as a process a test can signal ----------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _program(pid: int) -> str:
    """The program's name, with its module for an interpreter (`python -m pulumi.policy`)."""
    try:
        args = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return "?"
    name = Path(args[0]).name if args else "?"
    return " ".join([name, *args[1:4]]) if name.startswith("python") else name


def _pids() -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]


class Cli:
    """`pulumi <args>` through e2e/pulumi_client.py as harness.Pulumi.run starts it, but in a session of its
    own (start_new_session): the wrapper leads it, the CLI and every plugin it starts stay in it (a process
    group is not a session), so `session()` finds what a SIGKILL would leave behind."""

    def __init__(self, pulumi: Pulumi, *args: str, stack: str, env: dict[str, str] | None = None):
        self.argv = [*args, "--non-interactive", "--stack", stack]
        pulumi.calls += 1
        words = [a for a in args[:2] if a.replace("-", "").isalnum()]
        self.log = pulumi.logs / f"{pulumi.calls:03d}-{'-'.join(words)}.log"
        self._out = self.log.open("w")
        self._out.write(f"$ pulumi {' '.join(self.argv)}\n")
        self._out.flush()
        self.start = time.monotonic()
        self.proc = subprocess.Popen([str(PYTHON), str(ROOT / "e2e" / "pulumi_client.py"), *self.argv],
                                     cwd=pulumi.project, env={**pulumi.env(), **(env or {})}, stdout=self._out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._cli: int | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cli_pid(self) -> int:
        """The `pulumi` process itself: the wrapper's child running .e2e/bin/pulumi."""
        if self._cli is None:
            def find():
                return next((p for p in _pids() if (st := _stat(p)) and int(st[1]) == self.proc.pid
                             and _argv0(p) == str(BIN / "pulumi")), None)
            self._cli = wait_until(f"the CLI of `pulumi {' '.join(self.argv)}` started", find, 30, 0.1)
        return self._cli

    def session(self) -> list[int]:
        """Every live process of this CLI's session: the wrapper, the CLI, the plugins and their children."""
        return [p for p in _pids() if (st := _stat(p)) and st[0] != "Z" and int(st[3]) == self.proc.pid]

    def sigint(self) -> None:
        """Ctrl-C as the CLI gets it: SIGINT to the `pulumi` process (pkg/backend/cancellation_scope.go)."""
        os.kill(self.cli_pid(), signal.SIGINT)

    def kill(self) -> list[str]:
        """SIGKILL to the CLI, as a CI runner's timeout does, then to every process it left behind (the
        plugins in their own process groups, the language runtime); returns what was left, by program name.
        Bounded: every process of the session is gone within 10 s or the assertion says which is not."""
        cli = self.cli_pid()
        os.kill(cli, signal.SIGKILL)
        wait_until("the CLI gone after SIGKILL", lambda: not _alive(cli), 10, 0.05)
        # The wrapper sees its child die and exits with 137, as a shell would report it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        left = [p for p in self.session() if p != cli]
        names = sorted(_program(p) for p in left)
        for p in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        wait_until(f"the processes the CLI left ({names}) gone", lambda: not self.session(), 10, 0.05)
        return names

    def wait(self, timeout: float = 900) -> Result:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"pulumi {' '.join(self.argv)} still running after {timeout} s (killed)")
        finally:
            self._out.close()
        return Result(self.argv, self.proc.returncode, self.log.read_text(), time.monotonic() - self.start)


# ---- the file backend's lock and checkpoint ----------------------------------------------------------------

def lock_files(pulumi: Pulumi, stack: str) -> list[Path]:
    d = pulumi.state / ".pulumi" / "locks" / "organization" / PROJECT / stack
    return sorted(d.glob("*.json")) if d.is_dir() else []


def checkpoint_path(pulumi: Pulumi, stack: str) -> Path:
    return pulumi.state / ".pulumi" / "stacks" / PROJECT / f"{stack}.json"


def pending_operations(pulumi: Pulumi, stack: str) -> list[tuple[str, str]]:
    """(type, resource name) of each pending operation the checkpoint holds."""
    latest = json.loads(checkpoint_path(pulumi, stack).read_text())["checkpoint"].get("latest") or {}
    return [(op["type"], op["resource"]["urn"].rsplit("::", 1)[1]) for op in latest.get("pending_operations") or []]


# ---- an update held at a point: its pods created but never scheduled ---------------------------------------

@contextlib.contextmanager
def held_pods(namespace: str, condition: str, probe_labels: dict[str, str]):
    """New pods of `namespace` that match the CEL `condition` are created with a scheduling gate of ours, so
    they stay Pending (SchedulingGated) until released: kwok would otherwise complete a Job's pod and ready
    an engine pod at once. A MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, served by this
    kube-apiserver) bound to this namespace only, so no other scenario's pod is touched. Entered once a
    server-side dry run of a pod with `probe_labels` comes back gated; on exit the binding goes first (no new
    pod gated), then the gate is removed from every pod that has it, and the scheduler binds them. The dry run
    goes to a probe namespace the binding also selects: the stack's own may not exist before its first `up`."""
    name = f"e2e-hold-{namespace}"[:63]
    # A namespace of its own per hold: the last hold's may still be terminating, and nothing is created there.
    probe_ns = f"{namespace[:48]}-probe-{os.urandom(3).hex()}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
              "metadata": {"name": name}, "spec": {
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["pods"]}]},
                  "matchConditions": [{"name": "held", "expression": condition}],
                  "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": (
                      f'Object{{spec: Object.spec{{schedulingGates: [Object.spec.schedulingGates{{name: "{GATE}"}}]}}}}')}}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "matchResources": {
                   "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                               "values": [namespace, probe_ns]}]}}}}
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-hold-probe", "namespace": probe_ns,
                                                             "labels": probe_labels},
             "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]}}

    def gated() -> bool:
        out = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", check=False, input=json.dumps(probe))
        return out.returncode == 0 and GATE in out.stdout

    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": probe_ns}}
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                  "items": [namespace_obj, policy, binding]}))
    try:
        wait_until(f"the hold on {condition} in effect", gated, 20)
        yield
    finally:
        kubectl("delete", "mutatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
        kubectl("delete", "mutatingadmissionpolicy", name, "--ignore-not-found", check=False)
        with contextlib.suppress(AssertionError):
            wait_until("the hold lifted", lambda: not gated(), 20)
        kubectl("delete", "namespace", probe_ns, "--wait=false", "--ignore-not-found", check=False)
        for pod in gated_pods(namespace):
            kubectl("patch", "pod", pod, "-n", namespace, "--type=json", "-p",
                    json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]), check=False)


def gated_pods(namespace: str) -> list[str]:
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    return [p["metadata"]["name"] for p in pods
            if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])]


# ---- a kube-apiserver of our own: stopped and started for real ---------------------------------------------

class PrivateApiserver:
    """A second kube-apiserver process on the cluster's etcd, with the cluster's own flags, certificate, tokens
    and service-account keys (e2e/cluster.py component_args), on a port of its own: the stack under test reaches
    the cluster only through it (its kubeconfig), so stopping and starting it is a real restart of the process
    the CLI and the provider talk to, and no other scenario's stack (the shared kube-apiserver) notices.
    Controllers, the scheduler and kwok keep using the shared one, as they would another replica of an HA
    control plane. Its arguments carry the cluster's state dir, so `cluster.py down` stops it too."""

    def __init__(self, workdir: Path, name: str):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.token = cluster.admin_token()
        self.kubeconfig = workdir / f"{name}.kubeconfig"
        self.kubeconfig.write_text(cluster.kubeconfig(self.port, self.token))
        self.kubeconfig.chmod(0o600)
        self.logfile = workdir / "logs" / f"{name}-kube-apiserver.log"
        args = cluster.component_args(cluster.STATE / "tokens.csv")["kube-apiserver"]
        certs = cluster.CERT_DIR
        self.args = [str(a) for a in args if not str(a).startswith(("--secure-port=", "--cert-dir="))] + [
            f"--secure-port={self.port}", f"--tls-cert-file={certs / 'apiserver.crt'}",
            f"--tls-private-key-file={certs / 'apiserver.key'}"]
        self.proc: subprocess.Popen | None = None

    def ready(self) -> bool:
        try:
            return cluster.Api(self.port, self.token).ready()
        except OSError:
            return False

    def start(self) -> float:
        """Started and ready (bounded); returns the seconds it took."""
        t0 = time.monotonic()
        with self.logfile.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=os.environ | {"GOGC": "400"})
        wait_until(f"kube-apiserver on :{self.port} ready (log {self.logfile})",
                   lambda: self.proc.poll() is None and self.ready() or self.proc.poll() is not None, 90, 0.2)
        assert self.proc.poll() is None, f"kube-apiserver on :{self.port} exited {self.proc.returncode}: {self.logfile}"
        return time.monotonic() - t0

    def stop(self, grace: float = 5) -> str:
        """SIGTERM (its graceful shutdown), SIGKILL after `grace` seconds; gone before this returns. Says which
        ended it: with a client watching, kube-apiserver v1.37.2 was seen to drain for longer than 20 s."""
        if self.proc is None or self.proc.poll() is not None:
            return "not running"
        self.proc.terminate()
        try:
            self.proc.wait(timeout=grace)
            return "SIGTERM"
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return f"SIGKILL {grace:g} s after SIGTERM"

    def __enter__(self) -> PrivateApiserver:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
