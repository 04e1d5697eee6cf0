"""policy/gpu_accounting.py, the one home of rollout waves and peak GPUs: its rules on their own, and
both of its callers agreeing on every stack and topology: the config side (components/topologies
gpu_workloads, components/combined.py rollout_timeouts) and the manifest side (policy/workloads.py
pod_templates and rollout_waves, policy/stack_rules.py workload_gpus, what the pack runs)."""

from __future__ import annotations

import functools

import pytest
import test_pd
import test_topologies
from conftest import PROJECT_DIR, STACKS, render_stack, stack_resources
from multinode_stacks import GROUP_PAIRS, r1_config
from variants import SECRETS, pair_file, variant_file

from components.orchestrators import rollout_strategy
from components.topologies import gpu_workloads, group_size, topology_of
from config_model import ServedModel, StackConfig
from policy import gpu_accounting, stack_rules, workloads
from policy.manifests import kind_of, pod_gpus, templates
from policy.unknowns import UNKNOWN, UnknownTouched, is_unknown
from render import runtime, stackfile
from stacks import loader, program
from stacks.rules import capacity

# ---- the rules (kubernetes v1.37.2 pkg/controller/deployment/util/deployment_util.go ResolveFenceposts) ----


def test_surge_rounds_a_percentage_up_and_unavailable_rounds_it_down_to_at_least_one():
    assert [gpu_accounting.surge_pods("25%", n) for n in (1, 3, 4, 5)] == [1, 1, 1, 2]
    assert gpu_accounting.surge_pods(0, 7) == 0 and gpu_accounting.surge_pods(2, 7) == 2
    assert [gpu_accounting.unavailable_pods("25%", n) for n in (1, 3, 4, 8)] == [1, 1, 1, 2]
    assert gpu_accounting.unavailable_pods(0, 5) == 1 and gpu_accounting.unavailable_pods(3, 5) == 3


@pytest.mark.parametrize("pods,max_unavailable", [(1, 1), (2, 1), (3, 2), (5, 2), (8, "25%"), (3, "50%"), (0, 1)])
def test_waves_replace_the_pods_k_at_a_time(pods, max_unavailable):
    k = gpu_accounting.unavailable_pods(max_unavailable, pods)
    replaced, waves = 0, 0
    while replaced < pods:            # one wave: k more pods down, each a full cold start
        replaced, waves = replaced + k, waves + 1
    assert gpu_accounting.rollout_waves(pods, max_unavailable) == max(1, waves)
    assert gpu_accounting.rollout_waves(pods, max_unavailable, recreate=True) == 1


def test_peak_gpus_count_every_pod_at_peak_and_the_autoscaler_grows_replicas_only():
    assert gpu_accounting.peak_gpus(2, 1, 8) == 24
    assert gpu_accounting.scaled_pods(1) == 1
    assert gpu_accounting.scaled_pods(1, 3) == 3 and gpu_accounting.scaled_pods(4, 3) == 4


def test_an_unknown_count_stays_unknown_in_sums_and_is_never_decided():
    assert is_unknown(gpu_accounting.peak_gpus(UNKNOWN, 0, 8))
    assert is_unknown(gpu_accounting.surge_pods("25%", UNKNOWN))
    with pytest.raises(UnknownTouched):
        gpu_accounting.rollout_waves(UNKNOWN, 1)


# ---- both callers on every stack and topology ----

def _cases():
    """(case, stack file, rendered, GPUs the existing test expects in total): the committed stacks at
    their exported total, the P/D topologies of tests/test_pd.py at their budget, the pairs of
    tests/test_topologies.py at 8."""
    out = [(s, lambda s=s: stackfile.read(PROJECT_DIR, s), lambda s=s: render_stack(s), None) for s in STACKS]
    out += [(f"{t} {o}", lambda t=t, o=o, b=b: test_pd.stack(t, o, b), lambda t=t, o=o, b=b: test_pd.rendered(t, o, b), b)
            for t, o, b in test_pd.CASES]
    out += [(f"{e} {o}", lambda e=e, o=o: pair_file(e, o), lambda e=e, o=o: test_topologies.rendered_pair(e, o), 8)
            for e, o in test_topologies.PAIRS]
    return out


