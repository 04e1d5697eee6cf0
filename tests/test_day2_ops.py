"""Day-2 switches of issue 18, cases 6 and 9, as before/after pairs of offline renders judged by the
engine's, the provider's, server-side apply's and the garbage collector's own rules (ported with
repository, tag and file in tests/upstream_day2.py): an optional feature switched off keeps its data
and switched on again adopts it; the load test never runs on live traffic unless the stack says so
and never fails or re-runs a `pulumi up`; autoscaling switches off in one `pulumi up`; the Namespace
and the ECR mirror behave on destroy (docs/day-2/optional-features-and-destroy.md)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import upstream_day2 as up
import upstream_pulumi_kubernetes as upk
import yaml
from conftest import PROJECT_DIR, render_stack
from policy_server import Report, operation
from test_pack import kind, server  # noqa: F401  (the pack's server fixture, through its real process)

from components.providers import RETAINED_PROVIDER
from render import runtime, stackfile
from render.__main__ import main as render_main

RETAINED = f"pulumi:providers:kubernetes::{RETAINED_PROVIDER}"
MAIN = "pulumi:providers:kubernetes::kubernetes"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
SCRIPTS = PROJECT_DIR / "components" / "scripts"


def variant(stack: str, **edits) -> runtime.Rendered:
    """The committed stack file with some top-level config values edited (each a function of the
    decoded value), rendered as `make render` does."""
    sf = copy.deepcopy(stackfile.read(PROJECT_DIR, stack))
    for key, edit in edits.items():
        k = f"llm-serving:{key}"
        value = json.loads(sf.config[k]) if k in sf.config else {}
        sf.config[k] = json.dumps(edit(value))
    return runtime.render(sf)


def at(path: str, value):
    """An edit that sets a dotted path inside a config value."""
    def edit(node):
        node = copy.deepcopy(node)
        cur = node
        *head, last = path.split(".")
        for part in head:
            cur = cur[int(part)] if isinstance(cur, list) else cur.setdefault(part, {})
        cur[last] = value
        return node
    return edit


def by_name(rendered: runtime.Rendered) -> dict[str, runtime.Recorded]:
    return {r.name: r for r in rendered.resources}


def k8s_name(r: runtime.Recorded) -> str:
    return r.inputs["metadata"]["name"]


def provider_inputs(rendered: runtime.Rendered, name: str) -> dict:
    (p,) = [r for r in rendered.resources if r.type == "pulumi:providers:kubernetes" and r.name == name]
    return p.inputs


def dropped(before: runtime.Rendered, after: runtime.Rendered) -> list[runtime.Recorded]:
    """What the engine deletes at the end of the update: in the old state, not registered now."""
    now = {r.engine_urn for r in after.resources}
    return [r for r in before.resources if r.custom and r.engine_urn not in now]


OPEN_WEBUI = json.loads(stackfile.read(PROJECT_DIR, "dev").config["llm-serving:operations"])["openWebUI"]


def ghcr_credentials(images: dict) -> dict:
    """prod mirrors through ECR, which caches ghcr.io (OpenWebUI's registry) only with credentials."""
    images = copy.deepcopy(images)
    images["mirror"]["ecr"]["upstreamCredentialArns"]["ghcr.io"] = \
        "arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/ghcr"
    return images


def with_openwebui(stack: str) -> runtime.Rendered:
    extra = {"images": ghcr_credentials} if stack == "prod" else {}
    return variant(stack, operations=at("openWebUI", OPEN_WEBUI), **extra)


# --- case 6: an optional feature's data claim ---------------------------------------------------------

def test_switching_the_load_test_off_keeps_its_results_claim_in_one_up():
    before = render_stack("staging")
    after = variant("staging", operations=at("loadTest.enabled", False))
    gone = [r for r in dropped(before, after) if r.type == CLAIM]
    assert [k8s_name(r) for r in gone] == ["llm-bench-results"]
    (claim,) = gone
    # Protected, the delete of a dropped resource fails the update; retained, it leaves the claim.
    assert up.delete_step({**claim.options, "protect": True}) == "refused"
    assert up.delete_step(claim.options) == "kept"
    # Nothing else the load test brought is kept: its Job and Service go with it.
    assert {r.type for r in dropped(before, after) if up.delete_step(r.options) == "kept"} == {CLAIM}


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_switching_openwebui_off_outside_dev_keeps_its_data_claim(stack):
    before = with_openwebui(stack)
    after = render_stack(stack)
    claims = [r for r in dropped(before, after) if r.type == CLAIM]
    assert [k8s_name(r) for r in claims] == ["open-webui"]
    assert up.delete_step(claims[0].options) == "kept" and claims[0].provider == RETAINED


def test_in_dev_a_switched_off_feature_takes_its_claim_along():
    before = render_stack("dev")
    after = variant("dev", operations=at("openWebUI.enabled", False))
    (claim,) = [r for r in dropped(before, after) if r.type == CLAIM]
    assert up.delete_step(claim.options) == "deleted" and claim.provider == MAIN


def test_switching_the_feature_on_again_adopts_the_kept_claim():
    """The second `pulumi up` (loadTest on again) creates the claim by the same name, which the first
    left in the cluster: on the retained provider that create is an apply of the existing object; on
    the main provider it would fail with AlreadyExists (pulumi-kubernetes v4.32.0 await.go Creation)."""
    off = variant("staging", operations=at("loadTest.enabled", False))
    on = render_stack("staging")
    (claim,) = [r for r in on.resources if r.type == CLAIM and k8s_name(r) == "llm-bench-results"]
    assert not any(r.type == CLAIM and k8s_name(r) == "llm-bench-results" for r in off.resources)
    retained = provider_inputs(on, RETAINED_PROVIDER)
    assert claim.provider == RETAINED
    assert up.create(exists=True, upsert_existing_objects=up.provider_flag(retained, "upsertExistingObjects")) == "applied"
    main = provider_inputs(on, "kubernetes")
    assert up.create(exists=True, upsert_existing_objects=up.provider_flag(main, "upsertExistingObjects")) == "AlreadyExists"

    # The kept claim's fields are owned by the manager of its first create (client-side: "pulumi-kubernetes",
    # Update); the new resource applies under its own. A size grown meanwhile conflicts unless forced.
    spec = claim.inputs["spec"]
    kept = up.Live({"spec.resources.requests.storage": "5Gi", "spec.accessModes": spec["accessModes"]},
                   {"pulumi-kubernetes": {"spec.resources.requests.storage", "spec.accessModes"}})
    config = {"spec.resources.requests.storage": spec["resources"]["requests"]["storage"], "spec.accessModes": spec["accessModes"]}
    with pytest.raises(up.Conflict):
        up.apply(copy.deepcopy(kept), config, "pulumi-kubernetes-new", force=False)
    force = up.patch_force(claim.inputs["metadata"]["annotations"], up.provider_flag(retained, "enablePatchForce"))
    assert force
    up.apply(kept, config, "pulumi-kubernetes-new", force=force)
    assert kept.fields["spec.resources.requests.storage"] == "10Gi"


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_only_retained_resources_use_the_upserting_provider(stack):
    """upsertExistingObjects' hazard is a create that adopts an object a later delete then removes
    (pulumi-kubernetes CHANGELOG 4.29.0); a retained resource's delete never reaches the provider."""
    for rendered in (render_stack(stack), with_openwebui(stack)):
        on_retained = [r for r in rendered.resources if r.provider == RETAINED]
        assert all(up.delete_step(r.options) == "kept" and not r.options["protect"] for r in on_retained)
        kept_k8s = [r for r in rendered.resources if r.type.startswith("kubernetes:") and r.options["retainOnDelete"]]
        assert kept_k8s == on_retained
        if stack == "dev":
            assert on_retained == [] and not [r for r in rendered.resources if r.name == RETAINED_PROVIDER]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_moving_a_claim_or_the_namespace_to_the_retained_provider_replaces_nothing(stack):
    """A stack deployed before this change has them on `kubernetes`: the engine asks the new
    provider's DiffConfig whether the move replaces them (step_generator.go providerChanged)."""
    rendered = render_stack(stack)
    main, retained = provider_inputs(rendered, "kubernetes"), provider_inputs(rendered, RETAINED_PROVIDER)
    assert {k: v for k, v in retained.items() if k != "upsertExistingObjects"} == main
    assert not up.diff_config_replaces(main, retained)
    assert up.diff_config_replaces(main, {**retained, "clusterIdentifier": "another"})  # the port can say yes


# --- case 9: the Namespace and the ECR mirror on destroy ------------------------------------------------

@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_the_namespace_is_retained_not_protected_outside_dev(stack):
    (ns,) = [r for r in render_stack(stack).resources if r.type == "kubernetes:core/v1:Namespace"]
    assert ns.options["retainOnDelete"] and not ns.options["protect"] and ns.provider == RETAINED
    assert up.delete_step(ns.options) == "kept"


def test_destroy_outside_dev_leaves_the_namespace_the_claims_and_the_bucket():
    """`pulumi destroy` of prod with OpenWebUI: the bucket stays protected (destroy refuses it until
    `pulumi state unprotect`); the Namespace and the data claim are only removed from the state."""
    rendered = with_openwebui("prod")
    outcome = {(r.type, r.name): up.delete_step(r.options) for r in rendered.resources if r.custom}
    kept = sorted(k for k, v in outcome.items() if v == "kept")
    refused = sorted(k for k, v in outcome.items() if v == "refused")
    assert ("kubernetes:core/v1:Namespace", "namespace") in kept and (CLAIM, "open-webui-data") in kept
    assert refused and all(t.startswith("aws:s3/") for t, _ in refused)
    unprotected = {k: up.delete_step({**r.options, "protect": False}) for r in rendered.resources if r.custom
                   for k in [(r.type, r.name)]}
    assert sorted(k for k, v in unprotected.items() if v == "kept") == sorted(kept + refused)


def test_dev_destroy_deletes_its_namespace():
    (ns,) = [r for r in render_stack("dev").resources if r.type == "kubernetes:core/v1:Namespace"]
    assert up.delete_step(ns.options) == "deleted"


def test_ecr_mirror_repositories_delete_with_their_images():
    """The mirror holds copies of public images pinned by digest; ECR refuses to delete a repository
    with images unless forceDelete (pulumi_aws 7.51.1 ecr.Repository force_delete)."""
    repos = [r for r in render_stack("prod").resources if r.type == "aws:ecr/repository:Repository"]
    assert repos and all(up.ecr_delete(r.inputs, holds_images=True) == "deleted" for r in repos)
    assert up.ecr_delete({**repos[0].inputs, "forceDelete": False}, holds_images=True) == "RepositoryNotEmptyException"
    assert all("@sha256:" in ref for ref in render_stack("prod").outputs["workloadImages"]["deepseek-v4-flash"].values())


# --- case 6: the load test on prod, and after a failure -------------------------------------------------

def _project_with(tmp_path: Path, stack: str, edit) -> Path:
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    doc = yaml.safe_load((PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    edit(doc["config"].setdefault("llm-serving:operations", {}))
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def test_a_load_test_on_prod_is_refused_without_allow_live_traffic(tmp_path, capsys):
    project = _project_with(tmp_path, "prodload", lambda ops: ops.update(loadTest={"enabled": True}))
    out = tmp_path / "out"
    code = render_main(["--stack", "prodload", "--project-dir", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not out.exists()
    (line,) = [x for x in err.splitlines() if "loadTest" in x]
    assert line.startswith("Pulumi.prodload.yaml: llm-serving:operations.loadTest.enabled = true: ")
    assert "operations.loadTest.allowLiveTraffic: true" in line


def test_a_load_test_on_prod_renders_when_the_stack_allows_live_traffic(tmp_path, capsys):
    project = _project_with(tmp_path, "prodload",
                            lambda ops: ops.update(loadTest={"enabled": True, "allowLiveTraffic": True}))
    out = tmp_path / "out"
    assert render_main(["--stack", "prodload", "--project-dir", str(project), "--out", str(out)]) == 0, capsys.readouterr().err
    jobs = [d for d in yaml.safe_load_all((out / "kubernetes.yaml").read_text()) if d and d["kind"] == "Job"]
    assert any(j["metadata"]["name"].startswith("loadtest-") for j in jobs)


def later_up(annotations: dict, failed: bool) -> str:
    """What the next `pulumi up` does to a Job resource whose spec did not change, after it failed
    (`failed`) or succeeded: an awaited Job that failed left an init error, so the engine updates it
    and the awaiter fails again at once (pulumi/pulumi v3.259.0 step_generator.go
    applyReplaceOnChanges: hasInitErrors); replaceUnready makes the provider's Diff replace any Job
    that is not Complete (provider.go Diff: checkjob Ready), the new run awaited again."""
    awaited = not upk.skips_await(annotations)
    if annotations.get("pulumi.com/replaceUnready") == "true" and failed:
        return "replaced, runs again" + (" and is awaited" if awaited else "")
    if awaited and failed:
        return "fails again"
    return "nothing"


def test_a_failed_load_test_never_touches_a_later_up_and_smoke_still_reruns():
    rendered = render_stack("staging")
    jobs = {k8s_name(r).split("-", 1)[0]: r for r in rendered.resources if r.type == "kubernetes:batch/v1:Job"
            and not k8s_name(r).startswith(("sync-", "image-"))}
    load = jobs["loadtest"].inputs["metadata"]["annotations"]
    assert not upk.awaited("batch/v1", "Job", load)  # `pulumi up` starts it and goes on
    assert later_up(load, failed=True) == "nothing"
    # With the annotations it had before: every later `pulumi up` re-ran the benchmark.
    assert later_up({"pulumi.com/replaceUnready": "true"}, failed=True) == "replaced, runs again and is awaited"
    for gate in ("smoke", "warmup"):
        annotations = jobs[gate].inputs["metadata"]["annotations"]
        assert upk.awaited("batch/v1", "Job", annotations)
        assert later_up(annotations, failed=True) == "replaced, runs again and is awaited"


def test_the_pack_refuses_replace_unready_on_a_job_pulumi_does_not_await(server):  # noqa: F811
    rendered = render_stack("staging")
    load = next(k8s_name(r) for r in rendered.resources
                if r.type == "kubernetes:batch/v1:Job" and k8s_name(r).startswith("loadtest-"))
    edit = kind("Job", lambda p: p["metadata"]["annotations"].update({"pulumi.com/replaceUnready": "true"}), k8s_name=load)
    report: Report = server.run(operation(rendered, server.fresh_stack("staging"), edit=edit))
    assert any(load in m and "must not set pulumi.com/replaceUnready" in m for m in report.messages("jobs-rerun"))
    clean: Report = server.run(operation(rendered, server.fresh_stack("staging")))
    assert clean.messages("jobs-rerun") == []


def test_a_load_test_stopped_by_sigterm_releases_its_lock(tmp_path):
    """The next rollout deletes a running load-test Job; as the container's PID 1 without a handler the
    script would be killed after the grace period with its lock left on the claim."""
    plan = {"engines": {"host": "engines.invalid", "ports": [8000], "engine": "vllm"}, "rounds": [{"name": "r0", "argv": ["true"]}]}
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "load_test.py"), "--plan", json.dumps(plan), "--results",
                             str(tmp_path), "--idle-timeout", "60", "--idle-poll", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lock = tmp_path / ".benchmark.lock"
    deadline = time.monotonic() + 20
    while not lock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert lock.exists(), proc.communicate(timeout=5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM and not lock.exists(), err



def test_a_refused_start_leaves_the_signal_mask_as_it_was(tmp_path):
    """The mask that keeps SIGTERM out while the lock is taken is undone when the lock is someone
    else's: a caller running main in process (the tests do) kept it, and every process it started
    after that ignored SIGTERM until SIGKILL."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import load_test
    (tmp_path / ".benchmark.lock").write_text("other-host pid 1\n")
    plan = {"engines": {"host": "engines.invalid", "ports": [8000], "engine": "vllm"}, "rounds": []}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    handler = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit, match="another benchmark client holds"):
            load_test.main(["--plan", json.dumps(plan), "--results", str(tmp_path)])
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
    finally:
        signal.signal(signal.SIGTERM, handler)

# --- case 9: autoscaling off and on in one `pulumi up` -------------------------------------------------

AUTOSCALER_MANAGER = "manager"  # any name but ours: AIBrix v0.7.0 writes with a plain Update


def _workload(rendered: runtime.Rendered, kind_: str) -> runtime.Recorded:
    (w,) = [r for r in rendered.resources if r.type.endswith(kind_) and k8s_name(r) == "deepseek-v4-flash"]
    return w


def _switch(rendered: runtime.Rendered, model: str = "deepseek-v4-flash") -> runtime.Recorded:
    (s,) = [r for r in rendered.resources if r.name == f"{model}.autoscaling-switch"]
    return s


@pytest.mark.parametrize("stack,kind_", [("prod", "Deployment"), ("staging", "StormService")])
def test_switching_autoscaling_off_deletes_the_autoscaler_before_the_workload_takes_its_replicas(stack, kind_):
    before = render_stack(stack)
    after = variant(stack, models=lambda ms: [{**m, "autoscaling": {**m["autoscaling"], "enabled": False}} for m in ms])
    pa = next(r for r in before.resources if r.type.endswith("PodAutoscaler") and k8s_name(r) == "deepseek-v4-flash")
    assert pa in dropped(before, after)  # the engine's own delete comes last, too late

    # The switch is replaced, delete first, before the workload registers: the provider replaces a
    # ConfigMap whose data changed (diff.go forceNewProperties), and so would replaceOnChanges.
    old_switch, new_switch = _switch(before), _switch(after)
    assert old_switch.engine_urn == new_switch.engine_urn and old_switch.inputs["data"] != new_switch.inputs["data"]
    assert new_switch.engine_options["replaceOnChanges"] == ["data"] and new_switch.engine_options["deleteBeforeReplace"]
    workload = _workload(after, kind_)
    assert new_switch.engine_urn in workload.dependencies
    if kind_ == "Deployment":  # prod keeps replicas 2, so routing and the pod template stay: no restart
        assert workload.inputs["spec"]["template"] == _workload(before, kind_).inputs["spec"]["template"]
    # Deleting the old switch (foreground, pulumi-kubernetes' default) waits for the autoscaler it owns.
    assert up.deletion_propagation(old_switch.inputs["metadata"].get("annotations") or {}) == "Foreground"
    uid = old_switch.outputs()["metadata"]["uid"]
    assert up.foreground_delete_waits_for(uid, [pa.inputs]) == ["deepseek-v4-flash"]
    assert up.foreground_delete_waits_for("another-uid", [pa.inputs]) == []

    # The autoscaler's Update left it owning spec.replicas; the workload's apply forces it once.
    replicas = workload.inputs["spec"]["replicas"]
    live = up.Live({"spec.replicas": replicas}, {"pulumi-kubernetes-abc": {"spec.replicas"}})
    up.update(live, {"spec.replicas": replicas + 3}, AUTOSCALER_MANAGER)
    assert live.managers == {AUTOSCALER_MANAGER: {"spec.replicas"}}
    assert workload.engine_options["ignoreChanges"] == []
    config = {"spec.replicas": replicas}
    with pytest.raises(up.Conflict):
        up.apply(copy.deepcopy(live), config, "pulumi-kubernetes-abc", force=False)
    up.apply(live, config, "pulumi-kubernetes-abc", force=up.patch_force(workload.inputs["metadata"]["annotations"]))
    assert live.fields["spec.replicas"] == replicas and live.managers == {"pulumi-kubernetes-abc": {"spec.replicas"}}


@pytest.mark.parametrize("stack,kind_", [("prod", "Deployment"), ("staging", "StormService")])
def test_switching_autoscaling_on_leaves_replicas_to_the_autoscaler(stack, kind_):
    off = variant(stack, models=lambda ms: [{**m, "autoscaling": {**m["autoscaling"], "enabled": False}} for m in ms])
    on = render_stack(stack)
    workload = _workload(on, kind_)
    assert workload.engine_options["ignoreChanges"] == ["spec.replicas"]
    assert "pulumi.com/patchForce" not in workload.inputs["metadata"]["annotations"]
    pa = next(r for r in on.resources if r.type.endswith("PodAutoscaler") and k8s_name(r) == "deepseek-v4-flash")
    assert workload.engine_urn in pa.dependencies and _switch(on).engine_urn in pa.dependencies
    (ref,) = pa.inputs["metadata"]["ownerReferences"]
    assert ref == {"apiVersion": "v1", "kind": "ConfigMap", "name": k8s_name(_switch(on)), "blockOwnerDeletion": True,
                   "uid": _switch(on).outputs()["metadata"]["uid"]}
    assert _switch(off).inputs["data"] != _switch(on).inputs["data"]
    # Later updates of the workload (a new image, say) while the autoscaler holds spec.replicas.
    replicas = _workload(off, kind_).inputs["spec"]["replicas"]
    live = up.Live({"spec.replicas": replicas}, {"pulumi-kubernetes-abc": {"spec.replicas"}})
    config = {"spec.replicas": workload.inputs["spec"]["replicas"]}
    # Before the autoscaler wrote: our own field, sent with its live value.
    assert up.ssa_ignore_fields(config, live, "pulumi-kubernetes-abc", ["spec.replicas"]) == {"spec.replicas": replicas}
    up.update(live, {"spec.replicas": replicas + 1}, AUTOSCALER_MANAGER)
    sent = up.ssa_ignore_fields(config, live, "pulumi-kubernetes-abc", ["spec.replicas"])
    assert sent == {}
    up.apply(live, sent, "pulumi-kubernetes-abc", force=False)  # no conflict, the autoscaler's count stays
    assert live.fields["spec.replicas"] == replicas + 1


def test_models_that_cannot_autoscale_get_no_switch():
    rendered = render_stack("dev")
    assert [r.name for r in rendered.resources if r.name.endswith(".autoscaling-switch")] == ["deepseek-v4-flash.autoscaling-switch"]
    from variants import render as render_file
    from variants import sglang_stack
    sglang = render_file(sglang_stack())
    assert not [r for r in sglang.resources if r.name.endswith(".autoscaling-switch")]
    assert not any("pulumi.com/patchForce" in ((r.inputs.get("metadata") or {}).get("annotations") or {})
                   for r in sglang.resources if r.type.endswith("RoleBasedGroup"))
