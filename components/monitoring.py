"""Prometheus Operator objects for the engines: a PodMonitor on every engine port and a
PrometheusRule whose thresholds come from the stack config (field report 13: failure rate, queue,
KV cache, TTFT, GPU memory; it ran at about 93 of 96 GiB per card; 11.3: failed KV transfers).
The engines' NetworkPolicy admits the scrapes (components/network.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import PART_OF, Component, metadata
from config_model import Monitoring
from policy.engines import ENGINES, vllm

# The Prometheus Operator names the scrape job of its targets "<namespace>/<this name>".
POD_MONITOR_NAME = "llm-serving-engines"
# Container port names the engines use: combined and fleet heads, same-pod prefill and decode.
ENGINE_PORT_NAMES = ("engine", "prefill", "decode")


def pod_monitor_spec() -> dict:
    return {
        "selector": {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF}},
        "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": "15s"} for port in ENGINE_PORT_NAMES],
    }


def alert_rules(namespace: str, mon: Monitoring) -> list[dict]:
    """PromQL over the names the pinned engines really export (tests/upstream_vllm.py,
    tests/upstream_sglang.py, tests/upstream_dcgm_exporter.py), from each engine's module; a model
    runs one engine, so each rule joins the engines' series with `or`. Scoped to the namespace."""
    ns = f'namespace="{namespace}"'

    def each(series) -> str:
        return " or ".join(series(e) for e in ENGINES)

    def http(e, failed: bool) -> str:
        name, matchers, failure = e.HTTP_RESPONSES
        return f"{name}{{{','.join(m for m in (ns, matchers, failure if failed else '') if m)}}}"

    def alert(name: str, expr: str, for_: str, summary: str) -> dict:
        return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": "warning", "namespace": namespace},
                "annotations": {"summary": summary}}

    # Each engine counts its HTTP answers in a counter of its own (HTTP_RESPONSES): vLLM in
    # prometheus-fastapi-instrumentator's http_requests_total, status grouped as "5xx"; SGLang in
    # sglang:http_responses_total{status_code}, which also counts the scrapes of its /metrics.
    failed = each(lambda e: f"sum by (pod) (rate({http(e, True)}[5m]))")
    total = each(lambda e: f"sum by (pod) (rate({http(e, False)}[5m]))")
    # dcgm-exporter labels a GPU with the pod that holds it, but scraped without honorLabels (its
    # chart's default) those labels arrive as exported_namespace/exported_pod: read both forms.
    fb_free = (f'label_replace(label_replace(DCGM_FI_DEV_FB_FREE{{exported_namespace="{namespace}"}}, '
               f'"namespace", "$1", "exported_namespace", "(.+)"), "pod", "$1", "exported_pod", "(.+)") '
               f'or DCGM_FI_DEV_FB_FREE{{{ns},exported_namespace=""}}')
    return [
        alert("LlmServingRequestFailureRate", f"({failed}) / clamp_min({total}, 1e-9) > {mon.max_failure_ratio}",
              "10m", f"More than {mon.max_failure_ratio:.0%} of requests to {{{{ $labels.pod }}}} fail."),
        alert("LlmServingQueueLength",
              f"max by (pod) ({each(lambda e: f'{e.QUEUE_GAUGE}{{{ns}}}')}) > {mon.max_queue_length}",
              "5m", f"More than {mon.max_queue_length} requests wait in the queue of {{{{ $labels.pod }}}}."),
        alert("LlmServingKvCacheUsage",
              f"max by (pod) ({each(lambda e: f'{e.KV_CACHE_GAUGE}{{{ns}}}')}) > {mon.max_kv_cache_usage}",
              "10m", f"KV-cache usage of {{{{ $labels.pod }}}} above {mon.max_kv_cache_usage:.0%}."),
        alert("LlmServingTtftP95",
              f"histogram_quantile(0.95, sum by (le, pod) ({each(lambda e: f'rate({e.TTFT_HISTOGRAM}_bucket{{{ns}}}[5m])')})) "
              f"> {mon.ttft_p95_slo_seconds}",
              "10m", f"p95 TTFT of {{{{ $labels.pod }}}} above the {mon.ttft_p95_slo_seconds}s SLO."),
        alert("LlmServingGpuMemoryHeadroom",
              f"min by (pod, gpu) ({fb_free}) / 1024 < {mon.min_gpu_memory_headroom_gib}",
              "5m", f"GPU {{{{ $labels.gpu }}}} of {{{{ $labels.pod }}}} has less than "
                    f"{mon.min_gpu_memory_headroom_gib} GiB free."),
        # A failed NIXL transfer is recomputed locally under kv_load_failure_policy "recompute": the
        # request still answers 200, but it was not served P/D (field report 11.3), so count it.
        alert("LlmServingKvTransferFailures",
              f"sum by (pod) (increase({vllm.NIXL_FAILURE_COUNTERS[0]}_total{{{ns}}}[15m])) > 0",
              "1m", "NIXL KV transfers of {{ $labels.pod }} failed in the last 15 minutes: those requests were "
                    "recomputed or failed, not served prefill/decode."),
    ]


PICKER_MONITOR_NAME = "llm-serving-endpoint-pickers"


def picker_monitor_spec() -> dict:
    """The inferencePool layer's endpoint pickers (components/endpoint_picker.py): their own metrics
    (scheduling latency, pool readiness) on the port their NetworkPolicy opens to Prometheus."""
    from components.endpoint_picker import COMPONENT
    return {
        "selector": {"matchLabels": {"app.kubernetes.io/component": COMPONENT, "app.kubernetes.io/part-of": PART_OF}},
        "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
    }


@dataclass(frozen=True)
class MonitoringArgs:
    namespace: str
    monitoring: Monitoring
    endpoint_pickers: bool = False     # the stack runs the inferencePool layer's pickers


class EngineMonitoring(Component):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:monitoring:EngineMonitoring", name, opts)
        ns, mon = args.namespace, args.monitoring
        extra = dict(sorted(mon.labels.items()))
        k8s.apiextensions.CustomResource(
            f"{name}-podmonitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor",
            metadata=metadata(POD_MONITOR_NAME, ns, "monitoring", extra), spec=pod_monitor_spec(),
            opts=self.child_opts())
        if args.endpoint_pickers:
            k8s.apiextensions.CustomResource(
                f"{name}-picker-podmonitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor",
                metadata=metadata(PICKER_MONITOR_NAME, ns, "monitoring", extra), spec=picker_monitor_spec(),
                opts=self.child_opts())
        k8s.apiextensions.CustomResource(
            f"{name}-rules", api_version="monitoring.coreos.com/v1", kind="PrometheusRule",
            metadata=metadata("llm-serving-alerts", ns, "monitoring", extra),
            spec={"groups": [{"name": f"llm-serving-{ns}", "rules": alert_rules(ns, mon)}]},
            opts=self.child_opts())
        self.register_outputs({})
