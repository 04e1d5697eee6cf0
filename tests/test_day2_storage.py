"""Issue 18, cases 4, 5 and 8: day-2 changes of the model volume and of the sync Job.

Each case is a pair of renders, before and after a change an operator makes, judged by the rules
that decide what `pulumi up` does with the difference (ported below, each with its upstream file)
and by the API server's update rules (apivalidation/updates.py); the sync scripts run on real files,
and with the real AWS CLI against the local S3 server (tests/test_sync_real.py). docs/day-2/storage.md.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import PROJECT_DIR

from apivalidation import apiserver, updates
from config_model import derived
from policy.profiles import deepseek_v4
from render import runtime, stackfile
from stacks import loader

SCRIPTS = PROJECT_DIR / "components" / "scripts"
sys.path.insert(0, str(SCRIPTS))
import model_gate  # noqa: E402
import verify_model  # noqa: E402

# make test runs --dist loadgroup: one worker takes the whole file, so its local S3 server, once.
pytestmark = pytest.mark.xdist_group("day2-storage")


PV, PVC, JOB, DEPLOYMENT = (f"kubernetes:{t}" for t in ("core/v1:PersistentVolume", "core/v1:PersistentVolumeClaim",
                                                        "batch/v1:Job", "apps/v1:Deployment"))

# ---- what `pulumi up` does with a difference ----
# pulumi-kubernetes v4.32.0 provider/pkg/provider/diff.go: metadataForceNewProperties (every kind) and
# the forceNew lists of the kinds these cases change. A kind not listed here is refused by `plan`.
PV_SOURCES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
              "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
              "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume")
IDENTITY = (("metadata", "name"), ("metadata", "namespace"))
FORCE_NEW = {
    "PersistentVolume": tuple(("spec", s) for s in PV_SOURCES),
    "PersistentVolumeClaim": (("spec", "accessModes"), ("spec", "selector"), ("spec", "storageClassName"),
                              ("spec", "volumeName")),
    "Job": (("spec", "completions"), ("spec", "parallelism"), ("spec", "selector"), ("spec", "template")),
    "Deployment": (("spec", "selector"),),
    # forceNewProperties: a Secret's or ConfigMap's content replaces it while the provider's
    # enableSecretMutable / enableConfigMapMutable are off (their default, provider.go CheckConfig;
    # this program sets neither).
    "Secret": (("type",), ("stringData",), ("data",)),
    "ConfigMap": (("binaryData",), ("data",)),
    "Service": (("spec", "clusterIP"),),
}


def changed(old, new, path: tuple = ()) -> list[tuple[tuple, object]]:
    """(path, new value or None) of every difference, maps walked key by key and anything else
    compared whole, as provider.go convertPatchToDiff walks the merge patch of old and new inputs."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            if key not in new:
                out.append((path + (key,), None))
            elif key not in old:
                out.append((path + (key,), new[key]))
            else:
                out += changed(old[key], new[key], path + (key,))
        return out
    return [] if old == new else [(path, new)]


def _reaches(value, rest: tuple) -> bool:
    for key in rest:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    return True


