"""Issue 13, dashboards as code: the ConfigMaps carry the Grafana sidecar's label as its charts set
it (tests/upstream_grafana.py), the dashboard JSON keeps Grafana's dashboard model, and every query
parses with a real PromQL parser and names only series the pinned engines and the DCGM exporter
export, with labels the stack's PodMonitor targets really carry."""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil

import promql_parser
import pytest
import upstream_grafana as grafana
import upstream_prometheus_operator as prom_operator
import upstream_sglang as sglang
import upstream_vllm as vllm
from conftest import PROJECT_DIR, STACKS, k8s_objects, render_stack
from engine_containers import engine_packages
from test_config import SECRETS, problems, raw_config
from test_network_monitoring import EXPORTED, exposed_samples, rendered_topologies, selectors
from variants import dev_config, render, variant_file

from apivalidation.apiserver import MAX_DATA_SIZE
from components import dashboards
from components.monitoring import POD_MONITOR_NAME
from config_model import Dashboards, Monitoring
from render.__main__ import main as render_main
from render.output import plan_md
from stacks import loader


def dashboard_maps(rendered) -> list[dict]:
    return [o for o in k8s_objects(rendered) if o["kind"] == "ConfigMap"
            and o["metadata"]["labels"].get("app.kubernetes.io/component") == "dashboards"]


def only_dashboard(rendered) -> tuple[dict, dict]:
    (cm,) = dashboard_maps(rendered)
    (text,) = cm["data"].values()
    return cm, json.loads(text)


def queries(dash: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


# ---- Grafana's side: what the dashboard model requires ----

VARIABLE_REF = re.compile(r"\$\{?(\w+)")
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range"}


def model_problems(dash: dict) -> list[str]:
    """Grafana's dashboard model (tests/upstream_grafana.py) plus what a provisioned, shared dashboard
    needs: templated datasource, defined variables, panels that do not overlap."""
    out = []
    if not (grafana.SCHEMA_VERSION_MIN <= dash.get("schemaVersion", 0) <= grafana.SCHEMA_VERSION_LATEST):
        out.append(f"schemaVersion {dash.get('schemaVersion')}")
    uid = dash.get("uid", "")
    if not uid or not grafana.UID_PATTERN.match(uid) or len(uid) > grafana.UID_MAX:
        out.append(f"uid {uid!r}")
    if not dash.get("title"):
        out.append("no title")
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    out += [f"variable {n} type {v['type']}" for n, v in variables.items() if v["type"] not in grafana.VARIABLE_TYPES]
    if (variables.get("datasource") or {}).get("type") != "datasource":
        out.append("no datasource variable")
    ids, cells = set(), set()
    for p in dash["panels"]:
        g = p.get("gridPos") or {}
        if p.get("id") in ids or not isinstance(p.get("id"), int):
            out.append(f"panel id {p.get('id')}")
        ids.add(p.get("id"))
        if not p.get("type"):
            out.append(f"panel {p.get('id')} has no type")
        if not (g.get("h", 0) > 0 and 0 < g.get("w", 0) <= grafana.GRID_WIDTH and 0 <= g.get("x", -1) < grafana.GRID_WIDTH
                and g["x"] + g["w"] <= grafana.GRID_WIDTH and g.get("y", -1) >= 0):
            out.append(f"panel {p.get('id')} gridPos {g}")
            continue
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        if mine & cells:
            out.append(f"panel {p['id']} overlaps another")
        cells |= mine
        if p["type"] == "row":
            continue
        refs = [t.get("refId") for t in p.get("targets") or []]
        if not refs or len(set(refs)) != len(refs):
            out.append(f"panel {p['id']} refIds {refs}")
        for ds in [p.get("datasource")] + [t.get("datasource") for t in p["targets"]]:
            if ds != {"type": "prometheus", "uid": "${datasource}"}:
                out.append(f"panel {p['id']} datasource {ds} is not the templated one")
        for t in p["targets"]:
            out += [f"panel {p['id']} uses undefined ${name}" for name in VARIABLE_REF.findall(t["expr"])
                    if name not in variables and name not in GRAFANA_BUILTINS and not name.isdigit()]
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_has_one_dashboard_in_grafanas_model(stack):
    cm, dash = only_dashboard(render_stack(stack))
    assert model_problems(dash) == []
    ns = render_stack(stack).outputs["namespace"]
    assert cm["metadata"]["namespace"] == ns and dash["uid"] == dashboards.dashboard_uid(ns)
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "namespace", "model"}


