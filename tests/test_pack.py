"""The CrossGuard pack through its real server (tests/policy_server.py): started as the Python
language host starts it, spoken to as the engine speaks to it, for every committed stack in preview
and in up mode; every policy fails a broken resource through the server too. The robustness sweep
at the end runs in-process, through the server's own proxy wrapper, to stay fast."""

from __future__ import annotations

import copy
import functools
import random
from typing import Callable, Iterator

import pytest
from conftest import PROJECT_DIR, STACKS, render_stack
from google.protobuf import json_format
from policy_server import (
    Edit,
    PackFailure,
    PackServer,
    Report,
    Resource,
    kind,
    marshal,
    operation,
    parse_policy_pack_config,
    plain,
    resources_of,
    serving,
)
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from policy import pack
from policy.workloads import pod_templates
from render import runtime, stackfile
from tools import stacks

# make test runs --dist loadgroup: one worker takes the whole file, so one policy pack server for the file.
pytestmark = pytest.mark.xdist_group("pack")

MODES = ("preview", "up")


@pytest.fixture(scope="session")
def server() -> Iterator[PackServer]:
    """One pack process for the session; it must outlive every operation sent to it."""
    yield from serving()


@functools.lru_cache(maxsize=None)
def rendered_in(stack: str, mode: str) -> runtime.Rendered:
    if mode == "up":
        return render_stack(stack)
    return runtime.render(stackfile.read(PROJECT_DIR, stack), preview=True)


def mandatory_levels() -> set[str]:
    return {p.name for p in pack.policies() if p.enforcement_level == EnforcementLevel.MANDATORY}


def test_the_pack_reports_its_policies_and_levels(server):
    info = server.info()
    assert info.name == "llm-serving" and info.supportsConfig
    reported = {p.name: p.enforcementLevel for p in info.policies}
    assert set(reported) == {p.name for p in pack.policies()}
    assert pack.MANDATORY <= set(reported)
    for name, level in reported.items():
        assert level == (analyzer_pb2.MANDATORY if name in pack.MANDATORY else analyzer_pb2.ADVISORY), name


