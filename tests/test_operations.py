"""Day-2 operations: command builders, the scripts against a real local HTTP server, the Jobs,
disruption budgets, monitoring and OpenWebUI as rendered."""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
from pathlib import Path

import promql_parser
import pytest
import upstream_aibrix as aibrix
import upstream_kuberay as kuberay
import upstream_kubernetes as kube
import upstream_rbg as rbg
import yaml
from conftest import k8s_objects, render_stack, shared_dir, stack_resources
from crd_schemas import crd_index, validate_custom_resource
from fake_openai import FakeEngine

from components import ops_commands as ops
from components.engines import SmokeSettings
from components.monitoring import alert_rules, pod_monitor_spec
from config_model import LoadScenario, Monitoring, Warmup
from policy import rules
from policy.workloads import pod_templates

SCRIPTS = Path(__file__).resolve().parent.parent / "components" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import load_test  # noqa: E402
import smoke  # noqa: E402
import warmup  # noqa: E402

ENDPOINT = "http://deepseek-v4-flash.llm-serving-dev.svc.cluster.local:8000/v1"
DEEPSEEK_SMOKE = SmokeSettings(prompt="只回答：你好", expected_text="你好", checks=("reasoning", "tool-call"),
                               reasoning_kwarg="thinking")
REPORT_C8 = LoadScenario(input_len=128, output_len=64, concurrency=8, num_prompts=64, num_warmups=8)


# ---- command builders ----

@pytest.mark.parametrize("endpoint", ["http://10.244.3.17:8000/v1", "http://[fd00::17]:8000/v1"])
def test_pod_ip_endpoints_are_refused(endpoint):
    with pytest.raises(ops.OpsConfigError, match="IP address"):
        ops.smoke_args(endpoint, "m", DEEPSEEK_SMOKE, 32)


def test_endpoint_must_be_the_v1_base_url():
    with pytest.raises(ops.OpsConfigError, match="/v1 base URL"):
        ops.checked_endpoint("http://svc.ns.svc.cluster.local:8000")


def test_missing_expected_text_is_refused():
    with pytest.raises(ops.OpsConfigError, match="expected answer"):
        ops.smoke_args(ENDPOINT, "m", SmokeSettings("p", "  ", (), None), 32)


def test_warmups_below_concurrency_are_refused():
    with pytest.raises(ops.OpsConfigError, match="7 warm-ups are below the concurrency 8"):
        ops.bench_round_args(ENDPOINT, "m", "/models/x", "deepseek_v4", REPORT_C8.model_copy(update={"num_warmups": 7}))


def test_warmup_covers_every_level_length_and_shape():
    argv = ops.warmup_args(ENDPOINT, "DeepSeek-V4-Flash", Warmup(), 204800, "warmup-x", smoke=DEEPSEEK_SMOKE)
    f = dict(zip(argv[2::2], argv[3::2]))
    assert f["--concurrency"] == "1,8"
    assert f["--input-tokens"] == "128,4096,184320"   # common lengths plus 90% of maxModelLen
    assert f["--shapes"] == "chat,reasoning,tool" and f["--request-id-prefix"] == "warmup-x"
    assert f["--reasoning-kwarg"] == "thinking"
    with pytest.raises(ops.OpsConfigError, match="exceed maxModelLen"):
        ops.warmup_args(ENDPOINT, "m", Warmup(input_tokens=[4090]), 4096, "w")


def test_warmup_of_a_model_without_parsers_or_known_context():
    """A generic model: chat requests only, no chat_template_kwargs, no near-maximum input (the engine
    takes the checkpoint's context, which the program does not know)."""
    argv = ops.warmup_args(ENDPOINT, "m", Warmup(), None, "w", smoke=SmokeSettings("p", "OK", (), None))
    f = dict(zip(argv[2::2], argv[3::2]))
    assert f["--input-tokens"] == "128,4096" and f["--shapes"] == "chat" and f["--reasoning-kwarg"] == ""


def report_bench_command() -> list[str]:
    text = (shared_dir("seed") / "000_238c050cad1f662b.txt").read_text(encoding="utf-8")
    section = text[text.index("8.4 Load Test Command"):text.index("9. Same-Pod")]
    match = re.search(r"^vllm bench serve .*?(?=\n\n)", section, flags=re.S | re.M)
    return shlex.split(match.group(0).replace("\\\n", " "))


