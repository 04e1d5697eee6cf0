"""What an update costs while it runs: the GPUs each workload holds (old and new copies at once, counted
as plan.md and the policy pack count them), and per served model whether it keeps serving and for
how long it does not (the time-to-serving estimate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.time_to_serving import time_to_serving
from policy.manifests import kind_of, templates
from policy.stack_rules import StackResource, autoscaled, grown_to, workload_gpus
from policy.workloads import pod_gpus, rollout_waves
from render import update_rules as rules
from render.update_steps import (
    CREATE,
    CREATE_FIRST,
    DELETE,
    DELETE_FIRST,
    REPLACE,
    SAME,
    UPDATE,
    Step,
    is_k8s,
    template_paths,
)


@dataclass
class Workload:
    """A GPU workload during the update: what it holds in phase 1 and whether its pods restart."""
    object: str
    action: str
    order: str | None
    old_gpus: int
    new_gpus: int
    held: int            # GPUs held at the end of phase 1, rollout surge included
    restarts: bool


@dataclass
class ModelImpact:
    served: str
    verdict: str         # "no downtime", "reduced capacity", "no serving", "new", "removed"
    seconds: float | None
    why: str
    measured: bool = True   # False: no cold start is measured for the model's profile on its engine: a lower bound


def _stack_resources(records: list[dict]) -> list[StackResource]:
    return [StackResource(type=r["type"], name=r["name"], props=r.get("inputs") or {}, options=r.get("options") or {},
                          provider=r.get("provider") or "", custom=bool(r.get("custom")), parent=r.get("parent") or "")
            for r in records]


def _gpus(record: dict | None, scaled: dict) -> tuple[int, int]:
    """(steady, peak with rollout surge) GPUs of a workload, as its autoscaler may grow it."""
    if not record or not is_k8s(record):
        return 0, 0
    props = record["inputs"]
    meta = props.get("metadata") or {}
    max_replicas = scaled.get((props.get("kind"), meta.get("namespace") or "", meta.get("name")))
    peak = workload_gpus(record["type"], props, max_replicas)
    grown = props if max_replicas is None else grown_to(props, max_replicas)
    steady = sum(ref.replicas * pod_gpus(ref.template) for ref in templates(record["type"], grown))
    return int(steady), int(peak)


def template_changed(step: Step) -> bool:
    if step.action != UPDATE or not step.new or not is_k8s(step.new):
        return False
    paths = template_paths(step.new["inputs"]["kind"], step.new["inputs"])
    changed = [rules.property_path(f) for f in step.fields]
    return any(rules.path_contains(t, c) for t in paths for c in changed)


def workloads(steps: list[Step], old: list[dict], new: list[dict]) -> list[Workload]:
    """Phase 1 as the engine runs it: every create, update and create-first replacement is done (each
    awaited to Ready) while dropped resources and old copies still run; phase 2 only removes GPUs."""
    old_scaled, new_scaled = autoscaled(_stack_resources(old)), autoscaled(_stack_resources(new))
    out = []
    for s in steps:
        old_steady, _ = _gpus(s.old, old_scaled)
        new_steady, new_peak = _gpus(s.new, new_scaled)
        if not (old_steady or new_steady):
            continue
        restarts = s.action in (REPLACE, CREATE, DELETE) or template_changed(s)
        if s.action in (SAME,) or (s.action == UPDATE and not restarts):
            held = max(old_steady, new_steady)
        elif s.action == UPDATE:
            held = max(old_steady, new_peak)  # the rollout's surge pods beside the old ones (Recreate: none)
        elif s.action == REPLACE and s.order == CREATE_FIRST:
            held = old_steady + new_steady   # old and new at once until phase 2
        elif s.action == REPLACE:
            held = new_steady                # the old one is deleted first
        elif s.action == CREATE:
            held = new_steady
        else:
            held = old_steady                # deleted only in phase 2
        out.append(Workload(s.object, s.action, s.order, old_steady, new_steady, held, restarts))
    return out


def _engine_refs(record: dict | None) -> list[tuple[str, Any]]:
    """(served model name, pod template ref) of each engine pod template of a workload."""
    if not record or not is_k8s(record):
        return []
    out = []
    for ref in templates(record["type"], record["inputs"]):
        meta = ref.template.get("metadata") or {}
        served = (meta.get("labels") or {}).get("model.aibrix.ai/name") or dict(ref.leader_labels).get("model.aibrix.ai/name")
        if served and (meta.get("annotations") or {}).get("llm-serving.io/role") == "engine":
            out.append((served, ref))
    return out


def _fate(step: Step) -> tuple[str, str]:
    """How a workload's serving pods fare, and why: 'through' (old pods serve until new ones are Ready),
    'reduced' (a wave at a time), 'down' (all at once: Recreate, no surge with every pod unavailable, a
    delete-first replacement) or 'new'."""
    if step.action == CREATE:
        return "new", f"{step.object} is created beside the old pods"
    if step.action == DELETE:
        return "through", f"{step.object} serves until phase 2 deletes it"
    if step.action == REPLACE and step.order == DELETE_FIRST:
        shown = ", ".join(step.fields[:3]) + (", ..." if len(step.fields) > 3 else "")
        return "down", f"{step.object} is replaced delete-first ({shown})"
    if step.action == REPLACE:
        return "through", f"{step.object}'s new copy is Ready before phase 2 deletes the old one"
    if not template_changed(step):
        return "through", f"{step.object}'s pods do not restart"
    obj = step.new["inputs"]
    if any(ref.extra_pods for ref in templates(step.new["type"], obj)):
        return "through", f"{step.object} rolls with surge: new pods are Ready before old ones stop"
    if rollout_waves(kind_of(step.new["type"]), obj) > 1:
        return "reduced", f"{step.object} restarts a wave of pods at a time, the others serve"
    if ((obj.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
        return "down", f"{step.object} rolls out Recreate: every pod stops before the new ones start"
    return "down", f"{step.object} restarts every pod at once (no surge)"


def _rendered(records: list[dict], outputs: dict):
    """The records as the Rendered object plan.md is written from, to reuse its readers."""
    from render.runtime import Recorded, Rendered
    resources = [Recorded(urn=r["urn"], type=r["type"], name=r["name"], custom=bool(r.get("custom")),
                          parent=r.get("parent") or "", provider=r.get("provider") or "", inputs=r.get("inputs") or {},
                          options=r.get("options") or {}) for r in records]
    return Rendered(stack="", resources=resources, outputs=outputs, secret_outputs=set())


def _time_to_serving(new: list[dict], outputs: dict, served: str, image_changed: bool) -> tuple[float | None, bool]:
    """Seconds from the pods' scheduling to the first token (components/time_to_serving.py): the weights
    are on the volume already; the image is pulled again only when it changed and is not pre-pulled."""
    from render.output import time_to_serving_inputs
    try:
        rows = time_to_serving_inputs(_rendered(new, outputs))
    except StopIteration:
        return None, True  # an engine pod without the model gate (not one this program renders): no estimate
    for row in rows:
        if row["served"] == served and row["sizeGiB"] is not None and row["engine"] is not None and row.get("profile"):
            estimate = time_to_serving(row["sizeGiB"], row["engine"], row["gpus"],
                                       pre_pulled=row["preloaded"] or not image_changed,
                                       images_per_node=row.get("imagesPerNode") or len(row["images"]),
                                       profile=row["profile"])
            return estimate.gpu_wait_seconds, estimate.measured
    return None, True


def _images(record: dict | None) -> set[str]:
    return {c.get("image") for _, ref in _engine_refs(record)
            for c in (ref.template.get("spec") or {}).get("containers") or []}


def models(steps: list[Step], new: list[dict], outputs: dict, fails: bool) -> list[ModelImpact]:
    by_model: dict[str, list[Step]] = {}
    for s in steps:
        for served in {m for rec in (s.old, s.new) for m, _ in _engine_refs(rec)}:
            by_model.setdefault(served, []).append(s)
    caveat = " (if the update succeeds: see the problems)" if fails else ""
    out = []
    for served, model_steps in sorted(by_model.items()):
        olds = [s for s in model_steps if any(m == served for m, _ in _engine_refs(s.old))]
        news = [s for s in model_steps if any(m == served for m, _ in _engine_refs(s.new))]
        image_changed = any(s.action == CREATE for s in news) or any(
            _images(s.old) != _images(s.new) for s in model_steps if s.old and s.new)
        seconds, measured = _time_to_serving(new, outputs, served, image_changed)
        if not olds:
            out.append(ModelImpact(served, "new", seconds, "first serving after its time to serving" + caveat))
            continue
        if not news:
            out.append(ModelImpact(served, "removed", None, "no longer served once phase 2 deletes its pods" + caveat))
            continue
        fates = [_fate(s) for s in olds] + [_fate(s) for s in news if s.action == CREATE]
        why = "; ".join(reason for _, reason in fates) + caveat
        kept = [f for f, _ in fates if f != "new"]
        if all(f == "down" for f in kept):
            out.append(ModelImpact(served, "no serving", seconds, why, measured))
        elif any(f in ("down", "reduced") for f in kept):
            out.append(ModelImpact(served, "reduced capacity", None, why))
        else:
            out.append(ModelImpact(served, "no downtime", None, why))
    return out