# The groups diff.go forceNew has an entry for; any other kind (a custom resource) is replaced for
# its name and namespace only (forceNewProperties: metadataForceNewProperties alone).
FORCE_NEW_GROUPS = {"", "core", "apps", "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "batch"}


def force_new(api_version: str, kind: str) -> tuple[tuple[str, ...], ...]:
    group = api_version.split("/")[0] if "/" in api_version else ""
    if group not in FORCE_NEW_GROUPS:
        return IDENTITY
    if kind not in FORCE_NEW:
        raise AssertionError(f"{api_version} {kind}: its forceNew list is not ported here")
    return IDENTITY + FORCE_NEW[kind]


def forces_replace(fields: tuple, path: tuple, value) -> bool:
    """provider.go addPatchValueToDiff: openapi.PatchPropertiesChanged of the patch slice at `path`
    (the new value, null for a delete) against the kind's forceNew JSONPaths."""
    for f in fields:
        if path[:len(f)] == f or (f[:len(path)] == path and _reaches(value, f[len(path):])):
            return True
    return False


@dataclass(frozen=True)
class Res:
    urn: str
    type: str
    inputs: dict
    delete_before_replace: bool | None   # the resource option, None when the program leaves it to the provider
    ignore_changes: tuple[str, ...]
    dependencies: tuple[str, ...]

    @property
    def kind(self) -> str:
        return self.inputs["kind"]

    @property
    def identity(self) -> tuple[str, str]:
        meta = self.inputs["metadata"]
        return meta.get("namespace") or "", meta["name"]


def resources(rendered: runtime.Rendered) -> dict[str, Res]:
    return {r.engine_urn: Res(r.engine_urn, r.type, r.inputs, r.engine_options["deleteBeforeReplace"],
                              tuple(r.engine_options["ignoreChanges"]), tuple(r.dependencies))
            for r in rendered.resources if r.custom and r.type.startswith("kubernetes:") and "kind" in r.inputs}


@dataclass(frozen=True)
class Step:
    action: str       # create | same | update | replace | delete
    fields: tuple[str, ...] = ()
    delete_first: bool = False


def ignoring(old: dict, new: dict, paths: tuple[str, ...]) -> dict:
    """pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go processIgnoreChanges: the new inputs
    with each ignored path set back to its old value (PropertyPath.Reset; dotted paths only here)."""
    out = copy.deepcopy(new)
    for path in paths:
        assert "[" not in path, path
        *head, last = path.split(".")
        src, dst = old, out
        for key in head:
            src, dst = (src or {}).get(key), dst.get(key)
            if not isinstance(dst, dict):
                break
        else:
            if isinstance(src, dict) and last in src:
                dst[last] = copy.deepcopy(src[last])
            else:
                dst.pop(last, None)
    return out


def step(old: Res, new: Res) -> Step:
    diffs = changed(old.inputs, ignoring(old.inputs, new.inputs, new.ignore_changes))
    if not diffs:
        return Step("same")
    force = force_new(new.inputs["apiVersion"], new.kind)
    fields = tuple(".".join(p) for p, _ in diffs)
    if not any(forces_replace(force, p, v) for p, v in diffs):
        return Step("update", fields)
    # provider.go Diff: delete before replace when the name and namespace stay; the resource option,
    # when set, overrides the provider (step_generator.go generateSteps, goal.DeleteBeforeReplace).
    dbr = old.identity == new.identity if new.delete_before_replace is None else new.delete_before_replace
    return Step("replace", fields, dbr)


def plan(before: dict[str, Res], after: dict[str, Res]) -> dict[str, Step]:
    steps = {u: step(before[u], r) if u in before else Step("create") for u, r in after.items()}
    steps.update({u: Step("delete") for u in before if u not in after})
    return steps


def deletes_at_the_end(before: dict[str, Res], steps: dict[str, Step]) -> list[set[str]]:
    """What the engine deletes after every create and update: dropped resources and the old objects
    of create-first replacements (step_generator.go GenerateDeletes), in waves where nothing goes
    before what depends on it (ScheduleDeletes, on the old dependency graph)."""
    condemned = {u for u, s in steps.items() if s.action == "delete" or (s.action == "replace" and not s.delete_first)}
    waves = []
    while condemned:
        wave = {u for u in condemned if not set(before[u].dependencies) & condemned}
        assert wave, "a dependency cycle"
        waves.append(wave)
        condemned -= wave
    return waves[::-1]


def by_name(res: dict[str, Res], type_: str) -> dict[str, Res]:
    return {u.rsplit("::", 1)[-1]: r for u, r in res.items() if r.type == type_}


def mounts(value, claim_name: str) -> bool:
    """Whether a pod spec anywhere in `value` mounts the claim."""
    if isinstance(value, dict):
        if (value.get("persistentVolumeClaim") or {}).get("claimName") == claim_name:
            return True
        return any(mounts(v, claim_name) for v in value.values())
    if isinstance(value, list):
        return any(mounts(v, claim_name) for v in value)
    return False


def depends_on(res: dict[str, Res], urn: str, target: str) -> bool:
    seen, todo = set(), [urn]
    while todo:
        u = todo.pop()
        if u == target:
            return True
        if u not in seen and u in res:
            seen.add(u)
            todo += res[u].dependencies
    return False


# ---- renders ----

def render_changed(stack: str, **sections: Callable[[dict], None]) -> runtime.Rendered:
    """The stack as committed, each named config section (camelCase, without `llm-serving:`) changed."""
    sf = stackfile.read(PROJECT_DIR, stack)
    for key, change in sections.items():
        full = f"llm-serving:{key}"
        value = json.loads(sf.config[full]) if full in sf.config else {}
        change(value)
        sf.config[full] = json.dumps(value)
    return runtime.render(sf)


def first_model(change: Callable[[dict], None]) -> Callable[[list], None]:
    return lambda models: change(models[0])


def nested(*path: str, value) -> Callable[[dict], None]:
    def change(section: dict) -> None:
        for key in path[:-1]:
            section = section.setdefault(key, {})
        section[path[-1]] = value
    return change


def volume_pair(res: dict[str, Res]) -> dict[str, Res]:
    """The model-volume component's PVs and claims by logical name."""
    return {u.rsplit("::", 1)[-1]: r for u, r in res.items()
            if r.type in (PV, PVC) and "llm-serving:volume:ModelVolume" in u}


def previous_program(res: dict[str, Res]) -> dict[str, Res]:
    """What the program before this change (commit d441289, components/volume.py) registered for the
    same config: the fixed names model-store and model-store-sync (PVs `<namespace>-<claim>`) and the
    claims' request equal to the PV's capacity. Modelled from this render: only those two differ."""
    pairs = volume_pair(res)
    old_names = {}
    for r in pairs.values():
        if r.kind == "PersistentVolumeClaim":
            name = r.inputs["metadata"]["name"]
            tagged = re.fullmatch(rf"({derived.SERVING_CLAIM}|{derived.SYNC_CLAIM})-[0-9a-f]{{8}}", name)
            assert tagged, f"{name} carries no source tag"
            base = tagged[1]
            old_names[name] = base
            old_names[r.inputs["spec"]["volumeName"]] = f"{r.inputs['metadata']['namespace']}-{base}"
    capacity = next(r.inputs["spec"]["capacity"]["storage"] for r in pairs.values() if r.kind == "PersistentVolume")

    def rename(v):
        if isinstance(v, dict):
            return {k: rename(x) for k, x in v.items()}
        if isinstance(v, list):
            return [rename(x) for x in v]
        return old_names.get(v, v) if isinstance(v, str) else v

    out = {}
    for u, r in res.items():
        inputs = rename(r.inputs)
        if r.type == PVC and u in {p.urn for p in pairs.values()}:
            inputs["spec"]["resources"]["requests"]["storage"] = capacity
        out[u] = Res(u, r.type, inputs, r.delete_before_replace, r.ignore_changes, r.dependencies)
    return out


def bound(claim: Res, pvs: dict[str, Res]) -> tuple[str, str]:
    """The claim's status once bound: phase and status.capacity, the PV's capacity at binding
    (pv_controller.go updateClaimStatus sets it only when the claim becomes Bound)."""
    pv = next(p for p in pvs.values() if p.type == PV and p.inputs["metadata"]["name"] == claim.inputs["spec"]["volumeName"])
    return "Bound", pv.inputs["spec"]["capacity"]["storage"]


def updates_refused(before: dict[str, Res], after: dict[str, Res], steps: dict[str, Step]) -> dict[str, list]:
    """Every in-place update of a PV or claim that the API server refuses (apivalidation/updates.py),
    each claim Bound to the PV of its old render."""
    refused = {}
    for u, s in steps.items():
        if s.action != "update":
            continue
        if after[u].type == PV:
            problems = updates.pv_update(before[u].inputs, after[u].inputs)
        elif after[u].type == PVC:
            problems = updates.pvc_update(before[u].inputs, after[u].inputs, *bound(before[u], before))
        else:
            continue
        if problems:
            refused[u] = problems
    return refused


# ---- case 4: modelVolume.capacityGiB, and keepRevisions that makes it grow ----

def test_claims_never_depend_on_the_capacity():
    """Unit: the claims' spec is the same whatever capacityGiB says; only the PVs carry it."""
    small, large = (resources(render_changed("dev", modelVolume=nested("capacityGiB", value=c))) for c in (400, 900))
    for name, r in volume_pair(small).items():
        other = volume_pair(large)[name]
        if r.type == PVC:
            assert r.inputs == other.inputs
            assert r.inputs["spec"]["resources"]["requests"]["storage"] == "1Gi"
        else:
            assert [p for p, _ in changed(r.inputs, other.inputs)] == [("spec", "capacity", "storage")]


def test_growing_keep_revisions_needs_capacity_and_applies_in_one_up():
    """keepRevisions 2 -> 3 in dev: the capacity rule (stacks/rules/storage.py model_capacity: 3 x 155.43 GiB)
    refuses it at 400 GiB, so the same change raises capacityGiB. Before: the claims were resized,
    which PersistentVolumeClaimResize refuses for class "". Now the PVs update in place, the claims do
    not change, the sync Job is replaced (its template is immutable) and the engine is untouched."""
    with pytest.raises(loader.ConfigError, match=r"modelVolume.capacityGiB = 400: must be at least 466.3 GiB"):
        render_changed("dev", models=first_model(lambda m: m.update(keepRevisions=3)))
    before = resources(render_changed("dev"))
    after = resources(render_changed("dev", models=first_model(lambda m: m.update(keepRevisions=3)),
                                     modelVolume=nested("capacityGiB", value=500)))
    steps = plan(before, after)
    moved = {u.rsplit("::", 1)[-1]: s for u, s in steps.items() if s.action != "same"}
    pvs = {n for n, r in volume_pair(after).items() if r.type == PV}
    assert {n: s.fields for n, s in moved.items() if n in pvs} == {n: ("spec.capacity.storage",) for n in pvs}
    assert all(moved[n].action == "update" for n in pvs)
    assert not any(n.startswith("model-volume-pvc") for n in moved)
    jobs = [n for n in moved if by_name(after, JOB).get(n) and n.startswith("sync-")]
    assert len(jobs) == 1 and moved[jobs[0]].action == "replace" and moved[jobs[0]].delete_first
    # No engine pod restarts. The smoke and warm-up Jobs are named after the model's whole config, so
    # they run again under new names (stacks/program.py rollout_key; left to issue 18 case 7).
    others = {n: (after.get(u) or before[u]).type for n, u in ((u.rsplit("::", 1)[-1], u) for u in steps)
              if n in set(moved) - pvs - set(jobs)}
    assert set(others.values()) <= {JOB} and all(n.startswith("ops-") for n in others), others
    assert updates_refused(before, after, steps) == {}
    # The program before this change resized both claims in place: the API server refuses that.
    old_before, old_after = previous_program(before), previous_program(after)
    old_steps = plan(old_before, old_after)
    refused = updates_refused(old_before, old_after, old_steps)
    assert {u.rsplit("::", 1)[-1] for u in refused} == {"model-volume-pvc-ro", "model-volume-pvc-rw"}
    assert all("PersistentVolumeClaimResize: only dynamically provisioned pvc can be resized" in p[0][2]
               for p in refused.values())


def test_a_smaller_capacity_updates_the_pvs_and_the_old_program_could_not_shrink_the_claims():
    before = resources(render_changed("staging", modelVolume=nested("capacityGiB", value=600)))
    after = resources(render_changed("staging", modelVolume=nested("capacityGiB", value=450)))
    steps = plan(before, after)
    assert {u.rsplit("::", 1)[-1] for u, s in steps.items() if s.action != "same"} == {
        "model-volume-pv-ro", "model-volume-pv-rw"}
    assert updates_refused(before, after, steps) == {}
    old_before, old_after = previous_program(before), previous_program(after)
    refused = updates_refused(old_before, old_after, plan(old_before, old_after))
    assert refused and all("can not be less than status.capacity" in p[0][2] for p in refused.values())


# ---- the update rules, against what the API server refuses ----

def claim(storage: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "n"},
            "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": "pv",
                     "volumeMode": "Filesystem", "resources": {"requests": {"storage": storage}}, **spec}}


