"""Prometheus Operator objects for the engines: a PodMonitor on every engine port and a
PrometheusRule whose thresholds come from the stack config (field report 13: failure rate, queue,
KV cache, TTFT, GPU memory; it ran at about 93 of 96 GiB per card)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import PART_OF, Component, metadata
from stacks.config import Monitoring

# Container port names the engines use: combined and fleet heads, same-pod prefill and decode.
ENGINE_PORT_NAMES = ("engine", "prefill", "decode")


def pod_monitor_spec() -> dict:
    return {
        "selector": {"matchLabels": {"app.kubernetes.io/component": "engine", "app.kubernetes.io/part-of": PART_OF}},
        "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": "15s"} for port in ENGINE_PORT_NAMES],
    }


def alert_rules(namespace: str, mon: Monitoring) -> list[dict]:
    """PromQL over vLLM and SGLang metric names (either may be present), scoped to the namespace."""
    ns = f'namespace="{namespace}"'

    def alert(name: str, expr: str, for_: str, summary: str) -> dict:
        return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": "warning", "namespace": namespace},
                "annotations": {"summary": summary}}

    return [
        alert("LlmServingRequestFailureRate",
              f'sum by (pod) (rate(http_requests_total{{{ns},status=~"5.."}}[5m])) / '
              f"clamp_min(sum by (pod) (rate(http_requests_total{{{ns}}}[5m])), 1e-9) > {mon.max_failure_ratio}",
              "10m", f"More than {mon.max_failure_ratio:.0%} of requests to {{{{ $labels.pod }}}} fail."),
        alert("LlmServingQueueLength",
              f"max by (pod) (vllm:num_requests_waiting{{{ns}}} or sglang:num_queue_reqs{{{ns}}}) > {mon.max_queue_length}",
              "5m", f"More than {mon.max_queue_length} requests wait in the queue of {{{{ $labels.pod }}}}."),
        alert("LlmServingKvCacheUsage",
              f"max by (pod) (vllm:kv_cache_usage_perc{{{ns}}} or vllm:gpu_cache_usage_perc{{{ns}}} "
              f"or sglang:token_usage{{{ns}}}) > {mon.max_kv_cache_usage}",
              "10m", f"KV-cache usage of {{{{ $labels.pod }}}} above {mon.max_kv_cache_usage:.0%}."),
        alert("LlmServingTtftP95",
              f"histogram_quantile(0.95, sum by (le, pod) (rate(vllm:time_to_first_token_seconds_bucket{{{ns}}}[5m]) "
              f"or rate(sglang:time_to_first_token_seconds_bucket{{{ns}}}[5m]))) > {mon.ttft_p95_slo_seconds}",
              "10m", f"p95 TTFT of {{{{ $labels.pod }}}} above the {mon.ttft_p95_slo_seconds}s SLO."),
        alert("LlmServingGpuMemoryHeadroom",
              f"min by (pod, gpu) (DCGM_FI_DEV_FB_FREE{{{ns}}}) / 1024 < {mon.min_gpu_memory_headroom_gib}",
              "5m", f"GPU {{{{ $labels.gpu }}}} of {{{{ $labels.pod }}}} has less than "
                    f"{mon.min_gpu_memory_headroom_gib} GiB free."),
    ]


@dataclass(frozen=True)
class MonitoringArgs:
    namespace: str
    monitoring: Monitoring


class EngineMonitoring(Component):
    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:monitoring:EngineMonitoring", name, opts)
        ns, mon = args.namespace, args.monitoring
        extra = dict(sorted(mon.labels.items()))
        k8s.apiextensions.CustomResource(
            f"{name}-podmonitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor",
            metadata=metadata("llm-serving-engines", ns, "monitoring", extra), spec=pod_monitor_spec(),
            opts=self.child_opts())
        k8s.apiextensions.CustomResource(
            f"{name}-rules", api_version="monitoring.coreos.com/v1", kind="PrometheusRule",
            metadata=metadata("llm-serving-alerts", ns, "monitoring", extra),
            spec={"groups": [{"name": f"llm-serving-{ns}", "rules": alert_rules(ns, mon)}]},
            opts=self.child_opts())
        self.register_outputs({})
