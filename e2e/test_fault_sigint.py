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
from fault_stack import POINTS, POLICY, FaultStack
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
    log(f"{NAME}: SIGINT at the {point}: exit {result.returncode} in {result.seconds:.0f} s")
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