@pytest.mark.parametrize("old, new, phase, status, classes, refused_by", [
    # ValidatePersistentVolumeClaimUpdate lets a bound claim's request change; admission refuses an
    # increase unless the class (never "") allows expansion.
    (claim("400Gi"), claim("500Gi"), "Bound", "400Gi", frozenset(), "PersistentVolumeClaimResize: only dynamically"),
    (claim("400Gi", storageClassName="fast"), claim("500Gi", storageClassName="fast"), "Bound", "400Gi",
     frozenset({"fast"}), None),
    (claim("400Gi", storageClassName="fast"), claim("500Gi", storageClassName="fast"), "Bound", "400Gi",
     frozenset(), "PersistentVolumeClaimResize: only dynamically"),
    # Not bound: the whole spec is immutable, and admission refuses the increase too.
    (claim("400Gi"), claim("500Gi"), "Pending", None, frozenset(), "spec is immutable"),
    # A decrease: refused down to status.capacity (RecoverVolumeExpansionFailure, GA since 1.34); above
    # it (an expansion that never completed) allowed.
    (claim("500Gi"), claim("450Gi"), "Bound", "500Gi", frozenset(), "can not be less than status.capacity"),
    (claim("500Gi"), claim("450Gi"), "Bound", "400Gi", frozenset(), None),
    (claim("400Gi"), claim("400Gi"), "Bound", "400Gi", frozenset(), None),
    (claim("400Gi"), claim("409600Mi"), "Bound", "400Gi", frozenset(), None),  # the same quantity
    (claim("1Gi"), claim("1Gi", volumeName="other"), "Bound", "400Gi", frozenset(), "spec is immutable"),
    (claim("1Gi", volumeName=""), claim("1Gi", volumeName="pv"), "Pending", None, frozenset(), None),
    (claim("1Gi"), claim("1Gi", volumeMode="Block"), "Bound", "400Gi", frozenset(), "field is immutable"),
])
def test_claim_update_rule(old, new, phase, status, classes, refused_by):
    problems = updates.pvc_update(old, new, phase, status, classes)
    if refused_by is None:
        assert problems == []
    else:
        assert any(refused_by in rule for _, _, rule in problems), problems


