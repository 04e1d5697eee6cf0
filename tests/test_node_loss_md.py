"""plan.md's "When a GPU node is lost or drained" (render/node_loss_md.py, issue 30): whether the pool has a node to
spare for a lost or drained node's pods, from gpuPool.nodeCount and the nodes the rendered GPU pods fill, and what
`kubectl drain` may evict of each model under its PodDisruptionBudget. e2e/test_nodes.py proves the behaviour on
the real control plane: a dev stack of two pods on three nodes, one spare."""

from __future__ import annotations

import re

import pytest
from multinode_stacks import r1_config
from variants import model, render, variant_file

from render import node_loss_md
from render.plan_md import plan_md

SECTION = "## When a GPU node is lost or drained"


def _section(rendered) -> str:
    text = plan_md(rendered)
    assert SECTION in text
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _two_pods(node_count: int | None):
    pool = {"gpuType": "H20", **({"nodeCount": node_count} if node_count is not None else {})}
    return render(variant_file(gpuBudget=16, gpuPool=pool, models=[model(replicas=2)]))


@pytest.mark.parametrize("pods,per_node,nodes", [([8, 8], 8, 2), ([4, 4, 4], 8, 2), ([8, 4, 4, 2], 8, 3),
                                                 ([2, 2, 2, 2], 8, 1), ([], 8, 0)])
def test_pods_fill_nodes_first_fit(pods, per_node, nodes):
    assert node_loss_md.nodes_held(pods, per_node) == nodes


def test_a_pool_with_a_spare_node_says_so():
    text = _section(_two_pods(3))
    assert "**1 spare node**: gpuPool.nodeCount 3, this stack's GPU pods fill 2 of its nodes" in text
    row = next(line for line in text.splitlines() if line.startswith("| deepseek-v4-flash |"))
    assert "| 2 |" in row and "1 at a time" in row and "at least 1 keeps serving" in row


def test_a_pool_without_a_spare_node_says_pods_stay_pending():
    text = _section(_two_pods(2))
    assert "**No spare node**: gpuPool.nodeCount 2" in text and "stay Pending" in text


def test_an_unknown_pool_size_is_said_not_guessed():
    text = _section(_two_pods(None))
    assert "gpuPool.nodeCount is unset" in text and "spare node" not in text.replace("a node to spare", "")


def test_a_one_pod_model_is_not_held_by_its_budget():
    # maxUnavailable 1 (components/operations.py disruption_budget) with one pod: drain takes the model down.
    text = _section(render(variant_file()))
    row = next(line for line in text.splitlines() if line.startswith("| deepseek-v4-flash |"))
    assert "**nothing held**" in row and "stops serving" in row


def test_autoscalers_at_their_maximum_count_against_the_spare():
    auto = model(autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 2})
    auto.pop("rollout")
    text = _section(render(variant_file(gpuBudget=16, gpuPool={"gpuType": "H20", "nodeCount": 2}, models=[auto])))
    assert re.search(r"fill 1 of its nodes, 2 with every autoscaler at maxReplicas", text), text
    assert "**No spare node**" in text
    assert "| deepseek-v4-flash | 1 (up to 2) |" in text


def test_a_model_spanning_nodes_is_drained_a_group_at_a_time():
    cfg = {**r1_config("leaderworkerset", "vllm", replicas=2), "gpuBudget": 32}
    text = _section(render(variant_file("r1", **cfg)))
    row = next(line for line in text.splitlines() if line.startswith("| deepseek-r1 |"))
    assert "one group at a time" in row and "at least 1 of 2 groups keep serving" in row, row


def test_a_stack_with_no_gpu_pod_has_no_section_and_no_crash():
    """Found by tests/test_bad_input.py's fuzz: replicas 0 left a model with an empty pod list (max() of nothing)."""
    assert node_loss_md.section(render(variant_file(models=[model(replicas=0)]))) == []
