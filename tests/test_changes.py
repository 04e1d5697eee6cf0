"""The offline update planner (render/changes.py, render/update_rules.py, apivalidation/updates.py): each
ported rule on small synthetic record pairs, then `python -m render --previous` on real renders of the
pairs in tests/update_pairs.py (their expected verdicts live in that one table).

Upstream files the expectations come from: pulumi/pulumi-kubernetes v4.32.0 provider/pkg/provider/
diff.go and provider.go Diff; pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go and step.go;
kubernetes/kubernetes v1.37.2 pkg/apis/*/validation and plugin/pkg/admission/storage/persistentvolume/
resize; the pv/pvc-protection controllers."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
from conftest import PROJECT_DIR, render_stack
from update_pairs import APPLIES, PAIRS, REFUSED, variant_project

from apivalidation.updates import check_update
from components.time_to_serving import IMAGE_PULL_SECONDS, time_to_serving
from render import changes, output, runtime, update_rules
from render.changes_md import changes_md

# make test runs --dist loadgroup: one worker takes the whole file, so the base renders of the module fixture, once.
pytestmark = pytest.mark.xdist_group("changes")


STACK, PROJECT = "s", "p"
PROVIDER = "pulumi:providers:kubernetes::kubernetes"
GPU = "nvidia.com/gpu"


def urn(type_: str, name: str, parent: str = "") -> str:
    return update_rules.create_urn(name, type_, parent, PROJECT, STACK)


def k8s_type(obj: dict) -> str:
    group, version = update_rules.group_version(obj["apiVersion"])
    return f"kubernetes:{group or 'core'}/{version}:{obj['kind']}"


def rec(obj: dict, name: str | None = None, parent: str = "", **options) -> dict:
    type_ = k8s_type(obj)
    name = name or obj["metadata"]["name"]
    u = urn(type_, name, parent)
    return {"urn": u, "engineUrn": u, "engineParent": parent, "type": type_, "name": name, "custom": True,
            "parent": "", "provider": PROVIDER, "inputs": obj,
            "options": {"protect": False, "retainOnDelete": False, "deleteBeforeReplace": False,
                        "deleteBeforeReplaceDefined": False, "customTimeouts": {}, "dependsOn": [],
                        "ignoreChanges": [], "replaceOnChanges": [], "aliases": [], **options}}


def provider(**inputs) -> dict:
    u = urn("pulumi:providers:kubernetes", "kubernetes")
    return {"urn": u, "engineUrn": u, "engineParent": "", "type": "pulumi:providers:kubernetes", "name": "kubernetes",
            "custom": True, "parent": "", "provider": "", "inputs": {"clusterIdentifier": "c", **inputs},
            "options": {}}


def obj(kind: str, name: str, ns: str | None = "ns", api: str = "v1", **body) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": api, "kind": kind, "metadata": meta, **body}


def plan(old: list[dict], new: list[dict], budget: int | None = None, prov_old=None, prov_new=None) -> changes.Plan:
    outputs = {} if budget is None else {"gpuBudget": budget}
    return changes.plan([prov_old or provider(), *old], [prov_new or provider(), *new], outputs, outputs, stack=STACK)


def step(p: changes.Plan, object_text: str) -> changes.Step:
    return next(s for s in p.steps if s.object == object_text)


def edited(record: dict, edit) -> dict:
    out = copy.deepcopy(record)
    edit(out["inputs"])
    return out


# ---- the provider's replace lists and delete-before-replace decision (diff.go, provider.go Diff) ----

def pv(name="vol", root="/a", claim="claim", size="100Gi") -> dict:
    return obj("PersistentVolume", name, None, spec={
        "capacity": {"storage": size}, "accessModes": ["ReadOnlyMany"], "storageClassName": "",
        "claimRef": {"name": claim, "namespace": "ns"},
        "csi": {"driver": "cephfs.csi.ceph.com", "volumeHandle": name, "volumeAttributes": {"rootPath": root}}})


def claim(name="claim", size="100Gi", volume="vol", storage_class="") -> dict:
    return obj("PersistentVolumeClaim", name, spec={
        "accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": size}},
        "storageClassName": storage_class, "volumeName": volume})


def test_a_pv_source_change_replaces_delete_first_and_pv_protection_holds_the_bound_volume():
    old = [rec(pv(), "pv"), rec(claim(), "pvc")]
    new = [rec(pv(root="/b"), "pv"), rec(claim(), "pvc")]
    p = plan(old, new)
    s = step(p, "PersistentVolume vol")
    assert (s.action, s.order, s.fields) == (changes.REPLACE, changes.DELETE_FIRST, ["spec.csi.volumeAttributes.rootPath"])
    assert any("kubernetes.io/pv-protection" in line and "ns/claim" in line for line in p.problems)
    # Without its claim in the stack, nothing holds the PV.
    assert not plan([old[0]], [new[0]]).problems


def test_pv_capacity_is_not_on_the_replace_list_and_updates_in_place():
    p = plan([rec(pv(), "pv")], [rec(pv(size="200Gi"), "pv")])
    s = step(p, "PersistentVolume vol")
    assert (s.action, s.fields) == (changes.UPDATE, ["spec.capacity.storage"]) and not p.problems


def test_a_new_object_name_replaces_create_first():
    old = rec(obj("ConfigMap", "a", data={"k": "v"}), "cm")
    s = step(plan([old], [edited(old, lambda o: o["metadata"].update(name="b"))]), "ConfigMap ns/b")
    assert (s.action, s.order, s.fields) == (changes.REPLACE, changes.CREATE_FIRST, ["metadata.name"])


def test_a_job_template_change_replaces_delete_first_under_the_same_name():
    job = rec(obj("Job", "sync", api="batch/v1", spec={"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}))
    new = edited(job, lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="b"))
    s = step(plan([job], [new]), "Job ns/sync")
    assert (s.action, s.order, s.fields) == (changes.REPLACE, changes.DELETE_FIRST,
                                             ["spec.template.spec.containers[0].image"])
    # backoffLimit is not on the list: an in-place update.
    assert step(plan([job], [edited(job, lambda o: o["spec"].update(backoffLimit=2))]), "Job ns/sync").action == changes.UPDATE


@pytest.mark.parametrize("kind,field,mutable_flag", [("Secret", "stringData", "enableSecretMutable"),
                                                     ("ConfigMap", "data", "enableConfigMapMutable")])
def test_secret_and_configmap_data_replace_unless_the_provider_makes_them_mutable(kind, field, mutable_flag):
    old = rec(obj(kind, "x", **{field: {"k": "1"}}))
    new = edited(old, lambda o: o[field].update(k="2"))
    assert step(plan([old], [new]), f"{kind} ns/x").action == changes.REPLACE
    mutable = provider(**{mutable_flag: "true"})
    assert step(plan([old], [new], prov_old=mutable, prov_new=mutable), f"{kind} ns/x").action == changes.UPDATE
    # immutable: true keeps the replacement whatever the provider says.
    frozen_old = edited(old, lambda o: o.update(immutable=True))
    frozen_new = edited(new, lambda o: o.update(immutable=True))
    assert step(plan([frozen_old], [frozen_new], prov_old=mutable, prov_new=mutable),
                f"{kind} ns/x").action == changes.REPLACE


def test_only_a_policy_v1beta1_pdb_replaces_on_spec():
    for api, action in (("policy/v1", changes.UPDATE), ("policy/v1beta1", changes.REPLACE)):
        old = rec(obj("PodDisruptionBudget", "pdb", api=api, spec={"maxUnavailable": 1}))
        new = edited(old, lambda o: o["spec"].update(maxUnavailable=2))
        assert step(plan([old], [new]), "PodDisruptionBudget ns/pdb").action == action, api


def test_a_custom_resource_replaces_only_on_its_identity():
    old = rec(obj("StormService", "svc", api="orchestration.aibrix.ai/v1alpha1", spec={"replicas": 1}))
    assert step(plan([old], [edited(old, lambda o: o["spec"].update(replicas=2))]),
                "StormService ns/svc").action == changes.UPDATE
    moved = step(plan([old], [edited(old, lambda o: o["metadata"].update(namespace="other"))]), "StormService other/svc")
    assert (moved.action, moved.order, moved.fields) == (changes.REPLACE, changes.CREATE_FIRST, ["metadata.namespace"])


def test_a_service_cluster_ip_change_replaces():
    old = rec(obj("Service", "api", spec={"clusterIP": "10.0.0.1", "ports": [{"port": 80}]}))
    s = step(plan([old], [edited(old, lambda o: o["spec"].update(clusterIP="10.0.0.2"))]), "Service ns/api")
    assert (s.action, s.order) == (changes.REPLACE, changes.DELETE_FIRST)


def test_autonamed_objects_replace_create_first():
    old = rec(obj("Job", "j-abc", api="batch/v1", spec={"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}))
    old["inputs"]["metadata"]["annotations"] = {"pulumi.com/autonamed": "true"}
    new = edited(old, lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="b"))
    assert step(plan([old], [new]), "Job ns/j-abc").order == changes.CREATE_FIRST


# ---- the engine's options (step_generator.go) ----

def test_ignore_changes_drops_the_paths_it_names():
    old = rec(obj("Deployment", "d", api="apps/v1", spec={"replicas": 1, "paused": False}), ignoreChanges=["spec.replicas"])
    new = edited(old, lambda o: o["spec"].update(replicas=3))
    assert step(plan([old], [new]), "Deployment ns/d").action == changes.SAME
    both = edited(new, lambda o: o["spec"].update(paused=True))
    assert step(plan([old], [both]), "Deployment ns/d").fields == ["spec.paused"]


def test_replace_on_changes_turns_an_update_into_a_replacement():
    old = rec(obj("ConfigMap", "c", data={"k": "1"}), replaceOnChanges=["metadata.labels"])
    old["inputs"]["metadata"]["labels"] = {"a": "1"}
    mutable = provider(enableConfigMapMutable="true")
    new = edited(old, lambda o: o["metadata"]["labels"].update(a="2"))
    s = step(plan([old], [new], prov_old=mutable, prov_new=mutable), "ConfigMap ns/c")
    assert (s.action, s.fields) == (changes.REPLACE, ['metadata.labels.a'])


def test_the_delete_before_replace_option_overrides_the_provider_both_ways():
    old = rec(obj("ConfigMap", "a", data={"k": "v"}), "cm")
    renamed = edited(old, lambda o: o["metadata"].update(name="b"))
    renamed["options"].update(deleteBeforeReplace=True, deleteBeforeReplaceDefined=True)
    assert step(plan([old], [renamed]), "ConfigMap ns/b").order == changes.DELETE_FIRST
    # deleteBeforeReplace=False set explicitly: create-first under the same name collides.
    data = edited(old, lambda o: o["data"].update(k="w"))
    data["options"].update(deleteBeforeReplace=False, deleteBeforeReplaceDefined=True)
    p = plan([old], [data])
    assert step(p, "ConfigMap ns/a").order == changes.CREATE_FIRST
    assert any("AlreadyExists" in line for line in p.problems)


def test_an_alias_matches_the_old_urn_and_a_parent_alias_is_inherited():
    comp_type = "llm-serving:x:Comp"
    old_parent = {"urn": urn(comp_type, "old"), "engineUrn": urn(comp_type, "old"), "engineParent": "",
                  "type": comp_type, "name": "old", "custom": False, "inputs": {}, "options": {}, "provider": ""}
    old_child = rec(obj("ConfigMap", "c", data={"k": "v"}), "old-cm", parent=old_parent["engineUrn"])
    new_parent = {**old_parent, "urn": urn(comp_type, "new"), "engineUrn": urn(comp_type, "new"), "name": "new",
                  "options": {"aliases": [{"name": "old"}]}}
    new_child = rec(obj("ConfigMap", "c", data={"k": "v"}), "new-cm", parent=new_parent["engineUrn"])
    p = plan([old_parent, old_child], [new_parent, new_child])
    assert {s.action for s in p.steps} == {changes.SAME} and step(p, "ConfigMap ns/c").alias == old_child["engineUrn"]
    # Without the alias: a new component and ConfigMap beside the old ones, and the same object name twice.
    unaliased = plan([old_parent, old_child], [{**new_parent, "options": {}}, new_child])
    assert step(unaliased, f"{comp_type} new").action == changes.CREATE
    assert any("AlreadyExists" in line for line in unaliased.problems)


def test_deleting_or_replacing_a_protected_resource_fails_and_retain_on_delete_only_drops_it():
    claim_rec = rec(claim(storage_class="fast"), "pvc", protect=True)
    p = plan([claim_rec], [])
    assert step(p, "PersistentVolumeClaim ns/claim").action == changes.DELETE
    assert any("cannot be deleted because it is protected" in line for line in p.problems)
    replaced = edited(claim_rec, lambda o: o["spec"].update(storageClassName="slow"))
    assert any("unable to replace resource" in line for line in plan([claim_rec], [replaced]).problems)
    retained = rec(claim(), "pvc", retainOnDelete=True)
    p = plan([retained], [])
    assert not p.problems and "retainOnDelete" in step(p, "PersistentVolumeClaim ns/claim").notes[0]
    # Retained and replaced delete-first: the old object stays and the create collides with it.
    moved = edited(retained, lambda o: o["spec"].update(storageClassName="other"))
    assert any("retainOnDelete keeps the old object" in line for line in plan([retained], [moved]).problems)


def test_the_provider_replaced_replaces_everything_it_manages():
    cm = rec(obj("ConfigMap", "c", data={}))
    p = plan([cm], [cm], prov_old=provider(clusterIdentifier="a"), prov_new=provider(clusterIdentifier="b"))
    assert step(p, "ConfigMap ns/c").fields == ["provider"]
    # The same cluster identifier under a new default namespace: an update of the provider only.
    p = plan([cm], [cm], prov_old=provider(namespace="a"), prov_new=provider(namespace="b"))
    assert step(p, "ConfigMap ns/c").action == changes.SAME
    assert step(p, "pulumi:providers:kubernetes kubernetes").action == changes.UPDATE


def test_an_older_render_without_engine_urns_or_the_new_options_is_read_with_defaults():
    old = rec(obj("Job", "j", api="batch/v1", spec={"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}),
              deleteBeforeReplace=True)
    for key in ("engineUrn", "engineParent"):
        old.pop(key)
    for key in ("deleteBeforeReplaceDefined", "ignoreChanges", "replaceOnChanges", "aliases"):
        old["options"].pop(key)
    renamed = edited(rec(old["inputs"], deleteBeforeReplace=True, deleteBeforeReplaceDefined=True),
                     lambda o: o["metadata"].update(name="k"))
    renamed["name"], renamed["urn"] = "j", old["urn"]
    s = step(plan([old], [renamed]), "Job ns/k")
    # Matched by urn; a set deleteBeforeReplace counts as defined.
    assert (s.action, s.order) == (changes.REPLACE, changes.DELETE_FIRST)
    assert update_rules.options(old)["deleteBeforeReplaceDefined"] is True


# ---- the API server on in-place updates (apivalidation/updates.py) ----

def test_a_static_claim_resize_is_refused_and_an_expandable_class_allows_it():
    old, new = rec(claim(), "pvc"), rec(claim(size="200Gi"), "pvc")
    p = plan([old], [new])
    assert step(p, "PersistentVolumeClaim ns/claim").action == changes.UPDATE
    assert any("only dynamically provisioned pvc can be resized" in line for line in p.problems)
    sc = rec(obj("StorageClass", "fast", None, api="storage.k8s.io/v1", provisioner="x", allowVolumeExpansion=True))
    old_fast, new_fast = rec(claim(storage_class="fast"), "pvc"), rec(claim(size="200Gi", storage_class="fast"), "pvc")
    assert not plan([sc, old_fast], [sc, new_fast]).problems
    shrunk = plan([sc, new_fast], [sc, old_fast])
    # RecoverVolumeExpansionFailure (GA, locked on since 1.34): a claim may shrink back only above its
    # status.capacity, which offline is taken to be what it asked for.
    assert any("can not be less than status.capacity" in line for line in shrunk.problems)


def test_update_rules_name_the_immutable_fields():
    dep = obj("Deployment", "d", api="apps/v1", spec={"selector": {"matchLabels": {"a": "1"}}})
    assert check_update(dep, {**dep, "spec": {"selector": {"matchLabels": {"a": "2"}}}}) == [("spec.selector", "field is immutable")]
    sts = obj("StatefulSet", "s", api="apps/v1", spec={"serviceName": "a", "replicas": 1})
    assert check_update(sts, {**sts, "spec": {"serviceName": "a", "replicas": 3}}) == []
    assert check_update(sts, {**sts, "spec": {"serviceName": "b", "replicas": 1}}) == [("spec.serviceName", "field is immutable")]
    secret = obj("Secret", "x", data={"k": "a"}, immutable=True)
    assert ("data", "field is immutable when `immutable` is set") in check_update(secret, {**secret, "data": {"k": "b"}})
    bound = claim()
    assert check_update(bound, {**bound, "spec": {**bound["spec"], "volumeMode": "Block"}})[0][0] == "spec"


def test_a_claim_replaced_delete_first_while_a_pod_mounts_it_is_held_by_pvc_protection():
    old_claim = rec(claim(), "pvc")
    user = rec(deployment("d", claims=["claim"]))
    moved = edited(old_claim, lambda o: o["spec"].update(volumeName="other"))
    p = plan([old_claim, user], [moved, user])
    assert any("kubernetes.io/pvc-protection" in line and "Deployment ns/d" in line for line in p.problems)


# ---- GPUs and downtime ----

def deployment(name: str, replicas: int = 1, gpus: int = 8, strategy: dict | None = None, image: str = "vllm:1",
               served: str = "M", claims: tuple = (), ns: str = "ns") -> dict:
    template = {"metadata": {"labels": {"model.aibrix.ai/name": served, "llm-serving.io/model": name},
                             "annotations": {"llm-serving.io/role": "engine"}},
                "spec": {"initContainers": [{"name": "model-gate", "image": image, "args": ["--model-dir", "/m/x"]}],
                         "containers": [{"name": "engine", "image": image, "args": ["vllm", "serve"],
                                         "resources": {"limits": {GPU: gpus}}}],
                         "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"m": name}}, "template": template}
    if strategy:
        spec["strategy"] = strategy
    return obj("Deployment", name, ns, api="apps/v1", spec=spec)


def sync_job(size_gib: float = 100) -> dict:
    job = obj("Job", "sync", api="batch/v1", spec={"template": {"spec": {"containers": [
        {"name": "download", "image": "aws", "env": [{"name": "DEST", "value": "/m/x"}]}]}}})
    job["metadata"]["annotations"] = {"llm-serving.io/model-size-gib": str(size_gib),
                                      "llm-serving.io/model-profile": "deepseek-v4"}
    return job


RECREATE = {"type": "Recreate"}


def test_a_renamed_gpu_workload_holds_old_and_new_until_phase_2():
    old = rec(deployment("a", strategy=RECREATE), "engine")
    p = plan([old], [rec(deployment("b", strategy=RECREATE), "engine-b")], budget=8)
    assert p.peak_gpus == 16
    assert any("needs 16 of budget 8 GPUs" in line and "`pulumi up` times out" in line for line in p.problems)
    assert plan([old], [rec(deployment("b", strategy=RECREATE), "engine-b")], budget=16).problems == []


def test_a_create_first_replacement_counts_both_and_a_delete_first_one_only_the_new():
    old = rec(deployment("a", strategy=RECREATE), "engine")
    moved = edited(old, lambda o: o["metadata"].update(namespace="other"))
    assert plan([old], [moved], budget=8).peak_gpus == 16
    moved["options"].update(deleteBeforeReplace=True, deleteBeforeReplaceDefined=True)
    p = plan([old], [moved], budget=8)
    assert p.peak_gpus == 8 and not p.problems
    model = p.models[0]
    assert model.verdict == "no serving" and "replaced delete-first" in model.why


def test_rollouts_add_the_surge_and_recreate_adds_nothing():
    rolling = rec(deployment("a", replicas=2, gpus=4, strategy={"type": "RollingUpdate",
                                                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))
    new = edited(rolling, lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="vllm:2"))
    p = plan([rolling], [new], budget=8)
    assert p.peak_gpus == 12 and p.problems and p.workloads[0].restarts
    recreate = rec(deployment("a", replicas=2, gpus=4, strategy=RECREATE))
    assert plan([recreate], [edited(recreate, lambda o: o["spec"]["template"]["metadata"]["annotations"].update(x="1"))],
                budget=8).peak_gpus == 8
    # Only replicas change: no rollout, so no surge.
    scaled = plan([rolling], [edited(rolling, lambda o: o["spec"].update(replicas=1))], budget=8)
    assert scaled.peak_gpus == 8 and not scaled.workloads[0].restarts


def test_downtime_per_model_from_the_time_to_serving_estimate():
    job = rec(sync_job(100))
    old = rec(deployment("a", strategy=RECREATE))
    p = plan([job, old], [job, edited(old, lambda o: o["spec"]["template"]["metadata"]["annotations"].update(x="1"))])
    model = p.models[0]
    same_image = time_to_serving(100, "vllm", 8, pre_pulled=True, profile="deepseek-v4").gpu_wait_seconds
    assert (model.verdict, model.seconds) == ("no serving", same_image) and "Recreate" in model.why
    # A new engine image is pulled again on the node (no pre-pull DaemonSet here).
    new_image = edited(old, lambda o: [c.update(image="vllm:2") for c in o["spec"]["template"]["spec"]["containers"]])
    assert plan([job, old], [job, new_image]).models[0].seconds == same_image + IMAGE_PULL_SECONDS
    # Rolling with surge keeps the model serving; without surge, several replicas restart a wave at a time.
    surge = rec(deployment("a", replicas=2, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}))
    bump = lambda o: o["spec"]["template"]["metadata"]["annotations"].update(x="1")  # noqa: E731
    assert plan([job, surge], [job, edited(surge, bump)]).models[0].verdict == "no downtime"
    waves = rec(deployment("a", replicas=3, strategy={"type": "RollingUpdate",
                                                       "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}))
    assert plan([job, waves], [job, edited(waves, bump)]).models[0].verdict == "reduced capacity"
    single = rec(deployment("a", replicas=1, strategy={"type": "RollingUpdate",
                                                        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}))
    assert plan([job, single], [job, edited(single, bump)]).models[0].verdict == "no serving"


def test_changes_md_names_the_actions_fields_peak_and_downtime():
    job = rec(sync_job(100))
    old = rec(deployment("a", strategy=RECREATE))
    p = plan([job, old], [job, edited(old, lambda o: o["spec"]["template"]["metadata"]["annotations"].update(x="1"))],
             budget=8)
    text = changes_md(p, "build/old")
    assert "| Deployment ns/a | update in place | 1 | `spec.template.metadata.annotations.x` |" in text
    assert "GPU peak during the update: 8 of budget 8 (fits)." in text
    assert "| M | no serving | about " in text and "Pods restart in: Deployment ns/a (rollout)" in text
    assert "Nothing changes" in changes_md(plan([job, old], [job, old], budget=8), "build/old")


def test_property_paths_and_change_text_follow_the_engine_and_the_provider():
    assert update_rules.property_path('metadata.annotations["a.b/c"]') == ("metadata", "annotations", "a.b/c")
    assert update_rules.property_path("spec.containers[0].image") == ("spec", "containers", 0, "image")
    assert update_rules.path_contains(("spec", "*", "x"), ("spec", "a", "x", "y"))
    assert not update_rules.path_contains(("spec", "b"), ("spec", "a"))
    assert update_rules.Change(("metadata", "annotations", "a.b/c"), "update").text == 'metadata.annotations["a.b/c"]'
    assert update_rules.forces_replace(("spec", "containers", 0, "image"), "x", [".spec.containers[*].image"])
    assert not update_rules.forces_replace(("spec", "containers", 0, "name"), "x", [".spec.containers[*].image"])
    # A whole added subtree matches a property inside it (makePatchSlice with the new value).
    assert update_rules.forces_replace(("spec",), {"csi": {}}, [".spec.csi"])


# ---- what the render records ----

def test_resources_json_records_engine_urns_and_the_options_the_planner_reads():
    rows = json.loads(output.resources_json(render_stack("dev")))
    deployment_row = next(r for r in rows if r["type"] == "kubernetes:apps/v1:Deployment"
                          and r["inputs"]["metadata"]["name"] == "deepseek-v4-flash")
    assert deployment_row["engineUrn"].startswith("urn:pulumi:dev::llm-serving::llm-serving:combined:CombinedEngine$")
    for key in ("ignoreChanges", "replaceOnChanges", "aliases", "deleteBeforeReplaceDefined"):
        assert key in deployment_row["options"]
    job = next(r for r in rows if r["type"] == "kubernetes:batch/v1:Job")
    assert job["options"]["deleteBeforeReplace"] is True and job["options"]["deleteBeforeReplaceDefined"] is True


def test_an_alias_the_program_sets_is_recorded_and_matched():
    from pulumi_kubernetes.core.v1 import ConfigMap

    def program(name: str, aliases: list):
        def run():
            ConfigMap(name, metadata={"name": "c", "namespace": "ns"}, data={"k": "v"},
                      opts=pulumi.ResourceOptions(aliases=aliases))
            return {}
        return run

    before = runtime.record("s", program("old", []))
    after = runtime.record("s", program("new", [pulumi.Alias(name="old")]))
    cm = next(r for r in after.resources if r.type == "kubernetes:core/v1:ConfigMap")
    assert cm.options["aliases"] == [{"name": "old"}]
    rows = [json.loads(output.resources_json(r)) for r in (before, after)]
    p = changes.plan(rows[0], rows[1])
    assert step(p, "ConfigMap ns/c").alias is not None and not p.changes


# ---- end to end: python -m render --previous on real renders (tests/update_pairs.py) ----

def run_render(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "render", *args], cwd=PROJECT_DIR, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONHASHSEED": "0"})


@pytest.fixture(scope="session")
def base_renders(tmp_path_factory) -> dict[str, Path]:
    """Each stack's render as committed, the `--previous` of its pairs: once per session. The files
    `python -m render --stack <stack>` writes (render/__main__.py: stackfile.read, runtime.render,
    output.write), from the worker's render of the stack (conftest render_stack) rather than a process
    of their own: test_render holds the CLI's files to themselves and plan.md to the snapshot."""
    out = {}
    for stack in sorted({p.stack for p in PAIRS}):
        out[stack] = tmp_path_factory.mktemp("base") / stack
        output.write(render_stack(stack), out[stack])
    return out


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_update_pair(pair, base_renders, tmp_path):
    project = variant_project(pair, tmp_path / "project")
    out = tmp_path / "out"
    proc = run_render("--stack", pair.stack, "--project-dir", str(project), "--out", str(out),
                      "--previous", str(base_renders[pair.stack]))
    if pair.verdict == APPLIES:
        assert proc.returncode == 0, proc.stderr
        assert pair.expect in (out / "changes.md").read_text()
    else:
        assert pair.verdict == REFUSED
        assert proc.returncode == 2, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert any(pair.expect in line for line in lines), proc.stderr
        # The program's own refusal (a config rule, stacks/transitions.py) is a ConfigError report; the
        # planner's lines say which render the update starts from.
        body = lines[1:] if lines[0].startswith("invalid stack configuration (") else lines
        assert all(line.startswith(f"Pulumi.{pair.stack}.yaml: ") for line in body), proc.stderr
        assert "Traceback" not in proc.stderr and not out.exists()


def test_previous_that_is_not_a_render_exits_2(tmp_path):
    proc = run_render("--stack", "dev", "--out", str(tmp_path / "out"), "--previous", str(tmp_path / "missing"))
    assert proc.returncode == 2 and "not a render's output directory" in proc.stderr and not (tmp_path / "out").exists()
