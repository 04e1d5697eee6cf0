"""Autoscaling per served model (issue 13): the rendered PodAutoscaler is one AIBrix v0.7.0 runs and
reads real engine metrics with; the config refuses what v0.7.0 (or Pulumi around it) cannot do; the
GPU budget counts maxReplicas; routing turns prefix-cache-aware; only AIBrix's controller manager
gains a path, to the autoscaled engines' metrics port. The AIBrix behaviour is ported in
tests/upstream_aibrix.py (v0.7.0, file by file); the pack's refusal runs through the real policy
server in tests/test_pack.py."""

from __future__ import annotations

import copy
import json
import re

import pytest
import upstream_aibrix as aibrix
import upstream_pulumi_kubernetes as pk
import upstream_sglang as sglang
import upstream_vllm as vllm
import yaml
from conftest import PROJECT_DIR, k8s_objects, render_stack, shared_dir, stack_resources
from crd_schemas import strict, validate_custom_resource
from netpol import Pod, allowed
from test_config import SECRETS, problems, raw_config
from test_network_monitoring import EXPORTED, pods_of

import apivalidation
from components import autoscaling, combined
from components.gateway import service_name
from components.orchestrators import base as orchestrator_base
from components.orchestrators import stormservice
from components.routing import routing_strategy
from config_model import AUTOSCALING_METRICS, ServedModel
from policy import gpu_accounting, stack_rules, workloads
from render import output, runtime, stackfile
from stacks import loader, rules


def objects(stack: str, kind: str) -> list[dict]:
    return [o for o in k8s_objects(render_stack(stack)) if o["kind"] == kind]


def go_duration_seconds(text: str) -> float:
    """time.ParseDuration for the forms used here ("0s", "300s", "5m")."""
    m = re.fullmatch(r"(\d+)(s|m|h)", text)
    assert m, text
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


# ---- the rendered PodAutoscaler against v0.7.0 ----

