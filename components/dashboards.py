"""Grafana dashboards as code: one dashboard per stack in a ConfigMap the Grafana sidecar loads by
label. Its panels are the figures the field report judged every topology by (8.4, 11.4, 12.5, 13):
TTFT, TPOT and ITL at p50/p95/p99, output tok/s and tok/s per GPU, queue, KV-cache usage, GPU memory
headroom and, for P/D models, NIXL transfers and failures.

Every query selects the series the stack's PodMonitor scrapes (components/monitoring.py): the
Prometheus Operator labels each target with namespace, pod, endpoint (the port name) and job
"<namespace>/<PodMonitor name>"; the engines add model_name (--served-model-name). The metric names
are the ones the pinned engines export (tests/test_dashboards.py checks each against them)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels
from components.monitoring import POD_MONITOR_NAME
from config_model import Monitoring
from policy.engines import ENGINES, vllm

# kube-prometheus-stack's own dashboards carry 39; Grafana migrates any version from 9 up to its
# latest forward on load (tests/upstream_grafana.py).
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
QUANTILES = (0.5, 0.95, 0.99)
CONFIG_MAP_BASE = "llm-serving-dashboards"

# The engine series of the selected models, as the PodMonitor delivers them.
SEL = f'namespace="$namespace", job="$namespace/{POD_MONITOR_NAME}", model_name=~"$model"'
# One series per engine pod and model: the join that gives DCGM's per-GPU series a model.
ENGINE_PODS = f"group by (namespace, pod, model_name) ({' or '.join(f'{e.QUEUE_GAUGE}{{{SEL}}}' for e in ENGINES)})"
# Free framebuffer in MiB per GPU, with the workload's namespace and pod as labels whether the
# exporter is scraped with honorLabels false (its chart's default: exported_namespace/exported_pod)
# or true (tests/upstream_dcgm_exporter.py).
GPU_FREE_MIB = ('label_replace(label_replace(DCGM_FI_DEV_FB_FREE{exported_namespace="$namespace"}, '
                '"namespace", "$1", "exported_namespace", "(.+)"), "pod", "$1", "exported_pod", "(.+)") '
                'or DCGM_FI_DEV_FB_FREE{namespace="$namespace", exported_namespace=""}')
MODEL_GPUS_FREE_MIB = f"({GPU_FREE_MIB}) * on (namespace, pod) group_left (model_name) {ENGINE_PODS}"

# engine -> (TTFT, TPOT, ITL histograms, output-token counter, waiting-requests gauge, KV-cache gauge),
# exposed names, from each engine's module. SGLang exports no TPOT histogram before 0.5.23: that panel
# shows it from 0.5.23 on.
ENGINE_METRICS = {
    e.DISPLAY_NAME: {"ttft": f"{e.TTFT_HISTOGRAM}_bucket", "tpot": f"{e.TPOT_HISTOGRAM}_bucket",
                     "itl": f"{e.ITL_HISTOGRAM}_bucket", "tokens": e.GENERATION_TOKENS_TOTAL,
                     "queue": e.QUEUE_GAUGE, "kv": e.KV_CACHE_GAUGE}
    for e in ENGINES
}


@dataclass(frozen=True)
class DashboardModel:
    served_model_name: str
    nixl: bool   # P/D: KV moves between engines over NIXL


def dashboard_uid(namespace: str) -> str:
    """Stable per stack namespace and unique across the stacks one Grafana shows (at most 40 characters)."""
    return "llm-serving-" + hashlib.sha256(namespace.encode()).hexdigest()[:20]


def config_map_name(namespace: str) -> str:
    # Stacks may share the dashboards' namespace: the stack's namespace keeps the names apart.
    return f"{CONFIG_MAP_BASE}-{namespace}"


def data_key(namespace: str) -> str:
    # The sidecar writes every key of every ConfigMap it selects into one folder: keys must differ.
    return f"llm-serving-{namespace}.json"


def _target(ref: str, expr: str, legend: str) -> dict:
    return {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}


def _quantile(q: float, bucket: str) -> str:
    return f"histogram_quantile({q}, sum by (le, model_name) (rate({bucket}{{{SEL}}}[$__rate_interval])))"


def _refs():
    for i in range(26):
        yield chr(ord("A") + i)


def _panel(title: str, description: str, unit: str, targets: list[tuple[str, str]], threshold: float | None = None,
           below_is_bad: bool = False) -> dict:
    refs = _refs()
    fc: dict = {"unit": unit, "custom": {"thresholdsStyle": {"mode": "line" if threshold is not None else "off"}}}
    if threshold is not None:
        steps = ([{"color": "red", "value": None}, {"color": "green", "value": threshold}] if below_is_bad
                 else [{"color": "green", "value": None}, {"color": "red", "value": threshold}])
        fc["thresholds"] = {"mode": "absolute", "steps": steps}
    return {"type": "timeseries", "title": title, "description": description, "datasource": DATASOURCE,
            "fieldConfig": {"defaults": fc, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max", "lastNotNull"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "targets": [_target(next(refs), expr, legend) for expr, legend in targets]}


def _latency(key: str, title: str, what: str, mon: Monitoring) -> dict:
    targets = [(_quantile(q, m[key]), f"{{{{model_name}}}} p{round(q * 100)} ({engine})")
               for engine, m in ENGINE_METRICS.items() for q in QUANTILES]
    slo = mon.ttft_p95_slo_seconds if key == "ttft" else None
    return _panel(title, what, "s", targets, slo)


def rows(mon: Monitoring, nixl: bool) -> list[tuple[str, list[tuple[int, dict]]]]:
    """(row title, [(width, panel)]) in display order; widths add up to 24 per row."""
    per_model = {e: f"sum by (model_name) (rate({m['tokens']}{{{SEL}}}[$__rate_interval]))"
                 for e, m in ENGINE_METRICS.items()}
    out = [
        ("Latency (p50/p95/p99, field report 8.4)", [
            (8, _latency("ttft", "TTFT", "Time to first token: queueing and prefill. Line: the p95 SLO alert.", mon)),
            (8, _latency("tpot", "TPOT", "Time per output token after the first (SGLang from 0.5.23).", mon)),
            (8, _latency("itl", "ITL", "Interval between streamed tokens; one DSpark verify can return several.", mon))]),
        ("Throughput", [
            (12, _panel("Output tok/s", "Output tokens per second of all engines of a model.", "short",
                        [(expr, f"{{{{model_name}}}} ({e})") for e, expr in per_model.items()])),
            (12, _panel("Output tok/s per GPU", "Output tok/s over the model's GPUs (DCGM): the figure to compare "
                        "topologies at fixed GPU totals (field report 11.4).", "short",
                        [(f"{expr} / count by (model_name) ({MODEL_GPUS_FREE_MIB})", f"{{{{model_name}}}} ({e})")
                         for e, expr in per_model.items()]))]),
        ("Load", [
            (12, _panel("Queue (waiting requests)", "Requests waiting per engine. Line: the queue alert.", "short",
                        [(f"sum by (model_name, pod, endpoint) ({m['queue']}{{{SEL}}})",
                          f"{{{{model_name}}}} {{{{pod}}}} {{{{endpoint}}}} ({e})") for e, m in ENGINE_METRICS.items()],
                        mon.max_queue_length)),
            (12, _panel("KV-cache usage", "Share of the KV cache in use per engine. Line: the KV-cache alert.",
                        "percentunit",
                        [(f"max by (model_name, pod, endpoint) ({m['kv']}{{{SEL}}})",
                          f"{{{{model_name}}}} {{{{pod}}}} {{{{endpoint}}}} ({e})") for e, m in ENGINE_METRICS.items()],
                        mon.max_kv_cache_usage))]),
        ("GPU", [
            (24, _panel("GPU memory headroom", "Free framebuffer per GPU of the models' pods (DCGM exporter); the "
                        "field report ran at about 93 of 96 GiB. Line: the headroom alert.", "bytes",
                        [(f"min by (model_name, pod, gpu) ({MODEL_GPUS_FREE_MIB}) * 1048576",
                          "{{model_name}} {{pod}} GPU {{gpu}}")],
                        mon.min_gpu_memory_headroom_gib * 2 ** 30, below_is_bad=True))]),
    ]
    if nixl:
        nixl_sel = f"{{{SEL}}}[$__rate_interval]"
        out.append(("P/D KV transfer (NIXL, vLLM)", [
            (8, _panel("NIXL transfers/s", "Successful KV transfers per second (one per TP rank), counted on the "
                       "decode side.", "short",
                       [(f"sum by (model_name, pod) (rate({vllm.NIXL_TRANSFERS_HISTOGRAM}_count{nixl_sel}))",
                         "{{model_name}} {{pod}}")])),
            (8, _panel("NIXL bytes/s and transfer time", "KV bytes moved per second, and p95 transfer time (field "
                       "report 9.3: 7.6 ms cold, 0.3 ms warm).", "Bps",
                       [(f"sum by (model_name, pod) (rate({vllm.NIXL_BYTES_HISTOGRAM}_sum{nixl_sel}))",
                         "{{model_name}} {{pod}} bytes/s"),
                        (f"histogram_quantile(0.95, sum by (le, model_name) (rate({vllm.NIXL_TRANSFERS_HISTOGRAM}_bucket{nixl_sel})))",
                         "{{model_name}} p95 transfer s")])),
            (8, _panel("NIXL failures", "Failed transfers and notifications, and expired KV (prefill side): those "
                       "requests were recomputed or failed, not served P/D (field report 11.3).", "short",
                       [(f"sum by (model_name, pod) (increase({name}_total{nixl_sel}))", f"{{{{model_name}}}} {{{{pod}}}} {label}")
                        for name, label in zip(vllm.NIXL_FAILURE_COUNTERS,
                                               ("failed transfers", "failed notifications", "expired KV"))]))]))
    return out


def dashboard(namespace: str, models: list[DashboardModel], mon: Monitoring) -> dict:
    """The dashboard JSON model of one stack."""
    panels, y, pid = [], 0, 1
    for title, row in rows(mon, any(m.nixl for m in models)):
        panels.append({"id": pid, "type": "row", "title": title, "collapsed": False, "panels": [],
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        pid, y, x = pid + 1, y + 1, 0
        for width, panel in row:
            panels.append({"id": pid, **panel, "gridPos": {"h": 8, "w": width, "x": x, "y": y}})
            pid, x = pid + 1, x + width
        y += 8
    names = [m.served_model_name for m in models]
    variables = [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "hide": 0,
         "refresh": 1, "regex": "", "current": {}},
        {"name": "namespace", "label": "Namespace", "type": "custom", "query": namespace, "hide": 0,
         "current": {"text": namespace, "value": namespace},
         "options": [{"text": namespace, "value": namespace, "selected": True}]},
        # Multi-value: Grafana's Prometheus data source regex-escapes each value and joins them with |.
        {"name": "model", "label": "Served model", "type": "custom", "query": ",".join(names), "hide": 0,
         "multi": True, "includeAll": True, "current": {"text": ["All"], "value": ["$__all"]},
         "options": [{"text": "All", "value": "$__all", "selected": True}]
         + [{"text": n, "value": n, "selected": False} for n in names]},
    ]
    return {"uid": dashboard_uid(namespace), "title": f"LLM serving: {namespace}",
            "description": "Generated by llm-serving (components/dashboards.py); edits in Grafana are overwritten.",
            "tags": ["llm-serving"], "timezone": "browser", "editable": False, "graphTooltip": 1,
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "schemaVersion": SCHEMA_VERSION,
            "version": 1, "links": [], "annotations": {"list": []}, "templating": {"list": variables},
            "panels": panels}


def config_map_data(namespace: str, models: list[DashboardModel], mon: Monitoring) -> dict[str, str]:
    return {data_key(namespace): json.dumps(dashboard(namespace, models, mon), sort_keys=True, separators=(",", ":"))}


def config_map_metadata(namespace: str, mon: Monitoring) -> dict:
    d = mon.dashboards
    meta = {"name": config_map_name(namespace), "namespace": d.namespace or namespace,
            "labels": {**labels(CONFIG_MAP_BASE, "dashboards"), d.label_key: d.label_value}}
    if d.folder:
        meta["annotations"] = {d.folder_annotation: d.folder}
    return meta


@dataclass(frozen=True)
class DashboardArgs:
    namespace: str
    monitoring: Monitoring
    models: tuple[DashboardModel, ...]


class GrafanaDashboards(Component):
    def __init__(self, name: str, args: DashboardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:monitoring:GrafanaDashboards", name, opts)
        k8s.core.v1.ConfigMap(
            f"{name}-configmap", metadata=config_map_metadata(args.namespace, args.monitoring),
            data=config_map_data(args.namespace, list(args.models), args.monitoring), opts=self.child_opts())
        self.register_outputs({})