def test_the_model_check_refuses_what_grafana_refuses():
    _, dash = only_dashboard(render_stack("dev"))
    bad = copy.deepcopy(dash)
    bad["uid"] = "x" * 41
    bad["panels"][2]["gridPos"] = dict(bad["panels"][1]["gridPos"])
    bad["panels"][3]["datasource"] = {"type": "prometheus", "uid": "prometheus"}
    bad["panels"][5]["targets"][0]["expr"] += " * $cluster"
    bad["schemaVersion"] = 43
    assert len(model_problems(bad)) == 5, model_problems(bad)


def test_uids_keys_and_names_differ_between_stacks():
    # One Grafana and one sidecar folder may serve every stack of a cluster.
    seen = [(only_dashboard(render_stack(s))[1]["uid"], next(iter(only_dashboard(render_stack(s))[0]["data"])),
             only_dashboard(render_stack(s))[0]["metadata"]["name"]) for s in STACKS]
    for i in range(3):
        assert len({row[i] for row in seen}) == len(STACKS)
    assert dashboards.dashboard_uid("x" * 63) == dashboards.dashboard_uid("x" * 63)
    assert len(dashboards.dashboard_uid("x" * 63)) <= grafana.UID_MAX


# ---- the sidecar's side ----

def test_defaults_are_the_label_kube_prometheus_stack_sets():
    d = Dashboards()
    assert (d.label_key, d.label_value) == (grafana.KUBE_PROMETHEUS_STACK_LABEL, grafana.KUBE_PROMETHEUS_STACK_LABEL_VALUE)
    assert d.label_key == grafana.GRAFANA_CHART_LABEL and d.folder_annotation == grafana.SIDECAR_FOLDER_ANNOTATION_DEFAULT
    cm, _ = only_dashboard(render_stack("prod"))
    labels = cm["metadata"]["labels"]
    assert grafana.sidecar_selects(labels, grafana.KUBE_PROMETHEUS_STACK_LABEL, grafana.KUBE_PROMETHEUS_STACK_LABEL_VALUE)
    assert grafana.sidecar_selects(labels, grafana.GRAFANA_CHART_LABEL, grafana.GRAFANA_CHART_LABEL_VALUE)
    assert "annotations" not in cm["metadata"]


def test_label_namespace_and_folder_come_from_config():
    ops = copy.deepcopy(dev_config()["operations"])
    ops["monitoring"] = {"dashboards": {"labelKey": "example.com/dashboard", "labelValue": "llm",
                                        "namespace": "monitoring", "folder": "LLM serving"}}
    cm, dash = only_dashboard(render(variant_file(operations=ops)))
    meta = cm["metadata"]
    assert meta["namespace"] == "monitoring" and meta["name"] == "llm-serving-dashboards-llm-serving-dev"
    assert grafana.sidecar_selects(meta["labels"], "example.com/dashboard", "llm")
    assert not grafana.sidecar_selects(meta["labels"], grafana.KUBE_PROMETHEUS_STACK_LABEL, "")
    assert meta["annotations"] == {grafana.SIDECAR_FOLDER_ANNOTATION_DEFAULT: "LLM serving"}
    # The queries still read the stack's namespace, wherever the ConfigMap lives.
    assert next(v for v in dash["templating"]["list"] if v["name"] == "namespace")["query"] == "llm-serving-dev"


