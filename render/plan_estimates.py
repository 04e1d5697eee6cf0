"""plan.md's figures that are estimates or defaults, each with where it comes from: the rollout of each
GPU workload and what serves during it, the time to first token (measured, derived or unknown, and from
what), and the settings that fell back to a figure of the field report's one deployment.

Rollouts and times are read off the rendered objects like the rest of plan.md; the download rate and the
inherited settings come from the validated config the render keeps (Rendered.config).
"""

from __future__ import annotations

from typing import Any

from components.pod_template import ANN_STARTUP_BUDGET
from components.time_to_serving import (
    IMAGE_PULL_SECONDS,
    IMAGE_PULL_SECTION,
    IMAGE_PULL_SOURCE,
    SYNC_MIB_PER_SECOND,
    cold_start_seconds,
    cold_start_source,
    minutes,
    time_to_serving,
)
from components.topologies import inherited_pod_sizes_of
from config_model.inherited import inherited
from policy import gpu_accounting
from policy.profiles import PROFILES, profile_named
from policy.workloads import pod_gpus, pod_templates, rollout_waves
from render.manifest_facts import autoscalers, time_to_serving_inputs
from render.multinode_md import group_shapes, plural
from render.runtime import Rendered
from render.serialize import kubernetes_objects

FIELD_REPORT = "docs/field-report.md"


def download_rate(rendered: Rendered) -> tuple[float, bool]:
    """The store's download rate in MiB/s and whether the stack file declares it."""
    cfg = rendered.config
    if cfg is None:
        return SYNC_MIB_PER_SECOND, False
    store = cfg.object_store
    return store.download_rate_mibps, "download_rate_mibps" in store.model_fields_set


def cold_start_words(profile: str | None, engine: str | None, budget_seconds: Any = None) -> str:
    """A model's cold start as plan.md states it: measured (and where) or unknown (and what bounds it)."""
    if profile in PROFILES and engine is not None and cold_start_seconds(engine, profile) is not None:
        measured = profile_named(profile).COLD_START_ESTIMATE_SECONDS[engine]
        where = cold_start_source(engine, profile)
        return (f"about {measured / 60:g} min, measured for profile {profile} on {engine}"
                + (f" (field report {where})" if where else ""))
    bound = f"; at most its startup budget, {int(budget_seconds) / 60:g} min, after which the pod restarts" \
        if budget_seconds is not None else ""
    return f"unknown: no cold start measured for profile {profile} on {engine}{bound}"


def _engine_template(obj: dict):
    for ref in pod_templates(obj.get("kind", ""), obj):
        meta = ref.template.get("metadata") or {}
        if (meta.get("annotations") or {}).get("llm-serving.io/role") == "engine" and pod_gpus(ref.template):
            return ref
    return None


