"""The offline update planner: what `pulumi up` does going from one render to the next.

Pure functions over two lists of resources.json records (render/serialize.py) and the two outputs.json
maps. The decisions per resource are render/update_rules.py's (the provider's diff and the engine's
options) and apivalidation/updates.py's (what the API server refuses on an update); this module puts
them in the engine's order and finds what cannot succeed:

- Phase 1, while the program registers (pulumi/pulumi v3.259.0 step_generator.go
  continueStepsFromDiff): creates, in-place updates and replacements. A replacement creates the new
  copy first (CreateReplacementStep) unless deleteBeforeReplace (the option, else the provider's
  answer) deletes the old one first, with every dependant that the change would replace.
- Phase 2, only when every registration has finished (deployment_executor.go performPostSteps ->
  step_generator.go GenerateDeletes, "the delete step is generated later on, after all creates/updates
  finish"): deletes of dropped resources and of the old copies of create-first replacements, in
  reverse dependency order (ScheduleDeletes). A failed phase-1 step stops the update before phase 2.

GPUs are counted the way plan.md and the policy pack count them (policy/stack_rules.py
workload_gpus, policy/workloads.py pod_templates), and downtime comes from the time-to-serving
estimate (components/time_to_serving.py) over the same inputs plan.md reads (render/manifest_facts.py
time_to_serving_inputs).
"""

from __future__ import annotations

from dataclasses import dataclass

from render import consumers_md, update_impact, update_steps
from render.update_impact import ModelImpact, Workload
from render.update_steps import (
    CREATE,
    CREATE_FIRST,
    DELETE,
    DELETE_FIRST,
    REPLACE,
    SAME,
    UPDATE,
    Step,
    load,
)

__all__ = ["CREATE", "CREATE_FIRST", "DELETE", "DELETE_FIRST", "REPLACE", "SAME", "UPDATE", "ModelImpact", "Plan", "Step",
           "Workload", "load", "plan"]


@dataclass
class Plan:
    stack: str
    steps: list[Step]
    problems: list[str]
    workloads: list[Workload]
    peak_gpus: int
    budget: int | None
    models: list[ModelImpact]
    consumer_lines: list[str]   # what the update does to the consumers' tokens (render/consumers_md.py)

    def by_action(self, action: str) -> list[Step]:
        return [s for s in self.steps if s.action == action]

    @property
    def changes(self) -> list[Step]:
        return [s for s in self.steps if s.action != SAME]


def plan(old: list[dict], new: list[dict], old_outputs: dict | None = None, new_outputs: dict | None = None,
         stack: str = "") -> Plan:
    """The update from the `old` render to the `new` one, with every problem that makes it fail."""
    new_outputs = new_outputs or {}
    problems: list[str] = []
    steps = update_steps.steps(old, new, problems)
    problems += update_steps.identity_conflicts(steps)
    problems += update_steps.volume_protection(steps, old)
    workloads = update_impact.workloads(steps, old, new)
    peak = sum(w.held for w in workloads)
    budget = new_outputs.get("gpuBudget")
    if isinstance(budget, bool) or not isinstance(budget, int):
        budget = None
    if budget is not None and peak > budget:
        holders = ", ".join(f"{w.object} {w.held}" for w in workloads if w.held)
        problems.append(f"the update needs {peak} of budget {budget} GPUs at once ({holders}): the new pods stay "
                        "Pending and `pulumi up` times out")
    tokens = consumers_md.change_lines(steps, old_outputs, new_outputs, [w.object for w in workloads if w.restarts])
    return Plan(stack, steps, problems, workloads, peak, budget, update_impact.models(steps, new, new_outputs, bool(problems)),
                tokens)
