"""Hard faults on one dev stack pinned to a GPU node of its own (e2e/fault_stack.py) that reaches the cluster only
through a kube-apiserver process of its own (e2e/faults.py PrivateApiserver): `pulumi up` killed with SIGKILL at
each of the three points of issue 30's scenario 1, then that kube-apiserver restarted and unreachable (scenario 3).

SIGKILL (a CI runner's timeout): each point held by keeping its pod Pending (e2e/faults.py held_pods); the CLI
is killed, then every plugin it started (they run in process groups of their own and would outlive it:
e2e/faults.py Cli.kill). What pulumi v3.276.0 leaves (/work/briefs/i30-pulumi.md 2): the lock file (the deferred
Unlock never runs; pkg/backend/diy/lock.go, no pid-liveness check), and the steps that were running as pending
operations in the checkpoint (pkg/backend/snapshot.go markOperationPending). The runbook, each command shown
needed once here: `pulumi cancel --yes` (the next `up` is refused by the lock without it), `pulumi refresh
--clear-pending-creates --yes` (without it a pending CREATE stays in the state through a successful `up`:
SnapshotManager keeps base `creating` operations "because these must require user intervention"), `pulumi up`.

kube-apiserver: its own process on the cluster's etcd, stopped with SIGTERM and started again. Restarting the
shared kube-apiserver would break every scenario running beside this file in `make e2e`; the controllers, the
scheduler and kwok keep using the shared one, as beside another replica of an HA control plane. What the
provider retries (pulumi-kubernetes provider/v4 at f47bc2d6f199, the pinned module): a create is retried 5
times, 1 s doubling (pkg/retry/retry.go SleepingRetry; pkg/await/await.go Creation `WithMaxRetries(5)
.WithBackoffFactor(2)`, 31 s in all), and only on NotFound and NoMatch (`retrier.Do(apierrors.IsNotFound,
meta.IsNoMatchError)`): a refused connection is not retried. Its awaits watch through client-go informers, whose
reflectors re-list with backoff until the await's own timeout. A provider that cannot reach the cluster when it
is configured marks it unreachable (pkg/provider/provider.go clusterUnreachable) and fails each operation.
"""

from __future__ import annotations

import json
import re
import time

import faults
import pytest
from fault_stack import LOCKED, POINTS, FaultStack
from harness import Pulumi, log

NAME = "fault-kill"
# Longer than the provider's longest retry schedule (1 + 2 + 4 + 8 + 16 s, above).
UNREACHABLE_SECONDS = 35
PENDING_WARNING = re.compile(r"warning: Attempting to deploy or update resources with (\d+) pending operations from "
                             r"previous deployment\.")


@pytest.fixture(scope="module")
def setup(pulumi: Pulumi):
    api = faults.PrivateApiserver(pulumi.workdir, NAME)
    log(f"{NAME}: own kube-apiserver on :{api.port} ready in {api.start():.1f} s")
    s = FaultStack(pulumi, NAME, 231)
    s.env = {"KUBECONFIG": str(api.kubeconfig)}
    try:
        s.init()
        yield s, api
    finally:
        if not api.ready():
            api.start()
        s.cleanup()
        api.stop()


def kill(stack: FaultStack, point: str):
    with faults.held_pods(stack.namespace, *POINTS[point]):
        cli = stack.start_up()
        stack.held_at(cli, point)
        pid = cli.cli_pid()
        left = cli.kill()
        result = cli.wait(30)
        passed = point == "engine" and stack.engine_await_passed(cli)
    log(f"{NAME}: SIGKILL at the {point}{' (the provider had passed the rollout)' if passed else ''}: "
        f"exit {result.returncode}; killed after it: {left}")
    # The provider outlived the CLI until killed (its own process group); nothing of the session is left.
    assert "pulumi-resource-kubernetes" in left, left
    assert result.returncode == 137, result
    (lock,) = faults.lock_files(stack.pulumi, NAME)
    assert json.loads(lock.read_text())["pid"] == pid, lock.read_text()
    return passed