@pytest.mark.parametrize("stack", STACKS)
def test_each_policy_config_names_real_policies(stack):
    """The CLI passes unknown names through without a word (config.go applyConfig): a misspelled
    name would silently leave the policy at its default level."""
    config = parse_policy_pack_config(stacks.policy_config(PROJECT_DIR, stack).read_text())
    assert set(config) - {"all"} <= {p.name for p in pack.policies()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_through_the_server(server, stack, mode):
    rendered = rendered_in(stack, mode)
    report = server.run(operation(rendered, server.fresh_stack(stack)))
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.mandatory_violations() == [], [(d.policy, d.urn, d.message) for d in report.mandatory_violations()]
    assert report.violations() == [], [(d.policy, d.level, d.urn, d.message) for d in report.violations()]
    if mode == "up":
        assert report.skipped() == [], "nothing is unknown in `pulumi up`"
    assert {d.policy for d in report.skipped()} <= set(report.levels) - mandatory_levels()


TOPOLOGIES = ["pd-rayclusterfleet", "pd-same-pod-deployment", "hybrid-stormservice", "sglang-rolebasedgroup"]


@functools.lru_cache(maxsize=None)
def topology_stack(name: str) -> stackfile.StackFile:
    from test_pd import stack as pd_stack
    from variants import sglang_stack
    return {"pd-rayclusterfleet": lambda: pd_stack("pd", "rayclusterfleet", 24),
            "pd-same-pod-deployment": lambda: pd_stack("pd-same-pod", "deployment", 8),
            "hybrid-stormservice": lambda: pd_stack("hybrid", "stormservice", 32),
            "sglang-rolebasedgroup": sglang_stack}[name]()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_workload_kind_passes_through_the_server(server, topology, mode):
    """The committed stacks only run Deployments; the custom workloads (RayClusterFleet, StormService,
    RoleBasedGroup) reach the server from the dev stack with that topology, under dev's policy config."""
    sf = topology_stack(topology)
    rendered = runtime.render(sf, preview=mode == "preview")
    kinds = {plain(r.inputs).get("kind") for r in resources_of(rendered)}
    assert kinds & {"RayClusterFleet", "StormService", "RoleBasedGroup", "Deployment"}
    report = server.run(operation(rendered, server.fresh_stack("variant"), stack_file=sf, policy_config="dev"))
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.violations() == [], [(d.policy, d.level, d.urn, d.message) for d in report.violations()]


def test_preview_carries_unknowns_where_outputs_flow_in():
    """The preview proof is not vacuous: outside dev the object-store Secret is made from the new
    IAM access key and the bucket configuration from the new bucket, both unknown before `up`."""
    for stack in ("staging", "prod"):
        unknown = {r.name for r in resources_of(rendered_in(stack, "preview")) if _has_unknown(r.inputs)}
        assert {"secrets-object-store", "model-store-versioning"} <= unknown, (stack, unknown)
        assert not any(_has_unknown(r.inputs) for r in resources_of(rendered_in(stack, "up")))


def _has_unknown(value) -> bool:
    if isinstance(value, dict):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value == UNKNOWN_STRING_VALUE


# ---- every policy fails a broken resource, through the server ----



ENGINE = "deepseek-v4-flash"


def deployment(change: Callable[[dict], None], **kw) -> Edit:
    return kind("Deployment", change, k8s_name=ENGINE, **kw)


def template(props: dict) -> dict:
    """The first pod template of any workload kind (policy/workloads.py finds them, in place)."""
    return pod_templates(props["kind"], props)[0].template


def pod_spec(props: dict) -> dict:
    return template(props)["spec"]


def sync_claim_of(spec: dict) -> str:
    """The sync claim beside the serving claim a pod mounts (both carry the source tag: components/volume.py)."""
    serving = next(v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if v["name"] == "model")
    return serving.replace("model-store-", "model-store-sync-", 1)


def engine(props: dict) -> dict:
    return next(c for c in pod_spec(props)["containers"] if c["name"] == "engine")


def of_type(type_: str, change: Callable[[Resource], None]) -> Edit:
    def edit(resources: list[Resource]) -> list[Resource]:
        for r in resources:
            if r.type == type_:
                change(r)
        return resources
    return edit


def without(match: Callable[[Resource], bool]) -> Edit:
    return lambda resources: [r for r in resources if not match(r)]


def set_env(c: dict, name: str, value: str) -> None:
    next(e for e in c["env"] if e["name"] == name)["value"] = value


def args_replace(c: dict, old: str, new: str) -> None:
    c["args"][c["args"].index(old)] = new


def with_default_provider(resources: list[Resource]) -> list[Resource]:
    """A Service on the engine's default Kubernetes provider: the engine registers that provider
    (urn ...::pulumi:providers:kubernetes::default_<version>) and points the resource at it."""
    explicit = next(r for r in resources if r.type == "pulumi:providers:kubernetes")
    default = copy.deepcopy(explicit)
    default.urn = explicit.urn.rsplit("::", 1)[0] + "::default_4_34_2"
    default.name = "default_4_34_2"
    service = next(r for r in resources if plain(r.inputs).get("kind") == "Service")
    service.provider = default.urn
    return [default] + resources


SGLANG_HEALTH = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"

# policy, source stack, mode, edit, words of the expected violation
FAILING = [
    ("engine-probes-tcp", "dev", "up",
     deployment(lambda p: engine(p).update(livenessProbe={"httpGet": {"path": "/health", "port": 8000}})),
     "livenessProbe is not tcpSocket"),
    ("startup-allowance", "dev", "up",
     deployment(lambda p: engine(p)["startupProbe"].update(failureThreshold=30)), "startup allowance 300s"),
    ("model-read-only", "dev", "up",
     deployment(lambda p: next(m for m in engine(p)["volumeMounts"] if m["name"] == "model").update(readOnly=False)),
     "without readOnly"),
    ("gpu-parallel-size", "dev", "up",
     deployment(lambda p: engine(p)["resources"]["requests"].update({"nvidia.com/gpu": "7"})), "requests 7"),
    ("shm-memory", "dev", "up",
     deployment(lambda p: next(v for v in pod_spec(p)["volumes"] if v["name"] == "shm")["emptyDir"].update(
         sizeLimit="32Gi")), "below 64Gi"),
    ("offload-memory", "staging", "up",
     kind("StormService", lambda p: engine(p)["resources"]["limits"].update(memory="160Gi")),
     "does not hold the 128Gi of KV offload"),
    ("image-digest", "dev", "preview",
     deployment(lambda p: engine(p).update(image="vllm/vllm-openai:latest")), "not pinned by digest"),
    ("no-privileged", "dev", "up",
     deployment(lambda p: engine(p)["securityContext"].update(privileged=True)), "privileged false"),
    ("no-host-access", "dev", "up", deployment(lambda p: pod_spec(p).update(hostNetwork=True)), "hostNetwork"),
    ("secret-refs", "dev", "up",
     deployment(lambda p: engine(p)["env"].append({"name": "AWS_SECRET_ACCESS_KEY", "value": "x"})),
     "not a secretKeyRef"),
    ("sync-off-gpu", "dev", "up",
     kind("Job", lambda p: pod_spec(p)["containers"][0]["resources"].setdefault("limits", {}).update(
         {"nvidia.com/gpu": "1"})), "must not request nvidia.com/gpu"),
    # The pre-pull DaemonSet: a GPU would be a count the budget cannot bound; without "void" the
    # NVIDIA runtime would hand its GPU-less container the node's GPUs.
    ("daemonsets-no-gpu", "prod", "up",
     kind("DaemonSet", lambda p: pod_spec(p)["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "8"})),
     "a pod per node is a GPU count no budget bounds"),
    ("daemonsets-no-gpu", "dev", "preview",
     kind("DaemonSet", lambda p: pod_spec(p)["containers"][0].pop("env")), "must set NVIDIA_VISIBLE_DEVICES=void"),
    ("jobs-rerun", "staging", "preview",
     kind("Job", lambda p: p["metadata"]["annotations"].pop("pulumi.com/replaceUnready", None)), "pulumi.com/replaceUnready"),
    ("rollout-gpus", "prod", "up",
     deployment(lambda p: p["spec"]["strategy"]["rollingUpdate"].update(maxSurge=2)), "extra pod"),
    ("custom-resources-awaited", "pd", "up",
     kind("RayClusterFleet", lambda p: p["metadata"]["annotations"].pop("pulumi.com/waitFor")), "pulumi.com/waitFor"),
    ("no-generative-health", "sglang", "up",
     kind("RoleBasedGroup", lambda p: set_env(engine(p), SGLANG_HEALTH, "1")),
     f"must set {SGLANG_HEALTH}=0"),
    ("no-router-owned-routes", "dev", "up",
     deployment(lambda p: p["metadata"]["labels"].update({"model.aibrix.ai/name": "m"})), "shared HTTPRoute"),
    ("pd-wiring", "pd", "up", kind("RayClusterFleet", lambda p: args_replace(engine(p), "mp", "ray")), "Ray executor"),
    ("aibrix-profiles-schema", "pd", "up",
     kind("RayClusterFleet", lambda p: template(p)["metadata"]["annotations"].update(
         {"model.aibrix.ai/config": '{"routingStrategy":"pd"}'})), "routingStrategy form"),
    # The gateway: a 5xx retry would re-send a generation that was running; an HTTP check would generate.
    ("gateway-no-resend", "dev", "up",
     kind("BackendTrafficPolicy", lambda p: p["spec"]["retry"]["retryOn"]["triggers"].append("5xx")), "['5xx']"),
    ("gateway-no-resend", "prod", "up",
     kind("BackendTrafficPolicy", lambda p: p["spec"].update(healthCheck={"active": {
         "type": "HTTP", "http": {"path": "/health"}}})), "active HTTP health check"),
    # A leader patch giving the leader 16 GPUs would escape the count: the pack reads the template's pods.
    ("group-patches", "r1-rbg", "up",
     kind("RoleBasedGroup", lambda p: p["spec"]["roles"][0]["leaderWorkerPattern"]["leaderTemplatePatch"].update(
         spec={"containers": [{"name": "engine", "resources": {"limits": {"nvidia.com/gpu": "16"}}}]})),
     "spec.roles[0].leaderWorkerPattern.leaderTemplatePatch touches spec"),
    # A custom resource's pods too, which kube-score (make e2e) does not read.
    ("ephemeral-storage", "staging", "up",
     kind("StormService", lambda p: engine(p)["resources"]["limits"].pop("ephemeral-storage")),
     "has no ephemeral-storage limits"),
    ("capabilities-minimal", "pd", "up",
     kind("RayClusterFleet", lambda p: engine(p)["securityContext"]["capabilities"].update(add=["IPC_LOCK", "SYS_ADMIN"])),
     "only IPC_LOCK"),
    # Blocking per resource: the facts state the budget, the workload over it is refused before it is created.
    ("gpu-budget", "prod", "preview",
     of_type(pack.STACK_FACTS, lambda r: r.inputs.update(gpuBudget=8)), "need 16 GPUs at peak"),
    ("data-protected", "prod", "preview",
     of_type("aws:s3/bucket:Bucket", lambda r: r.options.update(protect=False)), "must be protected"),
    # Stack policies: AnalyzeStack sees every resource's outputs.
    ("gpu-budget-stack", "prod", "up",
     of_type(pack.STACK_FACTS, lambda r: r.outputs.update(gpuBudget=8)), "The stack needs 16 GPUs at peak"),
    ("data-protected-stack", "prod", "up",
     without(lambda r: r.type == "aws:s3/bucketVersioning:BucketVersioning"), "versioning"),
    ("pd-rolesets", "pd", "up",
     without(lambda r: plain(r.outputs).get("metadata", {}).get("name") == "deepseek-v4-flash-decode"), "no decode pods"),
    ("model-writers", "dev", "up",
     deployment(lambda p: pod_spec(p)["volumes"].append(
         {"name": "weights", "persistentVolumeClaim": {"claimName": sync_claim_of(pod_spec(p))}}), outputs=True),
     "only the sync Job may write"),
    # A GPU pod selecting a node label key no Job's affinity excludes (a model's own pool): the Jobs
    # still pass sync-off-gpu, which sees each Job alone.
    ("sync-off-gpu-stack", "dev", "up",
     deployment(lambda p: pod_spec(p)["nodeSelector"].update({"example.com/gpu-pool": "h20"}), outputs=True),
     "lets in nodes labelled example.com/gpu-pool"),
    ("await-timeouts", "dev", "up",
     of_type("kubernetes:apps/v1:Deployment", lambda r: r.options.update(customTimeouts={"create": 600.0})), "create timeout"),
    ("reference-grants", "dev", "up", without(lambda r: r.type.endswith(":ReferenceGrant")), "no ReferenceGrant"),
    ("explicit-providers", "dev", "up", with_default_provider, "default provider"),
    # gateway.routingLayer inferencePool (issue 31; tests/test_pool_pack.py breaks each rule every way it reads).
    ("inference-pool-pods", "pool-r1-leaderworkerset-vllm", "up",
     kind("InferencePool", lambda p: p["spec"]["selector"]["matchLabels"].pop("leaderworkerset.sigs.k8s.io/worker-index"),
          outputs=True), "selects a group's worker pods"),
    ("inference-pool-picker", "pool-vllm-deployment", "up",
     kind("Deployment", lambda p: args_replace(pod_spec(p)["containers"][0], "deepseek-v4-flash-pool", "other-pool"),
          outputs=True, k8s_name="deepseek-v4-flash-pool-epp"), "it would pick the endpoints of another pool"),
    ("inference-pool-routes", "pool-vllm-deployment", "up", without(lambda r: r.type.endswith(":ReferenceGrant")),
     "RefNotPermitted"),
    ("endpoint-picker-probes", "pool-vllm-deployment", "up",
     kind("Deployment", lambda p: pod_spec(p)["containers"][0].update(livenessProbe={"httpGet": {"path": "/", "port": 9003}}),
          k8s_name="deepseek-v4-flash-pool-epp"), "the picker serves no HTTP health"),
    ("egress-default-deny", "dev", "up",
     without(lambda r: plain(r.outputs).get("metadata", {}).get("name") == "llm-serving-default-deny-egress"),
     "no NetworkPolicy there denies egress by default"),
]


@functools.lru_cache(maxsize=None)
def variant(name: str) -> tuple[runtime.Rendered, stackfile.StackFile]:
    from multinode_stacks import r1_stack
    from pool_stacks import POOL_STACKS, pool_stack
    from test_pd import stack as pd_stack
    from variants import sglang_stack
    if name in POOL_STACKS:
        return runtime.render(pool_stack(name)), pool_stack(name)
    sf = {"pd": lambda: pd_stack("pd", "rayclusterfleet", 24), "sglang": sglang_stack,
          "r1-rbg": lambda: r1_stack("rolebasedgroup", "sglang")}[name]()
    return runtime.render(sf), sf


def source(name: str, mode: str):
    if name in STACKS:
        return rendered_in(name, mode), None
    rendered, sf = variant(name)
    assert mode == "up"
    return rendered, sf


def test_every_policy_has_a_failing_case():
    assert {case[0] for case in FAILING} == {p.name for p in pack.policies()}


@pytest.mark.parametrize("policy,stack,mode,edit,expected", FAILING, ids=[c[0] for c in FAILING])
def test_each_policy_fails_a_broken_stack_through_the_server(server, policy, stack, mode, edit, expected):
    rendered, sf = source(stack, mode)
    op = operation(rendered, server.fresh_stack(stack), edit=edit, stack_file=sf, policy_config="dev" if sf else None)
    report: Report = server.run(op)
    found = report.of(policy)
    assert any(expected in m for m in report.messages(policy)), (expected, [d.message for d in report.diagnostics])
    assert {d.level for d in found} == {report.levels[policy]}
    assert report.skipped_mandatory() == []
    if policy in ("gpu-budget", "data-protected"):
        # Blocking means: reported on the resource as it is registered, before any change, in preview.
        assert {d.phase for d in found} == {"analyze"} and report.levels[policy] == "mandatory"


def facts_last(change: Callable[[Resource], None]) -> Edit:
    """The SDK registers a resource when its inputs resolve, not in program order: send the stack
    facts after every other resource, as an unlucky schedule could."""
    def edit(resources: list[Resource]) -> list[Resource]:
        change_all = of_type("aws:s3/bucket:Bucket", change)(resources)
        facts = [r for r in change_all if r.type == pack.STACK_FACTS]
        for r in facts:
            r.inputs.update(gpuBudget=8)
        return [r for r in change_all if r.type != pack.STACK_FACTS] + facts
    return edit


def test_blocking_checks_do_not_depend_on_the_facts_coming_first(server):
    """Whichever of the facts and a workload (or bucket) is registered second reports the violation."""
    op = operation(rendered_in("prod", "preview"), server.fresh_stack("prod"),
                   edit=facts_last(lambda r: r.options.update(protect=False)))
    assert op.resources[-1].type == pack.STACK_FACTS
    report = server.run(op)
    facts_urn = op.resources[-1].urn
    assert [(d.urn, m) for d, m in zip(report.of("gpu-budget"), report.messages("gpu-budget"))] == [
        (facts_urn, "The workloads registered so far need 16 GPUs at peak (rollouts included) but the stack's "
                    "budget is 8; raise llm-serving:gpuBudget or lower replicas.")]
    protected = report.messages("data-protected")
    assert [d.urn for d in report.of("data-protected")] == [facts_urn]
    assert len(protected) == 1 and protected[0].startswith("Bucket model-store-bucket must be protected in prod")


# ---- autoscalers: the budget counts a PodAutoscaler's maxReplicas for its target (issue 13) ----

PODAUTOSCALER = "kubernetes:autoscaling.aibrix.ai/v1alpha1:PodAutoscaler"
STORMSERVICE = "kubernetes:orchestration.aibrix.ai/v1alpha1:StormService"


def max_replicas(n: int) -> Edit:
    return kind("PodAutoscaler", lambda p: p["spec"].update(maxReplicas=n), outputs=True)


@pytest.mark.parametrize("mode", MODES)
def test_an_autoscaler_that_could_exceed_the_budget_is_blocked_before_it_is_created(server, mode):
    """prod's Deployment runs 2 x 8 GPUs, its budget 16: an autoscaler allowed 3 pods is refused as it
    is registered, and the whole stack with it."""
    op = operation(rendered_in("prod", mode), server.fresh_stack("prod"), edit=max_replicas(3))
    report = server.run(op)
    (pa,) = [r for r in op.resources if r.type == PODAUTOSCALER]
    assert [(d.phase, d.urn, m) for d, m in zip(report.of("gpu-budget"), report.messages("gpu-budget"))] == [
        ("analyze", pa.urn, "Deployment llm-serving/deepseek-v4-flash holds 24 GPUs at peak (3 pods of 8 GPUs); "
                            "the workloads registered so far need 24 GPUs at peak (rollouts included) but the "
                            "stack's budget is 16; raise llm-serving:gpuBudget or lower replicas.")]
    if mode == "up":
        assert report.messages("gpu-budget-stack") == [
            "The stack needs 24 GPUs at peak (rollouts included) but its budget is 16; raise llm-serving:gpuBudget "
            "or lower replicas."]
    # Within the budget (as committed), nothing is reported.
    assert server.run(operation(rendered_in("prod", mode), server.fresh_stack("prod"))).of("gpu-budget") == []


def test_an_autoscaler_registered_before_its_workload_is_counted_when_the_workload_comes(server):
    def autoscaler_first(resources: list[Resource]) -> list[Resource]:
        resources = max_replicas(3)(resources)
        pa = [r for r in resources if r.type == PODAUTOSCALER]
        return pa + [r for r in resources if r.type != PODAUTOSCALER]

    op = operation(rendered_in("prod", "preview"), server.fresh_stack("prod"), edit=autoscaler_first)
    report = server.run(op)
    (dep,) = [r for r in op.resources if plain(r.inputs).get("kind") == "Deployment"
              and plain(r.inputs)["metadata"]["name"] == ENGINE]
    assert [d.urn for d in report.of("gpu-budget")] == [dep.urn]
    assert "need 24 GPUs" in report.messages("gpu-budget")[0]


@pytest.mark.parametrize("mode", MODES)
def test_an_autoscaled_stormservice_is_counted_at_max_replicas_rolesets(server, mode):
    """staging's two StormServices run one RoleSet of one 8-GPU pod each, their autoscalers allow 2 (32 of
    budget 32): at 3 RoleSets each arm needs 24 GPUs, and the second autoscaler pushes the total past 32."""
    op = operation(rendered_in("staging", mode), server.fresh_stack("staging"), edit=max_replicas(3))
    report = server.run(op)
    # Blocked as the autoscaler or StormService that passes the budget registers, whichever comes second.
    counted = {r.urn for r in op.resources if r.type in (PODAUTOSCALER, STORMSERVICE)}
    assert len(counted) == 4 and report.of("gpu-budget") and {d.urn for d in report.of("gpu-budget")} <= counted
    assert report.messages("gpu-budget")[-1].endswith(
        "the workloads registered so far need 48 GPUs at peak (rollouts included) but the stack's budget is 32; "
        "raise llm-serving:gpuBudget or lower replicas.")
    if mode == "up":
        assert report.messages("gpu-budget-stack") == [
            "The stack needs 48 GPUs at peak (rollouts included) but its budget is 32; raise llm-serving:gpuBudget "
            "or lower replicas."]
    assert server.run(operation(rendered_in("staging", mode), server.fresh_stack("staging"))).of("gpu-budget") == []


def test_an_autoscaler_of_a_workload_the_stack_lacks_is_reported(server):
    retarget = kind("PodAutoscaler", lambda p: p["spec"]["scaleTargetRef"].update(name="elsewhere"), outputs=True)
    report = server.run(operation(rendered_in("prod", "up"), server.fresh_stack("prod"), edit=retarget))
    assert report.messages("gpu-budget-stack") == [
        "PodAutoscaler llm-serving/deepseek-v4-flash scales Deployment llm-serving/elsewhere, which this stack does "
        "not declare; the GPUs it may add cannot be counted against the budget."]


# ---- robustness: no rule raises on any unknown, through the server's own proxy ----

# Variants per stack (of about 1300 to 2300): every top-level value, then a seeded sample of the rest.
# Each variant is a pass of every resource policy; the pack unwraps the proxies once per policy,
# which is most of the time (about 1.5 ms per variant on the 2-core machine).
SWEEP_BUDGET = 900


def _paths(value, path=()):
    """Every leaf, and every list or object (an unknown may replace a whole value)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))
    yield path


def _replaced(value, path, sentinel):
    if not path:
        return sentinel
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, sentinel)}
    return [_replaced(v, rest, sentinel) if i == head else v for i, v in enumerate(value)]


@pytest.mark.parametrize("stack", STACKS)
def test_no_resource_policy_raises_on_any_unknown(stack):
    """Each leaf (and each subtree) of each resource's inputs replaced in turn by the unknown
    sentinel the engine sends, wrapped as pulumi_policy's server wraps it: an advisory policy may
    give up (UnknownValueError, "can't run ... during preview"), a mandatory one may not, and none
    may raise anything else (the engine would fail the preview: "failed to run policy")."""
    mandatory = {name for name, level in _levels(stack).items() if level == "mandatory"}
    policies = [p for p in pack.policies() if isinstance(p, ResourceValidationPolicy)]
    failures = sweep(rendered_in(stack, "up"), policies, mandatory, SWEEP_BUDGET, seed=stack)
    assert failures == [], failures[:10]


@pytest.mark.parametrize("topology", ["pd-rayclusterfleet", "hybrid-stormservice", "sglang-rolebasedgroup"])
def test_no_resource_policy_raises_on_any_unknown_in_a_custom_workload(topology):
    """The same sweep over the custom workload kinds only (the rest of those stacks is dev's)."""
    mandatory = {name for name, level in _levels("dev").items() if level == "mandatory"}
    policies = [p for p in pack.policies() if isinstance(p, ResourceValidationPolicy)]
    rendered = runtime.render(topology_stack(topology))
    workloads = [r for r in rendered.registered if r.inputs.get("kind") in ("RayClusterFleet", "StormService", "RoleBasedGroup")]
    assert workloads
    failures = sweep(rendered, policies, mandatory, 400, seed=topology, only={r.name for r in workloads})
    assert failures == [], failures[:10]


def test_the_sweep_catches_naive_policies():
    """The sweep is not blind: a mandatory rule that reads a field the engine may send unknown is
    caught as skipped, one that adds a proxy list to a list as raising."""
    def touches(args, report):
        if args.resource_type == "kubernetes:apps/v1:Deployment":
            str(args.props["metadata"]["name"])

    def adds(args, report):
        if args.resource_type == "kubernetes:apps/v1:Deployment":
            args.props["spec"]["template"]["spec"]["containers"] + []

    naive = [ResourceValidationPolicy("touches", "reads metadata.name", touches),
             ResourceValidationPolicy("adds", "treats a proxy list as a list", adds)]
    failures = sweep(rendered_in("dev", "up"), naive, {"touches"}, 100, seed="dev")
    assert ("touches", "skipped") in {(f[0], f[3]) for f in failures}
    assert any(f[0] == "adds" and "TypeError" in f[3] for f in failures)


def sweep(rendered: runtime.Rendered, policies: list, mandatory: set[str], budget: int, seed: str,
          only: set[str] | None = None) -> list[tuple]:
    variants = [(r, props, path) for r in resources_of(rendered) if only is None or r.name in only
                for props in [plain(json_format.MessageToDict(marshal(r.inputs)))] for path in _paths(props) if path]
    top = [v for v in variants if len(v[2]) == 1]
    rest = [v for v in variants if len(v[2]) > 1]
    sample = top + random.Random(seed).sample(rest, min(len(rest), max(0, budget - len(top))))
    failures = []
    for r, props, path in sample:
        # The props as the server builds them (policy.py Analyze): the wire inputs already went
        # through protobuf (numbers are floats), so only the server's own unwrapping remains.
        proxied = unknown_checking_proxy(deserialize_properties(_replaced(props, path, UNKNOWN_STRING_VALUE)))
        opts = PolicyResourceOptions(r.options["protect"], [], None, [], PolicyCustomTimeouts(0, 0, 0), [], r.parent or None)
        for p in policies:
            try:
                p.validate(ResourceValidationArgs(r.type, proxied, r.urn, r.name, opts, None), lambda *_: None)
            except UnknownValueError:
                if p.name in mandatory:
                    failures.append((p.name, r.name, path, "skipped"))
            except Exception as err:  # noqa: BLE001 - any other exception fails the preview
                failures.append((p.name, r.name, path, repr(err)))
    return failures


def _levels(stack: str) -> dict[str, str]:
    levels = {p.name: p.enforcement_level.value for p in pack.policies()}
    for name, c in parse_policy_pack_config(stacks.policy_config(PROJECT_DIR, stack).read_text()).items():
        if c["enforcementLevel"]:
            levels[name] = c["enforcementLevel"]
    return levels


NAIVE_PACK = '''
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy



def reads_secret(args, report_violation):
    if args.resource_type == "kubernetes:core/v1:Secret":
        str(args.props["stringData"])


def adds_lists(args, report_violation):
    if args.resource_type == "kubernetes:apps/v1:Deployment":
        args.props["spec"]["template"]["spec"]["containers"] + []


PolicyPack(name="naive", enforcement_level=EnforcementLevel.MANDATORY, policies=[
    ResourceValidationPolicy(name="reads-secret", description="reads stringData", validate=reads_secret),
    ResourceValidationPolicy(name="adds-lists", description="adds proxy lists", validate=adds_lists),
])
'''


def test_the_harness_fails_where_the_engine_fails(tmp_path):
    """Through a real server too, a mandatory rule skipped on an unknown is reported as skipped, and a
    rule that raises fails the operation ("failed to run policy"), as the engine reports them."""
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: python\n")
    (tmp_path / "__main__.py").write_text(NAIVE_PACK)
    with PackServer.start(tmp_path) as naive:
        op = operation(rendered_in("staging", "preview"), naive.fresh_stack("staging"))
        op.policy_config = {"adds-lists": {"enforcementLevel": "disabled", "properties": {}}}
        report = naive.run(op)
        assert {d.policy for d in report.skipped_mandatory()} == {"reads-secret"}
        with pytest.raises(PackFailure, match=r"failed to run policy: Analyze .*Deployment.*unsupported operand type\(s\) for \+: '_ListProxy'"):
            naive.run(operation(rendered_in("dev", "up"), naive.fresh_stack("dev")))