def test_pv_update_rule():
    """ValidatePersistentVolumeUpdate: the source is immutable, the capacity is not."""
    pv = next(r for r in resources(render_changed("staging")).values() if r.type == PV).inputs
    grown = copy.deepcopy(pv)
    grown["spec"]["capacity"]["storage"] = "900Gi"
    assert updates.pv_update(pv, grown) == []
    moved = copy.deepcopy(pv)
    moved["spec"]["nfs"]["server"] = "nfs2.storage.internal"
    assert [f for f, _, _ in updates.pv_update(pv, moved)] == ["spec.persistentvolumesource"]
    unset = copy.deepcopy(pv)
    unset["spec"]["nfs"].pop("readOnly")   # a false bool and an absent one are the same field
    pv["spec"]["nfs"]["readOnly"] = False
    assert updates.pv_update(pv, unset) == []
    with pytest.raises(updates.NotPorted):
        updates.pv_update(pv, {**pv, "spec": {**pv["spec"], "nodeAffinity": {}}})


# ---- case 5: a new storage source ----

SOURCE_CHANGES = {
    "staging nfs.server": ("staging", nested("nfs", "server", value="nfs2.storage.internal")),
    "staging nfs.path": ("staging", nested("nfs", "path", value="/exports/llm/models-v2")),
    "dev cephfs.path": ("dev", nested("cephfs", "path", value="/volumes/llm/models-v2")),
    "dev cephfs.clusterId": ("dev", nested("cephfs", "clusterId", value="ceph-dev-2")),
    "prod cephfs.fsName": ("prod", nested("cephfs", "fsName", value="cephfs2")),
}


def keep(vol: dict) -> None:
    pass


def to_in_tree(vol: dict) -> None:
    vol["cephfs"].update(driver="in-tree", monitors=["10.0.0.1:6789"])


def more_monitors(vol: dict) -> None:
    vol["cephfs"].update(driver="in-tree", monitors=["10.0.0.1:6789", "10.0.0.2:6789"])


