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
import upstream_sglang as sglang
import upstream_vllm as vllm
from conftest import PROJECT_DIR, k8s_objects, render_stack, shared_dir
from crd_schemas import strict, validate_custom_resource
from netpol import Pod, allowed
from test_config import SECRETS, problems, raw_config
from test_network_monitoring import EXPORTED, pods_of

import apivalidation
from components import autoscaling
from components.routing import routing_strategy
from config_model import AUTOSCALING_METRICS, ServedModel
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
    assert objects("dev", aibrix.PA_KIND) == [] and objects("staging", aibrix.PA_KIND) == []
    cfg = loader.validate(raw_config("prod"), "prod", SECRETS)
    assert cfg.models[0].autoscaling.enabled


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


def test_scale_to_zero_needs_the_stack_to_opt_in_and_the_plan_says_what_the_first_request_waits():
    # Why: at zero pods v0.7.0 reads no value, averages 0, and stays at zero whatever arrives.
    assert aibrix.apa_replicas(0, [], 0.8, 0, 2) == 0
    assert aibrix.apa_replicas(1, [0.0], 0.8, 0, 2) == 0       # an idle pod is scaled away
    raw = autoscaled(minReplicas=0)
    assert any("models[0].autoscaling.minReplicas = 0: scale to zero needs allowScaleToZero: true" in line
               and "~12 min" in line for line in problems(raw, stack="prod"))
    raw["allowScaleToZero"] = True
    cfg = loader.validate(raw, "prod", SECRETS)
    assert rules.check(cfg, "prod") == []


    sf = stackfile.read(PROJECT_DIR, "prod")
    sf.config["llm-serving:allowScaleToZero"] = "true"
    models = json.loads(sf.config["llm-serving:models"])
    models[0]["autoscaling"]["minReplicas"] = 0
    sf.config["llm-serving:models"] = json.dumps(models)
    plan = output.plan_md(runtime.render(sf))
    assert "| Deployment deepseek-v4-flash | 0-2 |" in plan
    assert ("**deepseek-v4-flash scales to zero.** With no pod the gateway refuses its requests" in plan
            and "the first request then waits a full cold start (about 12 min measured for vllm" in plan)


@pytest.mark.parametrize("edit,field,why", [
    (lambda m: m.update(orchestrator="stormservice", rollout={"strategy": "RollingUpdate", "maxUnavailable": 1}),
     "orchestrator = 'stormservice'", "ignoreChanges cannot name a field inside a list"),
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


# ---- routing ----

def test_an_autoscaler_makes_the_default_routing_prefix_cache_aware():
    base = loader.validate(raw_config("dev"), "dev", SECRETS).models[0]
    assert base.replicas == 1 and routing_strategy(base) == "least-request"
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