def flag_map(argv: list[str]) -> dict[str, str | None]:
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            out[argv[i]] = value
            i += 2 if value is not None else 1
        else:
            i += 1
    return out


def test_bench_round_is_the_report_command_plus_request_ids_and_result_dir():
    report = flag_map(report_bench_command()[3:])
    argv = load_test.round_argv(ops.bench_round_args(ENDPOINT, "DeepSeek-V4-Flash", "/models/DeepSeek-V4-Flash-0731",
                                                     "deepseek_v4", REPORT_C8), "/results", "bench-r0", "RUN")
    ours = flag_map(argv[3:])
    # The run's own prefix, kept in the result JSON (the gateway replaces x-request-id) and directory.
    assert ours.pop("--request-id-prefix") == "bench-r0-RUN-"
    assert ours.pop("--metadata") == "request_id_prefix=bench-r0-RUN-"
    assert ours.pop("--result-dir") == "/results/bench-r0/RUN"
    assert ours.pop("--base-url") == "http://deepseek-v4-flash.llm-serving-dev.svc.cluster.local:8000"
    report.pop("--base-url")
    for path_flag in ("--model", "--tokenizer"):
        assert ours.pop(path_flag) == "/models/DeepSeek-V4-Flash-0731"
        report.pop(path_flag)
    assert ours == report


def test_load_plan_names_each_round_and_the_engines_to_check():
    engines = ops.Engines("m-engines.ns.svc.cluster.local", (8100, 8200), "vllm")
    plan = json.loads(ops.load_test_plan(ENDPOINT, "m", "/models/x", "deepseek_v4", [
        LoadScenario(input_len=128, output_len=64, concurrency=1, num_prompts=16, num_warmups=2), REPORT_C8],
        "bench-m-abc", engines))
    assert [r["name"] for r in plan["rounds"]] == ["bench-m-abc-r0-128x64-c1", "bench-m-abc-r1-128x64-c8"]
    assert plan["engines"] == {"host": "m-engines.ns.svc.cluster.local", "ports": [8100, 8200], "engine": "vllm"}
    with pytest.raises(ops.OpsConfigError, match="no idle check"):
        ops.load_test_plan(ENDPOINT, "m", "/x", "auto", [REPORT_C8], "b", ops.Engines("h", (), "vllm"))


# ---- scripts against a local server ----

def test_smoke_passes_on_a_correct_engine_in_order(capsys):
    with FakeEngine() as engine:
        code = smoke.main(["--endpoint", f"{engine.base}/v1", "--model", "DeepSeek-V4-Flash",
                           "--prompt", "只回答：你好", "--expected", "你好", "--reasoning-kwarg", "thinking"])
        paths = [p for p, _, _ in engine.requests]
        exact, reasoning = engine.requests[1][2], engine.requests[2][2]
    assert code == 0
    assert paths == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions"]
    assert exact["temperature"] == 0 and exact["chat_template_kwargs"] == {"thinking": False}
    assert reasoning["chat_template_kwargs"] == {"thinking": True}
    assert "smoke 4/5 tool-call: ok" in capsys.readouterr().out


def test_smoke_of_a_model_without_reasoning_sends_no_template_kwargs_and_skips_the_checks(capsys):
    """A generic model's defaults: no reasoning kwarg, no parser, so only the list and the exact answer
    (and the route); an engine that would fail reasoning and tool calls passes."""
    with FakeEngine(answer="OK", reasoning=False, tool_calls=False) as engine:
        code = smoke.main(["--endpoint", f"{engine.base}/v1", "--model", "DeepSeek-V4-Flash",
                           "--prompt", "Reply OK", "--expected", "OK", "--checks", "", "--reasoning-kwarg", ""])
        posts = [b for p, _, b in engine.requests if p == "/v1/chat/completions"]
    assert code == 0
    assert len(posts) == 1 and "chat_template_kwargs" not in posts[0]
    assert "smoke 3/3 route: ok" in capsys.readouterr().out


