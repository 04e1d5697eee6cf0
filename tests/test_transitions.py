"""Identity changes on day 2 (issue 18, case 1): renaming a model, switching its orchestrator, its
topology or the namespace. The engine creates new resources before it deletes dropped ones
(pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go GenerateDeletes runs after the program;
a replacement deletes its old copy first only with deleteBeforeReplace, generateStepsFromDiff), so
without room in the budget the new GPU pods would wait for GPUs the old ones never give back.
These pairs render the stack before and after the change, hand the first render to the second as the
stack's last deployment (what the engine's readStackResourceOutputs invoke answers), and check the
options the engine then acts on; e2e/test_day2.py applies the same pairs to a real cluster."""

from __future__ import annotations

import pytest
from conftest import render_stack
from test_pd import images
from variants import model, variant_file

from render import runtime
from stacks import loader, transitions
from stacks.transitions import Planned, Workload

GPU_KINDS = ("Deployment", "StormService", "RayClusterFleet", "RoleBasedGroup")


def previous_of(rendered: runtime.Rendered) -> dict[str, dict]:
    return runtime.previous_state([{"urn": r.urn, "engineUrn": r.engine_urn, "type": r.type, "inputs": r.inputs,
                                    "custom": r.custom} for r in rendered.resources])


def gpu_workloads(rendered: runtime.Rendered) -> dict[str, dict]:
    """metadata.name -> the recorded resource's options, for the GPU workloads."""
    state = previous_of(rendered)
    names = {w.urn for w in transitions.gpu_workloads_of(state)}
    return {r.inputs["metadata"]["name"]: {**r.options, "aliases": [a["urn"] for a in r.options["aliases"] if "urn" in a]}
            for r in rendered.resources if r.engine_urn in names}


def old(name: str, gpus: int = 8, kind: str = "Deployment", ns: str = "ns") -> Workload:
    return Workload(urn=f"urn:pulumi:dev::p::t$kubernetes:x:{kind}::{name}", kind=kind, namespace=ns, name=name,
                    gpus=gpus)


# --- the plan, pure ---------------------------------------------------------------------------

def test_a_new_stack_has_nothing_to_take_over_from():
    t = transitions.plan([], [Planned("ns", "m", 8)], budget=8, planned_total=8)
    assert t.takes_place_of == {} and t.refusals == [] and t.notes() == []


def test_with_room_for_both_the_new_workload_starts_beside_the_old_one():
    """Create-before-delete: no downtime, the old fleet goes at the end."""
    t = transitions.plan([old("a")], [Planned("ns", "b", 8)], budget=16, planned_total=8)
    assert t.takes_place_of == {} and t.refusals == []


def test_without_room_the_added_workload_takes_the_dropped_ones_place():
    t = transitions.plan([old("a")], [Planned("ns", "b", 8, downtime_seconds=750)], budget=8, planned_total=8)
    assert t.takes_place_of == {("ns", "b"): old("a")}
    assert t.refusals == []
    assert "deleted before ns/b starts" in t.notes()[0] and t.notes()[0].endswith("(about 12 min)")


def test_the_downtime_named_is_the_time_to_serving_estimate():
    """The vLLM cold start with the image pre-pulled (components/time_to_serving.py), as plan.md prints it."""
    from test_config import SECRETS, raw_config

    from components.time_to_serving import time_to_serving
    from stacks.program import engine_models

    cfg = loader.validate(raw_config("dev"), "dev", SECRETS)
    (planned,) = transitions.planned_workloads(cfg, engine_models(cfg))
    m = cfg.models[0]
    assert planned.downtime_seconds == time_to_serving(m.size_gib, m.engine, 8, pre_pulled=True, profile=m.profile).gpu_wait_seconds


def test_combined_to_pd_frees_the_deployment_for_the_first_fleet():
    """One dropped, two added: the prefill fleet replaces the Deployment delete-first; the decode
    fleet's pods wait for the GPUs that delete frees (it happens during the update, not after it)."""
    t = transitions.plan([old("m")], [Planned("ns", "m-prefill", 8), Planned("ns", "m-decode", 8)], budget=16,
                         planned_total=16)
    assert list(t.takes_place_of) == [("ns", "m-prefill")] and t.refusals == []


