"""Issue 28: the rollout by replica count and budget, the startup budget derived from what is known of the
model, the time to first token with each figure's source, and the defaults a stack inherits from the
field report, as plan.md states them."""

from __future__ import annotations

import math

import pytest
from test_config import SECRETS, problems, raw_config
from variants import dev_config, model, render, sglang_stack, variant_file

from components.time_to_serving import IMAGE_PULL_SECONDS, minutes
from config_model import startup
from config_model.inherited import inherited
from render.output import kubernetes_objects, plan_md
from stacks import loader


def small(**changes) -> dict:
    """A 40 GiB model of no measured family at TP=1 (not DeepSeek, not on its field report's pod)."""
    m = model(**{"name": "small", "servedModelName": "small-20b", "profile": "generic", "directory": "Small-20B",
                 "objectPrefix": "models/Small-20B", "revision": "r1", "sizeGiB": 40, "expectedShardCount": 9,
                 "vllm": {"tensorParallelSize": 1, "maxNumSeqs": 64}, **changes})
    for key in ("rollout", "startupBudgetSeconds"):
        if key not in changes:
            m.pop(key, None)
    return m


def deployment(rendered) -> dict:
    return next(o for o in kubernetes_objects(rendered) if o["kind"] == "Deployment" and o["metadata"]["name"] == "small")


def rollout_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("| Deployment small |"))


@pytest.mark.parametrize("replicas, strategy, serving", [
    (1, {"type": "Recreate"}, "at 1 pod: **no pod serves** (Recreate)"),
    (3, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
     "at 3 pods: 2 of 3 serve, 3 waves in a row"),
])
def test_one_pod_recreates_and_more_roll_one_at_a_time(replicas, strategy, serving):
    r = render(variant_file(gpuBudget=4, models=[small(replicas=replicas)]))
    assert deployment(r)["spec"]["strategy"] == strategy
    line = rollout_line(plan_md(r))
    assert serving in line
    assert "unknown: no cold start measured for profile generic on vllm" in line


def test_a_surge_pod_needs_room_in_the_budget():
    surge = {"maxSurge": 1, "maxUnavailable": 0}
    r = render(variant_file(gpuBudget=4, models=[small(replicas=3, rollout=surge)]))
    assert deployment(r)["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": surge}
    assert "at 3 pods: all 3 serve throughout; the surge pod holds 1 more GPUs" in rollout_line(plan_md(r))
    raw = raw_config()
    raw.update(gpuBudget=3, models=[small(replicas=3, rollout=surge)])
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:gpuBudget = 3: the workloads need 4 GPUs at peak, rollouts "
                             "included (small 4); raise gpuBudget or lower replicas"]


def test_an_explicit_rollout_wins():
    r = render(variant_file(gpuBudget=4, models=[small(replicas=3, rollout={"strategy": "Recreate"})]))
    assert deployment(r)["spec"]["strategy"] == {"type": "Recreate"}
    assert "at 3 pods: **no pod serves** (Recreate)" in rollout_line(plan_md(r))


@pytest.mark.parametrize("changes, field, words", [
    ({"orchestrator": "stormservice", "rollout": {"maxSurge": 1}}, "maxSurge", "only a Deployment rolls with a surge pod"),
    ({"rollout": {"strategy": "Recreate", "maxSurge": 1}}, "maxSurge", "must be 0 with rollout.strategy Recreate"),
    ({"rollout": {"maxUnavailable": 0}}, "maxUnavailable", "could neither add nor take down a pod"),
])
def test_rollouts_that_cannot_be_are_refused(changes, field, words):
    raw = raw_config()
    raw.update(gpuBudget=16, models=[small(replicas=3, **changes)])
    [line] = problems(raw)
    assert line.startswith(f"Pulumi.dev.yaml: llm-serving:models[0].rollout.{field} = ") and words in line


def test_the_startup_budget_keeps_the_field_reports_values_for_deepseek_v4():
    """1.5 x the measured cold start, rounded up to 15 min, gives what the defaults were (1800, 2700)."""
    raw = raw_config()
    del raw["models"][0]["startupBudgetSeconds"]
    vllm = loader.validate(raw, "dev", SECRETS).models[0]
    assert startup.startup_budget_seconds(vllm) == 1800
    assert startup.derived_startup_budget(vllm).section == "6"
    rbg = next(o for o in kubernetes_objects(render(sglang_stack())) if o["kind"] == "RoleBasedGroup")
    template = rbg["spec"]["roles"][0]["standalonePattern"]["template"]
    assert template["metadata"]["annotations"]["llm-serving.io/startup-budget-seconds"] == "2700"


