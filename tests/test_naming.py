"""Logical names the engine can live with: no duplicate URN, names from what identifies the object,
and Jobs that rerun after a failure (issue 9, items 6-8)."""

from __future__ import annotations

import collections
import copy

from conftest import render_stack
from test_pd import images
from variants import dev_config, model, render, variant_file

from components.scanner_exceptions import DIGEST_PINNED, scanner_exceptions


def duplicates(rendered) -> list[str]:
    """URNs registered twice. The engine builds a URN from the parent's whole type chain (pulumi/pulumi
    v3.259.0 sdk/go/common/resource/urn.go NewURN, parentType = the parent URN's QualifiedType); the
    SDK's mock monitor keeps only the parent's last type, so its URNs are coarser: none duplicated
    here means none duplicated in the engine."""
    counts = collections.Counter(r.urn for r in rendered.resources)
    return sorted(urn for urn, n in counts.items() if n > 1)


def test_committed_stacks_register_no_duplicate_urn():
    for stack in ("dev", "staging", "prod"):
        assert duplicates(render_stack(stack)) == [], stack


def test_a_hybrid_model_beside_a_pd_model_named_after_it_registers_no_duplicate_urn():
    """A hybrid model X registered its P/D half as `X-pd`, the name of a pd model `X-pd`: three
    duplicate URNs (the component and both fleets), which the engine refuses."""
    hybrid = model(topology="hybrid", orchestrator="stormservice", name="ds", servedModelName="ds")
    hybrid.pop("rollout")
    pd = model(topology="pd", orchestrator="rayclusterfleet", name="ds-pd", servedModelName="ds-pd")
    pd.pop("rollout")
    r = render(variant_file(images=images(), models=[hybrid, pd], gpuBudget=64))
    assert duplicates(r) == []
    names = {x.name for x in r.resources if x.type == "llm-serving:disaggregated:DisaggregatedEngine"}
    assert names == {"ds.pd", "ds-pd"}


def test_the_sync_job_is_named_after_what_it_syncs_not_after_the_first_model():
    """Two models sharing a weights directory get one sync Job. Named after the first model, it was
    renamed when the models swapped places while its Kubernetes name stayed: the provider then
    refuses to create an object that already exists."""
    models = copy.deepcopy(dev_config()["models"])
    arm = {**copy.deepcopy(models[0]), "name": "deepseek-v4-flash-dspark", "servedModelName": "DeepSeek-V4-Flash-DSpark",
           "dsparkOf": models[0]["name"]}
    arm["vllm"] = {**arm.get("vllm", {}), "speculativeDecoding": "dspark"}

    def sync_jobs(ordered):
        r = render(variant_file(models=ordered, gpuBudget=16))
        return {(x.type, x.name, x.inputs["metadata"]["name"] if x.type.startswith("kubernetes:") else "")
                for x in r.resources if "sync" in x.name}

    first, swapped = sync_jobs([models[0], arm]), sync_jobs([arm, models[0]])
    assert first == swapped
    job = next(name for t, name, k8s_name in first if t == "kubernetes:batch/v1:Job")
    k8s_name = next(k for t, _, k in first if t == "kubernetes:batch/v1:Job")
    assert job == f"{k8s_name}-job" and "deepseek-v4-flash" not in job.removeprefix("sync-deepseek-v4-flash-0731")


def test_every_awaited_job_is_replaced_when_unready_so_a_retry_reruns_it():
    """Without pulumi.com/replaceUnready a failed Job stays failed in state and every later
    `pulumi up` fails at once on its Failed condition (pulumi/pulumi-kubernetes v4.32.0
    provider/pkg/provider/provider.go Diff); its fixed name needs delete-before-replace. The load
    test is not awaited and carries no replaceUnready (components/base.py NOT_AWAITED)."""
    for stack in ("dev", "staging", "prod"):
        jobs = [r for r in render_stack(stack).resources if r.type == "kubernetes:batch/v1:Job"]
        assert jobs, stack
        for r in jobs:
            annotations = r.inputs["metadata"]["annotations"]
            if r.inputs["metadata"]["name"].startswith("loadtest-"):
                # Besides kube-score's exception for digest-pinned images (components/scanner_exceptions.py).
                assert annotations == {"pulumi.com/skipAwait": "true", **scanner_exceptions(DIGEST_PINNED)}, (stack, r.name)
            else:
                assert annotations["pulumi.com/replaceUnready"] == "true", (stack, r.name)
            assert r.options["deleteBeforeReplace"], (stack, r.name)


def test_a_job_without_replace_unready_is_flagged():
    from policy import rules

    job = copy.deepcopy(next(r for r in render_stack("dev").resources if r.type == "kubernetes:batch/v1:Job"))
    policy = next(p for p in rules.RESOURCE_POLICIES if p.name == "jobs-rerun")
    assert policy.check(job.type, job.inputs) == []
    del job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"]
    (message,) = policy.check(job.type, job.inputs)
    assert "pulumi.com/replaceUnready" in message and job.inputs["metadata"]["name"] in message



def test_a_model_named_like_another_models_service_is_refused():
    """The StormService controller names its headless Service after the StormService (the model's
    name): a model `ds-api` beside `ds` would take `ds`'s Service name (tests/upstream_aibrix.py)."""
    import pytest

    from stacks.loader import ConfigError

    base = model(name="ds", servedModelName="ds", orchestrator="stormservice")
    base.pop("rollout")
    twin = {**copy.deepcopy(base), "name": "ds-api", "servedModelName": "ds-api"}
    with pytest.raises(ConfigError) as err:
        render(variant_file(models=[base, twin], gpuBudget=16))
    assert "llm-serving:models[1].name = 'ds-api': is the name of a Service this program makes for model 'ds'" in str(err.value)
    ok = {**copy.deepcopy(base), "name": "ds-two", "servedModelName": "ds-two"}
    assert render(variant_file(models=[base, ok], gpuBudget=16)).resources
