"""The policy pack on models spanning nodes (issue 29): DeepSeek-R1 on 2 x 8 H20 (tests/multinode_stacks.py) on
each orchestrator x engine that runs groups, through the real policy server (tests/policy_server.py) where a
stack passes or a hand-broken manifest is refused, and in process where every engine pod of every group is
broken in turn (cheap, and the same rule functions the server runs).

What the pack reads: a LeaderWorkerSet's leader and worker templates (a vLLM worker runs --headless: no port, no
probes), a StormService role's one template for every rank of podGroupSize, an RBG leaderWorkerPattern's one
template for every pod, its patches refused beyond labels and annotations (policy/workloads.py); each pod holds
the engine's GPUs over its --nnodes (policy/engines gpus_per_node_of_argv)."""

from __future__ import annotations

import copy
import functools
from typing import Iterator

import pytest
from conftest import render_stack
from engine_containers import sglang_options
from multinode_stacks import GROUP_PAIRS, RDMA_NETWORK, r1_stack
from policy_server import PackServer, Resource, kind, operation, plain, serving

from policy import pack, rules
from policy.engines import sglang, vllm
from policy.manifests import PARALLEL_SIZE
from policy.workloads import pod_templates
from render import runtime

pytestmark = pytest.mark.xdist_group("pack-groups")

KINDS = {"leaderworkerset": "LeaderWorkerSet", "stormservice": "StormService", "rolebasedgroup": "RoleBasedGroup"}
WORKLOAD = "llm-serving-dev/deepseek-r1"
IDS = [f"{o}-{e}" for o, e in GROUP_PAIRS]


@pytest.fixture(scope="module")
def server() -> Iterator[PackServer]:
    yield from serving()


@functools.lru_cache(maxsize=None)
def pair(orchestrator: str, engine: str, preview: bool = False):
    """One render per pair: with the RDMA network in `pulumi up` (IPC_LOCK, RDMA resources, NCCL_IB_HCA), over
    TCP in preview."""
    sf = r1_stack(orchestrator, engine, network=None if preview else RDMA_NETWORK)
    return sf, runtime.render(sf, preview=preview)


def group_workload(rendered: runtime.Rendered, orchestrator: str) -> dict:
    return next(copy.deepcopy(plain(r.inputs)) for r in rendered.resources
                if plain(r.inputs).get("kind") == KINDS[orchestrator])


def engine_of(template: dict) -> dict:
    return next(c for c in template["spec"]["containers"] if c["name"] == "engine")


def facts(budget: int):
    def edit(resources: list[Resource]) -> list[Resource]:
        for r in resources:
            if r.type == pack.STACK_FACTS:
                r.inputs.update(gpuBudget=budget)
                r.outputs.update(gpuBudget=budget)
        return resources
    return edit


def both(*edits):
    def edit(resources: list[Resource]) -> list[Resource]:
        for e in edits:
            resources = e(resources)
        return resources
    return edit


# ---- the rendered stacks pass through the server ----

# Every pair in `pulumi up`; in preview (unknowns, policy/unknowns.py) the two with the most new reading: LWS's
# leader and worker templates, RBG's template and its patches.
PASSING = [(o, e, False) for o, e in GROUP_PAIRS] + [("leaderworkerset", "vllm", True), ("rolebasedgroup", "sglang", True)]


@pytest.mark.parametrize("orchestrator,engine,preview", PASSING,
                         ids=[f"{o}-{e}-{'preview-tcp' if p else 'up-rdma'}" for o, e, p in PASSING])
def test_every_group_pair_passes_through_the_server(server, orchestrator, engine, preview):
    sf, rendered = pair(orchestrator, engine, preview)
    report = server.run(operation(rendered, server.fresh_stack("r1"), stack_file=sf, policy_config="dev"))
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.violations() == [], [(d.policy, d.level, d.message) for d in report.violations()]
    if not preview:
        assert report.skipped() == []
        # Not vacuous: the pack saw one group of two 8-GPU engine pods, and a vLLM worker without a port.
        refs = pod_templates(KINDS[orchestrator], group_workload(rendered, orchestrator))
        assert sum(r.replicas for r in refs) == 2 and {rules.pod_gpus(r.template) for r in refs} == {8}
        headless = [r for r in refs if "--headless" in engine_of(r.template)["args"]]
        assert [(r.group_worker, "readinessProbe" in engine_of(r.template)) for r in headless] == (
            [(True, False)] if engine == "vllm" else [])