@pytest.mark.parametrize("monitoring", [{"enabled": False}, {"dashboards": {"enabled": False}}])
def test_off_switches(monitoring):
    ops = copy.deepcopy(dev_config()["operations"]) | {"monitoring": monitoring}
    r = render(variant_file(operations=ops))
    assert dashboard_maps(r) == []
    assert "None rendered (operations.monitoring or its dashboards are off)." in plan_md(r)


@pytest.mark.parametrize(("dashboards_cfg", "message"), [
    ({"labelKey": "app.kubernetes.io/part-of"}, "must not be a label the program sets on every object"),
    ({"labelKey": "grafana dashboard"}, "name part must be letters"),
    ({"labelValue": ""}, "must not be empty"),
    ({"namespace": "Monitoring"}, "a DNS label"),
    ({"folder": "../etc"}, "a folder name"),
])
def test_bad_dashboard_settings_name_the_field(dashboards_cfg, message):
    raw = raw_config()
    raw.setdefault("operations", {})["monitoring"] = {"dashboards": dashboards_cfg}
    (line,) = problems(raw)
    key = next(iter(dashboards_cfg))
    assert line.startswith(f"Pulumi.dev.yaml: llm-serving:operations.monitoring.dashboards.{key} = ") and message in line


def test_the_render_cli_exits_2_on_a_bad_label_and_writes_nothing(tmp_path, capsys):
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    assert "  llm-serving:operations:\n" in dev
    broken = dev.replace("  llm-serving:operations:\n", "  llm-serving:operations:\n    monitoring:\n      dashboards:\n"
                         "        labelKey: app.kubernetes.io/name\n        labelValue: -x\n", 1)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.bad.yaml").write_text(broken)
    code = render_main(["--stack", "bad", "--project-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "out").exists() and "Traceback" not in err
    assert "Pulumi.bad.yaml: llm-serving:operations.monitoring.dashboards.labelValue = '-x'" in err


def test_dashboards_off_allows_any_label_key():
    raw = raw_config()
    raw.setdefault("operations", {})["monitoring"] = {"dashboards": {"enabled": False, "labelKey": "app.kubernetes.io/name"}}
    assert loader.validate(raw, "dev", SECRETS)


# ---- every query: parses, names exported series, selects what the PodMonitor scrapes ----

def grafana_interpolate(expr: str, namespace: str, models: list[str]) -> str:
    """What Grafana sends Prometheus: $namespace as is; the multi-value $model escaped and joined as
    the Prometheus data source does; $__rate_interval a duration. $1 of label_replace names no
    variable and stays."""
    values = {"namespace": namespace, "model": grafana.prometheus_regex_values(models), "__rate_interval": "1m"}
    return VARIABLE_REF.sub(lambda m: values.get(m.group(1), m.group(0)), expr)


def _under(node) -> tuple[list, list]:
    """Selectors and aggregations in a subtree."""
    sels, aggs = [], []

    def visit(n):
        # walk() visits a MatrixSelector and then its VectorSelector.
        if isinstance(n, promql_parser.VectorSelector):
            sels.append(n)
        elif isinstance(n, promql_parser.AggregateExpr):
            aggs.append(n)

    promql_parser.walk(node, visit)
    return sels, aggs


def query_problems(dash: dict, namespace: str, exported: dict[str, set[str]]) -> list[str]:
    models = [o["value"] for v in dash["templating"]["list"] if v["name"] == "model" for o in v["options"]
              if o["value"] != "$__all"]
    job = prom_operator.pod_monitor_job(namespace, POD_MONITOR_NAME)
    target = prom_operator.TARGET_LABELS
    out = []
    for title, expr in queries(dash):
        try:
            tree = promql_parser.parse(grafana_interpolate(expr, namespace, models))
        except (ValueError, RuntimeError) as err:
            out.append(f"{title}: does not parse: {err}")
            continue
        for sel in _under(tree)[0]:
            if sel.name not in exported:
                out.append(f"{title}: {sel.name} is not exported")
                continue
            own = exported[sel.name]
            matchers = {m.name: m.value for m in sel.matchers.matchers}
            for name in matchers:
                ok = name in own | target or (name.startswith(prom_operator.EXPORTED_PREFIX)
                                               and name[len(prom_operator.EXPORTED_PREFIX):] in own & target)
                if not ok:
                    out.append(f"{title}: {sel.name} has no label {name}")
            if sel.name.startswith(("vllm:", "sglang:")) and (
                    matchers.get("namespace") != namespace or matchers.get("job") != job):
                out.append(f"{title}: {sel.name} selects {matchers}, not the PodMonitor's targets in {namespace}")

        def quantiles(n):
            if isinstance(n, promql_parser.Call) and n.func.name == "histogram_quantile":
                sels, aggs = _under(n.args[1])
                for s in sels:
                    if not (s.name.endswith("_bucket") and s.name in exported and "le" in exported[s.name]):
                        out.append(f"{title}: histogram_quantile over {s.name}, no _bucket series")
                for a in aggs:
                    if a.modifier is None or "le" not in a.modifier.labels or a.modifier.type != promql_parser.AggModifierType.By:
                        out.append(f"{title}: an aggregation under histogram_quantile drops le")

        promql_parser.walk(tree, quantiles)
    return out


def every_dashboard() -> list[tuple[str, str, dict]]:
    out = [(s, render_stack(s).outputs["namespace"], only_dashboard(render_stack(s))[1]) for s in STACKS]
    out += [(t, r.outputs["namespace"], only_dashboard(r)[1]) for t, r in rendered_topologies().items()]
    return out


def test_every_query_parses_and_names_only_exported_series_and_scraped_labels():
    for name, ns, dash in every_dashboard():
        assert query_problems(dash, ns, EXPORTED) == [], name
    # Served names may hold '.', a regex metacharacter, and several are joined with '|'.
    dots = dashboards.dashboard("ns", [dashboards.DashboardModel("DeepSeek-V4.1", nixl=True),
                                       dashboards.DashboardModel("m_2", nixl=False)], Monitoring())
    assert query_problems(dots, "ns", EXPORTED) == []


def test_the_query_check_refuses_names_the_engines_do_not_export():
    ns = "llm-serving-dev"
    _, dash = only_dashboard(render_stack("dev"))
    for old, new, expected in [
            # the V0 TPOT name, gone from both pinned vLLM releases
            ("vllm:request_time_per_output_token_seconds_bucket", "vllm:time_per_output_token_seconds_bucket", "is not exported"),
            # a quantile over a histogram's _sum is no quantile
            ("vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds_sum", "no _bucket series"),
            ("sum by (le, model_name) (rate(sglang:inter", "sum by (model_name) (rate(sglang:inter", "drops le"),
            # a PodMonitor target has no service label (that is a ServiceMonitor's)
            ('job="$namespace/', 'service="$namespace/', "has no label service"),
            ("job=\"$namespace/llm-serving-engines", "job=\"$namespace/engines", "not the PodMonitor's targets"),
            ("group_left (model_name)", "group_left (model_name", "does not parse")]:
        bad = json.loads(json.dumps(dash).replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1], 1))
        assert bad != dash, old
        found = query_problems(bad, ns, EXPORTED)
        assert any(expected in f for f in found), (old, found)