@pytest.mark.parametrize("what", sorted(SOURCE_CHANGES))
def test_a_new_source_creates_the_new_pair_first_and_deletes_the_old_one_last(what):
    """Before: the PVs keep their names, the provider replaces them delete-first while they are Bound
    (pv-protection holds them: `pulumi up` fails after the delete timeout). Now: new names, created
    first; the engine pods roll onto the new claim (a Deployment update); the old claims, then the
    old PVs, go after every create and update."""
    stack, change = SOURCE_CHANGES[what]
    before, after = resources(render_stack_fresh(stack)), resources(render_changed(stack, modelVolume=change))
    steps = plan(before, after)
    pair = volume_pair(after)
    for name, r in pair.items():
        s = steps[r.urn]
        assert (s.action, s.delete_first) == ("replace", False), (name, s)
        assert before[r.urn].identity != r.identity
    assert updates_refused(before, after, steps) == {}
    # The engine pods roll onto the new claim: an update of the Deployment, after the new claims.
    serving_claim = next(r for r in pair.values() if r.type == PVC and "ReadOnlyMany" in r.inputs["spec"]["accessModes"])
    readers = [r for r in after.values() if r.type != PV and mounts(r.inputs, serving_claim.identity[1])]
    engines = [r for r in readers if r.type != JOB]
    assert engines
    for r in engines:   # Deployment, StormService: their pods roll, GPU by GPU as their strategy says
        s = steps[r.urn]
        assert s.action == "update" and any("template" in f for f in s.fields), (r.urn, s)
        assert depends_on(after, r.urn, serving_claim.urn)
    # The old objects go last, claims before their PVs (pv-protection lets a PV go once unbound).
    waves = deletes_at_the_end(before, steps)
    flat = [before[u].type for wave in waves for u in wave if u in {r.urn for r in pair.values()}]
    assert flat == [PVC, PVC, PV, PV]
    # The program before this change: the same change replaced the Bound PVs under their own names,
    # delete first.
    old_before, old_after = previous_program(before), previous_program(after)
    old_steps = plan(old_before, old_after)
    assert [(s.action, s.delete_first) for u, s in old_steps.items() if old_after[u].type == PV] == [("replace", True)] * 2


@pytest.mark.parametrize("before_change, after_change", [(keep, to_in_tree), (to_in_tree, more_monitors)],
                         ids=["csi -> in-tree", "in-tree monitors"])
def test_monitors_and_the_driver_are_part_of_the_source(before_change, after_change):
    """In-tree CephFS (Kubernetes before 1.31): the switch from ceph-csi and the monitors rename the pair."""
    old_k8s = nested("kubernetesVersion", value="1.30")
    before = resources(render_changed("dev", cluster=old_k8s, modelVolume=before_change))
    after = resources(render_changed("dev", cluster=old_k8s, modelVolume=after_change))
    steps = plan(before, after)
    assert [(steps[r.urn].action, steps[r.urn].delete_first) for r in volume_pair(after).values()] == [("replace", False)] * 4


_fresh: dict[str, runtime.Rendered] = {}


def render_stack_fresh(stack: str) -> runtime.Rendered:
    if stack not in _fresh:
        _fresh[stack] = render_changed(stack)
    return _fresh[stack]


CEPHFS = {"driver": "csi", "clusterId": "c", "fsName": "f", "path": "/p", "user": "u"}


def to_cephfs(vol: dict, **fields) -> None:
    vol.update(kind="cephfs", cephfs={**CEPHFS, **fields})
    vol.pop("nfs", None)


# (what changes, the staging volume before, after): every field of the model volume section.
VOLUME_FIELDS = [
    ("capacityGiB", keep, nested("capacityGiB", value=777)),
    ("mountPath", keep, nested("mountPath", value="/weights")),
    ("nfs.server", keep, nested("nfs", "server", value="other")),
    ("nfs.path", keep, nested("nfs", "path", value="/other")),
    ("kind nfs -> cephfs", keep, to_cephfs),
    ("cephfs.user (csi: the Secret's, not the PV's)", to_cephfs, lambda v: to_cephfs(v, user="other")),
    ("cephfs.path", to_cephfs, lambda v: to_cephfs(v, path="/q")),
    ("cephfs.clusterId", to_cephfs, lambda v: to_cephfs(v, clusterId="d")),
    ("cephfs.fsName", to_cephfs, lambda v: to_cephfs(v, fsName="g")),
]


@pytest.mark.parametrize("label, base, change", VOLUME_FIELDS, ids=[f[0] for f in VOLUME_FIELDS])
def test_a_pv_is_renamed_exactly_when_its_volume_source_changes(label, base, change):
    """By construction: whatever changes the source a PV carries changes its name and its claim's,
    and nothing else does, so no change ever reaches a same-name PV replacement."""
    before = volume_pair(resources(render_changed("staging", modelVolume=base)))
    after = volume_pair(resources(render_changed("staging", modelVolume=change)))
    for name, r in after.items():
        if r.type != PV:
            continue
        sources = []
        for pv in (before[name], r):
            src = copy.deepcopy({k: v for k, v in pv.inputs["spec"].items() if k in PV_SOURCES})
            for v in src.values():
                v.pop("volumeHandle", None)   # the CSI handle is the PV's own name
            sources.append(src)
        renamed = before[name].identity != r.identity
        assert (sources[0] != sources[1]) == renamed, label
        claim_of = {c.inputs["spec"]["volumeName"]: c.identity[1] for c in after.values() if c.type == PVC}
        assert r.inputs["spec"]["claimRef"]["name"] == claim_of[r.identity[1]]


