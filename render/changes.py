"""The offline update planner: what `pulumi up` does going from one render to the next.

Pure functions over two lists of resources.json records (render/output.py) and the two outputs.json
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
estimate (components/time_to_serving.py) over the same inputs plan.md reads (render/output.py
time_to_serving_inputs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apivalidation.updates import check_update
from components.time_to_serving import time_to_serving
from policy.manifests import kind_of, templates
from policy.stack_rules import StackResource, autoscaled, grown_to, workload_gpus
from policy.workloads import pod_gpus, pod_templates, rollout_waves
from render import update_rules as rules

CREATE, UPDATE, REPLACE, DELETE, SAME = "create", "update", "replace", "delete", "same"
CREATE_FIRST, DELETE_FIRST = "create-before-delete", "delete-before-create"


@dataclass
class Step:
    key: str                  # the URN the engine matches on
    type: str
    name: str                 # logical name
    action: str               # create / update / replace / delete / same
    order: str | None = None  # for a replace: create-before-delete or delete-before-create
    fields: list[str] = field(default_factory=list)  # the property paths that decide it
    notes: list[str] = field(default_factory=list)
    old: dict | None = None
    new: dict | None = None
    alias: str | None = None  # the old URN when matched by alias

    @property
    def record(self) -> dict:
        return self.new or self.old or {}

    @property
    def object(self) -> str:
        """`Kind namespace/name` of a Kubernetes object, else the type and logical name."""
        props = self.record.get("inputs") or {}
        if self.type.startswith("kubernetes:") and "kind" in props:
            meta = props.get("metadata") or {}
            where = f"{meta['namespace']}/" if meta.get("namespace") else ""
            return f"{props['kind']} {where}{meta.get('name', '?')}"
        return f"{self.type} {self.name}"


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


@dataclass
class Plan:
    stack: str
    steps: list[Step]
    problems: list[str]
    workloads: list[Workload]
    peak_gpus: int
    budget: int | None
    models: list[ModelImpact]

    def by_action(self, action: str) -> list[Step]:
        return [s for s in self.steps if s.action == action]

    @property
    def changes(self) -> list[Step]:
        return [s for s in self.steps if s.action != SAME]


def load(directory: Path) -> tuple[list[dict], dict]:
    """resources.json records and outputs.json of an earlier render's output directory."""
    records = json.loads((directory / "resources.json").read_text(encoding="utf-8"))
    outputs_path = directory / "outputs.json"
    outputs = json.loads(outputs_path.read_text(encoding="utf-8")) if outputs_path.is_file() else {}
    return records, outputs


def _is_k8s(r: dict) -> bool:
    return bool(r.get("custom")) and r["type"].startswith("kubernetes:") and "kind" in (r.get("inputs") or {})


def _is_provider(r: dict) -> bool:
    return r["type"].startswith("pulumi:providers:")


def _provider_ref(r: dict) -> str:
    return f"{r['type']}::{r['name']}"


def _identity(obj: dict) -> tuple:
    """What the API server names an object by: group, kind, namespace, name."""
    group, _ = rules.group_version(str(obj.get("apiVersion", "")))
    return (group, obj.get("kind"), rules.namespace_of(obj), (obj.get("metadata") or {}).get("name"))


def _where(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta.get('name')}"


def _keys(old: list[dict], new: list[dict]) -> tuple[str, str, bool]:
    """Match by the engine's URNs when both renders record them, else by the render's own URNs."""
    engine = all(r.get("engineUrn") for r in old + new) and bool(old + new)
    return ("engineUrn", "engineParent", True) if engine else ("urn", "", False)


def _match(old: list[dict], new: list[dict]) -> tuple[list[tuple[dict | None, dict | None, str, str | None]], bool]:
    """(old, new, key, alias) per resource: getOldResource looks up the URN first, then each alias."""
    key, parent_key, engine = _keys(old, new)
    olds = {r[key]: r for r in old}
    claimed: set[str] = set()
    parent_aliases: dict[str, str] = {}
    pairs = []
    # Parents first, so a child sees its parent's alias (generateAliases multiplies them out).
    for r in sorted(new, key=lambda r: (r[key].count("$"), r[key])):
        urn = r[key]
        candidates = [urn]
        if engine:
            candidates += rules.aliases_of(r, urn, r.get(parent_key) or "", parent_aliases)
        found = next((c for c in candidates if c in olds and c not in claimed), None)
        if found and found != urn:
            parent_aliases[urn] = found
        if found:
            claimed.add(found)
        pairs.append((olds.get(found) if found else None, r, urn, found if found and found != urn else None))
    pairs += [(r, None, r[key], None) for r in old if r[key] not in claimed]
    return pairs, engine


