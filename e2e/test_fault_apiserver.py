"""Issue 30's scenario 3: the kube-apiserver that `pulumi up` talks to restarted during an engine rollout, and
unreachable for longer than the Kubernetes provider retries, for real: a kube-apiserver process of the stack's
own on the cluster's etcd (e2e/faults.py PrivateApiserver), stopped with SIGTERM and started again. Restarting
the shared kube-apiserver would break every scenario running beside this one in `make e2e`; this one reaches the
cluster only through its own (its kubeconfig), the controllers, scheduler and kwok keep using the shared one.

What the provider retries (pulumi-kubernetes provider/v4 at f47bc2d6f199, the pinned module): a create is
retried 5 times, 1 s doubling (pkg/retry/retry.go SleepingRetry, pkg/await/await.go Creation `WithMaxRetries(5)
.WithBackoffFactor(2)`, 31 s in all), and only on NotFound and NoMatch (`retrier.Do(apierrors.IsNotFound,
meta.IsNoMatchError)`): a refused connection is not retried. Its awaits watch through client-go informers, whose
reflectors re-list with backoff until the await's own timeout. A provider that cannot reach the cluster when
it is configured marks it unreachable (pkg/provider/provider.go clusterUnreachable) and fails each operation.
"""

from __future__ import annotations

import time

import faults
import pytest
from fault_stack import POINTS, FaultStack
from harness import Pulumi, log

NAME = "fault-apiserver"
# Longer than the provider's longest retry schedule (1 + 2 + 4 + 8 + 16 s, above).
UNREACHABLE_SECONDS = 40


@pytest.fixture(scope="module")
def setup(pulumi: Pulumi):
    api = faults.PrivateApiserver(pulumi.workdir, NAME)
    log(f"{NAME}: own kube-apiserver on :{api.port} ready in {api.start():.1f} s")
    s = FaultStack(pulumi, NAME, 232)
    s.env = {"KUBECONFIG": str(api.kubeconfig)}
    try:
        s.init()
        up = s.up()
        s.converged("0731")
        log(f"{NAME}: first up {up.seconds:.0f} s through its own kube-apiserver")
        yield s, api
    finally:
        if not api.ready():
            api.start()
        s.cleanup()
        api.stop()


def _errors(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if "error:" in line]


def test_restart_during_the_smoke_wait_after_the_rollout(setup):
    """Restarted while `up` waits for the smoke Job of a new revision (the engine rolled, its smoke and warm-up
    to come): the provider's Job await watches through the restart. Not held in the engine's own rollout: the
    provider may have passed it already (fault_stack.FaultStack.engine_await_passed), which would leave the
    restart nothing to hit."""
    stack, api = setup
    stack.set("models[0].revision", "0901")
    with faults.held_pods(stack.namespace, *POINTS["smoke"]):
        cli = stack.start_up()
        stack.held_at(cli, "smoke")
        t0 = time.monotonic()
        api.stop()
        api.start()
        log(f"{NAME}: kube-apiserver restarted in {time.monotonic() - t0:.1f} s, the up still running: {cli.alive()}")
    result = cli.wait(300)
    log(f"{NAME}: the up held across the restart exited {result.returncode} after {result.seconds:.0f} s; "
        f"errors: {_errors(result.output)}")
    stack.serving_revisions()
    if result.returncode != 0:
        assert _errors(result.output), result
        again = stack.up()
        log(f"{NAME}: the next up converged in {again.seconds:.0f} s")
    stack.converged("0901")


def test_unreachable_before_the_update(setup):
    """Down before `pulumi up` starts: the provider finds the cluster unreachable when it is configured."""
    stack, api = setup
    stack.set("models[0].revision", "0902")
    before = stack.cluster_versions()
    api.stop()
    try:
        refused = stack.up(check=False)
    finally:
        api.start()
    log(f"{NAME}: up with its kube-apiserver down: exit {refused.returncode} in {refused.seconds:.0f} s; "
        f"errors: {_errors(refused.output)}")
    assert refused.returncode != 0 and _errors(refused.output), refused
    assert stack.cluster_versions() == before, "an update that reached no cluster changed it"
    stack.serving_revisions()
    up = stack.up()
    stack.converged("0902")
    log(f"{NAME}: the next up converged in {up.seconds:.0f} s")


def test_unreachable_during_the_sync_wait_for_longer_than_the_provider_retries(setup):
    """Down while `up` waits for the sync Job, for longer than any retry of the provider; the Job completes
    meanwhile (the controllers use the shared kube-apiserver). Then it comes back."""
    stack, api = setup
    stack.set("models[0].revision", "0903")
    with faults.held_pods(stack.namespace, *POINTS["sync"]):
        cli = stack.start_up()
        stack.held_at(cli, "sync")
        api.stop()
    t0 = time.monotonic()
    while time.monotonic() - t0 < UNREACHABLE_SECONDS and cli.alive():
        time.sleep(1)
    down_for = time.monotonic() - t0
    still_waiting = cli.alive()
    api.start()
    result = cli.wait(300)
    log(f"{NAME}: kube-apiserver down {down_for:.0f} s, the up {'still waiting' if still_waiting else 'had ended'}; "
        f"it exited {result.returncode} after {result.seconds:.0f} s; errors: {_errors(result.output)}")
    stack.serving_revisions()
    if result.returncode != 0:
        assert _errors(result.output), result
        again = stack.up()
        log(f"{NAME}: the next up converged in {again.seconds:.0f} s")
    stack.converged("0903")