def rollout_rows(rendered: Rendered) -> list[dict[str, Any]]:
    """Per GPU workload: its strategy as rendered, its pods (an autoscaled one's bounds) and how many
    pods a rollout takes down at once (`down`; None: none, a surge pod keeps every one serving)."""
    inputs = {r["model"]: r for r in time_to_serving_inputs(rendered)}
    scaled = autoscalers(rendered)
    shapes = group_shapes(rendered.config)
    rows = []
    for obj in kubernetes_objects(rendered):
        kind, ref = obj.get("kind", ""), _engine_template(obj)
        if ref is None:
            continue
        spec = obj.get("spec") or {}
        strategy = spec.get("strategy") or spec.get("updateStrategy") or {}
        pods, surge = ref.replicas, ref.surge
        recreate = strategy.get("type") == "Recreate"
        unavailable = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1) if kind == "Deployment" else 1
        if recreate:
            how, down = "Recreate", None
        elif surge and unavailable == 0:
            how, down = f"RollingUpdate, {surge} surge pod at a time (maxSurge {surge}, maxUnavailable 0)", 0
        else:
            waves = rollout_waves(kind, obj)
            down = -(-max(pods, 1) // waves)
            how = f"RollingUpdate, {down} pod{'s' if down != 1 else ''} down at a time (maxSurge {surge})"
        meta = ref.template.get("metadata") or {}
        model = (meta.get("labels") or {}).get("llm-serving.io/model")
        group = shapes.get(model)
        if group is not None and group.kind == kind:
            # A model spanning nodes rolls by whole groups, maxSurge 0: each orchestrator's maxUnavailable
            # counts groups (components/orchestrators/: LWS rollingUpdateConfiguration, the StormService role,
            # the RBG role), written from models[].rollout.maxUnavailable.
            down = -(-group.replicas // gpu_accounting.rollout_waves(group.replicas, group.max_unavailable))
            how = (f"RollingUpdate by whole groups, {plural(down, 'group')} ({plural(down * group.nodes, 'pod')}) down "
                   "at a time (maxSurge 0)")
        row = inputs.get(model) or {}
        pa = scaled.get((kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]))
        counts = sorted({pods} if pa is None else {pa["spec"].get("minReplicas", 1), pa["spec"]["maxReplicas"]})
        measured = (cold_start_seconds(row["engine"], row["profile"])
                    if row.get("profile") in PROFILES and row.get("engine") else None)
        budget = (meta.get("annotations") or {}).get(ANN_STARTUP_BUDGET)
        rows.append({"workload": f"{kind} {obj['metadata']['name']}", "strategy": how, "counts": counts, "down": down,
                     "group": group if group is not None and group.kind == kind else None,
                     "surgeGpus": surge * pod_gpus(ref.template), "coldSeconds": measured, "budget": budget,
                     "cold": cold_start_words(row.get("profile"), row.get("engine"), budget)})
    return rows


def _serving_words(r: dict[str, Any]) -> str:
    """How many pods serve during a rollout at each pod count the workload may run."""
    outage = (f"about {minutes(r['coldSeconds'])} down (one cold start, plus the image pull when the image changed)"
              if r["coldSeconds"] is not None else "down for one cold start (unknown: see the next column)")
    if r.get("group") is not None:
        return _group_serving_words(r, outage)
    out = []
    for n in r["counts"]:
        if n == 0:
            out.append("at 0 pods: nothing to roll")
        elif r["down"] is None or r["down"] >= n:
            why = "Recreate" if r["down"] is None else "every pod is in the first wave"
            out.append(f"at {n} pod{'s' if n != 1 else ''}: **no pod serves** ({why}), {outage}")
        elif r["down"] == 0:
            out.append(f"at {n} pods: all {n} serve throughout; the surge pod holds {r['surgeGpus']} more GPUs, "
                       "counted in the budget")
        else:
            out.append(f"at {n} pods: {n - r['down']} of {n} serve, {-(-n // r['down'])} waves in a row")
    return "; ".join(out)


def _group_serving_words(r: dict[str, Any], outage: str) -> str:
    """A model spanning nodes: a wave takes whole groups down, and a group serves only with every pod back."""
    g = r["group"]
    if r["down"] >= g.replicas:
        return (f"at {plural(g.replicas, 'group')}: **no group serves** (a wave replaces whole groups, and every group "
                f"is in the first), {outage}; the wave ends when the new group's slowest node has joined")
    return (f"at {g.replicas} groups: {g.replicas - r['down']} of {g.replicas} serve, "
            f"{-(-g.replicas // r['down'])} waves in a row, each ending when its groups' slowest node has joined")


def rollout_section(rendered: Rendered) -> list[str]:
    rows = rollout_rows(rendered)
    if not rows:
        return []
    lines = ["", "## Rollouts", "",
             "What serves while a change to the pods rolls out (a new image, revision, flag or consumer). Unset "
             "`models[].rollout`: a Deployment that never runs more than one pod recreates it (its GPUs are free "
             "before the new pod starts), more pods roll one at a time; `rollout.maxSurge: 1` keeps every pod "
             "serving where gpuBudget has room for one more pod (docs/operations.md, \"Rollouts\"). Each wave waits "
             "one cold start, plus the image pull when the image changed."
             + (" A model spanning nodes rolls by whole groups: a group serves only when all its pods do, so a wave "
                "takes down every GPU of its groups (replicas x nodes x GPUs per pod counted in groups)."
                if group_shapes(rendered.config) else ""), "",
             "| Workload | Strategy | Serving during a rollout | Cold start per wave |", "|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['strategy']} | {_serving_words(r)} | {r['cold']} |" for r in rows]
    return lines


def _lower_bound(seconds: float, known: bool, unit=minutes) -> str:
    if known:
        return unit(seconds)
    return f">= {unit(seconds)}" if seconds > 0 else "unknown"


def time_to_serving_section(rendered: Rendered) -> list[str]:
    rate, declared = download_rate(rendered)
    rows = [r for r in time_to_serving_inputs(rendered)
            if r["sizeGiB"] is not None and r["engine"] is not None and r.get("profile") is not None]
    lines = ["", "## Time to first token after `pulumi up`", "",
             "Estimate for a first deployment: the sync Job downloads the model, the engine pods (created once the "
             "sync has verified the weights, holding their GPUs from then on) pull the engine image, then the engine "
             "starts cold. With pre-pull (operations.imagePrePull) the GPU nodes pull the image during the sync. "
             "GPU-minutes: the model's GPUs x the time from its pods' scheduling to the first token.", "",
             "| Served model | Engine | GPUs | Model GiB | Sync | Image pull | Cold start | First token, no pre-pull | "
             "First token, pre-pull | GPU-minutes, no pre-pull | GPU-minutes, pre-pull | This stack |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    unknown = []
    for r in rows:
        kw = {"profile": r["profile"], "download_mib_per_second": rate}
        off = time_to_serving(r["sizeGiB"], r["engine"], r["gpus"], pre_pulled=False, **kw)
        on = time_to_serving(r["sizeGiB"], r["engine"], r["gpus"], pre_pulled=True,
                             images_per_node=r.get("imagesPerNode") or len(r["images"]), **kw)
        known = off.measured
        if not known:
            unknown.append(f"{r['served']} ({r['profile']} on {r['engine']})")
        gpu_minutes = lambda s: f"{s / 60:.0f}"  # noqa: E731  (GPU-seconds -> GPU-minutes, as a number)
        lines.append(f"| {r['served']} | {r['engine']} | {r['gpus']} | {format(r['sizeGiB'], 'g')} | "
                     f"{minutes(off.sync_seconds)} | {minutes(on.pull_seconds if r['preloaded'] else off.pull_seconds)} | "
                     f"{minutes(off.cold_start_seconds) if known else 'unknown'} | "
                     f"{_lower_bound(off.first_token_seconds, known)} | {_lower_bound(on.first_token_seconds, known)} | "
                     f"{_lower_bound(off.gpus * off.gpu_wait_seconds, known, gpu_minutes)} | "
                     f"{_lower_bound(on.gpus * on.gpu_wait_seconds, known, gpu_minutes)} | "
                     f"{'pre-pull' if r['preloaded'] else 'no pre-pull'} |")
    store = (f"declared: objectStore.downloadRateMiBps {rate:g} MiB/s" if declared else
             f"inherited: {rate:g} MiB/s, the field report's one measured download from one COS bucket (3.2); "
             "set objectStore.downloadRateMiBps to what this store gives")
    lines += ["", "Where each figure comes from:", "",
              "- Model GiB: the stack file's `models[].sizeGiB`, else its profile's (policy/profiles/).",
              f"- Sync: derived: model size / download rate ({store}).",
              f"- Image pull: measured in the field report only ({IMAGE_PULL_SECTION}: {IMAGE_PULL_SOURCE}), standing "
              "for every engine image; not measured for these images. With pre-pull, each node pulls its images one "
              "at a time (the kubelet's serializeImagePulls) during the sync.",
              "- Cold start: measured where the model's profile has a measurement on its engine (the field report's "
              "DeepSeek-V4 on 8 x H20: 6 for vLLM, 12.2 for SGLang, whose 23 min held the image pull, taken off here); "
              "else unknown.",
              "- First token and GPU-minutes: derived: sync + image pull + cold start; the GPUs wait for the pull "
              "(or what of the pre-pull outlasts the sync) and the cold start."]
    for g in group_shapes(rendered.config).values():
        lines.append(f"- GPUs of {g.model}, which spans nodes: {g.replicas} replica{'s' if g.replicas != 1 else ''} x "
                     f"{g.nodes} nodes x {g.gpus_per_pod} GPUs = {g.gpus}, every one of them waiting: a group serves only "
                     "once its slowest node has loaded its shard from the shared volume and joined the leader.")
    if unknown:
        lines.append(f"- **Lower bounds** (marked >=) for {', '.join(unknown)}: no cold start is measured for them, "
                     "so these figures leave it out; the Rollouts section gives what bounds it (the startup budget).")
    return lines


def inherited_section(rendered: Rendered) -> list[str]:
    """Every setting of the stack that fell back to a field-report figure (config_model/inherited.py)."""
    if rendered.config is None:
        return []
    cfg = rendered.config
    # The pod sizes need each model's GPUs per pod, which its topology (components/) knows; every other
    # source is config_model/inherited.py SOURCES.
    items = inherited(cfg) + inherited_pod_sizes_of(cfg.gpu_pool, cfg.models)
    lines = ["", "## Defaults this stack inherits", "",
             "Settings the stack file leaves unset whose value is a figure of the field report's one deployment "
             f"(DeepSeek-V4-Flash on 8 x H20, {FIELD_REPORT}) rather than something derived from what this stack "
             "declares. They hold for that model on that hardware; for another, measure and set the field (setting it "
             "to any value, the same one included, takes it off this list)."]
    if not items:
        return lines + ["", "None: every such setting is declared in the stack file."]
    lines += ["", "| Setting | Value | Field report | How |", "|---|---|---|---|"]
    for i in items:
        value = format(i.value, "g") if isinstance(i.value, float) else i.value
        lines.append(f"| `{i.path}` | {value} | {i.section} | {i.basis or 'the figure itself'} |")
    return lines


__all__ = ["IMAGE_PULL_SECONDS", "cold_start_words", "download_rate", "inherited_section", "rollout_rows",
           "rollout_section", "time_to_serving_section"]