def _provider_inputs(records: list[dict]) -> dict[str, dict]:
    return {_provider_ref(r): r.get("inputs") or {} for r in records if _is_provider(r)}


def _template_paths(kind: str, obj: dict) -> list[tuple]:
    return [rules.property_path(ref.path) for ref in pod_templates(kind, obj)]


def _changed_paths(o: dict, n: dict) -> list[str]:
    return [rules.Change(p, k).text for p, k, _ in rules.leaf_changes(o.get("inputs") or {}, n.get("inputs") or {})]


def _diff_step(o: dict, n: dict, key: str, alias: str | None, replaced_providers: set[str],
               new_providers: dict[str, dict], classes: dict[str, dict], problems: list[str]) -> Step:
    step = Step(key, n["type"], n["name"], SAME, old=o, new=n, alias=alias)
    opts, old_opts = rules.options(n), rules.options(o)
    if not n.get("custom"):
        # A component has no provider: the engine compares its inputs (step_generator.go diff, prov == nil).
        if (o.get("inputs") or {}) != (n.get("inputs") or {}):
            step.action, step.fields = UPDATE, _changed_paths(o, n)
            step.notes.append("a component: nothing changes in the cluster by itself")
        return step
    provider_changed = (o.get("provider") != n.get("provider")) or n.get("provider") in replaced_providers
    if _is_provider(n):
        replaces = rules.provider_config_replaces(o.get("inputs") or {}, n.get("inputs") or {})
        changed = sorted(k for k in set(o.get("inputs") or {}) | set(n.get("inputs") or {})
                         if (o.get("inputs") or {}).get(k) != (n.get("inputs") or {}).get(k))
        if replaces:
            step.action, step.fields = REPLACE, replaces
            step.order = DELETE_FIRST if rules.delete_before_replace(opts, False) else CREATE_FIRST
            step.notes.append("every resource it manages is replaced with it (step_generator.go providerChanged)")
        elif changed:
            step.action, step.fields = UPDATE, changed
    elif provider_changed:
        # providerChanged: DiffConfig says replace, so the resource is replaced, create-first by default.
        step.action, step.fields = REPLACE, ["provider"]
        step.order = DELETE_FIRST if rules.delete_before_replace(opts, False) else CREATE_FIRST
    elif _is_k8s(n) and _is_k8s(o):
        config = new_providers.get(n.get("provider") or "", {})
        diff = rules.kubernetes_diff(o["inputs"], n["inputs"], opts["ignoreChanges"], opts["replaceOnChanges"], config)
        if diff.replaces:
            step.action, step.fields = REPLACE, [c.text for c in diff.replaces]
            step.order = DELETE_FIRST if rules.delete_before_replace(opts, diff.delete_before_replace) else CREATE_FIRST
        elif diff.changes:
            step.action, step.fields = UPDATE, [c.text for c in diff.changes]
            for fld, message in check_update(o["inputs"], n["inputs"], classes):
                problems.append(f"{_where(n['inputs'])}: {fld}: the API server refuses the in-place update: {message}")
        if diff.replace_unready:
            step.notes.append("pulumi.com/replaceUnready: replaced again on every `pulumi up` while the Job is not "
                              "Complete (provider.go Diff, checkjob)")
    elif (o.get("inputs") or {}) != (n.get("inputs") or {}):
        step.action, step.fields = UPDATE, _changed_paths(o, n)
        step.notes.append("this provider's replace rules are not modelled offline: `pulumi preview` decides")
    if step.action == REPLACE and opts["protect"] and old_opts["protect"]:
        problems.append(f"{step.object}: {rules.replace_protected(key)}")
    return step


def _steps(old: list[dict], new: list[dict], problems: list[str]) -> list[Step]:
    pairs, _ = _match(old, new)
    replaced_providers = {_provider_ref(n) for o, n, _, _ in pairs if o and n and _is_provider(n)
                          and rules.provider_config_replaces(o.get("inputs") or {}, n.get("inputs") or {})}
    new_providers = _provider_inputs(new)
    classes = {(r["inputs"].get("metadata") or {}).get("name"): r["inputs"] for r in new
               if _is_k8s(r) and r["inputs"].get("kind") == "StorageClass"}
    steps = []
    for o, n, key, alias in pairs:
        if o is None:
            steps.append(Step(key, n["type"], n["name"], CREATE, new=n))
        elif n is None:
            step = Step(key, o["type"], o["name"], DELETE, old=o)
            opts = rules.options(o)
            if opts["protect"]:
                problems.append(f"{step.object}: {rules.delete_protected(key)}")
            elif opts["retainOnDelete"]:
                step.notes.append("retainOnDelete: dropped from the state only, the object stays (step.go)")
            steps.append(step)
        else:
            steps.append(_diff_step(o, n, key, alias, replaced_providers, new_providers, classes, problems))
    # Phase 1 first, then phase 2's deletes, then what does not change.
    return sorted(steps, key=lambda s: (s.action == SAME, s.action == DELETE, s.key))


