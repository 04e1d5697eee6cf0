"""vLLM (github.com/vllm-project/vllm) as the stacks use it, at the two releases they target: every
vLLM fact the tests rely on, once. The stacks run vllm/vllm-openai:v0.26.0-cu129; 0.33.0 is the next
target. vLLM's server cannot run here (no GPU); its `vllm serve` parser does (tests/vllm_cli.py, in
.venv-vllm/<release>). Everything below is READ from the PyPI wheels' source, except the metrics table,
which a tool re-checks.

Re-check on a bump (add the new release to RELEASES and a requirements-vllm-<release>.txt, then):
- `pip download vllm==<v> --no-deps` and unzip it; `python tools/engine_metrics.py vllm <dir> [i]`
  checks METRICS and REMOVED against the release's own files (i: index in RELEASES);
- re-read the wheel's METADATA Requires-Dist for TILELANG / TVM_FFI (requirements-engines.txt then
  needs the new pins), and each file cited below (`unzip -p <wheel> <path>`).
"""

from __future__ import annotations

from source_facts import ReadAt

RELEASES = ("0.26.0", "0.33.0")

# Requires-Dist in each wheel's METADATA: the TileLang and tvm-ffi whose code the cache test runs
# (tests/upstream_tilelang.py, tests/upstream_tvm_ffi.py).
TILELANG = {"0.26.0": "0.1.9", "0.33.0": "0.1.12"}
TVM_FFI = {"0.26.0": "0.1.10", "0.33.0": "0.1.11"}
# The same Requires-Dist for FlashInfer (flashinfer-python) and torch (tests/upstream_flashinfer.py,
# tests/upstream_pytorch.py, tests/upstream_triton.py).
FLASHINFER = {"0.26.0": "0.6.14", "0.33.0": "0.7.2.post1"}
TORCH = {"0.26.0": "2.11.0", "0.33.0": "2.14.0"}

# Compared with the tag of the vLLM images the stacks run (images.vllm, images.vllmRay) by
# tests/test_upstream_releases.py: each must be one of RELEASES.
PORTED_FROM = (
    {"repo": "vllm-project/vllm", "releases": RELEASES, "component": "vllm",
     "files": ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py",
               "vllm/config/cache.py", "vllm/config/vllm.py", "vllm/config/parallel.py", "vllm/v1/kv_offload/",
               "vllm/distributed/kv_transfer/kv_connector/v1/", "vllm/envs.py", "vllm/utils/deep_gemm.py",
               "vllm/v1/metrics/loggers.py", "vllm/entrypoints/serve/", "vllm/benchmarks/serve.py",
               "vllm/benchmarks/lib/endpoint_request_func.py", "METADATA (Requires-Dist)")},
    {"repo": "vllm-project/vllm", "release": None, "commit": "0000977eaf873be6a295cf73017976d49ca2fb9d",
     "files": ("docker/Dockerfile", "examples/disaggregated/disaggregated_serving/disagg_proxy_multiturn.py"),
     "untagged": "the image's Dockerfile as stored at a commit (the repository is larger than a mirror may be here); "
                 "the proxy example was read at v0.26.0",
     "not_deployed": "the image build, not a release the stack files name"},
    {"repo": "trallnag/prometheus-fastapi-instrumentator", "release": "8.1.0",
     "files": ("src/prometheus_fastapi_instrumentator/metrics.py",
               "src/prometheus_fastapi_instrumentator/instrumentation.py"),
     "not_deployed": "vLLM requires >=8.0.0 (wheel METADATA); which one an image holds is not in the stack files"},
)


# ---- `vllm serve` options ----

# Every rendered argv is parsed by each release's own `vllm serve` parser (tests/vllm_cli.py,
# .venv-vllm/<release> from requirements-vllm-<release>.txt), which also answers which option strings
# exist and take a value. vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py) keeps argparse's
# allow_abbrev, so an abbreviation would also parse: tests/test_engine_flags.py requires full names.


# ---- KV-cache offload to CPU memory (issue 13), read from both wheels ----