@pytest.mark.parametrize("engine_kwargs,message", [
    ({"model": "other"}, "smoke 1/5 models: FAILED: /v1/models lists ['other']"),
    ({"answer": "Hello! 你好"}, "smoke 2/5 deterministic: FAILED: temperature 0, reasoning off: expected '你好', got 'Hello! 你好'"),
    ({"reasoning": False}, "smoke 3/5 reasoning: FAILED: reasoning on: no separate reasoning field"),
    ({"tool_calls": False}, "smoke 4/5 tool-call: FAILED: no structured get_weather tool call"),
    ({"fail_status": 503}, "smoke 2/5 deterministic: FAILED:"),
])
def test_smoke_fails_loudly_on_the_first_broken_check(capsys, engine_kwargs, message):
    with FakeEngine(**engine_kwargs) as engine:
        code = smoke.main(["--endpoint", f"{engine.base}/v1", "--model", "DeepSeek-V4-Flash",
                           "--prompt", "p", "--expected", "你好", "--reasoning-kwarg", "thinking"])
    assert code == 1
    assert message in capsys.readouterr().err


def test_warmup_sends_every_shape_at_every_level_with_its_own_request_ids():
    with FakeEngine() as engine:
        code = warmup.main(["--endpoint", f"{engine.base}/v1", "--model", "m", "--concurrency", "1,3",
                            "--input-tokens", "16,64", "--request-id-prefix", "warmup-t", "--reasoning-kwarg", "thinking"])
        posts = [(h, b) for p, h, b in engine.requests if p == "/v1/chat/completions"]
    assert code == 0
    assert len(posts) == 1 + (1 + 3) * 2 * 3   # the readiness request, then the grid
    ids = [h.get("X-Request-Id") for h, _ in posts]
    assert all(i.startswith("warmup-t-") for i in ids) and len(set(ids)) == len(ids)
    assert sum(1 for _, b in posts if b.get("tools")) == 8
    assert sum(1 for _, b in posts if b["chat_template_kwargs"]["thinking"]) == 8


def test_warmup_fails_with_the_request_that_failed(capsys):
    with FakeEngine(fail_status=500) as engine:
        code = warmup.main(["--endpoint", f"{engine.base}/v1", "--model", "m", "--concurrency", "1",
                            "--input-tokens", "16", "--request-id-prefix", "warmup-t"])
    assert code == 1
    assert "warm-up request warmup-t-ready failed" in capsys.readouterr().err


def test_load_test_refuses_to_run_beside_another_client(tmp_path):
    (tmp_path / load_test.LOCK).write_text("other-host pid 7\n")
    with pytest.raises(SystemExit, match="another benchmark client holds"):
        load_test.main(["--plan", '{"endpoint":"http://x.svc/v1","rounds":[]}', "--results", str(tmp_path)])


# ---- rendered Jobs, budgets, monitoring, OpenWebUI ----

def jobs(stack: str) -> dict[str, dict]:
    return {o["metadata"]["name"].rsplit("-", 1)[0]: o for o in k8s_objects(render_stack(stack)) if o["kind"] == "Job"}


def test_smoke_then_warmup_run_after_the_rollout_through_the_gateway():
    r = render_stack("dev")
    by_name = {x.name: x for x in r.resources}
    smoke_job = by_name["ops-deepseek-v4-flash-smoke"]
    warm_job = by_name["ops-deepseek-v4-flash-warmup"]
    deployment = by_name["deepseek-v4-flash-deployment"]
    assert "kubernetes:apps/v1:Deployment::deepseek-v4-flash-deployment" in smoke_job.options["dependsOn"]
    assert "kubernetes:batch/v1:Job::ops-deepseek-v4-flash-smoke" in warm_job.options["dependsOn"]
    # The Envoy proxy Service AIBrix v0.7.0's own scripts reach the default Gateway by (upstream_aibrix.py).
    gateway = f"http://{aibrix.ENVOY_GATEWAY_SERVICE_AIBRIX_DEFAULT}.envoy-gateway-system.svc.cluster.local/v1"
    rollout = int(deployment.options["customTimeouts"]["update"].removesuffix("s"))
    for job in (smoke_job, warm_job):
        spec = job.inputs["spec"]
        args = spec["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--endpoint") + 1] == gateway
        # Waits for the endpoint as long as Pulumi waits for the rollout, and has the time to.
        assert args[args.index("--wait-seconds") + 1] == str(rollout) and spec["activeDeadlineSeconds"] > rollout
    args = smoke_job.inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--expected") + 1] == "你好" and args[args.index("--route") + 1] == "combined"