CASES = _cases()
IDS = [c[0] for c in CASES]


def stack_models(sf) -> list[ServedModel]:
    """The served models as the engines are built (a DSpark arm is its target with DSpark on)."""
    prefix = "llm-serving:"
    raw = {k[len(prefix):]: loader.decode(k[len(prefix):], v) for k, v in sf.config.items()
           if k.startswith(prefix) and k not in sf.secret_keys}
    return program.engine_models(StackConfig.model_validate(raw))


def gpu_workloads_of(rendered) -> dict[str, tuple]:
    """Workload name -> (type, props, maxReplicas of its autoscaler) for every workload holding GPUs."""
    resources = stack_resources(rendered)
    scaled = stack_rules.autoscaled(resources)
    out = {}
    for r in resources:
        refs = templates(r.type, r.props)
        if r.custom and refs and any(pod_gpus(ref.template) for ref in refs):
            key = stack_rules.workload_key(r.type, r.props)
            out[key[2]] = (r, scaled.get(key))
    return out


@pytest.mark.parametrize("case,stack_file,rendering,total", CASES, ids=IDS)
def test_the_config_and_the_manifests_count_the_same_peak_gpus(case, stack_file, rendering, total):
    rendered = rendering()
    models = stack_models(stack_file())
    config_side = {w.name: w for m in models for w in gpu_workloads(m)}
    manifests = gpu_workloads_of(rendered)
    assert set(config_side) == set(manifests)
    for name, w in config_side.items():
        r, most = manifests[name]
        props = stack_rules.grown_to(r.props, most) if most is not None else r.props
        (ref,) = templates(r.type, props)   # one pod template per engine workload of ours
        assert (ref.replicas, ref.extra_pods, pod_gpus(ref.template)) == (w.pods, w.extra_pods, w.gpus_per_pod), name
        assert stack_rules.workload_gpus(r.type, r.props, most) == w.peak_gpus, name
    expected = rendered.outputs["gpuTotal"] if total is None else total
    assert sum(w.peak_gpus for w in config_side.values()) == stack_rules.gpu_total(stack_resources(rendered)) == expected


@pytest.mark.parametrize("case,stack_file,rendering,total", CASES, ids=IDS)
def test_the_await_and_the_pack_count_the_same_rollout_waves(case, stack_file, rendering, total):
    """Pulumi's update timeout is one deadline per wave (components/combined.py rollout_timeouts); the pack
    counts the waves from the manifest, at the autoscaler's maxReplicas; both equal the rule applied to the
    config: the model's pods at peak by its maxUnavailable, the fleets' RayClusters one at a time."""
    rendered = rendering()
    manifests = gpu_workloads_of(rendered)
    for m in stack_models(stack_file()):
        t = topology_of(m)
        for w in gpu_workloads(m):
            r, most = manifests[w.name]
            props = stack_rules.grown_to(r.props, most) if most is not None else r.props
            timeouts = r.options["customTimeouts"]
            await_waves, rest = divmod(int(timeouts["update"].rstrip("s")), int(timeouts["create"].rstrip("s")))
            if w.name == m.name:
                rule = gpu_accounting.rollout_waves(w.pods, m.rollout.max_unavailable, rollout_strategy(m) == "Recreate")
            else:
                rule = gpu_accounting.rollout_waves(t.fleet_replicas(m), 1)
            assert (await_waves, rest) == (rule, 0), w.name
            assert workloads.rollout_waves(kind_of(r.type), props) == rule, w.name


def test_prod_rolls_its_two_replicas_in_two_waves():
    """tests/test_policy.py test_update_timeout_covers_every_rollout_wave, from the rule."""
    waves = {w.name: gpu_accounting.rollout_waves(w.pods, m.rollout.max_unavailable, rollout_strategy(m) == "Recreate")
             for m in stack_models(stackfile.read(PROJECT_DIR, "prod")) for w in gpu_workloads(m) if m.replicas == 2}
    assert waves and set(waves.values()) == {2}


def test_the_rule_module_imports_the_standard_library_only():
    """The pack publishes it, and components import it: nothing of ours, nothing installed."""
    import ast
    import sys
    tree = ast.parse(open(gpu_accounting.__file__).read())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


