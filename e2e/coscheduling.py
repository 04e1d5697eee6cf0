"""Gang scheduling on the local control plane (issue 29): scheduler-plugins' scheduler beside kube-scheduler.

    with coscheduling.second_scheduler() as scheduler_name: ...

installs the PodGroup CRD (`scheduling.x-k8s.io/v1alpha1`) and starts `.e2e/bin/kube-scheduler-plugins`
(e2e/build-tools.sh scheduler-plugins: sigs.k8s.io/scheduler-plugins cmd/scheduler at the version AIBrix
v0.7.0's go.mod requires, v0.31.8) as a second scheduler: one profile, SCHEDULER_NAME, with the Coscheduling
plugin. kube-scheduler keeps `default-scheduler`; a pod picks the second one with `schedulerName`. Only a test
that asks pays for it (conftest.py's `coscheduling` fixture); it is stopped after, and `cluster.py down` stops
it too (cluster.ON_DEMAND).

Everything is read from the module at that version, never copied into this repository: the CRD and the
scheduler configuration (`go mod download -json`, as cluster.go_module_dir). Like the other components it runs
with the admin kubeconfig (no RBAC of its own), listens on 127.0.0.1 only, and every wait is bounded.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import cluster
import yaml

MODULE, WRAPPER = "sigs.k8s.io/scheduler-plugins", "scheduler-plugins"  # e2e/tools/scheduler-plugins
BINARY = "kube-scheduler-plugins"  # e2e/build-tools.sh build_scheduler_plugins
assert BINARY in cluster.ON_DEMAND
# What upstream's Helm chart names it (manifests/install/charts/as-a-second-scheduler/values.yaml
# scheduler.name, v0.31.8). AIBrix v0.7.0 creates the PodGroup of a RoleSet with a coschedulingSchedulingStrategy
# and labels its pods with POD_GROUP_LABEL (pkg/controller/roleset/sync.go, utils.go) but sets no
# schedulerName: the pod template must name this scheduler.
SCHEDULER_NAME = "scheduler-plugins-scheduler"
# manifests/coscheduling/crd.yaml is byte for byte config/crd/bases/scheduling.x-k8s.io_podgroups.yaml at
# v0.31.8; the first is the one upstream's coscheduling install (doc/install.md) applies.
CRD_FILE = "manifests/coscheduling/crd.yaml"
CONFIG_FILE = "manifests/coscheduling/scheduler-config.yaml"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # apis/scheduling/v1alpha1/types.go PodGroupLabel
NAME = "kube-scheduler-plugins"  # its log and pid file in the cluster's state dir


def module_dir() -> Path:
    return cluster.go_module_dir(MODULE, WRAPPER)


def scheduler_config(upstream: dict, kubeconfig: Path) -> dict:
    """Upstream's manifests/coscheduling/scheduler-config.yaml (v0.31.8) with what its deployment fills in
    (the kubeconfig: REPLACE_ME_WITH_KUBE_CONFIG_PATH) and its profile renamed from default-scheduler, which
    kube-scheduler already serves. Kept as upstream has it: leader election off, `multiPoint` enabling
    Coscheduling at every extension point it implements (pkg/coscheduling/coscheduling.go: QueueSort,
    PreFilter, PostFilter, Permit, Reserve; v0.31.8 has no PostBind), its QueueSort replacing the default
    one, permitWaitingTimeSeconds 10."""
    cfg = json.loads(json.dumps(upstream))
    if cfg.get("leaderElection", {}).get("leaderElect") is not False:
        raise cluster.Failure(f"{CONFIG_FILE}: expected leaderElection.leaderElect false, got {cfg.get('leaderElection')}")
    [profile] = cfg["profiles"]
    cfg["clientConnection"]["kubeconfig"] = str(kubeconfig)
    profile["schedulerName"] = SCHEDULER_NAME
    return cfg


def api() -> cluster.Api:
    return cluster.Api(cluster.recorded_ports()["apiserver"], cluster.admin_token())


def install_podgroup_crd(crd: Path | None = None) -> None:
    """Applies the PodGroup CRD from the module and waits until it is Established (idempotent)."""
    crd = crd or module_dir() / CRD_FILE
    done = subprocess.run([cluster.BIN / "kubectl", f"--kubeconfig={cluster.ADMIN_KUBECONFIG}", "apply",
                           "--server-side", "--force-conflicts", "-f", crd], capture_output=True, text=True,
                          timeout=60 * cluster.WAIT_SCALE)
    if done.returncode != 0:
        raise cluster.Failure(f"kubectl apply -f {crd}: {done.stderr.strip()}")
    server = api()
    cluster.wait_for(f"CRD {PODGROUP_CRD} Established", lambda: cluster.true(server.get(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{PODGROUP_CRD}"), "Established"), 20,
        cluster.rel(cluster.LOGS / "kube-apiserver.log"), {})


def port() -> int:
    # Next to cluster.PORT_DEFAULTS' range, but not in it: every port there is held while the cluster is up.
    return int(os.environ.get("E2E_SCHEDULER_PLUGINS_PORT", "26450"))


def command(config: Path, secure_port: int) -> list:
    k = cluster.ADMIN_KUBECONFIG
    # With --config the deprecated flags (--kubeconfig, --leader-elect) are ignored (cmd/kube-scheduler/app/
    # options); serving and delegated authn/authz stay flags, as kube-scheduler's in cluster.component_args.
    return [cluster.BIN / BINARY, f"--config={config}", f"--authentication-kubeconfig={k}",
            f"--authorization-kubeconfig={k}", "--bind-address=127.0.0.1", f"--secure-port={secure_port}"]


@contextlib.contextmanager
def second_scheduler() -> Iterator[str]:
    """The PodGroup CRD installed and the second scheduler ready; yields its schedulerName, stops it after."""
    binary = cluster.BIN / BINARY
    if not os.access(binary, os.X_OK):
        raise cluster.Failure(f"missing {cluster.rel(binary)}: build it with `bash e2e/build-tools.sh scheduler-plugins`")
    if not cluster.healthy():
        raise cluster.Failure("the cluster is not up: python3 e2e/cluster.py up")
    secure_port = port()
    if not cluster.port_free(secure_port):
        raise cluster.Failure(f"port 127.0.0.1:{secure_port} (E2E_SCHEDULER_PLUGINS_PORT) is taken by "
                              f"{cluster.port_holder(secure_port)}")
    source = module_dir()
    install_podgroup_crd(source / CRD_FILE)
    state = cluster.STATE / "scheduler-plugins"
    state.mkdir(exist_ok=True)
    config = state / "config.json"  # JSON is YAML: the scheduler's strict decoder reads either
    config.write_text(json.dumps(scheduler_config(yaml.safe_load((source / CONFIG_FILE).read_text()),
                                                  cluster.ADMIN_KUBECONFIG), indent=1) + "\n")
    proc = cluster.start(NAME, command(config, secure_port))
    try:
        # /readyz answers 200 once the informers (the Coscheduling plugin's PodGroup cache among them) synced.
        cluster.wait_for(f"{BINARY} /readyz", lambda: cluster.http(
            f"https://127.0.0.1:{secure_port}/readyz", cluster.insecure())[0] == 200, 30,
            cluster.rel(cluster.LOGS / f"{NAME}.log"), {NAME: proc})
        yield SCHEDULER_NAME
    finally:
        left = cluster.stop({proc.pid: BINARY})
        proc.wait(timeout=5)
        (cluster.PIDS / f"{NAME}.pid").unlink(missing_ok=True)
        if left:
            raise cluster.Failure(f"{BINARY} (pid {proc.pid}) survived SIGKILL")