# vllm/config/cache.py: KVOffloadingBackend = Literal["native", "lmcache"]; kv_offloading_size: float | None,
# "Size of the KV cache offloading buffer in GiB. When TP > 1, this is the total buffer size summed across
# all TP ranks"; unset means no offload.
KV_OFFLOADING_BACKENDS = ("native", "lmcache")
KV_OFFLOADING_SIZE_TYPE = float
# vllm/config/vllm.py VllmConfig._post_init_kv_transfer_config, both wheels: with a size set it creates a
# KVTransferConfig only when none was given, then OVERWRITES kv_connector ("native": OffloadingConnector with
# kv_connector_extra_config cpu_bytes_to_use = size * 2**30; "lmcache": LMCacheMPConnector) and kv_role. A
# NixlConnector --kv-transfer-config (P/D) would silently become the offload connector, so
# stacks/rules/capacity.py refuses offload outside topology combined.
OFFLOAD_REPLACES_KV_TRANSFER_CONNECTOR = True
# Combining both would take a MultiConnector (multi_connector.py, both wheels; it keeps the hybrid KV
# manager only when every child subclasses SupportsHMA, as NixlConnector and OffloadingConnector do). Not
# offered: the field report validated NIXL P/D alone, and nothing here can run that pair on DeepSeek-V4.
# DSpark forces the V2 model runner (vllm/config/vllm.py use_v2_model_runner); its
# _get_v2_model_runner_unsupported_features names no KV connector at either wheel and the runner builds one
# (vllm/v1/worker/gpu/kv_connector.py), so offload is allowed beside DSpark (staging's A/B arm).
# Same function, "lmcache" branch: "Default to LMCache multi-process (MP) mode. The actual KV storage capacity
# is managed by the standalone LMCache server process, so kv_offloading_size is not propagated"; the
# connector "falls back to tcp://localhost:5555". vllm/distributed/kv_transfer/kv_connector/v1/
# lmcache_mp_connector.py and lmcache_connector.py import the external `lmcache` package, which the wheel's
# METADATA does not require (no Requires-Dist or extra names it): which LMCache an image carries is not
# fixed by the vLLM release. LMCacheConnectorV1 does not subclass SupportsHMA, so vLLM turns the hybrid KV
# cache manager off for it (vllm/config/vllm.py, "Turning off hybrid kv cache manager"), which DeepSeek-V4's
# SWA/compressed KV groups use. Hence the backend is refused (stacks/rules/capacity.py).
LMCACHE_CONNECTOR_NEEDS_SERVER = "tcp://localhost:5555"
# Where the native buffer lives: CPUOffloadingSpec is the default spec (vllm/v1/kv_offload/factory.py,
# spec_name default). 0.26.0 vllm/v1/kv_offload/cpu/spec.py create_worker passes no mmap region, so
# CPUOffloadingWorker (cpu/gpu_worker.py) allocates torch.zeros(..., pin_memory=True): pinned anonymous
# memory. 0.33.0 cpu/spec.py create_worker uses SharedOffloadRegion on CUDA (_uses_shared_region), one file
# "/dev/shm/vllm_offload_{engine_id}.mmap" (cpu/shared_offload_region.py) sized num_chunks x all ranks'
# chunk bytes. Each data-parallel rank is its own engine core: ParallelConfig.world_size = PP x TP (x PCP)
# excludes DP (vllm/config/parallel.py __post_init__), and CPUOffloadingSpec spreads the size over those ranks.
OFFLOAD_BUFFER = {"0.26.0": "pinned", "0.33.0": "/dev/shm"}


# ---- caches ----

# vllm/envs.py (VLLM_CACHE_ROOT lambda) at both releases. DeepGEMM's variable is
# tests/upstream_deepgemm.py; vllm/utils/deep_gemm.py (DEEP_GEMM_JIT_CACHE_ENV_NAME) sets it to
# $VLLM_CACHE_ROOT/deep_gemm only when it is unset.
READ = (
    ReadAt("VLLM_CACHE_ROOT", ("vllm",),
           "vllm-project/vllm v0.26.0 and v0.33.0 vllm/envs.py (VLLM_CACHE_ROOT lambda)",
           "$XDG_CACHE_HOME/vllm, else ~/.cache/vllm; holds torch_compile_cache "
           "(vllm/compilation/decorators.py sets TORCHINDUCTOR_CACHE_DIR under it) and "
           "flashinfer_autotune_cache (vllm/model_executor/warmup/flashinfer_autotune_cache.py)"),
)


# ---- /metrics ----

_LOGGERS = "vllm/v1/metrics/loggers.py"
# NixlPromMetrics, registered only when the NIXL connector runs (P/D pods); the same file at both
# releases (there is no nixl_connector.py module holding it in either wheel).
_NIXL_STATS = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py"