# ---- hand-broken manifests refused through the server, naming the workload ----

def worker_template(props: dict, orchestrator: str) -> dict:
    """The template the group's workers run: LWS workerTemplate, StormService's and RBG's one template."""
    return next(r.template for r in pod_templates(props["kind"], props) if r.group_worker or orchestrator != "leaderworkerset")


def one_gpu_fewer(orchestrator: str):
    def change(props: dict) -> None:
        res = engine_of(worker_template(props, orchestrator))["resources"]
        res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = "7"
    return change


@pytest.mark.parametrize("orchestrator,engine", GROUP_PAIRS, ids=IDS)
def test_a_worker_template_one_gpu_short_is_refused_through_the_server(server, orchestrator, engine):
    sf, rendered = pair(orchestrator, engine)
    report = server.run(operation(rendered, server.fresh_stack("r1"), stack_file=sf, policy_config="dev",
                                  edit=kind(KINDS[orchestrator], one_gpu_fewer(orchestrator), outputs=True)))
    messages = report.messages("gpu-parallel-size")
    assert any(m.startswith(f"{KINDS[orchestrator]} {WORKLOAD}: container engine at ") and
               m.endswith("has 7 GPUs but the engine argv asks for 8 on each of its 2 nodes (parallel size 16).")
               for m in messages), messages
    assert any(f"{PARALLEL_SIZE}=16 does not match the 7 GPUs of container engine on each of its 2 nodes" in m
               for m in messages), messages
    assert {d.level for d in report.of("gpu-parallel-size")} == {"mandatory"}


def test_a_headless_vllm_in_a_deployment_is_refused_through_the_server(server):
    """--headless serves no port: outside a group's workers it would serve nothing (and its probes never pass)."""
    report = server.run(operation(render_stack("dev"), server.fresh_stack("dev"), edit=kind(
        "Deployment", lambda p: engine_of(p["spec"]["template"])["args"].append("--headless")
        if p["metadata"]["name"] == "deepseek-v4-flash" else None, outputs=True)))
    assert report.messages("engine-probes-tcp") == [
        "Deployment llm-serving-dev/deepseek-v4-flash: container engine at spec.template runs its engine headless, "
        "which serves no port and no /health; only a group's worker pod may, beside a leader that serves."]


def test_three_groups_of_two_pods_over_a_32_gpu_budget_are_refused_through_the_server(server):
    sf, rendered = pair("leaderworkerset", "vllm")
    report = server.run(operation(rendered, server.fresh_stack("r1"), stack_file=sf, policy_config="dev", edit=both(
        facts(32), kind("LeaderWorkerSet", lambda p: p["spec"].update(replicas=3), outputs=True))))
    assert report.messages("gpu-budget") == [
        f"LeaderWorkerSet {WORKLOAD} holds 48 GPUs at peak (6 pods of 8 GPUs); the workloads registered so far need "
        "48 GPUs at peak (rollouts included) but the stack's budget is 32; raise llm-serving:gpuBudget or lower replicas."]
    assert report.messages("gpu-budget-stack") == [
        "The stack needs 48 GPUs at peak (rollouts included) but its budget is 32; raise llm-serving:gpuBudget or "
        "lower replicas."]
    assert report.of("gpu-budget")[0].phase == "analyze"


# ---- every engine pod of every group is checked (in process, the rules the server runs) ----

def violations(policy: str, props: dict) -> list[str]:
    rule = next(p for p in rules.RESOURCE_POLICIES if p.name == policy)
    group, version = props["apiVersion"].split("/")
    return rule.check(f"kubernetes:{group}/{version}:{props['kind']}", props)


def writable_model(t: dict) -> None:
    next(m for m in engine_of(t)["volumeMounts"] if m["name"] == "model")["readOnly"] = False


