"""models[].startupBudgetSeconds when the stack file leaves it unset, derived from what is known of the
model, with the figures it rests on named.

A startup budget is a deadline: the startup probe restarts an engine that has not opened its port by
then (components/pod_template.py), and the rollout's progress deadline and Pulumi's await follow from it
(components/combined.py). Too short restarts every cold start in a loop, never serving; too long only
delays noticing a stuck pod. So the rule errs long:

- where the model's profile measured a cold start on its engine (policy/profiles/): that, plus half
  again, rounded up to a quarter hour. DeepSeek-V4's 12 min on vLLM (field report 6) gives 1800 s and its
  23 min on SGLang (12.2) 2700 s, the values these defaults had as fixed figures;
- else from the model's size: read at LOAD_MIB_PER_SECOND, plus ENGINE_START_SECONDS of engine start
  (JIT, NCCL, CUDA Graph capture), then the same margin and rounding.

Either way the result rests on field-report figures, so plan.md lists it under "Defaults this stack
inherits" (startup_budget_inherited).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from config_model.object_store import FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND
from config_model.types import Inherited, stack_key
from policy.profiles import profile_named

if TYPE_CHECKING:
    from config_model.serving import ServedModel

# Half again the expected start, then up to the next quarter hour.
MARGIN = 1.5
ROUND_TO_SECONDS = 15 * 60
# Weights read from the model volume at the one storage throughput the field report measures (3.2, the
# object store download). Its one timed load from the volume (12.2: 48 shards of ~156 GiB in about 25 s)
# ran far faster, from a warm node; a network volume read cold is slower, and a budget errs long.
LOAD_MIB_PER_SECOND = FIELD_REPORT_DOWNLOAD_MIB_PER_SECOND
# Field report 12.2: SGLang's self-reported engine start of DeepSeek-V4-Flash on 8 x H20, about 854 s:
# JIT of the sm_90a kernels, NCCL initialisation (about 19 s), the weight load (about 25 s) and two rounds
# of CUDA Graph capture (about 394 + 123 s). The longest engine start the report breaks down, standing
# here for graph capture and initialisation of a model nothing was measured for.
ENGINE_START_SECONDS = 854
# The sections the derivation without a measurement rests on.
SIZE_RULE_SECTIONS = "3.2, 12.2"


@dataclass(frozen=True)
class StartupBudget:
    seconds: int
    basis: str           # how the value follows, in words
    section: str | None  # the field report section(s) its figures come from; None: none


def _rounded(seconds: float) -> int:
    return int(math.ceil(seconds * MARGIN / ROUND_TO_SECONDS) * ROUND_TO_SECONDS)


def derived_startup_budget(model: ServedModel) -> StartupBudget:
    """What models[].startupBudgetSeconds is when unset (the module docstring gives the rule)."""
    profile = profile_named(model.profile)
    measured = profile.COLD_START_ESTIMATE_SECONDS.get(model.engine)
    if measured is not None:
        return StartupBudget(_rounded(measured), f"{MARGIN:g} x the {measured / 60:g} min cold start measured for "
                             f"profile {model.profile} on {model.engine}, rounded up to {ROUND_TO_SECONDS // 60} min",
                             profile.COLD_START_FIELD_REPORT.get(model.engine))
    size = model.size_gib or 0.0   # unset only where stacks/rules/models.py refuses the model anyway
    load = size * 1024 / LOAD_MIB_PER_SECOND
    return StartupBudget(_rounded(load + ENGINE_START_SECONDS),
                         f"{MARGIN:g} x ({size:g} GiB read at {LOAD_MIB_PER_SECOND} MiB/s + {ENGINE_START_SECONDS} s "
                         f"engine start), rounded up to {ROUND_TO_SECONDS // 60} min; no cold start measured for "
                         f"profile {model.profile} on {model.engine}", SIZE_RULE_SECTIONS)


def startup_budget_seconds(model: ServedModel) -> int:
    """The model's startup budget: the stack file's, else derived."""
    if model.startup_budget_seconds is not None:
        return model.startup_budget_seconds
    return derived_startup_budget(model).seconds


def startup_budget_inherited(models: list[ServedModel]) -> Iterator[Inherited]:
    """Each unset startup budget whose derivation rests on a field-report figure."""
    for i, m in enumerate(models):
        if m.startup_budget_seconds is not None:
            continue
        budget = derived_startup_budget(m)
        if budget.section is not None:
            yield Inherited(f"models[{i}].{stack_key('startup_budget_seconds')}", budget.seconds, budget.section,
                            budget.basis)


# What models[].startupBudgetSeconds's description says of the rule.
RULE_TEXT = (f"unset: {MARGIN:g} x the cold start the model's profile measured on its engine, else {MARGIN:g} x (the "
             f"model's size read at {LOAD_MIB_PER_SECOND} MiB/s + {ENGINE_START_SECONDS} s of engine start: JIT, NCCL, "
             f"CUDA Graph capture), rounded up to {ROUND_TO_SECONDS // 60} min (field report 3.2, 6, 12.2; plan.md "
             "lists it as inherited)")