# One observation per successful transfer per TP rank, on the decode, which reads.
NIXL_TRANSFERS_HISTOGRAM = "vllm:nixl_xfer_time_seconds"
# Failed transfers and notifications; expired requests are counted on the prefill side. With
# kv_load_failure_policy "recompute" a failed transfer is recomputed locally and the request still
# answers 200, so only these counters show it.
NIXL_FAILURE_COUNTERS = ("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications",
                         "vllm:nixl_num_kv_expired_reqs")

# name -> (prometheus_client kind, label names, defining file at both releases). Built with
# prometheus_client, a Counter `x` is exposed as `x_total`, a Histogram as `x_bucket`/`x_sum`/`x_count`
# (tests/test_network_monitoring.py exposed_samples).
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # gauge_scheduler_running / gauge_scheduler_waiting = self._gauge_cls(name="vllm:num_requests_running"
    # / "vllm:num_requests_waiting", labelnames=labelnames), labelnames ["model_name", "engine"]: the
    # scheduler's requests in flight, which the load test's idle check sums (openai_client.IN_FLIGHT_GAUGES)
    "vllm:num_requests_running": ("gauge", ("model_name", "engine"), _LOGGERS),
    "vllm:num_requests_waiting": ("gauge", ("model_name", "engine"), _LOGGERS),
    # gauge_kv_cache_usage = self._gauge_cls(name="vllm:kv_cache_usage_perc")
    "vllm:kv_cache_usage_perc": ("gauge", ("model_name", "engine"), _LOGGERS),
    # histogram_time_to_first_token / histogram_inter_token_latency /
    # histogram_request_time_per_output_token = self._histogram_cls(...): TTFT, ITL and TPOT, the
    # latencies the field report reads at p50/p95/p99 (8.4 --percentile-metrics ttft,tpot,itl,e2el)
    "vllm:time_to_first_token_seconds": ("histogram", ("model_name", "engine"), _LOGGERS),
    "vllm:inter_token_latency_seconds": ("histogram", ("model_name", "engine"), _LOGGERS),
    "vllm:request_time_per_output_token_seconds": ("histogram", ("model_name", "engine"), _LOGGERS),
    # counter_generation_tokens = self._counter_cls(name="vllm:generation_tokens"): output tokens
    "vllm:generation_tokens": ("counter", ("model_name", "engine"), _LOGGERS),
    # nixl_histogram_xfer_time = self._histogram_cls(name="vllm:nixl_xfer_time_seconds", ...)
    NIXL_TRANSFERS_HISTOGRAM: ("histogram", ("model_name", "engine"), _NIXL_STATS),
    # nixl_histogram_bytes_transferred = self._histogram_cls(name="vllm:nixl_bytes_transferred"):
    # bytes per transfer; its _sum is the KV data moved (field report 9.3 reads MB/s)
    "vllm:nixl_bytes_transferred": ("histogram", ("model_name", "engine"), _NIXL_STATS),
    # counter_nixl_num_failed_transfers / _notifications / _kv_expired_reqs = self._counter_cls(...)
    **{name: ("counter", ("model_name", "engine"), _NIXL_STATS) for name in NIXL_FAILURE_COUNTERS},
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

# Gone from both releases (no definition anywhere under vllm/): the V0 names of the KV-cache gauge
# and of the TPOT histogram (now vllm:request_time_per_output_token_seconds).
REMOVED = ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")


# ---- the API server ----

# AuthenticationMiddleware (v0.26.0 vllm/entrypoints/serve/utils/server_utils.py, v0.33.0
# vllm/entrypoints/serve/middleware/authenticate.py): with --api-key, a path starting with
# GUARDED_PREFIX ("/v1", "/v2", "/inference"; 0.33.0 adds "/cohere") answers 401
# {"error": "Unauthorized"} without `Authorization: Bearer <key>`; other paths (/health, /metrics)
# are open.
UNAUTHORIZED = (401, {"error": "Unauthorized"})
GUARDED_PREFIX = {"0.26.0": ("/v1", "/v2", "/inference"), "0.33.0": ("/v1", "/v2", "/inference", "/cohere")}
# Its tokens: `[key for key in (args.api_key or [envs.VLLM_API_KEY]) if key]` (v0.26.0
# vllm/entrypoints/openai/api_server.py build_app, v0.33.0 vllm/entrypoints/serve/middleware/register.py):
# VLLM_API_KEY is one key, read only when --api-key is not given. verify_token: the Authorization header
# split at its first space (str.partition), the scheme compared case-insensitively with "bearer", the rest
# compared by SHA-256 digest with every token (secrets.compare_digest); OPTIONS requests pass.
API_KEY_ENV_READ_ONLY_WITHOUT_FLAG = True
# The startup line "non-default args: {...}" at INFO: 0.26.0 prints api_key's values
# (vllm/entrypoints/serve/utils/api_utils.py log_non_default_args), 0.33.0 prints "***"
# (vllm/entrypoints/common/startup.py redact_sensitive_args over _SENSITIVE_ARG_FIELDS).
LOGS_API_KEYS_AT_INFO = {"0.26.0": True, "0.33.0": False}
# vllm/logger.py DEFAULT_LOGGING_CONFIG at both: the "vllm" logger (propagate False) and its handler take
# VLLM_LOGGING_LEVEL; every vLLM module logs through a child of it (init_logger(__name__)).
LOGGING_LEVEL_ENV = "VLLM_LOGGING_LEVEL"