def small_shm(t: dict) -> None:
    next(v for v in t["spec"]["volumes"] if v["name"] == "shm")["emptyDir"]["sizeLimit"] = "32Gi"


def generative_health(t: dict) -> None:
    for e in engine_of(t)["env"]:
        if e["name"] == "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION":
            e["value"] = "1"


BREAKS = [("model-read-only", writable_model, "without readOnly"),
          ("shm-memory", small_shm, "is below 64Gi for 8 GPUs"),
          ("gpu-parallel-size", lambda t: engine_of(t)["resources"]["limits"].update({"nvidia.com/gpu": "7"}), "limits 7"),
          ("no-generative-health", generative_health, "must set SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0")]


@pytest.mark.parametrize("orchestrator,engine", GROUP_PAIRS, ids=IDS)
def test_each_pod_template_of_a_group_is_checked_on_its_own(orchestrator, engine):
    _, rendered = pair(orchestrator, engine)
    workload = group_workload(rendered, orchestrator)
    paths = {r.path for r in pod_templates(workload["kind"], workload)}
    for policy, brk, expected in BREAKS:
        if policy == "no-generative-health" and engine != "sglang":
            continue
        for path in paths:
            props = copy.deepcopy(workload)
            refs = [r for r in pod_templates(props["kind"], props) if r.path == path]
            brk(refs[0].template)
            found = violations(policy, props)
            assert any(m.startswith(f"{KINDS[orchestrator]} {WORKLOAD}") and expected in m for m in found), (
                policy, path, found)