# ---- models spanning nodes (issue 29): every pod of every group, on each orchestrator x engine that runs groups ----

GROUPS = 2      # two replicas of DeepSeek-R1, each a group of two 8-GPU pods: 32 GPUs


def group_config(orchestrator: str, engine: str, budget: int = GROUPS * 2 * 8) -> dict:
    return {**r1_config(orchestrator, engine, replicas=GROUPS), "gpuBudget": budget}


@functools.lru_cache(maxsize=None)
def group_case(orchestrator: str, engine: str):
    sf = variant_file("r1", **group_config(orchestrator, engine))
    return sf, runtime.render(sf)


def stack_config(sf) -> StackConfig:
    prefix = "llm-serving:"
    return StackConfig.model_validate({k[len(prefix):]: loader.decode(k[len(prefix):], v) for k, v in sf.config.items()
                                       if k.startswith(prefix) and k not in sf.secret_keys})


@pytest.mark.parametrize("orchestrator,engine", GROUP_PAIRS)
def test_the_config_and_the_manifests_count_every_pod_of_every_group(orchestrator, engine):
    """replicas x pods per group x GPUs per pod, on both sides: the config rules' gpu_demand (stacks/rules/capacity.py,
    from components/topologies gpu_workloads) and the pack's count of the rendered workload (LWS's leader and worker
    templates, StormService's one template times podGroupSize, RBG's times leaderWorkerPattern.size)."""
    sf, rendered = group_case(orchestrator, engine)
    cfg = stack_config(sf)
    (m,) = stack_models(sf)
    (w,) = gpu_workloads(m)
    assert (m.replicas, group_size(m), w.gpus_per_pod) == (GROUPS, 2, 8)
    (r, most), = gpu_workloads_of(rendered).values()
    refs = templates(r.type, r.props)
    # LWS: leader and worker templates; StormService and RBG: one template every rank runs.
    assert len(refs) == (2 if orchestrator == "leaderworkerset" else 1)
    assert {pod_gpus(ref.template) for ref in refs} == {w.gpus_per_pod}
    assert (sum(ref.replicas for ref in refs), sum(ref.extra_pods for ref in refs)) == (w.pods, w.extra_pods)
    assert w.pods == m.replicas * group_size(m)
    assert stack_rules.workload_gpus(r.type, r.props, most) == w.peak_gpus == GROUPS * 2 * 8
    assert capacity.gpu_demand(cfg) == [(m.name, w.peak_gpus)]
    assert stack_rules.gpu_total(stack_resources(rendered)) == capacity.gpu_total(cfg) == rendered.outputs["gpuTotal"]
    # Groups roll maxUnavailable groups at a time, every pod of a group at once: Pulumi's update timeout and the pack
    # count the same waves (components/combined.py rollout_timeouts, policy/workloads.py rollout_waves).
    timeouts = r.options["customTimeouts"]
    await_waves, rest = divmod(int(timeouts["update"].rstrip("s")), int(timeouts["create"].rstrip("s")))
    rule = gpu_accounting.rollout_waves(m.replicas, m.rollout.max_unavailable)
    assert (await_waves, rest) == (rule, 0) and rule == GROUPS
    assert workloads.rollout_waves(kind_of(r.type), r.props) == rule


@pytest.mark.parametrize("orchestrator,engine", GROUP_PAIRS)
def test_a_budget_one_gpu_short_of_every_group_is_refused_by_the_config_and_the_pack(orchestrator, engine):
    short = GROUPS * 2 * 8 - 1
    with pytest.raises(loader.ConfigError) as err:
        loader.validate(group_config(orchestrator, engine, short), "r1", dict.fromkeys(SECRETS, True))
    assert f"llm-serving:gpuBudget = {short}: the workloads need {GROUPS * 2 * 8} GPUs at peak" in str(err.value)
    _, rendered = group_case(orchestrator, engine)     # rendered at 32, judged against 31
    assert stack_rules.gpus_within_budget(stack_resources(rendered), short) == [
        f"The stack needs {GROUPS * 2 * 8} GPUs at peak (rollouts included) but its budget is {short}; raise "
        "llm-serving:gpuBudget or lower replicas."]