def test_load_test_job_saves_results_on_a_kept_claim():
    objs = k8s_objects(render_stack("staging"))
    job = next(o for o in objs if o["metadata"]["name"].startswith("loadtest-deepseek-v4-flash-"))
    pod = job["spec"]["template"]["spec"]
    assert {"name": "results", "persistentVolumeClaim": {"claimName": "llm-bench-results"}} in pod["volumes"]
    plan = json.loads(pod["containers"][0]["args"][pod["containers"][0]["args"].index("--plan") + 1])
    assert [r["name"].split("-r", 1)[1] for r in plan["rounds"]] == ["0-128x64-c1", "1-128x64-c8", "2-4096x128-c4"]
    claim = next(x for x in render_stack("staging").resources if x.name == "bench-results-claim")
    assert not claim.options["protect"] and claim.options["retainOnDelete"]  # components/retention.py


def test_a_new_rollout_gets_new_jobs():
    from variants import model, render, variant_file
    base = {o["metadata"]["name"] for o in k8s_objects(render(variant_file())) if o["kind"] == "Job"}
    changed = {o["metadata"]["name"] for o in k8s_objects(render(variant_file(models=[model(vllm={"maxNumSeqs": 32})])))
               if o["kind"] == "Job"}
    assert {n for n in base if n.startswith(("smoke-", "warmup-"))}.isdisjoint(changed)
    assert {n for n in base if n.startswith("sync-")} <= changed  # same weights, same sync Job


def test_every_served_model_has_a_disruption_budget():
    for stack in ("dev", "staging", "prod"):
        pdbs = [o for o in k8s_objects(render_stack(stack)) if o["kind"] == "PodDisruptionBudget"]
        engines = {o["metadata"]["name"] for o in k8s_objects(render_stack(stack)) if o["kind"] in ("Deployment", "StormService")
                   and o["metadata"]["name"] != "open-webui"}
        assert {p["metadata"]["name"] for p in pdbs} == engines
        # dev and prod run Deployments (ReplicaSet pods: maxUnavailable); staging's StormServices
        # (RoleSet pods) autoscale from minReplicas 1: minAvailable 0.
        forms = {(stack, p["metadata"]["name"]): {k: v for k, v in p["spec"].items() if k != "selector"} for p in pdbs}
        expected = {"dev": {"maxUnavailable": 1}, "prod": {"maxUnavailable": 1}, "staging": {"minAvailable": 0}}[stack]
        assert all(form == expected for form in forms.values()), forms


# ---- disruption budgets against the Kubernetes disruption controller (tests/upstream_kubernetes.py) ----

@functools.lru_cache(maxsize=None)
def crd_scale(api_version: str, kind: str) -> tuple[str, bool]:
    """(plural, whether the version serves /scale) from the upstream CRD of a kind. The files are named
    <group>_<plural>.yaml (kubebuilder); KubeRay's from v1.2.1, the version AIBrix v0.7.0 installs."""
    group, version = api_version.split("/")
    plural = f"{kind.lower()}s"
    (path,) = [p for p in shared_dir("crds").rglob(f"{group}_{plural}.yaml") if "v1.7.0" not in p.parts]
    crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind and crd["spec"]["names"]["plural"] == plural
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
    return plural, "scale" in (served.get("subresources") or {})


def crd_controller(api_kind: tuple[str, str], name: str, replicas: int) -> kube.Controller:
    plural, scale = crd_scale(*api_kind)
    return kube.Controller(api_kind[0], api_kind[1], name, replicas, plural, scale)


