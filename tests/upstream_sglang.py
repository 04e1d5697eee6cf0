"""What the pinned SGLang releases export on /metrics (with --enable-metrics, which engines.py
passes), read from their source (PyPI wheels sglang==0.5.17 and sglang==0.5.23). Re-check this
module when bumping SGLang: `python tools/engine_metrics.py sglang <dir> [release index]`;
tests/test_network_monitoring.py runs that check on the wheels `make test` installs."""

from __future__ import annotations

RELEASES = ("0.5.17", "0.5.23")

_COLLECTOR = "sglang/srt/observability/metrics_collector.py"
# name -> (kind, label names the alerts rely on, defining file at 0.5.17 | 0.5.23)
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # SchedulerMetricsCollector: self.num_queue_reqs = Gauge(name="sglang:num_queue_reqs", ...)
    "sglang:num_queue_reqs": ("gauge", (), _COLLECTOR),
    # SchedulerMetricsCollector: self.token_usage = Gauge(name="sglang:token_usage", ...), a 0-1 ratio
    "sglang:token_usage": ("gauge", (), _COLLECTOR),
    # TokenizerMetricsCollector: self.histogram_time_to_first_token = Histogram(...)
    "sglang:time_to_first_token_seconds": ("histogram", (), _COLLECTOR),
    # 0.5.17 sglang/srt/utils/common.py add_prometheus_track_response_middleware, 0.5.23
    # sglang/srt/observability/http_request_metrics.py _HttpRequestMetrics: Counter
    # "sglang:http_responses_total" labels endpoint, status_code (str(response.status_code)),
    # method. SGLang has no unprefixed http_requests_total.
    "sglang:http_responses_total": ("counter", ("endpoint", "status_code", "method"),
                                    "sglang/srt/utils/common.py | sglang/srt/observability/http_request_metrics.py"),
}

# sglang/srt/utils/auth.py decide_request_auth: /metrics and /health* pass without the API key, so
# Prometheus scrapes an engine started with --api-key.
METRICS_PATH_NEEDS_KEY = False
