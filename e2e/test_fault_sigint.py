"""`pulumi up` cancelled with Ctrl-C (SIGINT to the CLI) at each of the three points of issue 30's scenario 1,
then two `pulumi up` of the same stack (scenario 6), on one dev stack pinned to a GPU node of its own
(e2e/fault_stack.py); each point held deterministically by keeping its pod Pending (e2e/faults.py held_pods).

What pulumi v3.276.0 does on the first SIGINT (pkg/backend/cancellation_scope.go; /work/briefs/i30-pulumi.md 1):
it prints "^C received; cancelling", asks the providers to cancel (the Kubernetes provider stops its await at
once: pulumi-kubernetes pkg/await/job.go, deployment.go, error.go "Resource operation was cancelled"), waits for
the running steps, writes the checkpoint (no pending operation), releases the lock and exits 1. The runbook
after it is `pulumi up` alone; this file proves it at each point.
"""

from __future__ import annotations

import time

import faults
import pytest
from fault_stack import LOCKED, POINTS, POLICY, FaultStack
from harness import Pulumi, log

NAME = "fault-sigint"


@pytest.fixture(scope="module")
def stack(pulumi: Pulumi):
    s = FaultStack(pulumi, NAME, 230)
    s.init()
    try:
        yield s
    finally:
        s.cleanup()


def interrupt(stack: FaultStack, point: str):
    """`pulumi up` held at `point`, one SIGINT to the CLI: the result, once the CLI has exited (bounded)."""
    with faults.held_pods(stack.namespace, *POINTS[point]):
        cli = stack.start_up()
        stack.held_at(cli, point)
        locks = faults.lock_files(stack.pulumi, NAME)
        assert len(locks) == 1, locks
        cli.sigint()
        result = cli.wait(120)
        passed = point == "engine" and stack.engine_await_passed(cli)
    log(f"{NAME}: SIGINT at the {point}{' (the provider had passed the rollout)' if passed else ''}: "
        f"exit {result.returncode} in {result.seconds:.0f} s")
    if point == "engine" and not passed:
        assert 'Resource operation was cancelled for "deepseek-v4-flash"' in result.output, result
    return result


def cancelled(stack: FaultStack, result) -> None:
    out = " ".join(result.output.split())
    assert "^C received; cancelling. If you would like to terminate immediately, press ^C again." in out, result
    assert result.returncode == 1, result
    assert "error: update failed" in out or "error: update canceled" in out, result
    assert not faults.lock_files(stack.pulumi, NAME), "the lock outlived a cancelled update"
    assert not faults.pending_operations(stack.pulumi, NAME), "a cancelled update left pending operations"


@pytest.mark.parametrize("point", list(POINTS))
def test_sigint_then_pulumi_up_alone_converges(stack: FaultStack, point: str):
    revision = f"08{list(POINTS).index(point):02d}"
    if point != "sync":
        # A new revision: a new sync Job, an engine rollout, a new smoke Job: every point on one `up`.
        stack.set("models[0].revision", revision)
    else:
        revision = "0731"
    result = interrupt(stack, point)
    cancelled(stack, result)
    if point == "sync":
        # What `pulumi up` is needed for: the cancelled steps are recorded with their init errors and the next
        # preview proposes them again (pkg/resource/deploy/step_generator.go).
        preview = stack.run("preview", "--expect-no-changes", *POLICY, check=False)
        assert preview.returncode != 0, preview
    start = time.monotonic()
    up = stack.up()
    converge = time.monotonic() - start
    stack.converged(revision)
    log(f"{NAME}: after SIGINT at the {point}: `pulumi up` {up.seconds:.0f} s, converged in {converge:.0f} s")


def test_a_second_up_is_refused_by_the_lock_and_a_preview_beside_it_takes_none(stack: FaultStack):
    """Issue 30's scenario 6 on the file backend: the second `pulumi up` starts once the first one's lock file
    exists (two writing theirs in the same instant can both be refused: pkg/backend/diy/lock.go Lock checks,
    writes, checks again), while the first is held in the sync Job's wait. It is refused, exit 1, and changes
    neither the state nor the cluster; a `pulumi preview` beside it runs (diy Preview takes no lock) and writes
    no lock file; the first `up` then completes."""
    stack.set("models[0].revision", "0810")
    with faults.held_pods(stack.namespace, *POINTS["sync"]):
        first = stack.start_up()
        (lock,) = faults.wait_until("the first up's lock file", lambda: faults.lock_files(stack.pulumi, NAME), 60, 0.1)
        stack.held_at(first, "sync")
        state, objects = faults.checkpoint_path(stack.pulumi, NAME).read_bytes(), stack.cluster_versions()
        second = stack.up(check=False)
        out = " ".join(second.output.split())
        assert second.returncode == 1 and LOCKED in out and f"(pid {first.cli_pid()})" in out, second
        assert faults.lock_files(stack.pulumi, NAME) == [lock]
        assert faults.checkpoint_path(stack.pulumi, NAME).read_bytes() == state, "the refused up wrote the state"
        assert stack.cluster_versions() == objects, "the refused up changed the cluster"
        log(f"{NAME}: second up refused by the lock in {second.seconds:.1f} s, state and cluster unchanged")

        preview = stack.start("preview", *POLICY)
        seen: set = set()
        while preview.alive():
            seen.update(faults.lock_files(stack.pulumi, NAME))
            time.sleep(0.05)
        result = preview.wait(5)
        assert result.returncode == 0, result
        assert seen == {lock}, f"lock files seen during the preview: {seen}"
        assert first.alive(), "the first up ended while held"
    done = first.wait(300)
    assert done.returncode == 0, done
    stack.converged("0810")
    log(f"{NAME}: preview beside the up took no lock ({result.seconds:.0f} s); the first up completed")