def test_prod_podautoscaler_is_one_v070_runs_on_metrics_the_engine_exports():
    (pa,) = objects("prod", aibrix.PA_KIND)
    (dep,) = objects("prod", "Deployment")
    spec = pa["spec"]
    assert pa["apiVersion"] == aibrix.PA_API_VERSION
    assert spec["scalingStrategy"] in aibrix.PA_SELF_FETCHING          # no HPA, no custom-metrics adapter
    assert len(spec["metricsSources"]) == aibrix.PA_MAX_METRIC_SOURCES
    (source,) = spec["metricsSources"]
    assert source["metricSourceType"] == "pod" and all(source.get(k) for k in aibrix.PA_POD_SOURCE_REQUIRED)
    assert float(source["targetValue"]) > 0
    # The target: this stack's Deployment, in the autoscaler's namespace, with the spec.replicas and
    # spec.selector the scaler reads; its pods say which engine's metric names apply.
    ref = spec["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", dep["metadata"]["name"])
    assert "namespace" not in ref and pa["metadata"]["namespace"] == dep["metadata"]["namespace"]
    assert isinstance(dep["spec"]["replicas"], int)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in dep["spec"]["selector"]["matchLabels"].items())
    engine = aibrix.engine_type(pod_labels)
    assert engine == "vllm"
    # The port the fetcher dials is the engine container's own port (a number, not a port name).
    ports = {p["containerPort"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    assert int(source["port"]) in ports
    kind, raw = aibrix.PA_METRICS[source["targetMetric"]]
    assert kind == "gauge" and raw[engine] in EXPORTED
    assert spec["minReplicas"] <= dep["spec"]["replicas"] <= spec["maxReplicas"]


@pytest.mark.parametrize("metric", [m for m in AUTOSCALING_METRICS if m != "ttft"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_accepted_metric_reads_a_gauge_the_pinned_engines_export(metric, engine):
    kind, raw = aibrix.PA_METRICS[autoscaling.AIBRIX_METRIC[metric]]
    table = vllm.METRICS if engine == "vllm" else sglang.METRICS
    assert kind == "gauge" and table[raw[engine]][0] == "gauge"
    # A nonzero sample reaches the algorithm as itself.
    assert aibrix.pod_metric(autoscaling.AIBRIX_METRIC[metric], engine, {raw[engine]: 0.5}) == 0.5


def test_the_metrics_left_out_would_read_zero():
    # TTFT is a histogram: v0.7.0 hands the algorithm 0 for it whatever the engine measures.
    ttft = autoscaling.AIBRIX_METRIC["ttft"]
    assert aibrix.PA_METRICS[ttft][0] == "histogram"
    assert aibrix.pod_metric(ttft, "vllm", {"vllm:time_to_first_token_seconds": 9.0}) == 0.0
    # AIBrix's older gpu_cache_usage_perc reads a vLLM gauge the pinned releases no longer define.
    old = aibrix.PA_METRICS["gpu_cache_usage_perc"][1]["vllm"]
    assert old in vllm.REMOVED and old not in EXPORTED
    assert "gpu_cache_usage_perc" not in autoscaling.AIBRIX_METRIC.values()


def test_windows_are_zero_because_v070_windows_only_scale_further():
    (pa,) = objects("prod", aibrix.PA_KIND)
    ann = pa["metadata"]["annotations"]
    up = go_duration_seconds(ann[aibrix.PA_ANN_SCALE_UP_COOLDOWN])
    down = go_duration_seconds(ann[aibrix.PA_ANN_SCALE_DOWN_COOLDOWN])
    assert (up, down) == (0, 0)
    # Load rose (3 pods asked for and made), then eased to 2: with the rendered windows the decision is
    # 2; with v0.7.0's default 300 s scale-down window it is the 1 seen before the rise.
    past = [(0.0, 1), (100.0, 3)]
    assert aibrix.stabilize(list(past), 2, 3, 200.0, up, down) == 2
    assert aibrix.stabilize(list(past), 2, 3, 200.0, 0, aibrix.PA_DEFAULTS["scaleDownCooldownSeconds"]) == 1
    # A scale-up window holds the highest recent ask instead of waiting: 3 although 2 is asked now.
    assert aibrix.stabilize([(0.0, 3)], 2, 1, 100.0, 600, 0) == 3
    assert aibrix.stabilize([(0.0, 3)], 2, 1, 100.0, up, down) == 2


def test_kv_cache_usage_cannot_run_away_while_new_pods_cold_start():
    """A pod still in its 12-23 min cold start answers no /metrics and reads 0: on KV-cache usage
    (at most 1 per pod) the recommendation stays within ceil(serving pods / target) however long
    the cold start takes; on queue length it follows the growing queue up to maxReplicas."""
    target, most = 0.8, 8
    for serving in (1, 2, 3):
        pods = serving
        for _ in range(10):   # ten decisions in a row during one cold start
            values = [1.0] * serving + [aibrix.pod_metric("kv_cache_usage_perc", "vllm", {})] * (pods - serving)
            pods = aibrix.apa_replicas(pods, values, target, 1, most)
        assert pods <= -(-serving // target) < most
    pods = 1
    for queue in (10, 20, 40, 80):
        pods = aibrix.apa_replicas(pods, [queue] + [0.0] * (pods - 1), 4.0, 1, most)
    assert pods == most


def test_workload_replicas_are_left_to_the_autoscaler():
    (prod,) = [r for r in render_stack("prod").resources if r.type == "kubernetes:apps/v1:Deployment"]
    # As the engine receives it (RegisterResourceRequest.ignoreChanges).
    assert prod.engine_options["ignoreChanges"] == autoscaling.IGNORE_REPLICAS == ["spec.replicas"]
    assert aibrix.PA_REPLICAS_PATH == ("spec", "replicas")
    assert "apps" in aibrix.CONTROLLER_UPDATABLE_GROUPS
    (dev,) = [r for r in render_stack("dev").resources if r.type == "kubernetes:apps/v1:Deployment"
              and r.name == "deepseek-v4-flash-deployment"]
    assert dev.engine_options["ignoreChanges"] == []


def test_autoscaler_is_created_after_its_workload():
    resources = render_stack("prod").resources
    (pa,) = [r for r in resources if r.type.endswith(":PodAutoscaler")]
    (dep,) = [r for r in resources if r.type == "kubernetes:apps/v1:Deployment"]
    assert f"kubernetes:apps/v1:Deployment::{dep.name}" in pa.options["dependsOn"]


# ---- config ----

def autoscaled(stack: str = "prod", **changes) -> dict:
    raw = raw_config(stack)
    raw["models"][0].setdefault("autoscaling", {"enabled": True, "minReplicas": 1, "maxReplicas": 2}).update(changes)
    return raw


def test_autoscaling_is_off_by_default_and_prod_turns_it_on():
    assert not ServedModel.model_fields["autoscaling"].default_factory().enabled
    assert objects("dev", aibrix.PA_KIND) == []
    for stack in ("prod", "staging"):
        cfg = loader.validate(raw_config(stack), stack, SECRETS)
        assert all(m.autoscaling.enabled for m in cfg.models), stack


@pytest.mark.parametrize("changes,replicas,expected", [
    ({"minReplicas": 3, "maxReplicas": 2}, 2, "models[0].autoscaling.minReplicas = 3: must not exceed maxReplicas 2"),
    ({"minReplicas": 1, "maxReplicas": 2}, 3, "models[0].replicas = 3: is the count the workload starts with and "
                                              "must lie within autoscaling.minReplicas 1 and maxReplicas 2"),
    ({"metric": "ttft"}, 2, "models[0].autoscaling.metric = 'ttft': is not readable by AIBrix v0.7.0: TTFT is a "
                            "histogram"),
    ({"targetValue": 80}, 2, "models[0].autoscaling.targetValue = 80.0: must be at most 1"),
    ({"maxReplicas": 3}, 2, "gpuBudget = 16: the workloads need 24 GPUs at peak, rollouts included "
                            "(deepseek-v4-flash 24); raise gpuBudget or lower replicas or autoscaling.maxReplicas"),
])
def test_bad_autoscaling_is_refused_under_its_field(changes, replicas, expected):
    raw = autoscaled(**changes)
    raw["models"][0]["replicas"] = replicas
    lines = problems(raw, stack="prod")
    assert any(line.startswith(f"Pulumi.prod.yaml: llm-serving:{expected}") for line in lines), lines


def test_a_kv_cache_target_the_usage_can_never_exceed_by_v070_s_tolerance_is_refused():
    """APA scales up only when the pods' average exceeds the target by its 10% tolerance: KV-cache
    usage tops out at 1, so from a target of 1/1.1 up not even full pods ever add one."""
    tolerance = aibrix.PA_DEFAULTS["upTolerance"]
    assert autoscaling.UP_TOLERANCE == tolerance
    assert aibrix.apa_replicas(1, [1.0], 0.95, 1, 2) == 1          # full, and never scaled up
    assert aibrix.apa_replicas(1, [1.0], 0.9, 1, 2) == 2
    lines = problems(autoscaled(targetValue=0.95), stack="prod")
    assert any(line.startswith("Pulumi.prod.yaml: llm-serving:models[0].autoscaling.targetValue = 0.95: must be below "
                               "0.909") for line in lines), lines
    cfg = loader.validate(autoscaled(targetValue=0.9), "prod", SECRETS)
    assert rules.check(cfg, "prod") == []


def scaled_to_zero_prod() -> stackfile.StackFile:
    """prod's stack file with its model allowed to scale to zero, the Jobs that need a serving pod off."""
    sf = stackfile.read(PROJECT_DIR, "prod")
    sf.config["llm-serving:allowScaleToZero"] = "true"
    models = json.loads(sf.config["llm-serving:models"])
    models[0]["autoscaling"]["minReplicas"] = 0
    sf.config["llm-serving:models"] = json.dumps(models)
    ops = json.loads(sf.config["llm-serving:operations"])
    ops.update(smoke={"enabled": False}, warmup={"enabled": False})
    sf.config["llm-serving:operations"] = json.dumps(ops)
    return sf


def test_scale_to_zero_needs_the_stack_to_opt_in_and_the_plan_says_what_the_first_request_waits():
    # Why: at zero pods v0.7.0 reads no value, averages 0, and stays at zero whatever arrives.
    assert aibrix.apa_replicas(0, [], 0.8, 0, 2) == 0
    assert aibrix.apa_replicas(1, [0.0], 0.8, 0, 2) == 0       # an idle pod is scaled away
    raw = autoscaled(minReplicas=0)
    assert any("models[0].autoscaling.minReplicas = 0: scale to zero needs allowScaleToZero: true" in line
               and "~12 min" in line for line in problems(raw, stack="prod"))
    raw["allowScaleToZero"] = True
    raw["operations"].update(smoke={"enabled": False}, warmup={"enabled": False})
    cfg = loader.validate(raw, "prod", SECRETS)
    assert rules.check(cfg, "prod") == []

    plan = output.plan_md(runtime.render(scaled_to_zero_prod()))
    assert "| Deployment deepseek-v4-flash | 0-2 |" in plan
    assert ("**deepseek-v4-flash scales to zero.** With no pod the gateway refuses its requests" in plan
            and "the first request then waits a full cold start (about 12 min, measured for profile deepseek-v4 on vllm (field report 6))" in plan)


def test_scale_to_zero_is_refused_while_jobs_after_each_rollout_need_a_serving_pod():
    """The smoke, warm-up and load-test Jobs run after every rollout and wait for the model to serve.
    At zero pods nothing they send makes a pod: v0.7.0 reads no metric and stays at zero, resync after
    resync, so each Job waits out its deadline and fails `pulumi up`."""
    pods = 0
    for _ in range(360):   # an hour of 10-s resyncs while the Jobs wait
        pods = aibrix.pa_reconcile(pods, [], 0.8, 0, 2)
    assert pods == 0
    raw = autoscaled(minReplicas=0)
    raw["allowScaleToZero"] = True
    raw["operations"]["loadTest"] = {"enabled": True}
    lines = problems(raw, stack="prod")
    assert any(line.startswith("Pulumi.prod.yaml: llm-serving:models[0].autoscaling.minReplicas = 0: cannot be 0 "
                               "with operations.smoke.enabled, operations.warmup.enabled and "
                               "operations.loadTest.enabled") for line in lines), lines
    raw["operations"].update(smoke={"enabled": False}, warmup={"enabled": False}, loadTest={"enabled": False})
    assert rules.check(loader.validate(raw, "prod", SECRETS), "prod") == []


def test_the_plan_s_way_back_from_zero_leaves_a_pod_the_autoscaler_keeps():
    """The operator's commands plan.md gives, run against the ported controller: a pod that cold-starts
    reads 0 (no /metrics yet), and with minReplicas 0 APA scales it away within a resync, long
    before the 12-min cold start ends. Only a floor raised on the PodAutoscaler keeps it."""
    rendered = runtime.render(scaled_to_zero_prod())
    (pa,) = [o for o in k8s_objects(rendered) if o["kind"] == aibrix.PA_KIND]
    (note,) = [line for line in output.plan_md(rendered).splitlines() if "scales to zero.**" in line]
    ns, name = pa["metadata"]["namespace"], pa["metadata"]["name"]
    state = {"minReplicas": pa["spec"]["minReplicas"], "replicas": 0}
    for cmd in re.findall(r"`(kubectl [^`]+)`", note):
        if m := re.fullmatch(rf"kubectl -n {ns} scale \w+/{name} --replicas=(\d+)", cmd):
            state["replicas"] = int(m.group(1))
        elif m := re.fullmatch(rf"kubectl -n {ns} patch podautoscalers\.autoscaling\.aibrix\.ai/{name} --type merge "
                               r"-p '(.+)'", cmd):
            state.update(json.loads(m.group(1))["spec"])
        else:
            raise AssertionError(f"unexpected command in plan.md: {cmd}")
    assert state["replicas"] >= 1
    cold = aibrix.pod_metric(pa["spec"]["metricsSources"][0]["targetMetric"], "vllm", {})
    target = float(pa["spec"]["metricsSources"][0]["targetValue"])
    replicas = state["replicas"]
    for _ in range(6):   # a minute of resyncs during the cold start
        replicas = aibrix.pa_reconcile(replicas, [cold] * replicas, target, state["minReplicas"], pa["spec"]["maxReplicas"])
    assert replicas >= 1, note
    # Without the raised floor the scale-up is undone at the first resync.
    assert aibrix.pa_reconcile(1, [cold], target, 0, pa["spec"]["maxReplicas"]) == 0


@pytest.mark.parametrize("edit,field,why", [
    (lambda m: m.update(topology="hybrid", orchestrator="stormservice",
                        rollout={"strategy": "RollingUpdate", "maxUnavailable": 1}),
     "topology = 'hybrid'", "keeps its P/D roleset at one fixed pair"),
    (lambda m: m.update(engine="sglang", orchestrator="rolebasedgroup", vllm=None,
                        rollout={"strategy": "RollingUpdate", "maxUnavailable": 1}),
     "orchestrator = 'rolebasedgroup'", "grants nothing on workloads.x-k8s.io"),
    (lambda m: m.update(topology="pd", orchestrator="rayclusterfleet",
                        rollout={"strategy": "RollingUpdate", "maxUnavailable": 1}),
     "topology = 'pd'", "would scale the pair's sides apart"),
    (lambda m: m.update(topology="pd-same-pod"), "topology = 'pd-same-pod'", "field report 9.5"),
])
def test_autoscaling_where_v070_or_pulumi_cannot_scale_is_refused_naming_why(edit, field, why):
    raw = autoscaled()
    model = raw["models"][0]
    edit(model)
    if model.get("vllm") is None:
        model.pop("vllm")
    lines = problems(raw, stack="prod")
    assert any(f"llm-serving:models[0].{field}: cannot be autoscaled: " in line and why in line for line in lines), lines


def test_the_budget_counts_max_replicas_plus_rollout_extra_pods():
    raw = autoscaled(maxReplicas=2)
    raw["models"][0]["replicas"] = 1
    raw["models"][0]["rollout"] = {"strategy": "RollingUpdate", "maxUnavailable": 1, "maxSurge": 0}
    cfg = loader.validate(raw, "prod", SECRETS)
    assert rules.gpu_demand(cfg) == [("deepseek-v4-flash", 16)]
    off = copy.deepcopy(raw)
    off["models"][0]["autoscaling"]["enabled"] = False
    assert rules.gpu_demand(loader.validate(off, "prod", SECRETS)) == [("deepseek-v4-flash", 8)]


def test_plan_counts_each_autoscaled_model_at_its_max_replicas_where_it_shows_peak_gpus():
    """staging's arms start at one 8-GPU pod and may grow to two: every peak in plan.md says 16."""
    rendered = render_stack("staging")
    workloads = {r["name"]: r["peakGpus"] for r in output.workload_rows(rendered) if r["kind"] == "StormService"}
    served = {r["model"]: (r["gpus"], r["peakGpus"]) for r in output.served_model_gpus(rendered)}
    assert workloads == {"deepseek-v4-flash": 16, "deepseek-v4-flash-dspark": 16}
    assert served == {"deepseek-v4-flash": (8, 16), "deepseek-v4-flash-dspark": (8, 16)}


# ---- routing ----

def test_the_default_routing_is_prefix_cache_aware_with_or_without_an_autoscaler():
    """Switching autoscaling on or off must not change the pods' strategy annotation (issue 18 case 2)."""
    base = loader.validate(raw_config("dev"), "dev", SECRETS).models[0]
    assert base.replicas == 1 and routing_strategy(base) == "prefix-cache"
    scaled = base.model_copy(update={"autoscaling": base.autoscaling.model_copy(
        update={"enabled": True, "max_replicas": 2})})
    assert routing_strategy(scaled) == "prefix-cache" and "prefix-cache" in aibrix.REGISTERED_STRATEGIES
    fixed = base.model_copy(update={"routing_strategy": "least-kv-cache", "autoscaling": scaled.autoscaling})
    assert routing_strategy(fixed) == "least-kv-cache"
    assert "DeepSeek-V4-Flash `prefix-cache`" in output.plan_md(render_stack("prod"))


# ---- network ----

def test_only_the_aibrix_controller_gains_a_path_to_the_autoscaled_engines_metrics_port():
    objs = k8s_objects(render_stack("prod"))
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    (engine,) = [p for p in pods_of(objs) if p.labels.get("app.kubernetes.io/component") == "engine"]
    (pa,) = [o for o in objs if o["kind"] == aibrix.PA_KIND]
    port = int(pa["spec"]["metricsSources"][0]["port"])
    controller = Pod(aibrix.AIBRIX_NAMESPACE, aibrix.CONTROLLER_MANAGER_POD_LABELS)
    assert allowed(policies, controller, engine, port)
    # Nothing else of the controller's, and no look-alike elsewhere.
    for other_port in set(engine.ports.values()) - {port}:
        assert not allowed(policies, controller, engine, other_port)
    assert not allowed(policies, Pod("default", aibrix.CONTROLLER_MANAGER_POD_LABELS), engine, port)
    assert not allowed(policies, Pod(aibrix.AIBRIX_NAMESPACE, {"app": "other"}), engine, port)
    # A model without an autoscaler stays closed to the controller (dev).
    dev = k8s_objects(render_stack("dev"))
    (dev_engine,) = [p for p in pods_of(dev) if p.labels.get("app.kubernetes.io/component") == "engine"]
    assert not allowed([o for o in dev if o["kind"] == "NetworkPolicy"], controller, dev_engine, port)


# ---- schema and API-server rules ----

def test_the_podautoscaler_passes_its_crd_and_the_render_refuses_a_broken_one():
    (pa,) = objects("prod", aibrix.PA_KIND)
    # Only the CRD files naming the kind are parsed (the whole directory is megabytes).
    index = apivalidation.crd_index(str(shared_dir("crds")), frozenset({aibrix.PA_KIND}))
    schemas = {k: strict(v) for k, v in index.items()}
    assert validate_custom_resource(pa, schemas) == []
    assert apivalidation.validate([pa], index) == []
    bad_strategy = copy.deepcopy(pa)
    bad_strategy["spec"]["scalingStrategy"] = "XPA"
    assert validate_custom_resource(bad_strategy, schemas)
    unknown_field = copy.deepcopy(pa)
    unknown_field["spec"]["scaleDownDelay"] = "20m"
    assert validate_custom_resource(unknown_field, schemas)
    too_many = copy.deepcopy(pa)
    too_many["spec"]["maxReplicas"] = 2**31
    assert [p.field for p in apivalidation.validate([too_many], index)] == ["spec.maxReplicas"]


# ---- a StormService, autoscaled in replica mode (staging's A/B pair) ----

SS_TYPE = "kubernetes:orchestration.aibrix.ai/v1alpha1:StormService"


def staging_models() -> list[ServedModel]:
    return loader.validate(raw_config("staging"), "staging", SECRETS).models


def by_name(stack: str, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects(stack, kind)}


def test_staging_autoscales_each_arm_through_its_stormservice_s_own_replicas():
    services, scalers = by_name("staging", aibrix.SS_KIND), by_name("staging", aibrix.PA_KIND)
    models = staging_models()
    assert len(models) == 2 and sorted(services) == sorted(scalers) == sorted(m.name for m in models)
    for m in models:
        ss, pa = services[m.name], scalers[m.name]
        spec = ss["spec"]
        # Replica mode: the model's pods are RoleSets of one pod each, counted by spec.replicas.
        assert spec["replicas"] == m.replicas and pa["spec"]["minReplicas"] <= m.replicas <= pa["spec"]["maxReplicas"]
        (role,) = spec["template"]["spec"]["roles"]
        assert role["replicas"] == 1 and role["updateStrategy"]["maxSurge"] == 0
        # RollingUpdate, the strategy with a maxSurge and minAvailable at all (InPlaceUpdate has neither).
        assert spec["updateStrategy"] == {"type": "RollingUpdate", "maxSurge": 0,
                                          "maxUnavailable": m.rollout.max_unavailable}
        assert aibrix.ss_limits(spec) == (0, m.replicas - min(m.rollout.max_unavailable, m.replicas))
        # The StormService itself, no role: v0.7.0 then reads and writes its top-level spec.replicas.
        ref = pa["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"], ref["name"]) == (aibrix.SS_API_VERSION, aibrix.SS_KIND, m.name)
        assert "subTargetSelector" not in pa["spec"] and "namespace" not in ref
        assert pa["metadata"]["namespace"] == ss["metadata"]["namespace"]
        assert aibrix.PA_REPLICAS_PATH == ("spec", "replicas") and "orchestration.aibrix.ai" in aibrix.CONTROLLER_UPDATABLE_GROUPS


def test_the_replica_mode_stormservice_passes_its_crd_and_cel_and_the_crd_scales_spec_replicas():
    crd = yaml.safe_load(shared_dir("crds", "aibrix", "orchestration.aibrix.ai_stormservices.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    assert version["subresources"]["scale"] == aibrix.SS_SCALE_SUBRESOURCE
    strategy = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["updateStrategy"]
    assert tuple(strategy["properties"]["type"]["enum"]) == aibrix.SS_UPDATE_STRATEGY_TYPES
    index = apivalidation.crd_index(str(shared_dir("crds")), frozenset({aibrix.SS_KIND}))
    schemas = {k: strict(v) for k, v in index.items()}
    for ss in objects("staging", aibrix.SS_KIND):
        assert validate_custom_resource(ss, schemas) == []
        assert apivalidation.validate([ss], index) == []
    broken = copy.deepcopy(ss)
    broken["spec"]["updateStrategy"]["type"] = "Recreate"
    assert validate_custom_resource(broken, schemas)
    broken["spec"]["updateStrategy"]["type"] = "RollingUpdate"
    broken["spec"]["replicas"] = 2**31
    assert [p.field for p in apivalidation.validate([broken], index)] == ["spec.replicas"]


def test_every_roleset_pod_is_read_by_the_autoscaler_and_routed_by_the_gateway():
    objs = k8s_objects(render_stack("staging"))
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    controller = Pod(aibrix.AIBRIX_NAMESPACE, aibrix.CONTROLLER_MANAGER_POD_LABELS)
    models = staging_models()
    pods = {m.name: [] for m in models}
    for m in models:
        ss, pa = by_name("staging", aibrix.SS_KIND)[m.name], by_name("staging", aibrix.PA_KIND)[m.name]
        (role,) = ss["spec"]["template"]["spec"]["roles"]
        # The pods the controller makes at maxReplicas, one per RoleSet.
        pods[m.name] = [aibrix.ss_pod_labels(m.name, f"{m.name}-roleset-{i}", role)
                        for i in range(pa["spec"]["maxReplicas"])]
        port = int(pa["spec"]["metricsSources"][0]["port"])
        assert port in {p["containerPort"] for c in role["template"]["spec"]["containers"] for p in c.get("ports", [])}
        (engine,) = [p for p in pods_of([ss])]
        assert allowed(policies, controller, engine, port)
    for m in models:
        wanted = aibrix.ss_pod_selector(m.name, by_name("staging", aibrix.SS_KIND)[m.name]["spec"]["template"]["spec"]["roles"])
        route = services[service_name(m)]["spec"]["selector"]
        for name, labels in pods.items():
            reads = all(labels_[k] == v for labels_ in labels for k, v in wanted.items())
            routed = all(labels_.get(k) == v for labels_ in labels for k, v in route.items())
            # Its own pods only, every one of them: the autoscaler's average and the gateway's choice.
            assert reads == routed == (name == m.name), (m.name, name)
            if name == m.name:
                assert {aibrix.engine_type(labels_) for labels_ in labels} == {"vllm"}
                assert {aibrix.model_of(aibrix.Pod("p", labels_)) for labels_ in labels} == {m.served_model_name}


def test_the_stormservice_replicas_are_left_to_the_autoscaler_which_comes_after_it():
    resources = render_stack("staging").resources
    services = [r for r in resources if r.type == SS_TYPE]
    assert len(services) == 2
    for ss in services:
        assert ss.engine_options["ignoreChanges"] == autoscaling.IGNORE_REPLICAS
        (pa,) = [r for r in resources if r.type.endswith(":PodAutoscaler")
                 and r.inputs["spec"]["scaleTargetRef"]["name"] == ss.inputs["metadata"]["name"]]
        assert f"{SS_TYPE}::{ss.name}" in pa.options["dependsOn"]


def _roll(spec: dict, wait: str, pods: int) -> tuple[int, int, int]:
    """Roll `pods` ready RoleSets of revision r1 to r2 through the ported controller, each created RoleSet
    ready after one cold start. Pulumi's await is checked against the status at every step. Returns
    (most RoleSets at once, fewest ready ones, cold starts in a row)."""
    spec = {**spec, "replicas": pods}
    rolesets = [aibrix.RoleSet("r1", True) for _ in range(pods)]
    most, fewest, waves = pods, pods, 0
    for _ in range(10 * pods + 10):
        aibrix.ss_reconcile(spec, rolesets, "r2")
        most, fewest = max(most, len(rolesets)), min(fewest, sum(r.ready for r in rolesets))
        done = len(rolesets) == pods and all(r.revision == "r2" and r.ready for r in rolesets)
        assert pk.ready(wait, aibrix.ss_status(spec, rolesets, "r1", "r2", 2)) == done
        if done:
            return most, fewest, waves
        cold = [r for r in rolesets if not r.ready]
        for r in cold:
            r.ready = True
        waves += bool(cold)
    raise AssertionError("the rollout did not finish")


@pytest.mark.parametrize("pods,max_unavailable", [(1, 1), (2, 1), (3, 2)])
def test_a_replica_mode_update_never_raises_the_gpu_count_and_fits_the_await(pods, max_unavailable):
    (m, *_) = staging_models()
    m = m.model_copy(update={"rollout": m.rollout.model_copy(update={"max_unavailable": max_unavailable}),
                             "autoscaling": m.autoscaling.model_copy(update={"max_replicas": pods})})
    ss = {"kind": "StormService", "spec": stormservice.stormservice_spec(m, {})}
    wait = stormservice.stormservice_replica_wait_for()
    most, fewest, waves = _roll(ss["spec"], wait, pods)
    # Never a RoleSet (8 GPUs) beyond the count the autoscaler set; never more down than maxUnavailable.
    assert most == pods and fewest == pods - min(max_unavailable, pods)
    # The waves the Pulumi update timeout and the policy count (at the autoscaler's maxReplicas).
    assert waves == gpu_accounting.rollout_waves(pods, max_unavailable)
    assert waves == workloads.rollout_waves("StormService", {"spec": {**ss["spec"], "replicas": pods}})
    deadline = orchestrator_base.rollout_deadline_seconds(m)
    assert combined.rollout_timeouts(m).update == f"{deadline * waves}s"
    # The pooled await's fixed count never completes once the autoscaler has made two RoleSets.
    if pods >= 2:
        done = [aibrix.RoleSet("r2", True) for _ in range(pods)]
        status = aibrix.ss_status({"replicas": pods}, done, "r1", "r2", 2)
        assert pk.ready(wait, status) and not pk.ready(stormservice.stormservice_wait_for(), status)
    # Top-level InPlaceUpdate would relabel every RoleSet at once: all their pods down together.
    inplace = {**ss["spec"], "replicas": pods, "updateStrategy": {"type": "InPlaceUpdate"}}
    rolesets = [aibrix.RoleSet("r1", True) for _ in range(pods)]
    aibrix.ss_reconcile(inplace, rolesets, "r2")
    assert sum(r.ready for r in rolesets) == 0


def test_staging_fits_its_budget_at_max_replicas_and_every_other_rule():
    cfg = loader.validate(raw_config("staging"), "staging", SECRETS)
    assert rules.check(cfg, "staging") == []
    assert rules.gpu_demand(cfg) == [(m.name, 2 * 8) for m in cfg.models] and cfg.gpu_budget == 32
    raw = raw_config("staging")
    raw["gpuBudget"] = 24
    assert any(line.startswith("Pulumi.staging.yaml: llm-serving:gpuBudget = 24: the workloads need 32 GPUs at peak")
               for line in problems(raw, stack="staging"))
    # The pack's stack rules count the same from the rendered objects: the StormService's RoleSets at
    # the autoscaler's maxReplicas, and await timeouts covering that many waves.
    resources = stack_resources(render_stack("staging"))
    assert stack_rules.gpu_total(resources) == 32 and stack_rules.unmatched_autoscalers(resources) == []
    assert stack_rules.await_timeouts_cover_rollout(resources) == []


def test_a_stormservice_without_autoscaler_stays_pooled():
    sf = stackfile.read(PROJECT_DIR, "staging")
    models = json.loads(sf.config["llm-serving:models"])
    for m in models:
        del m["autoscaling"]
    sf.config["llm-serving:models"] = json.dumps(models)
    sf.config["llm-serving:gpuBudget"] = "16"
    r = runtime.render(sf)
    assert [o for o in k8s_objects(r) if o["kind"] == aibrix.PA_KIND] == []
    for res in [x for x in r.resources if x.type == SS_TYPE]:
        ss, m = res.inputs, next(m for m in staging_models() if m.name == res.inputs["metadata"]["name"])
        spec = {k: v for k, v in ss["spec"].items() if k != "template"}
        (role,) = ss["spec"]["template"]["spec"]["roles"]
        assert spec == {"replicas": 1, "selector": {"matchLabels": orchestrator_base.selector(m)},
                        "updateStrategy": {"type": "InPlaceUpdate", "maxSurge": 0, "maxUnavailable": 1}}
        assert {k: v for k, v in role.items() if k != "template"} == {
            "name": "server", "replicas": m.replicas, "stateful": False,
            "updateStrategy": {"maxSurge": 0, "maxUnavailable": 1}}
        assert ss["metadata"]["annotations"]["pulumi.com/waitFor"] == stormservice.stormservice_wait_for()
        assert res.engine_options["ignoreChanges"] == []