def _identity_conflicts(steps: list[Step]) -> list[str]:
    """A create while an object of the same name still exists: the old one goes only in phase 2 (a
    dropped resource, a create-first replacement's old copy) or never (retainOnDelete). The API server
    answers AlreadyExists (pulumi-kubernetes v4.32.0 provider/pkg/await/await.go Creation)."""
    lingering: dict[tuple, Step] = {}
    for s in steps:
        if s.old and _is_k8s(s.old) and (s.action == DELETE or (s.action == REPLACE and (
                s.order == CREATE_FIRST or rules.options(s.old)["retainOnDelete"]))):
            lingering[_identity(s.old["inputs"])] = s
    problems = []
    for s in steps:
        if not (s.new and _is_k8s(s.new) and s.action in (CREATE, REPLACE)):
            continue
        other = lingering.get(_identity(s.new["inputs"]))
        if other is None:
            continue
        if rules.options(other.old)["retainOnDelete"] and (other is s or other.action == DELETE):
            why = "retainOnDelete keeps the old object"
        else:
            why = f"{other.object} is deleted only after every create ({other.action}, phase 2)"
        problems.append(f"{_where(s.new['inputs'])}: created while the object of that name still exists ({why}): "
                        "the API server answers AlreadyExists and `pulumi up` fails")
    return problems