def test_names_are_valid_for_every_namespace_and_distinct():
    """The longest namespace (63 characters) still gives valid PV names and label values, distinct
    for the two claims and for two sources; the claim names are short DNS labels."""
    ns = "n" * 63
    names = set()
    for tag in ("0" * 8, "f" * 8):
        for base in (derived.SERVING_CLAIM, derived.SYNC_CLAIM):
            claim_name = derived.claim_name(base, tag)
            pv_name = derived.volume_name(ns, claim_name)
            assert apiserver.dns1123_label(claim_name) == [] and len(claim_name) <= 25
            assert apiserver.dns1123_label(pv_name) == [] and apiserver.label_value(pv_name) == []
            names.add(pv_name)
    assert len(names) == 4


def test_the_exported_claim_is_the_serving_claim_and_follows_the_source():
    before = render_changed("staging")
    after = render_changed("staging", modelVolume=nested("nfs", "server", value="nfs2.storage.internal"))
    for r in (before, after):
        claims = [x.inputs for x in r.resources if x.type == PVC and "ModelVolume" in x.engine_urn]
        serving = next(c for c in claims if c["spec"]["accessModes"] == ["ReadOnlyMany"])
        assert r.outputs["modelClaimName"] == serving["metadata"]["name"]
        assert r.outputs["modelClaimName"].startswith("model-store-")
    assert before.outputs["modelClaimName"] != after.outputs["modelClaimName"]


def test_the_first_up_with_this_program_moves_an_existing_stack_once():
    """An existing stack (the previous program's state) and this program, same stack file: the pair
    is renamed (created first, the old one deleted at the end), the engine pods roll once onto the new
    claim, the sync Job re-runs (its claim changed) and no claim is ever updated in place."""
    for stack in ("dev", "staging", "prod"):
        now = resources(render_stack_fresh(stack))
        steps = plan(previous_program(now), now)
        pair = volume_pair(now)
        assert [(steps[r.urn].action, steps[r.urn].delete_first) for r in pair.values()] == [("replace", False)] * 4
        serving = next(r.identity[1] for r in pair.values() if r.type == PVC and "ReadOnlyMany" in r.inputs["spec"]["accessModes"])
        moved = {u: s for u, s in steps.items() if s.action != "same" and now[u].type not in (PV, PVC, JOB)}
        assert moved, stack
        for u, s in moved.items():   # the engine workloads (Deployment, StormService): one roll
            assert mounts(now[u].inputs, serving) and s.action == "update", (stack, u, s)
        sync = [s for u, s in steps.items() if now[u].type == JOB and "sync-" in u]
        assert [(s.action, s.delete_first) for s in sync] == [("replace", True)]


# ---- case 8: a re-run of the sync Job keeps the marker of a verified revision ----

MARKER = ".llm-serving-ready.json"
CACHE = ".digests.json"


def make_model(root: Path, shards: int = 3) -> Path:
    import hashlib
    root.mkdir(parents=True, exist_ok=True)
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for n in names:
        (root / n).write_bytes(os.urandom(64))
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {f"l.{i}": n for i, n in enumerate(names)}}))
    for f in ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json"):
        (root / f).write_text("{}")
    lines = [f"{hashlib.sha256((root / n).read_bytes()).hexdigest()}  {n}" for n in sorted(os.listdir(root))]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    # The scripts ConfigMap's record of the directory's required files (components/scripts.py).
    required_files(root).write_text(json.dumps({root.parent.name: list(deepseek_v4.REQUIRED_FILES)}))
    return root


def required_files(model: Path) -> Path:
    return model.parent.parent / "model_files.json"


def verify_args(model: Path, shards: int = 3, pinned: str = "") -> list[str]:
    return ["--model-dir", str(model), "--revision", "r1", "--expected-shards", str(shards), "--marker", MARKER,
            "--workers", "2", "--digest-cache", CACHE, "--manifest-sha256", pinned,
            "--required-files", str(required_files(model))]


def gate(model: Path, shards: int = 3, pinned: str = "") -> list[str]:
    return model_gate.gate_problems(str(model), "r1", shards, MARKER, pinned, str(required_files(model)))


def test_a_reverify_keeps_the_marker_while_it_runs_and_replaces_it_in_one_rename(tmp_path, monkeypatch, capsys):
    model = make_model(tmp_path / "m")
    assert verify_model.main(verify_args(model)) == 0
    first = (model / MARKER).read_text()
    seen = []
    real = verify_model.Digests.verified

    def during(self, names):
        seen.append(gate(model))    # a pod that starts while the verifier runs
        return real(self, names)

    monkeypatch.setattr(verify_model.Digests, "verified", during)
    inode = (model / MARKER).stat().st_ino
    assert verify_model.main(verify_args(model)) == 0
    assert seen == [[]]
    assert (model / MARKER).read_text() == first and (model / MARKER).stat().st_ino != inode
    capsys.readouterr()


