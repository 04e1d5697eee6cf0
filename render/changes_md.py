"""changes.md: the update planner's answer (render/changes.py) as a reviewer reads it in a pull request."""

from __future__ import annotations

from components.orchestrators.base import WAIT_FOR
from components.time_to_serving import minutes
from render.changes import CREATE, CREATE_FIRST, DELETE, REPLACE, SAME, UPDATE, Plan, Step

ACTION_TEXT = {CREATE: "create", UPDATE: "update in place", DELETE: "delete"}


def _action(step: Step) -> str:
    if step.action == REPLACE:
        return f"replace, {step.order}"
    return ACTION_TEXT.get(step.action, step.action)


def _fields(step: Step, limit: int = 6) -> str:
    if not step.fields:
        return "-"
    shown = ", ".join(f"`{f}`" for f in step.fields[:limit])
    return shown + (f" and {len(step.fields) - limit} more" if len(step.fields) > limit else "")


def _routes(plan: Plan) -> list[str]:
    """When routes come and go in one update (a routing-layer switch, a renamed model): the new ones route
    before phase 2 removes the old, since Pulumi deletes only after every create and update succeeded."""
    def kind(s: Step) -> str:
        return ((s.record.get("inputs") or {}).get("kind")) or ""
    created = [s for s in plan.changes if s.action == CREATE and kind(s) == "HTTPRoute"]
    deleted = [s for s in plan.changes if s.action == DELETE and kind(s) == "HTTPRoute"]
    if not (created and deleted):
        return []
    awaited = [s for s in created if WAIT_FOR in (((s.new or {}).get("inputs") or {}).get("metadata") or {}).get(
        "annotations", {})]
    lines = ["## Routes that move", "",
             f"Created in phase 1: {', '.join(s.object for s in created)}. Deleted in phase 2: "
             f"{', '.join(s.object for s in deleted)}. Both route while the update runs: the old routes, and the "
             "NetworkPolicies admitting their Gateway, go only after every phase-1 step succeeded."]
    if awaited:
        lines[-1] += (f" `pulumi up` waits until the Gateway accepts {', '.join(s.object for s in awaited)} and "
                      "resolves its backend (pulumi.com/waitFor) before that; a Gateway that cannot route to it fails "
                      "the update there, with the old routes still in place.")
    return lines + [""]


def _phase(step: Step) -> str:
    if step.action == DELETE or (step.action == REPLACE and step.order == CREATE_FIRST):
        return "1 + 2" if step.action == REPLACE else "2"
    return "1"


def changes_md(plan: Plan, previous: str) -> str:
    lines = [f"# Changes: stack {plan.stack}" if plan.stack else "# Changes", "",
             f"From the render in `{previous}` to this one, as `pulumi up` would apply it (pulumi-kubernetes v4.32.0 "
             "diff, the Pulumi engine's step order; render/update_rules.py).", ""]
    if plan.problems:
        count = f"{len(plan.problems)} problem{'s' if len(plan.problems) != 1 else ''}"
        lines += [f"**This update cannot succeed ({count}):**", ""]
        lines += [f"- {p}" for p in plan.problems] + [""]
    changes = plan.changes
    if not changes:
        lines += ["Nothing changes: `pulumi up` would report every resource unchanged.", ""]
    else:
        counts = {a: len(plan.by_action(a)) for a in (CREATE, UPDATE, REPLACE, DELETE)}
        lines += [", ".join(f"{n} to {ACTION_TEXT.get(a, a)}" for a, n in counts.items() if n)
                  + f"; {len(plan.by_action(SAME))} unchanged.", "",
                  "Phase 1 runs while the program registers: creates, updates and replacements (a delete-first "
                  "replacement deletes the old object, and every dependant it replaces, before creating the new one). "
                  "Phase 2 starts only after every phase-1 step has finished: deletes of dropped resources and of "
                  "the old copies of create-first replacements, in reverse dependency order. A failed phase-1 step "
                  "ends the update before phase 2.", "",
                  "| Resource | Action | Phase | Deciding fields | Notes |", "|---|---|---|---|---|"]
        for s in changes:
            notes = list(s.notes) + ([f"matched by alias {s.alias}"] if s.alias else [])
            lines.append(f"| {s.object} | {_action(s)} | {_phase(s)} | {_fields(s)} | {'; '.join(notes) or '-'} |")
        lines.append("")
    restarting = [w for w in plan.workloads if w.restarts]
    lines += ["## GPU workloads", ""]
    if restarting:
        lines += [f"Pods restart in: {', '.join(f'{w.object} ({_workload_action(w)})' for w in restarting)}.", ""]
    else:
        lines += ["No GPU workload's pods restart.", ""]
    if plan.workloads:
        lines += ["| Workload | Action | GPUs before | GPUs after | Held at the end of phase 1 |", "|---|---|---|---|---|"]
        lines += [f"| {w.object} | {_workload_action(w)} | {w.old_gpus} | {w.new_gpus} | {w.held} |" for w in plan.workloads]
        lines.append("")
    budget = "no budget recorded" if plan.budget is None else f"budget {plan.budget}"
    verdict = "" if plan.budget is None else (" (over budget)" if plan.peak_gpus > plan.budget else " (fits)")
    lines += [f"GPU peak during the update: {plan.peak_gpus} of {budget}{verdict}.", ""]
    lines += plan.consumer_lines
    lines += _routes(plan)
    lines += ["## Serving per model", ""]
    if plan.models:
        lines += ["| Served model | During the update | Expected downtime | Why |", "|---|---|---|---|"]
        for m in plan.models:
            downtime = ("none" if m.verdict != "no serving" else
                        "unknown (no time-to-serving estimate)" if m.seconds is None else
                        f"about {minutes(m.seconds)}" if m.measured else
                        (f"at least {minutes(m.seconds)}, plus " if m.seconds >= 30 else "") + "a cold start no "
                        "measurement gives (none for its profile on its engine: plan.md's Rollouts bounds it by the "
                        "startup budget)")
            lines.append(f"| {m.served} | {m.verdict} | {downtime} | {m.why} |")
    else:
        lines.append("No engine workload in either render.")
    return "\n".join(lines) + "\n"


def _workload_action(w) -> str:
    if w.action == REPLACE:
        return f"replace, {w.order}"
    if w.action == UPDATE:
        return "rollout" if w.restarts else "update, no restart"
    return ACTION_TEXT.get(w.action, w.action)
