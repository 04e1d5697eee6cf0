"""What the pinned vLLM releases export on /metrics, read from their source (the PyPI wheels
vllm==0.26.0 and vllm==0.33.0; the stacks run vllm/vllm-openai:v0.26.0-cu129). Re-check this
module when bumping vLLM: `python tools/engine_metrics.py vllm <unpacked wheel or checkout> [0|1]`.

Each metric the alerts use: its prometheus_client kind and label names, and the file defining it,
identical in both releases. tests/test_network_monitoring.py builds them with prometheus_client
to get the exposed sample names (a Counter `x` is exposed as `x_total`, a Histogram as
`x_bucket`/`x_sum`/`x_count`)."""

from __future__ import annotations

RELEASES = ("0.26.0", "0.33.0")

# name -> (kind, label names, defining file at both releases)
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # vllm/v1/metrics/loggers.py: self._gauge_cls(name="vllm:num_requests_waiting", labelnames=...)
    "vllm:num_requests_waiting": ("gauge", ("model_name", "engine"), "vllm/v1/metrics/loggers.py"),
    # vllm/v1/metrics/loggers.py: gauge_kv_cache_usage = self._gauge_cls(name="vllm:kv_cache_usage_perc")
    "vllm:kv_cache_usage_perc": ("gauge", ("model_name", "engine"), "vllm/v1/metrics/loggers.py"),
    # vllm/v1/metrics/loggers.py: histogram_time_to_first_token = self._histogram_cls(...)
    "vllm:time_to_first_token_seconds": ("histogram", ("model_name", "engine"), "vllm/v1/metrics/loggers.py"),
    # vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py: counter_nixl_num_failed_transfers;
    # registered only when the NIXL connector runs (P/D pods). With kv_load_failure_policy
    # "recompute" a failed transfer is recomputed locally and the request still answers 200.
    "vllm:nixl_num_failed_transfers": ("counter", ("model_name", "engine"),
                                       "vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py"),
}

# vllm/entrypoints/serve/instrumentator/metrics.py attach_router: Instrumentator(excluded_handlers=
# ["/metrics", "/health", ...]).add() puts the default metrics of prometheus-fastapi-instrumentator
# on the same /metrics. vLLM requires >=8.0.0 (wheel METADATA); read at 8.1.0, metrics.py default():
# Counter "http_requests_total" with labels handler, status, method.
HTTP_METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "http_requests_total": ("counter", ("handler", "status", "method"), "prometheus_fastapi_instrumentator/metrics.py"),
}

# Grouped status codes of http_requests_total (prometheus-fastapi-instrumentator 8.1.0,
# instrumentation.py: status_code[0] + "xx").
HTTP_STATUS_5XX = "5xx"

# Gone from both releases (no definition anywhere under vllm/): the V0 name of the KV-cache gauge.
REMOVED = ("vllm:gpu_cache_usage_perc",)