def test_panels_read_the_metrics_the_field_report_judged_by():
    _, dash = only_dashboard(rendered_topologies()["pd"])
    used: dict[str, set[str]] = {}
    for title, e in queries(dash):
        used.setdefault(title, set()).update(s.name for s in selectors(grafana_interpolate(e, "ns", ["m"])))
    assert {"vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket"} <= used["TTFT"]
    assert {"vllm:request_time_per_output_token_seconds_bucket",
            "sglang:request_time_per_output_token_seconds_bucket"} <= used["TPOT"]
    assert {"vllm:inter_token_latency_seconds_bucket", "sglang:inter_token_latency_seconds_bucket"} <= used["ITL"]
    assert {"vllm:generation_tokens_total", "sglang:generation_tokens_total"} <= used["Output tok/s"]
    assert "DCGM_FI_DEV_FB_FREE" in used["Output tok/s per GPU"] and "DCGM_FI_DEV_FB_FREE" in used["GPU memory headroom"]
    assert {"vllm:num_requests_waiting", "sglang:num_queue_reqs"} <= used["Queue (waiting requests)"]
    assert {"vllm:kv_cache_usage_perc", "sglang:token_usage"} <= used["KV-cache usage"]
    assert used["NIXL transfers/s"] == {vllm.NIXL_TRANSFERS_HISTOGRAM + "_count"}
    assert used["NIXL failures"] == {n + "_total" for n in vllm.NIXL_FAILURE_COUNTERS}
    for title in ("TTFT", "TPOT", "ITL"):
        assert [q for t, e in queries(dash) if t == title for q in re.findall(r"histogram_quantile\(([\d.]+)", e)] \
            == ["0.5", "0.95", "0.99"] * 2
    # P/D rows only where KV moves over NIXL.
    assert not any(t.startswith("NIXL") for t, _ in queries(only_dashboard(render_stack("dev"))[1]))