@pytest.mark.parametrize("how, shards, pinned", [("another pin", 3, "0" * 64), ("another shard count", 4, "")])
def test_a_failed_reverify_that_changed_nothing_leaves_the_marker(tmp_path, capsys, how, shards, pinned):
    """The files are what the marker recorded; the gate applies the new settings itself."""
    model = make_model(tmp_path / "m")
    assert verify_model.main(verify_args(model)) == 0
    before = (model / MARKER).read_text()
    assert verify_model.main(verify_args(model, shards, pinned)) == 1
    assert "stays: no file it vouches for changed" in capsys.readouterr().err
    assert (model / MARKER).read_text() == before
    assert gate(model) == []                      # pods of the old settings still start
    assert gate(model, shards, pinned) != []      # pods of the new settings do not


def test_a_file_that_fails_takes_the_marker_with_it(tmp_path, capsys):
    """Files changed underneath (replaced as the CLI replaces one, other bytes of the same size): the
    digest no longer matches, the file goes and so does the marker that vouched for it."""
    model = make_model(tmp_path / "m")
    assert verify_model.main(verify_args(model)) == 0
    shard = model / "model-00002-of-00003.safetensors"
    tmp = shard.with_name(shard.name + ".a1B2c3D4")
    tmp.write_bytes(os.urandom(64))
    os.rename(tmp, shard)
    assert gate(model) == [], "same size: the gate alone cannot tell"
    assert verify_model.main(verify_args(model)) == 1
    assert not shard.exists() and not (model / MARKER).exists() and gate(model) != []
    capsys.readouterr()


FAKE_AWS = """#!/bin/sh
echo "$*" >> "$AWS_LOG"
case " $* " in *" s3 ls "*) cat "$AWS_LISTING"; exit 0;; esac
case " $* " in *" --dryrun "*) [ -f "$AWS_DRYRUN_FAILS" ] && exit 1; cat "$AWS_DRYRUN"; exit 0;; esac
exit 0
"""
LISTING = "2026-07-31 10:00:00 1 SHA256SUMS\n2026-07-31 10:00:00 1 config.json\n2026-07-31 10:00:00 1 model.safetensors.index.json\n"


def fake_sync(tmp_path: Path, dryrun: str, dryrun_fails: bool = False, marker: bool = True):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(FAKE_AWS)
    aws.chmod(aws.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "listing").write_text(LISTING)
    (tmp_path / "dryrun").write_text(dryrun)
    if dryrun_fails:
        (tmp_path / "fails").write_text("")
    dest = tmp_path / "models" / "m"
    dest.mkdir(parents=True)
    if marker:
        (dest / MARKER).write_text('{"revision": "m"}')
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_LOG": str(tmp_path / "log"),
           "AWS_LISTING": str(tmp_path / "listing"), "AWS_DRYRUN": str(tmp_path / "dryrun"),
           "AWS_DRYRUN_FAILS": str(tmp_path / "fails"), "BUCKET": "b", "PREFIX": "models/m", "DEST": str(dest),
           "MARKER": MARKER, "DIGEST_CACHE": CACHE, "SYNC_ATTEMPTS": "2", "RETRY_DELAY_SECONDS": "0",
           "AWS_CONFIG_FILE": str(tmp_path / "aws-config")}
    proc = subprocess.run(["/bin/sh", str(SCRIPTS / "sync_model.sh")], env=env, capture_output=True, text=True)
    calls = [c for c in (tmp_path / "log").read_text().splitlines() if " sync " in f" {c} "]
    return proc, calls, dest


def test_an_unchanged_bucket_is_not_synced_and_the_marker_stays(tmp_path):
    proc, calls, dest = fake_sync(tmp_path, dryrun="")
    assert proc.returncode == 0, proc.stderr
    assert [c.endswith(" --dryrun") for c in calls] == [True]
    assert (dest / MARKER).exists() and "its ready marker stays" in proc.stdout


def test_a_changed_bucket_drops_the_marker_before_the_sync_and_says_why(tmp_path):
    change = "(dryrun) download: s3://b/models/m/config.json to models/m/config.json\n"
    proc, calls, dest = fake_sync(tmp_path, dryrun=change)
    assert proc.returncode == 0, proc.stderr
    assert [c.endswith(" --dryrun") for c in calls] == [True, False]
    assert not (dest / MARKER).exists()
    assert "differs from the verified revision" in proc.stderr and "(1 changes)" in proc.stderr
    assert change.strip() in proc.stderr


def test_a_failed_dry_run_is_a_failed_attempt_that_touches_nothing(tmp_path):
    proc, calls, dest = fake_sync(tmp_path, dryrun="", dryrun_fails=True)
    assert proc.returncode == 1 and "sync failed after 2 attempts" in proc.stderr
    assert all(c.endswith(" --dryrun") for c in calls) and len(calls) == 2
    assert (dest / MARKER).exists()


