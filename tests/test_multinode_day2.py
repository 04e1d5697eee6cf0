"""Day-2 changes to a model spanning nodes (issue 29), judged by issue 18's rules (render/changes.py, the
offline update planner, over two renders: the stack's last deployment and the next): scaling its replicas,
changing its parallel sizes, and switching its orchestrator, each counted in every pod of every group
(replicas x nodes x GPUs) and each saying whether the model keeps serving.

The GPU counts come from the pack's reading of each workload (policy/workloads.py pod_templates); the
restart of a group is its controller's rolling update of whole groups (LWS maxUnavailable groups,
policy/workloads.py rollout_waves), and an orchestrator switch with no room for both workloads replaces the
old one first (stacks/transitions.py)."""

from __future__ import annotations

import pytest
from multinode_stacks import r1_config, r1_stack
from test_transitions import previous_of
from variants import variant_file

from render import changes, output, runtime
from render.changes_md import changes_md

pytestmark = pytest.mark.xdist_group("multinode")

WORKLOAD = "LeaderWorkerSet llm-serving-dev/deepseek-r1"


def update(tmp_path, before, after) -> tuple[changes.Plan, str]:
    first = runtime.render(before)
    second = runtime.render(after, previous=previous_of(first))
    output.write(first, tmp_path / "a")
    output.write(second, tmp_path / "b")
    old, old_outputs = changes.load(tmp_path / "a")
    new, new_outputs = changes.load(tmp_path / "b")
    p = changes.plan(old, new, old_outputs, new_outputs, "r1")
    return p, changes_md(p, str(tmp_path / "a"))


def row(text: str, first_cell: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {first_cell} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_scaling_out_adds_a_whole_group_without_restarting_the_serving_one(tmp_path):
    cfg = r1_config()
    cfg["gpuBudget"] = 32
    cfg["models"][0]["replicas"] = 2
    p, text = update(tmp_path, r1_stack(), variant_file("r1", **cfg))
    assert not p.problems
    (w,) = p.workloads
    # 2 replicas x 2 nodes x 8 GPUs: the new group's leader and worker both counted.
    assert (w.action, w.old_gpus, w.new_gpus, w.held, w.restarts) == ("update", 16, 32, 32, False)
    assert "GPU peak during the update: 32 of budget 32 (fits)." in text
    assert row(text, "deepseek-r1")[1] == "no downtime"


def test_scaling_out_past_the_budget_is_refused_with_every_pod_counted(tmp_path):
    cfg = r1_config()
    cfg["models"][0]["replicas"] = 2     # gpuBudget stays 16
    from stacks.loader import ConfigError
    with pytest.raises(ConfigError, match=r"gpuBudget = 16: the workloads need 32 GPUs at peak"):
        runtime.render(variant_file("r1", **cfg))


def test_another_parallel_layout_rolls_the_group_and_says_the_model_stops_serving(tmp_path):
    """TP 8 x PP 2 to TP 16: the same two nodes, every argv changes; LWS replaces the only group (maxUnavailable
    1 of 1 replica), so nothing serves until the new group's slowest node has joined."""
    p, text = update(tmp_path, r1_stack(), r1_stack(tp=16, pp=1))
    (w,) = p.workloads
    assert (w.action, w.old_gpus, w.new_gpus, w.restarts) == ("update", 16, 16, True)
    cells = row(text, "deepseek-r1")
    assert cells[1] == "no serving" and "no measurement gives" in cells[2], cells
    assert f"Pods restart in: {WORKLOAD} (rollout)." in text


def test_two_groups_roll_one_at_a_time_and_keep_serving(tmp_path):
    cfg = r1_config()
    cfg["gpuBudget"] = 32
    cfg["models"][0]["replicas"] = 2
    after = r1_config(tp=16, pp=1)
    after["gpuBudget"] = 32
    after["models"][0]["replicas"] = 2
    p, text = update(tmp_path, variant_file("r1", **cfg), variant_file("r1", **after))
    (w,) = p.workloads
    assert (w.held, w.restarts) == (32, True)
    assert row(text, "deepseek-r1")[1] == "reduced capacity"


def test_switching_the_orchestrator_without_room_replaces_it_delete_first(tmp_path):
    """RoleBasedGroup to LeaderWorkerSet, same name, another kind, budget 16: the new workload takes the old
    one's place (an alias, deleted first: stacks/transitions.py), never 32 GPUs at once, and the model is
    said to stop serving, not to be new."""
    p, text = update(tmp_path, r1_stack("rolebasedgroup", "sglang"), r1_stack("leaderworkerset", "sglang"))
    assert not p.problems
    (w,) = p.workloads
    assert (w.action, w.order, w.held) == ("replace", "delete-before-create", 16)
    assert "GPU peak during the update: 16 of budget 16 (fits)." in text
    assert row(text, "deepseek-r1")[1] == "no serving"