def test_sglang_queries_hold_at_each_pinned_release():
    # A name the older release lacks is one the SINCE table records (and the installed-source test
    # proves absent there); everything else must be exported by every release.
    names = {s.name for _, _, dash in every_dashboard() for _, e in queries(dash)
             for s in selectors(grafana_interpolate(e, "ns", ["m"])) if s.name.startswith("sglang:")}
    for release in range(len(sglang.RELEASES)):
        metrics, absent = sglang.metrics_at(release)
        missing = names - set(exposed_samples(metrics))
        assert missing == {n for n in set(exposed_samples({a: sglang.METRICS[a] for a in absent}))
                           if n in names}, (sglang.RELEASES[release], missing)
    assert sglang.metrics_at(0)[1] == ("sglang:request_time_per_output_token_seconds",)


@pytest.mark.parametrize("release", sglang.RELEASES)
def test_sglang_collectors_label_every_series_with_the_served_model(release):
    # The panels select SGLang series by model_name: the installed source's label dicts start so.
    root = engine_packages() / f"sglang=={release}"
    for path, count in sglang.LABEL_DICTS[release].items():
        dicts = [n for n in ast.walk(ast.parse((root / path).read_text(encoding="utf-8"))) if isinstance(n, ast.Assign)
                 and [ast.unparse(t) for t in n.targets] == ["labels"] and isinstance(n.value, ast.Dict)]
        keys = [tuple(k.value for k in d.value.keys[:2] if isinstance(k, ast.Constant)) for d in dicts]
        assert keys.count(("model_name", "engine_type")) == count, (path, keys)


# ---- sizes ----

def test_every_rendered_config_map_fits_the_api_servers_limit():
    for name, _, _ in every_dashboard():
        r = render_stack(name) if name in STACKS else rendered_topologies()[name]
        for cm in dashboard_maps(r):
            size = sum(len(v.encode()) for v in cm["data"].values())
            assert 0 < size < MAX_DATA_SIZE // 16, (name, size)


def test_a_stack_of_many_models_still_fits():
    # The queries do not grow with the models, only the $model options: 64 served models of
    # 63-character names (more than any GPU budget here holds), with P/D.
    models = [dashboards.DashboardModel(f"m{i:02d}-" + "x" * 59, nixl=True) for i in range(64)]
    data = dashboards.config_map_data("n" * 63, models, Monitoring())
    assert sum(len(v.encode()) for v in data.values()) < MAX_DATA_SIZE