def test_more_dropped_than_added_is_refused_with_the_commands_that_work():
    """pd -> combined: the Deployment can take one fleet's place; the other holds its GPUs until the
    update ends, after the Deployment's create has timed out."""
    t = transitions.plan([old("m-prefill"), old("m-decode")], [Planned("ns", "m", 8)], budget=8, planned_total=8)
    (refusal,) = t.refusals
    assert "16 of gpuBudget 8" in refusal
    assert "pulumi destroy --target-dependents --target 'urn:pulumi:dev::p::t$kubernetes:x:Deployment::m-decode'" in refusal
    assert refusal.endswith("then `pulumi up`")


def test_a_kept_workload_is_deleted_first_only_where_the_budget_has_no_room_for_a_second_copy():
    tight = transitions.plan([old("m")], [Planned("ns", "m", 8)], budget=8, planned_total=8)
    roomy = transitions.plan([old("m")], [Planned("ns", "m", 8)], budget=16, planned_total=8)
    assert not tight.room_for(8) and roomy.room_for(8)


def test_the_state_is_read_with_the_policy_packs_gpu_count():
    """Only GPU workloads count, and they count as the pack counts them: the dev Deployment's 8."""
    found = transitions.gpu_workloads_of(previous_of(render_stack("dev")))
    assert [(w.kind, w.namespace, w.name, w.gpus) for w in found] == [
        ("Deployment", "llm-serving-dev", "deepseek-v4-flash", 8)]


class _FlakyState:
    """The DIY backend's answer while the engine rewrites the checkpoint's `.attrs` sidecar: the
    message the real CLI printed in CI (pulumi v3.276.0 backend/diy/state.go getSnapshotStackOutputs)."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, []

    def __call__(self, token, args):
        self.calls.append((token, args))
        if len(self.calls) <= self.failures:
            raise Exception(f"invoke of {token} failed: invocation of {token} returned an error: "
                            "failed to load checkpoint: EOF")
        return type("Result", (), {"value": {"outputs": {"urn:a": {"type": "t", "outputs": {}}}}})()


@pytest.fixture
def stack_identity(monkeypatch):
    monkeypatch.setattr(transitions.pulumi, "get_organization", lambda: "organization")
    monkeypatch.setattr(transitions.pulumi, "get_project", lambda: "llm-serving")
    monkeypatch.setattr(transitions.pulumi, "get_stack", lambda: "dev")


def test_a_checkpoint_read_racing_the_engines_write_is_retried(stack_identity):
    flaky, waits = _FlakyState(failures=2), []
    assert transitions.read_previous(flaky, waits.append) == {"urn:a": {"type": "t", "outputs": {}}}
    assert [c[1] for c in flaky.calls] == [{"stackName": "organization/llm-serving/dev"}] * 3
    assert waits == [0.1, 0.2]


def test_a_checkpoint_that_stays_unreadable_fails_with_a_message_not_a_traceback(stack_identity):
    flaky, waits = _FlakyState(failures=transitions.READ_ATTEMPTS), []
    with pytest.raises(transitions.pulumi.RunError, match=r"could not read this stack's last deployment .*5 "
                       r"attempts.*failed to load checkpoint: EOF"):
        transitions.read_previous(flaky, waits.append)
    assert len(flaky.calls) == transitions.READ_ATTEMPTS and len(waits) == transitions.READ_ATTEMPTS - 1


# --- rendered pairs -----------------------------------------------------------------------------

def _pair(before, after):
    first = runtime.render(before)
    return first, runtime.render(after, previous=previous_of(first))


def test_renaming_the_model_replaces_its_deployment_delete_first():
    first, second = _pair(variant_file(), variant_file(models=[model(name="dsv4")]))
    (old_urn,) = [r.engine_urn for r in first.resources if r.name == "deepseek-v4-flash-deployment"]
    options = gpu_workloads(second)["dsv4"]
    assert options["aliases"] == [old_urn]
    assert options["deleteBeforeReplace"] is True
    assert options["replaceOnChanges"] == ["*"]


def test_switching_the_orchestrator_replaces_the_deployment_with_the_stormservice_delete_first():
    """Same object name, another kind and URN: without the alias the Deployment would be deleted
    only after the StormService's create had waited for its GPUs."""
    m = model(orchestrator="stormservice")
    m.pop("rollout")
    first, second = _pair(variant_file(), variant_file(models=[m]))
    (old_urn,) = [r.engine_urn for r in first.resources if r.name == "deepseek-v4-flash-deployment"]
    (storm,) = [r for r in second.resources if r.type.endswith("StormService")]
    assert [a for a in storm.options["aliases"] if "urn" in a] == [{"urn": old_urn}] and storm.options["deleteBeforeReplace"] is True


