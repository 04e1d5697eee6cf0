"""Fixtures of `make e2e`: the tools, the local control plane and the real Pulumi CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


@pytest.fixture(scope="session")
def tools() -> None:
    missing = harness.missing_binaries()
    if missing:
        pytest.fail(f"missing in .e2e/bin: {', '.join(missing)}; build them with `make e2e-tools`", pytrace=False)


@pytest.fixture(scope="session")
def cluster(tools) -> Path:
    """The local control plane, started once for the session and always stopped after it."""
    if os.environ.get("E2E_CLUSTER_RUNNING") == "1":
        yield harness.KUBECONFIG
        return
    cluster_py = [sys.executable, str(harness.ROOT / "e2e" / "cluster.py")]
    up = subprocess.run([*cluster_py, "up"], timeout=180)
    try:
        if up.returncode != 0:
            pytest.fail(f"e2e/cluster.py up exited {up.returncode}", pytrace=False)
        yield harness.KUBECONFIG
    finally:
        subprocess.run([*cluster_py, "down"], timeout=120)


@pytest.fixture(scope="session")
def pulumi(cluster) -> harness.Pulumi:
    # One project copy, backend and CLI home per pytest worker (make e2e runs two side by side).
    cli = harness.Pulumi(harness.E2E / f"work{harness.worker_suffix()}")
    cli.prepare()
    return cli


@pytest.fixture(scope="module")
def coscheduling(cluster) -> str:
    """scheduler-plugins' scheduler (the Coscheduling plugin) beside kube-scheduler, with the PodGroup CRD
    installed (e2e/coscheduling.py): yields its schedulerName; stopped after the module that asked for it."""
    import cluster as control_plane
    import coscheduling as gang

    try:
        with gang.second_scheduler() as name:
            yield name
    except control_plane.Failure as e:  # missing binary, port taken, not ready in time: say which, no traceback
        pytest.fail(str(e), pytrace=False)


# make e2e hands whole files to its workers (--dist=loadfile) in collection order (--no-loadscope-reorder:
# xdist's default puts files with more tests first, so the one-test scenarios that take minutes went last
# and set the wall time). Longest first, as measured (docs/measured.md): each worker holds two files and
# takes the next as one ends. A file not named keeps its place after these.
LONGEST_FIRST = ("test_fault_kill.py", "test_day2.py", "test_topologies.py", "test_drift.py", "test_fault_sigint.py",
                 "test_multinode.py", "test_nodes.py", "test_inference_pool.py", "test_prod_stack.py", "test_dev_stack.py",
                 "test_differential.py", "test_gang.py")


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: a file's own order is kept