def test_a_headless_worker_has_no_probes_and_a_headless_leader_is_refused():
    _, rendered = pair("leaderworkerset", "vllm")
    lws = group_workload(rendered, "leaderworkerset")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    probed = copy.deepcopy(lws)
    engine_of(probed["spec"]["leaderWorkerTemplate"]["workerTemplate"])["readinessProbe"] = engine_of(
        lwt["leaderTemplate"])["readinessProbe"]
    assert violations("engine-probes-tcp", probed) == [
        f"LeaderWorkerSet {WORKLOAD}: container engine at spec.leaderWorkerTemplate.workerTemplate runs headless and "
        "serves no port, so its readinessProbe could never pass; a headless worker has no probes."]
    # Without a leaderTemplate the leader runs the workers' template: a headless leader would serve nothing.
    leaderless = copy.deepcopy(lws)
    del leaderless["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert any("spec.leaderWorkerTemplate.workerTemplate runs its engine headless" in m
               for m in violations("engine-probes-tcp", leaderless))
    # Only the leader is routed to: the gateway must not find a worker by the model label.
    labelled = copy.deepcopy(lws)
    labelled["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["model.aibrix.ai/name"] = "r1"
    assert violations("no-router-owned-routes", labelled) == [
        f"LeaderWorkerSet {WORKLOAD}: the group's worker pods at spec.leaderWorkerTemplate.workerTemplate carry "
        "model.aibrix.ai/name; only the leader serves the model, so only it may be routed to."]


def test_an_rbg_template_is_every_pod_s_and_a_patch_of_more_than_labels_is_refused():
    """RBG's leaderWorkerPattern template is the leader's and the workers' (leaderTemplatePatch and
    workerTemplatePatch merged into it, rbg v0.7.0 constructRoleInstanceTemplateByLeaderWorkerPattern): the pack
    reads it as every pod's and refuses a patch that would make the leader or the workers differ in more than labels
    and annotations, which would escape the GPU count and the pod rules."""
    _, rendered = pair("rolebasedgroup", "sglang")
    rbg = group_workload(rendered, "rolebasedgroup")
    (ref,) = pod_templates("RoleBasedGroup", rbg)
    assert (ref.path, ref.group_worker, ref.replicas, rules.pod_gpus(ref.template)) == (
        "spec.roles[0].leaderWorkerPattern.template", False, 2, 8)
    lwp = rbg["spec"]["roles"][0]["leaderWorkerPattern"]
    assert lwp["leaderTemplatePatch"].keys() == {"metadata"} and lwp["leaderTemplatePatch"]["metadata"].keys() == {"labels"}
    assert violations("group-patches", rbg) == []
    touched = copy.deepcopy(rbg)
    touched["spec"]["roles"][0]["leaderWorkerPattern"]["workerTemplatePatch"] = {
        "metadata": {"labels": {"a": "b"}, "name": "x"}, "spec": {"schedulerName": "default-scheduler"}}
    assert violations("group-patches", touched) == [
        f"RoleBasedGroup {WORKLOAD}: spec.roles[0].leaderWorkerPattern.workerTemplatePatch touches spec, metadata.name; "
        "a template patch may change only the pods' metadata.labels and metadata.annotations, so that the pods the "
        "pack checks and counts are the template's."]
    # The template is the leader's too: a headless vLLM there would leave the leader serving nothing.
    headless = copy.deepcopy(rbg)
    engine_of(pod_templates("RoleBasedGroup", headless)[0].template).update(command=["vllm"],
                                                                           args=["serve", "/m", "--headless"])
    assert any("runs its engine headless" in m for m in violations("engine-probes-tcp", headless))
    # The workers' labels are the template's with workerTemplatePatch: the model label routes only to the leader.
    routed = copy.deepcopy(rbg)
    routed["spec"]["roles"][0]["leaderWorkerPattern"]["workerTemplatePatch"] = {
        "metadata": {"labels": {"model.aibrix.ai/name": "deepseek-r1"}}}
    assert violations("no-router-owned-routes", routed) == [
        f"RoleBasedGroup {WORKLOAD}: the group's worker pods (spec.roles[0].leaderWorkerPattern.template with "
        "workerTemplatePatch) carry model.aibrix.ai/name; only the leader serves the model, so only it may be routed to."]
    # A role template by reference is read (and counted) as the template itself; a dangling reference is refused.
    by_ref = copy.deepcopy(rbg)
    role_lwp = by_ref["spec"]["roles"][0]["leaderWorkerPattern"]
    by_ref["spec"]["roleTemplates"] = [{"name": "r1", "template": role_lwp.pop("template")}]
    role_lwp["templateRef"] = {"name": "r1", "patch": {"metadata": {"annotations": {"x": "y"}}}}
    refs = pod_templates("RoleBasedGroup", by_ref)
    assert [(r.path, r.replicas, rules.pod_gpus(r.template), r.template["metadata"]["annotations"]["x"]) for r in refs] == [
        ("spec.roles[0].leaderWorkerPattern.templateRef", 2, 8, "y")]
    assert violations("group-patches", by_ref) == [] and violations("gpu-parallel-size", by_ref) == []
    role_lwp["templateRef"]["name"] = "elsewhere"
    assert violations("group-patches", by_ref) == [
        f"RoleBasedGroup {WORKLOAD}: spec.roles[0].leaderWorkerPattern.templateRef names 'elsewhere', which no "
        "spec.roleTemplates entry is; a template patch may change only the pods' metadata.labels and "
        "metadata.annotations, so that the pods the pack checks and counts are the template's."]


# ---- the flags the pack reads back are the engines' own ----

def test_the_multi_node_flags_the_pack_reads_are_the_engines_own():
    """SGLang 0.5.23 declares --nnodes with a value and no --headless, read from its installed source; vLLM 0.33.0's
    --nnodes/-n and --headless were read from its own serve parser (/work/briefs/facts-engines.md sections 1 and 5);
    the engine modules read them back as the engines do."""
    sglang_flags = sglang_options("0.5.23")
    assert [sglang_flags.get(f) for f in sglang.NODES_FLAGS] == [True] and "--headless" not in sglang_flags
    leader = ["vllm", "serve", "/m", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "-n", "2"]
    assert (vllm.parallel_size_of_argv(leader), vllm.nodes_of_argv(leader), vllm.gpus_per_node_of_argv(leader)) == (16, 2, 8)
    assert vllm.serves_http(leader) and not vllm.serves_http([*leader, "--headless"])
    worker = ["sglang", "serve", "--tp-size", "16", "--nnodes", "2", "--node-rank", "1"]
    assert (sglang.gpus_per_node_of_argv(worker), sglang.serves_http(worker)) == (8, True)