def test_switching_the_namespace_replaces_the_workload_delete_first():
    first, second = _pair(variant_file(), variant_file(namespace="llm-serving-dev2"))
    options = gpu_workloads(second)["deepseek-v4-flash"]
    assert options["deleteBeforeReplace"] is True


def test_with_room_for_both_nothing_is_aliased():
    first, second = _pair(variant_file(gpuBudget=16), variant_file(gpuBudget=16, models=[model(name="dsv4")]))
    assert gpu_workloads(second)["dsv4"]["aliases"] == []
    assert gpu_workloads(second)["dsv4"]["deleteBeforeReplace"] is False


def test_combined_to_pd_on_the_same_budget_frees_the_deployment_for_a_fleet():
    before = variant_file(images=images(), gpuBudget=24)
    pd = model(topology="pd", orchestrator="rayclusterfleet")
    pd.pop("rollout")
    first, second = _pair(before, variant_file(images=images(), models=[pd], gpuBudget=24))
    workloads = gpu_workloads(second)
    aliased = {name for name, o in workloads.items() if o["aliases"]}
    assert aliased == {"deepseek-v4-flash-prefill"}


def test_pd_to_combined_without_room_is_refused_before_anything_is_registered():
    pd = model(topology="pd", orchestrator="rayclusterfleet")
    pd.pop("rollout")
    first = runtime.render(variant_file(images=images(), models=[pd], gpuBudget=24))
    with pytest.raises(loader.ConfigError) as refused:
        runtime.render(variant_file(images=images(), gpuBudget=8), previous=previous_of(first))
    text = str(refused.value)
    assert text.startswith("Pulumi.variant.yaml: llm-serving:models: this update starts 8 GPUs")
    assert "pulumi destroy --target-dependents --target" in text


def test_an_unchanged_workload_is_aliased_only_to_its_own_urn():
    """Which the engine ignores: getOldResource looks the URN up before any alias (step_generator.go)."""
    first, second = _pair(variant_file(), variant_file())
    (deployment,) = [r for r in second.resources if r.name == "deepseek-v4-flash-deployment"]
    assert [a["urn"] for a in deployment.options["aliases"] if "urn" in a] == [deployment.engine_urn]
    assert deployment.options["replaceOnChanges"] == []


def test_combined_to_same_pod_updates_the_deployment_it_shares_a_name_with():
    """Another component (SamePodPdEngine), another URN, the same Deployment: without the alias the
    engine would create an object that exists and then delete the old URN's object, which is it."""
    same_pod = model(topology="pd-same-pod")
    same_pod["vllm"] = {**same_pod["vllm"], "tensorParallelSize": 4}
    first, second = _pair(variant_file(), variant_file(models=[same_pod]))
    (old_urn,) = [r.engine_urn for r in first.resources if r.name == "deepseek-v4-flash-deployment"]
    (new,) = [r for r in second.resources if r.type == "kubernetes:apps/v1:Deployment"
              and r.inputs["metadata"]["name"] == "deepseek-v4-flash"]
    assert new.engine_urn != old_urn
    assert [a["urn"] for a in new.options["aliases"] if "urn" in a] == [old_urn]
    assert new.options["replaceOnChanges"] == []