# examples/disaggregated/disaggregated_serving/disagg_proxy_multiturn.py at v0.26.0 (the image's
# proxy, field report 9.2; examples are not in the wheel): routes POST /v1/chat/completions,
# POST /v1/completions, GET /health only; its non-streaming answer is rebuilt from the streamed text
# alone (no reasoning, no tool calls, 9.5).
IMAGE_PROXY_ROUTES = (("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("GET", "/health"))


# ---- `vllm bench serve` (the load test's client) ----

# vllm/benchmarks/serve.py add_cli_args at both releases: --request-id-prefix (default
# "bench-<uuid4 hex[:8]>-") makes request i of the main run `<prefix><i>` (datasets.py sample), sent only
# as the header below (benchmarks/lib/endpoint_request_func.py _update_headers_common); the ready check
# and the --num-warmups requests reuse one test input without an id. The prefix is written nowhere in
# the --save-result JSON; each `--metadata KEY=VALUE` (nargs "*") becomes result_json[KEY].
BENCH_REQUEST_ID_HEADER = "x-request-id"
BENCH_METADATA_FLAG = "--metadata"
# The completions payload (async_request_openai_completions): streamed, model = --served-model-name.
BENCH_STREAMS = True


# ---- the image (read, not at the tag: the repository is larger than a mirror may be here) ----

# docker/Dockerfile as stored at commit 0000977eaf873be6a295cf73017976d49ca2fb9d: the vllm-openai
# stage ends in this ENTRYPOINT (later Dockerfiles: ["vllm", "serve"]), on FINAL_BASE_IMAGE
# nvidia/cuda:<CUDA>-devel-ubuntu22.04, whose image env sets NVIDIA_VISIBLE_DEVICES=all; the
# vllm-base stage puts python3 on PATH (update-alternatives --install /usr/bin/python3). A pod's
# `command` replaces the ENTRYPOINT, so the pre-pull holder runs python3, never the server.
IMAGE_ENTRYPOINT = ("python3", "-m", "vllm.entrypoints.openai.api_server")
IMAGE_PYTHON = "/usr/bin/python3"


# ---- a model spanning nodes (issue 29; /work/briefs/facts-engines.md 1-5), READ from both wheels and checked
# against the installed sources by tests/test_multinode_engines.py ----
# The rank flags and their short forms are the parsers' own (vllm_cli answers the option strings);
# --master-port's default and what each text below says:
MASTER_PORT_DEFAULT = 29501
# The worker ranks run `--headless`: ServeSubcommand.cmd sends them to run_headless, which builds the engine
# config and starts the workers with no API server (no HTTP port, no /health): only rank 0 serves.
MULTI_NODE_SOURCE = (
    ("vllm/config/parallel.py", "master_port: int = 29501"),
    ("vllm/config/parallel.py", "nnodes: int = Field(default=1, ge=1)"),
    ("vllm/entrypoints/cli/serve.py", "if args.headless:"),
    ("vllm/entrypoints/cli/serve.py", "run_headless(args)"),
    # get_ip(): VLLM_HOST_IP first, else the source address of a route to 8.8.8.8 (which need not be the pod
    # network): the program sets it to the pod's IP.
    ("vllm/utils/network_utils.py", "host_ip = envs.VLLM_HOST_IP"),
)
# The function whose body must not start a server: run_headless in vllm/entrypoints/cli/serve.py.
HEADLESS_FUNCTION = ("vllm/entrypoints/cli/serve.py", "run_headless")