def test_without_a_marker_the_sync_runs_at_once(tmp_path):
    proc, calls, dest = fake_sync(tmp_path, dryrun="", marker=False)
    assert proc.returncode == 0 and [c.endswith(" --dryrun") for c in calls] == [False]


# ---- case 8 for real: the rendered Job twice, the real AWS CLI, the local S3 server ----

@pytest.fixture(scope="module")
def real():
    import test_sync_real  # skips (or, in CI, fails) when .venv-s3 is missing, as that file does
    return test_sync_real


@pytest.fixture(scope="module")
def local_s3(real, tmp_path_factory):
    server = real.LocalS3(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()


def pipeline(real, **sections):
    return real.rendered_model_pipeline(render_changed("dev", **sections))


def run_job(real, pod) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess, list[bool]]:
    """The Job's pod: the verify container beside the download, started first; the marker's presence
    sampled while both run. Each run is a new pod of the (re-run) Job, so the emptyDir the two
    containers share starts empty: reused, the previous run's exit-code file could be read by the new
    verifier before the new download container removes it (sync_model.sh's first step), and the
    verifier would end on the old files; a real pod never has that file at its start."""
    work = pod.root / "work"
    shutil.rmtree(work)
    work.mkdir()
    samples: list[bool] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            samples.append(real.marker(pod).exists())
            stop.wait(0.005)

    verify = pod.start_verify()
    t = threading.Thread(target=watch)
    t.start()
    sync = pod.start_sync(RETRY_DELAY_SECONDS="0", AWS_MAX_ATTEMPTS="1")
    try:
        s_out, s_err = sync.communicate(timeout=120)
        v_out, v_err = verify.communicate(timeout=120)
    finally:
        stop.set()
        t.join()
    return (subprocess.CompletedProcess(sync.args, sync.returncode, s_out, s_err),
            subprocess.CompletedProcess(verify.args, verify.returncode, v_out, v_err), samples)


def test_a_settings_change_reruns_the_job_and_the_served_revision_stays_ready(real, local_s3, tmp_path):
    """Verified once; then the Job of another render (cpuRequest, keepRevisions with the capacity it
    needs) runs on the same volume and bucket, as `pulumi up` replaces it: the marker is there
    throughout, the gate passes, the marker is replaced after the pass; then the server dies during a
    third re-run: it fails, and the marker of the served revision is still there."""
    first = real.new_pod(local_s3, pipeline(real), tmp_path)
    model = real.fake_model(tmp_path / "upload")
    real.put_model(local_s3, *real.bucket_of(first), model)
    sync, verify, _ = run_job(real, first)
    assert sync.returncode == 0 and verify.returncode == 0, (sync.stderr, verify.stderr)
    marker = real.marker(first)
    recorded, inode = marker.read_text(), marker.stat().st_ino
    files = real.digest_tree(first.model_dir())

    changed_pipeline = pipeline(real, modelSync=nested("cpuRequest", value=6),
                                models=first_model(lambda m: m.update(keepRevisions=3)),
                                modelVolume=nested("capacityGiB", value=500))
    assert changed_pipeline[1].args != first.verify.args, "the settings change must reach the Job"
    again = real.Pod(first.root, local_s3, *changed_pipeline)
    sync, verify, samples = run_job(real, again)
    assert sync.returncode == 0 and verify.returncode == 0, (sync.stderr, verify.stderr)
    assert "nothing downloaded, its ready marker stays" in sync.stdout
    assert samples and all(samples), "the marker went away during the re-run"
    assert marker.read_text() == recorded and marker.stat().st_ino != inode
    assert real.digest_tree(first.model_dir()) == files and again.run_gate().returncode == 0

    local_s3.front.dead = True
    try:
        sync, verify, samples = run_job(real, again)
    finally:
        local_s3.front.dead = False
    assert sync.returncode == 1 and verify.returncode == 1
    assert all(samples) and marker.read_text() == recorded and again.run_gate().returncode == 0


def test_a_bucket_that_changed_under_the_revision_is_synced_and_never_marked_ready_unverified(real, local_s3, tmp_path):
    """The bucket's copy of the verified revision now differs (one shard re-uploaded with other bytes,
    the manifest left as it was): the dry run names it, the marker goes before the download changes
    anything, the new shard fails the manifest and is removed, and no marker is left."""
    pod = real.new_pod(local_s3, pipeline(real), tmp_path)
    model = real.fake_model(tmp_path / "upload")
    real.put_model(local_s3, *real.bucket_of(pod), model)
    sync, verify, _ = run_job(real, pod)
    assert sync.returncode == 0 and verify.returncode == 0
    shard = model / "model-00007-of-00048.safetensors"
    shard.write_bytes(os.urandom(shard.stat().st_size + 32))
    real.put_model(local_s3, *real.bucket_of(pod), model)
    sync, verify, _ = run_job(real, pod)
    assert sync.returncode == 0, sync.stderr
    assert "differs from the verified revision" in sync.stderr and shard.name in sync.stderr
    assert verify.returncode == 1 and f"sha256 mismatch for {shard.name}" in verify.stderr
    assert not real.marker(pod).exists() and pod.run_gate().returncode == 1
