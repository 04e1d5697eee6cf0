"""The update's steps, resource by resource: old and new records matched by identity (engine URN,
then aliases), each given the action the provider's diff and the engine's options decide
(render/update_rules.py) and its order (create or delete first); and what makes a step fail on the
API server: two objects of one identity at once, a bound volume deleted while its claim is in use
(apivalidation/updates.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from apivalidation.updates import check_update
from policy.manifests import templates
from policy.workloads import pod_templates
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


def load(directory: Path) -> tuple[list[dict], dict]:
    """resources.json records and outputs.json of an earlier render's output directory."""
    records = json.loads((directory / "resources.json").read_text(encoding="utf-8"))
    outputs_path = directory / "outputs.json"
    outputs = json.loads(outputs_path.read_text(encoding="utf-8")) if outputs_path.is_file() else {}
    return records, outputs


def is_k8s(r: dict) -> bool:
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


def template_paths(kind: str, obj: dict) -> list[tuple]:
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
    elif is_k8s(n) and is_k8s(o):
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


def steps(old: list[dict], new: list[dict], problems: list[str]) -> list[Step]:
    pairs, _ = _match(old, new)
    replaced_providers = {_provider_ref(n) for o, n, _, _ in pairs if o and n and _is_provider(n)
                          and rules.provider_config_replaces(o.get("inputs") or {}, n.get("inputs") or {})}
    new_providers = _provider_inputs(new)
    classes = {(r["inputs"].get("metadata") or {}).get("name"): r["inputs"] for r in new
               if is_k8s(r) and r["inputs"].get("kind") == "StorageClass"}
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


def identity_conflicts(steps: list[Step]) -> list[str]:
    """A create while an object of the same name still exists: the old one goes only in phase 2 (a
    dropped resource, a create-first replacement's old copy) or never (retainOnDelete). The API server
    answers AlreadyExists (pulumi-kubernetes v4.32.0 provider/pkg/await/await.go Creation)."""
    lingering: dict[tuple, Step] = {}
    for s in steps:
        if s.old and is_k8s(s.old) and (s.action == DELETE or (s.action == REPLACE and (
                s.order == CREATE_FIRST or rules.options(s.old)["retainOnDelete"]))):
            lingering[_identity(s.old["inputs"])] = s
    problems = []
    for s in steps:
        if not (s.new and is_k8s(s.new) and s.action in (CREATE, REPLACE)):
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
        if not is_k8s(r):
            continue
        ns = (r["inputs"].get("metadata") or {}).get("namespace") or "default"
        for ref in templates(r["type"], r["inputs"]):
            for v in (ref.template.get("spec") or {}).get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    out.setdefault((ns, claim), []).append(_where(r["inputs"]))
    return out


def volume_protection(steps: list[Step], old: list[dict]) -> list[str]:
    """Delete-first replacements the storage-object-in-use protection holds (kubernetes/kubernetes
    v1.37.2): a PV while it is Bound (pkg/controller/volume/pvprotection/pv_protection_controller.go
    isBeingUsed: Status.Phase == Bound), a claim while a pod uses it (pvcprotection/
    pvc_protection_controller.go podUsesPVCForDeletion). The delete waits until its timeout and
    `pulumi up` fails."""
    claims = {(rules.namespace_of(r["inputs"]), (r["inputs"].get("metadata") or {}).get("name"))
              for r in old if is_k8s(r) and r["inputs"].get("kind") == "PersistentVolumeClaim"}
    in_use = _claims_in_use(old)
    problems = []
    for s in steps:
        if s.action != REPLACE or s.order != DELETE_FIRST or not (s.old and is_k8s(s.old)):
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