@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_then_the_runbook_converges(setup, point: str):
    stack, _ = setup
    revision = "0731" if point == "sync" else f"09{list(POINTS).index(point):02d}"
    if point != "sync":
        stack.set("models[0].revision", revision)
    passed = kill(stack, point)
    pending = faults.pending_operations(stack.pulumi, NAME)
    log(f"{NAME}: pending operations after SIGKILL at the {point}: {pending}")
    expected = {"sync": ("creating", "sync-deepseek-v4-flash-0731-de13d1f1-job"),
                "engine": ("updating", "deepseek-v4-flash-deployment"),
                "smoke": ("creating", "ops-deepseek-v4-flash-smoke")}[point]
    if passed:
        # The provider was past the rollout, waiting for the smoke Job it had created.
        expected = ("creating", "ops-deepseek-v4-flash-smoke")
    assert expected in pending, pending
    start = time.monotonic()

    if point == "sync":
        # Without `pulumi cancel`: the stale lock refuses the next update, exit 1, and it names the command.
        refused = stack.up(check=False)
        assert refused.returncode == 1 and LOCKED in " ".join(refused.output.split()), refused
        assert f"(pid {json.loads(faults.lock_files(stack.pulumi, NAME)[0].read_text())['pid']})" in refused.output
    cancel = stack.run("cancel", "--yes")
    assert f"The currently running update for '{NAME}' has been canceled!" in cancel.output, cancel
    assert not faults.lock_files(stack.pulumi, NAME)

    if point == "sync":
        # Without `pulumi refresh --clear-pending-creates`: `up` warns and succeeds (server-side apply adopts the
        # Job the killed run created), and the pending CREATE is still in the state afterwards.
        up = stack.up()
        warned = PENDING_WARNING.search(up.output)
        assert warned and int(warned[1]) == len(pending) and "interrupted while creating" in up.output, up
        assert expected in faults.pending_operations(stack.pulumi, NAME), "the pending CREATE went without the flag"
    refresh = stack.run("refresh", "--clear-pending-creates", "--yes")
    assert not faults.pending_operations(stack.pulumi, NAME), refresh
    if point != "sync":
        up = stack.up()
        assert not PENDING_WARNING.search(up.output), up
    converge = time.monotonic() - start
    stack.converged(revision)
    log(f"{NAME}: after SIGKILL at the {point}: cancel, refresh --clear-pending-creates{', up' if point != 'sync' else ''}"
        f" converged in {converge:.0f} s")


def _errors(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if "error:" in line]


def _settles(stack: FaultStack, cli, what: str, revision: str) -> None:
    """The update that met the fault either finishes or fails with a clear error; no revision but a
    verified one serves meanwhile; then (after the next `pulumi up` where it failed) the stack converges."""
    result = cli.wait(300)
    log(f"{NAME}: {what} exited {result.returncode} after {result.seconds:.0f} s; errors: {_errors(result.output)}")
    stack.serving_revisions()
    if result.returncode != 0:
        assert _errors(result.output), result
        again = stack.up()
        log(f"{NAME}: the next up converged in {again.seconds:.0f} s")
    stack.converged(revision)


def test_apiserver_restart_during_the_smoke_wait_after_the_rollout(setup):
    """Restarted while `up` waits for the smoke Job of a new revision (the engine rolled, its smoke and warm-up
    to come): the provider's Job await watches through the restart. Not held in the engine's own rollout: the
    provider may have passed it already (fault_stack.FaultStack.engine_await_passed), which would leave the
    restart nothing to hit."""
    stack, api = setup
    stack.set("models[0].revision", "0911")
    with faults.held_pods(stack.namespace, *POINTS["smoke"]):
        cli = stack.start_up()
        stack.held_at(cli, "smoke")
        t0 = time.monotonic()
        how = api.stop()
        api.start()
        log(f"{NAME}: its kube-apiserver restarted ({how}) in {time.monotonic() - t0:.1f} s, "
            f"the up still running: {cli.alive()}")
    _settles(stack, cli, "the up held across the restart", "0911")


def test_apiserver_unreachable_before_and_during_an_update(setup):
    """Down before `pulumi up` starts: the provider finds the cluster unreachable when it is configured, the
    update fails at once and changes nothing. Then down while `up` waits for the sync Job, for longer than any
    retry of the provider; the Job completes meanwhile (the controllers use the shared kube-apiserver); then it
    comes back and the same update goes on (one revision, one convergence for both: make e2e's time)."""
    stack, api = setup
    stack.set("models[0].revision", "0912")
    before = stack.cluster_versions()
    api.stop()
    try:
        refused = stack.up(check=False)
    finally:
        api.start()
    log(f"{NAME}: up with its kube-apiserver down: exit {refused.returncode} in {refused.seconds:.0f} s; "
        f"errors: {_errors(refused.output)}")
    assert refused.returncode == 1 and "configured Kubernetes cluster is unreachable" in refused.output, refused
    assert stack.cluster_versions() == before, "an update that reached no cluster changed it"
    stack.serving_revisions()

    with faults.held_pods(stack.namespace, *POINTS["sync"]):
        cli = stack.start_up()
        stack.held_at(cli, "sync")
        log(f"{NAME}: its kube-apiserver stopped ({api.stop()})")
    t0 = time.monotonic()
    while time.monotonic() - t0 < UNREACHABLE_SECONDS and cli.alive():
        time.sleep(1)
    down_for = time.monotonic() - t0
    still_waiting = cli.alive()
    api.start()
    _settles(stack, cli, f"its kube-apiserver down {down_for:.0f} s, the up "
             f"{'still waiting' if still_waiting else 'had ended'}; it", "0912")