def _claims_in_use(records: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(namespace, claim) -> workloads whose pods mount it."""
    out: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if not _is_k8s(r):
            continue
        ns = (r["inputs"].get("metadata") or {}).get("namespace") or "default"
        for ref in templates(r["type"], r["inputs"]):
            for v in (ref.template.get("spec") or {}).get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    out.setdefault((ns, claim), []).append(_where(r["inputs"]))
    return out


def _volume_protection(steps: list[Step], old: list[dict]) -> list[str]:
    """Delete-first replacements the storage-object-in-use protection holds (kubernetes/kubernetes
    v1.37.2): a PV while it is Bound (pkg/controller/volume/pvprotection/pv_protection_controller.go
    isBeingUsed: Status.Phase == Bound), a claim while a pod uses it (pvcprotection/
    pvc_protection_controller.go podUsesPVCForDeletion). The delete waits until its timeout and
    `pulumi up` fails."""
    claims = {(rules.namespace_of(r["inputs"]), (r["inputs"].get("metadata") or {}).get("name"))
              for r in old if _is_k8s(r) and r["inputs"].get("kind") == "PersistentVolumeClaim"}
    in_use = _claims_in_use(old)
    problems = []
    for s in steps:
        if s.action != REPLACE or s.order != DELETE_FIRST or not (s.old and _is_k8s(s.old)):
            continue
        obj = s.old["inputs"]
        if obj.get("kind") == "PersistentVolume":
            ref = (obj.get("spec") or {}).get("claimRef") or {}
            claim = (ref.get("namespace") or "default", ref.get("name"))
            if ref.get("name") and claim in claims:
                problems.append(f"{_where(obj)}: replaced delete-first ({', '.join(s.fields)}) while Bound to claim "
                                f"{claim[0]}/{claim[1]}: kubernetes.io/pv-protection holds the delete and `pulumi up` "
                                "fails after the delete timeout")
        if obj.get("kind") == "PersistentVolumeClaim":
            users = in_use.get((rules.namespace_of(obj), (obj.get("metadata") or {}).get("name")), [])
            if users:
                problems.append(f"{_where(obj)}: replaced delete-first ({', '.join(s.fields)}) while mounted by "
                                f"{', '.join(sorted(set(users)))}: kubernetes.io/pvc-protection holds the delete and "
                                "`pulumi up` fails after the delete timeout")
    return problems


def _stack_resources(records: list[dict]) -> list[StackResource]:
    return [StackResource(type=r["type"], name=r["name"], props=r.get("inputs") or {}, options=r.get("options") or {},
                          provider=r.get("provider") or "", custom=bool(r.get("custom")), parent=r.get("parent") or "")
            for r in records]


def _gpus(record: dict | None, scaled: dict) -> tuple[int, int]:
    """(steady, peak with rollout surge) GPUs of a workload, as its autoscaler may grow it."""
    if not record or not _is_k8s(record):
        return 0, 0
    props = record["inputs"]
    meta = props.get("metadata") or {}
    max_replicas = scaled.get((props.get("kind"), meta.get("namespace") or "", meta.get("name")))
    peak = workload_gpus(record["type"], props, max_replicas)
    grown = props if max_replicas is None else grown_to(props, max_replicas)
    steady = sum(ref.replicas * pod_gpus(ref.template) for ref in templates(record["type"], grown))
    return int(steady), int(peak)


def _template_changed(step: Step) -> bool:
    if step.action != UPDATE or not step.new or not _is_k8s(step.new):
        return False
    paths = _template_paths(step.new["inputs"]["kind"], step.new["inputs"])
    changed = [rules.property_path(f) for f in step.fields]
    return any(rules.path_contains(t, c) for t in paths for c in changed)


def _workloads(steps: list[Step], old: list[dict], new: list[dict]) -> list[Workload]:
    """Phase 1 as the engine runs it: every create, update and create-first replacement is done (each
    awaited to Ready) while dropped resources and old copies still run; phase 2 only removes GPUs."""
    old_scaled, new_scaled = autoscaled(_stack_resources(old)), autoscaled(_stack_resources(new))
    out = []
    for s in steps:
        old_steady, _ = _gpus(s.old, old_scaled)
        new_steady, new_peak = _gpus(s.new, new_scaled)
        if not (old_steady or new_steady):
            continue
        restarts = s.action in (REPLACE, CREATE, DELETE) or _template_changed(s)
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
    if not record or not _is_k8s(record):
        return []
    out = []
    for ref in templates(record["type"], record["inputs"]):
        meta = ref.template.get("metadata") or {}
        served = (meta.get("labels") or {}).get("model.aibrix.ai/name")
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
    if not _template_changed(step):
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


def _time_to_serving(new: list[dict], outputs: dict, served: str, image_changed: bool) -> float | None:
    """Seconds from the pods' scheduling to the first token (components/time_to_serving.py): the weights
    are on the volume already; the image is pulled again only when it changed and is not pre-pulled."""
    from render.output import time_to_serving_inputs
    try:
        rows = time_to_serving_inputs(_rendered(new, outputs))
    except StopIteration:
        return None  # an engine pod without the model gate (not one this program renders): no estimate
    for row in rows:
        if row["served"] == served and row["sizeGiB"] is not None and row["engine"] is not None:
            estimate = time_to_serving(row["sizeGiB"], row["engine"], row["gpus"],
                                       pre_pulled=row["preloaded"] or not image_changed,
                                       images_per_node=row.get("imagesPerNode") or len(row["images"]))
            return estimate.gpu_wait_seconds
    return None


def _images(record: dict | None) -> set[str]:
    return {c.get("image") for _, ref in _engine_refs(record)
            for c in (ref.template.get("spec") or {}).get("containers") or []}


def _models(steps: list[Step], new: list[dict], outputs: dict, fails: bool) -> list[ModelImpact]:
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
        seconds = _time_to_serving(new, outputs, served, image_changed)
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
            out.append(ModelImpact(served, "no serving", seconds, why))
        elif any(f in ("down", "reduced") for f in kept):
            out.append(ModelImpact(served, "reduced capacity", None, why))
        else:
            out.append(ModelImpact(served, "no downtime", None, why))
    return out


def plan(old: list[dict], new: list[dict], old_outputs: dict | None = None, new_outputs: dict | None = None,
         stack: str = "") -> Plan:
    """The update from the `old` render to the `new` one, with every problem that makes it fail."""
    new_outputs = new_outputs or {}
    problems: list[str] = []
    steps = _steps(old, new, problems)
    problems += _identity_conflicts(steps)
    problems += _volume_protection(steps, old)
    workloads = _workloads(steps, old, new)
    peak = sum(w.held for w in workloads)
    budget = new_outputs.get("gpuBudget")
    if isinstance(budget, bool) or not isinstance(budget, int):
        budget = None
    if budget is not None and peak > budget:
        holders = ", ".join(f"{w.object} {w.held}" for w in workloads if w.held)
        problems.append(f"the update needs {peak} of budget {budget} GPUs at once ({holders}): the new pods stay "
                        "Pending and `pulumi up` times out")
    return Plan(stack, steps, problems, workloads, peak, budget, _models(steps, new, new_outputs, bool(problems)))