def test_the_startup_budget_of_an_unmeasured_model_follows_its_size():
    raw = raw_config()
    raw.update(gpuBudget=16, modelVolume={**raw["modelVolume"], "capacityGiB": 2000},
               models=[small(), small(name="large", servedModelName="l", directory="L", sizeGiB=642,
                                    vllm={"tensorParallelSize": 8, "maxNumSeqs": 64})])
    cfg = loader.validate(raw, "dev", SECRETS)
    budgets = [startup.derived_startup_budget(m) for m in cfg.models]
    for m, b in zip(cfg.models, budgets):
        expected = math.ceil(1.5 * (m.size_gib * 1024 / 437 + 854) / 900) * 900
        assert b.seconds == expected and b.section == "3.2, 12.2"
        assert f"{m.size_gib:g} GiB read at 437 MiB/s" in b.basis
    assert budgets[0].seconds < budgets[1].seconds
    r = render(variant_file(gpuBudget=1, models=[small()]))
    annotations = deployment(r)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["llm-serving.io/startup-budget-seconds"] == str(budgets[0].seconds)
    assert deployment(r)["spec"]["progressDeadlineSeconds"] > budgets[0].seconds


def _time_row(text: str) -> list[str]:
    row = next(line for line in text.splitlines() if line.startswith("| small-20b | vllm |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


@pytest.mark.parametrize("rate", [None, 200])
def test_estimates_of_a_model_without_a_measured_cold_start_say_where_each_figure_comes_from(rate):
    store = dict(dev_config()["objectStore"])
    if rate is not None:
        store["downloadRateMiBps"] = rate
    text = plan_md(render(variant_file(gpuBudget=1, objectStore=store, models=[small()])))
    used = rate or 437
    cells = _time_row(text)
    sync = 40 * 1024 / used
    assert cells[4] == minutes(sync)                              # derived from the size and the rate
    assert cells[5] == minutes(IMAGE_PULL_SECONDS)                # the field report's pull
    assert cells[6] == "unknown"                                  # no measured cold start
    assert cells[7] == f">= {minutes(sync + IMAGE_PULL_SECONDS)}"  # a lower bound, marked
    assert "GPU-minutes > 0" not in text and "12-23 min" not in text and "not measured (" not in text
    if rate is None:
        assert "inherited: 437 MiB/s, the field report's one measured download from one COS bucket (3.2)" in text
        assert "| `objectStore.downloadRateMiBps` | 437 | 3.2 |" in text
    else:
        assert "declared: objectStore.downloadRateMiBps 200 MiB/s" in text
        assert "objectStore.downloadRateMiBps`" not in text.split("## Defaults this stack inherits")[1]
    assert "Image pull: measured in the field report only (12.2" in text
    assert "**Lower bounds** (marked >=) for small-20b (generic on vllm)" in text


def test_measured_figures_name_their_section():
    text = plan_md(render(variant_file()))
    assert "about 12 min, measured for profile deepseek-v4 on vllm (field report 6)" in text
    assert "Lower bounds" not in text and ">=" not in text.split("## Time to first token")[1].split("## ")[0]


def test_the_inherited_section_lists_what_the_stack_leaves_unset_and_nothing_it_sets():
    raw = raw_config()
    del raw["models"][0]["startupBudgetSeconds"]
    paths = [i.path for i in inherited(loader.validate(raw, "dev", SECRETS))]
    assert "objectStore.downloadRateMiBps" in paths and "models[0].startupBudgetSeconds" in paths
    raw["objectStore"] = {**raw["objectStore"], "downloadRateMiBps": 437}   # the same value, declared
    raw["models"][0]["startupBudgetSeconds"] = 1800
    paths = [i.path for i in inherited(loader.validate(raw, "dev", SECRETS))]
    assert "objectStore.downloadRateMiBps" not in paths and "models[0].startupBudgetSeconds" not in paths
    text = plan_md(render(variant_file(gpuBudget=1, models=[small()])))
    section = text.split("## Defaults this stack inherits")[1].split("\n## ")[0]
    budget = startup.derived_startup_budget(loader.validate({**raw_config(), "gpuBudget": 1, "models": [small()]},
                                                            "dev", SECRETS).models[0])
    assert f"| `models[0].startupBudgetSeconds` | {budget.seconds} | 3.2, 12.2 | {budget.basis} |" in section