def pod_controllers(obj: dict, pods: int) -> list[tuple[kube.Controller, int]]:
    """(controller on the pods' ownerReferences, its pods) for `pods` pods of one template of a
    workload, by the owner chains each upstream module cites."""
    kind, name, spec = obj["kind"], obj["metadata"]["name"], obj["spec"]
    if kind == "Deployment":
        return [(kube.deployment_pod_controller(obj), pods)]
    if kind == "StormService":
        roles = spec["template"]["spec"]["roles"]
        assert all(r.get("podGroupSize", 1) <= 1 for r in roles)   # else a PodSet owns the pods
        sets = spec.get("replicas", 1)
        return [(crd_controller(aibrix.ROLESET_POD_CONTROLLER, f"{name}-roleset-{i}", pods // sets), pods // sets)
                for i in range(sets)]
    if kind == "RoleBasedGroup":
        assert all(rbg.ROLE_WORKLOAD_TYPE_ANNOTATION not in (r.get("annotations") or {}) for r in spec["roles"])
        return [(crd_controller(rbg.STANDALONE_POD_CONTROLLER, f"{name}-{i}", 1), 1) for i in range(pods)]
    if kind == "RayClusterFleet":
        clusters = spec.get("replicas", 1)
        return [(crd_controller(kuberay.POD_CONTROLLER, f"{name}-{i}", pods // clusters), pods // clusters)
                for i in range(clusters)]
    raise AssertionError(f"no owner chain known for the pods of a {kind}")


def budget_pods(objects: list[dict], pdb: dict, scale: dict[str, int] | None = None) -> list[kube.Pod]:
    """The pods the PDB's selector matches at steady state, each with its controller. `scale` sets
    a workload's replicas (what an autoscaler writes) in place of the rendered count."""
    selector = pdb["spec"]["selector"]["matchLabels"]
    pods = []
    for obj in objects:
        if scale and obj["metadata"]["name"] in scale:
            obj = {**obj, "spec": {**obj["spec"], "replicas": scale[obj["metadata"]["name"]]}}
        for ref in pod_templates(obj["kind"], obj):
            labels = ref.template.get("metadata", {}).get("labels") or {}
            if selector.items() <= labels.items():
                for ctrl, count in pod_controllers(obj, ref.replicas):
                    pods += [kube.Pod(f"{ctrl.name}-{j}", ctrl) for j in range(count)]
    return pods


@functools.lru_cache(maxsize=None)
def budget_cases() -> list[tuple[str, list[dict]]]:
    """Every committed stack and topology variant (engine pods of every owner kind this program makes)."""
    import test_pd
    from variants import render, sglang_stack
    cases = [(s, k8s_objects(render_stack(s))) for s in ("dev", "staging", "prod")]
    cases += [(f"{t}/{o}", k8s_objects(test_pd.rendered(t, o, b))) for t, o, b in test_pd.CASES]
    cases += [("sglang", k8s_objects(render(sglang_stack()))),
              ("stormservice x2", k8s_objects(render(test_pd.stack("combined", "stormservice", 16, replicas=2)))),
              ("pd x2", k8s_objects(render(test_pd.stack("pd", "rayclusterfleet", 40, replicas=2))))]
    return cases


def test_every_budget_is_computable_and_lets_exactly_one_engine_pod_go():
    seen_forms = set()
    for case, objects in budget_cases():
        autoscalers = {o["spec"]["scaleTargetRef"]["name"]: o["spec"] for o in objects if o["kind"] == "PodAutoscaler"}
        for pdb in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
            spec = {k: v for k, v in pdb["spec"].items() if k != "selector"}
            seen_forms.add(next(iter(spec)))
            pa = autoscalers.get(pdb["metadata"]["name"])
            # Steady state: the rendered count, or an autoscaled workload at its minimum.
            pods = budget_pods(objects, pdb, {pdb["metadata"]["name"]: pa["minReplicas"]} if pa else None)
            assert pods, (case, pdb["metadata"]["name"])
            status = kube.sync(pdb["spec"], pods)
            where = (case, pdb["metadata"]["name"], spec, {p.controller.kind for p in pods})
            assert status.sync_failed is None, where + (status.sync_failed,)
            assert status.disruptions_allowed == 1, where + (status,)
            # One engine pod already down: no further eviction.
            pods[0].ready = False
            assert kube.sync(pdb["spec"], pods).disruptions_allowed == 0, where
            # Above the minimum the autoscaler may run more pods: a drain is never blocked.
            for n in range(pa["minReplicas"] + 1, pa["maxReplicas"] + 1) if pa else ():
                more = budget_pods(objects, pdb, {pdb["metadata"]["name"]: n})
                assert kube.sync(pdb["spec"], more).disruptions_allowed >= 1, where + (n,)
    assert seen_forms == {"maxUnavailable", "minAvailable"}


@pytest.mark.parametrize("case", ["staging", "sglang", "pd/rayclusterfleet"])
def test_max_unavailable_over_pods_whose_owner_has_no_scale_is_refused(case):
    """The old budget (maxUnavailable 1 for every model) over RoleSet, RoleInstance and RayCluster pods:
    the port fails the sync as the controller does, and fail-safe allows no eviction at all."""
    objects = dict(budget_cases())[case]
    pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget")
    pods = budget_pods(objects, pdb)
    owner = {p.controller for p in pods}.pop()
    status = kube.sync({"maxUnavailable": 1, "selector": pdb["spec"]["selector"]}, pods)
    assert status.sync_failed == f"{owner.resource}.{owner.group} does not implement the scale subresource"
    assert status.disruptions_allowed == 0
    # A percentage minAvailable looks the controllers up too; only an integer one does not.
    assert kube.sync({"minAvailable": "50%"}, pods).sync_failed == status.sync_failed
    assert kube.needs_scale({"minAvailable": "50%"}) and not kube.needs_scale({"minAvailable": 1})
    # The same lookup on a custom resource whose CRD serves /scale (a StormService) succeeds.
    ss = crd_controller(("orchestration.aibrix.ai/v1alpha1", "StormService"), "ss", 2)
    assert kube.sync({"maxUnavailable": 1}, [kube.Pod("a", ss), kube.Pod("b", ss)]).disruptions_allowed == 1


def test_termination_grace_covers_the_request_timeout_and_prestop_drains():
    for obj in k8s_objects(render_stack("prod")):
        for ref in pod_templates(obj["kind"], obj):
            if (ref.template["metadata"].get("annotations") or {}).get("llm-serving.io/role") != "engine":
                continue
            assert ref.template["spec"]["terminationGracePeriodSeconds"] >= 120 + 30
            engine = ref.template["spec"]["containers"][0]
            assert engine["lifecycle"]["preStop"]["exec"]["command"][:2] == ["python3", "/opt/llm-serving/drain.py"]


def test_monitoring_objects_validate_and_alerts_parse():
    objs = k8s_objects(render_stack("prod"))
    monitor = next(o for o in objs if o["kind"] == "PodMonitor")
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    for obj in (monitor, rule):
        assert validate_custom_resource(obj, crd_index()) == []
        assert obj["metadata"]["labels"]["release"] == "prometheus"
    alerts = rule["spec"]["groups"][0]["rules"]
    assert {a["alert"] for a in alerts} == {"LlmServingRequestFailureRate", "LlmServingQueueLength",
                                           "LlmServingKvCacheUsage", "LlmServingTtftP95", "LlmServingGpuMemoryHeadroom",
                                           "LlmServingKvTransferFailures"}
    for a in alerts:
        promql_parser.parse(a["expr"])


def test_alert_thresholds_come_from_config():
    mon = Monitoring(max_failure_ratio=0.02, max_queue_length=7, max_kv_cache_usage=0.9, ttft_p95_slo_seconds=1.5,
                     min_gpu_memory_headroom_gib=3)
    exprs = {a["alert"]: a["expr"] for a in alert_rules("ns", mon)}
    assert exprs["LlmServingRequestFailureRate"].endswith("> 0.02")
    assert exprs["LlmServingQueueLength"].endswith("> 7") and exprs["LlmServingKvCacheUsage"].endswith("> 0.9")
    assert exprs["LlmServingTtftP95"].endswith("> 1.5") and exprs["LlmServingGpuMemoryHeadroom"].endswith("< 3.0")
    assert all('namespace="ns"' in e for e in exprs.values())
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(x[5m]) >")  # the parser does refuse broken expressions
    assert [e["port"] for e in pod_monitor_spec()["podMetricsEndpoints"]] == ["engine", "prefill", "decode"]


def test_open_webui_points_at_the_gateway_with_the_key_from_the_secret():
    objs = k8s_objects(render_stack("dev"))
    dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "open-webui")
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OPENAI_API_BASE_URLS"]["value"] == "http://llm.dev.example.internal/v1"
    assert env["OPENAI_API_KEYS"]["valueFrom"]["secretKeyRef"] == {"name": "llm-serving-api-key", "key": "api-key"}
    assert any(o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == "open-webui" for o in objs)
    assert any(o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "llm-serving-open-webui-ingress" for o in objs)


def test_policies_and_budget_hold_with_the_day2_objects():
    for stack in ("dev", "staging", "prod"):
        r = render_stack(stack)
        for policy in rules.RESOURCE_POLICIES:
            for res in r.resources:
                assert policy.check(res.type, res.inputs) == [], (stack, policy.name, res.name)
        assert rules.gpus_within_budget(stack_resources(r), r.outputs["gpuBudget"]) == []
