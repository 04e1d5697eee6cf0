"""`pulumi up` killed with SIGKILL (a CI runner's timeout) at each of the three points of issue 30's scenario 1, on
one dev stack pinned to a GPU node of its own (e2e/fault_stack.py); each point held by keeping its pod Pending
(e2e/faults.py held_pods). The CLI is killed, then every plugin it started (they run in process groups of their
own and would outlive it: e2e/faults.py Cli.kill).

What pulumi v3.276.0 leaves (/work/briefs/i30-pulumi.md 2): the lock file (the deferred Unlock never runs;
pkg/backend/diy/lock.go, no pid-liveness check), and the steps that were running as pending operations in the
checkpoint (pkg/backend/snapshot.go markOperationPending). The runbook, each command shown needed once here:
`pulumi cancel --yes` (the next `up` is refused by the lock without it), `pulumi refresh --clear-pending-creates
--yes` (without it a pending CREATE stays in the state through a successful `up`: SnapshotManager keeps base
`creating` operations "because these must require user intervention"), then `pulumi up --yes`.
"""

from __future__ import annotations

import json
import re
import time

import faults
import pytest
from fault_stack import LOCKED, POINTS, FaultStack
from harness import Pulumi, log

NAME = "fault-sigkill"
PENDING_WARNING = re.compile(r"warning: Attempting to deploy or update resources with (\d+) pending operations from "
                             r"previous deployment\.")


@pytest.fixture(scope="module")
def stack(pulumi: Pulumi):
    s = FaultStack(pulumi, NAME, 231)
    s.init()
    try:
        yield s
    finally:
        s.cleanup()


def kill(stack: FaultStack, point: str):
    with faults.held_pods(stack.namespace, *POINTS[point]):
        cli = stack.start_up()
        stack.held_at(cli, point)
        pid = cli.cli_pid()
        passed = point == "engine" and stack.engine_await_passed(cli)
        left = cli.kill()
        result = cli.wait(30)
    log(f"{NAME}: SIGKILL at the {point}{' (the provider had passed the rollout)' if passed else ''}: "
        f"exit {result.returncode}; killed after it: {left}")
    # The provider outlived the CLI until killed (its own process group); nothing of the session is left.
    assert "pulumi-resource-kubernetes" in left, left
    assert result.returncode == 137, result
    (lock,) = faults.lock_files(stack.pulumi, NAME)
    assert json.loads(lock.read_text())["pid"] == pid, lock.read_text()
    return passed


@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_then_the_runbook_converges(stack: FaultStack, point: str):
    revision = "0731" if point == "sync" else f"09{list(POINTS).index(point):02d}"
    if point != "sync":
        stack.set("models[0].revision", revision)
    passed = kill(stack, point)
    pending = faults.pending_operations(stack.pulumi, NAME)
    log(f"{NAME}: pending operations after SIGKILL at the {point}: {pending}")
    expected = {"sync": ("creating", "sync-deepseek-v4-flash-0731-de13d1f1-job"),
                "engine": ("updating", "deepseek-v4-flash-deployment"),
                "smoke": ("creating", "ops-deepseek-v4-flash-smoke")}["smoke" if passed else point]
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
