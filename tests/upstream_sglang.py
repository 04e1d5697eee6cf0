"""SGLang (github.com/sgl-project/sglang) as the stacks use it, at the two releases they target:
every SGLang fact the tests rely on, once. Field report 12 ran 0.5.17; 0.5.23 is the current target.

Most of it RUNs: `make test` installs each release's wheel --no-deps into .venv-engines/sglang==<v>
(requirements-engines.txt), and the tests execute its environment module and cache statements
(tests/test_engine_caches.py), build `sglang serve`'s parser from its option declarations
(tests/test_engine_flags.py, tests/sglang_cli.py) and check METRICS against its files
(tests/test_network_monitoring.py, tools/engine_metrics.py).

Re-check on a bump: add the release to RELEASES and a `sglang==<v>` line to requirements-engines.txt,
re-read the wheel's METADATA Requires-Dist for TILELANG / TVM_FFI (new pins there too), add the
release's entries to STATEMENTS and FIELD_SOURCES, and run `make test`; by hand,
`python tools/engine_metrics.py sglang <dir holding sglang/> [index in RELEASES]`.
"""

from __future__ import annotations

from source_facts import Statement

RELEASES = ("0.5.17", "0.5.23")

# Requires-Dist in each wheel's METADATA: the TileLang and tvm-ffi whose code the cache test runs
# (tests/upstream_tilelang.py, tests/upstream_tvm_ffi.py).
TILELANG = {"0.5.17": "0.1.11", "0.5.23": "0.1.12"}
TVM_FFI = {"0.5.17": "0.1.11", "0.5.23": "0.1.11"}
# The same Requires-Dist for FlashInfer (flashinfer-python) and torch (tests/upstream_flashinfer.py,
# tests/upstream_pytorch.py, tests/upstream_triton.py).
FLASHINFER = {"0.5.17": "0.6.15.post1", "0.5.23": "0.7.2"}
TORCH = {"0.5.17": "2.11.0", "0.5.23": "2.14.1"}

# Compared with the tag of the SGLang image the stacks run (images.sglang) by tests/test_upstream_releases.py:
# it must be one of RELEASES (each also installed from requirements-engines.txt, which the test checks).
PORTED_FROM = (
    {"repo": "sgl-project/sglang", "releases": RELEASES, "component": "sglang",
     "files": ("sglang/srt/environ.py", "sglang/srt/server_args.py", "sglang/srt/arg_groups/",
               "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py", "sglang/kernels/jit/utils/",
               "sglang/srt/observability/", "sglang/srt/managers/tokenizer_manager.py", "sglang/srt/utils/auth.py",
               "sglang/srt/utils/common.py", "sglang/srt/mem_cache/", "METADATA (Requires-Dist)")},
    {"repo": "sgl-project/sglang", "release": None, "commit": "004740a9cb3dbf6153455fb38b447021e3e07236",
     "files": ("docker/Dockerfile",), "untagged": "the image's Dockerfile as stored at a commit",
     "not_deployed": "the image build, not a release the stack files name"},
)


# ---- caches ----

# RUN: SGLang's environment module (stdlib only, loaded by path: the package __init__ imports torch).
# Every EnvField whose name says CACHE or DIR is read; 0.5.23 also applies redirect_third_party_caches()
# as sglang/__init__.py does first thing (setdefault of TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
# CUDA_CACHE_PATH, TILELANG_CACHE_DIR, FLASHINFER_WORKSPACE_BASE).
ENVIRON = "sglang/srt/environ.py"

# RUN: cache paths computed outside the environment module, where a later line overrides or bypasses it.
STATEMENTS = (
    # v0.5.17 python/sglang/srt/layers/deep_gemm_wrapper/compile_utils.py: at import, DG_JIT_CACHE_DIR is
    # overwritten from SGLANG_DG_CACHE_DIR (default ~/.cache/deep_gemm), so DG_JIT_CACHE_DIR alone never
    # reaches DeepGEMM under SGLang.
    Statement("sglang==0.5.17", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py",
              "os.environ['DG_JIT_CACHE_DIR']", "DeepGEMM JIT cache as SGLang sets it"),
    # v0.5.23, same file: os.environ["DG_JIT_CACHE_DIR"] = envs.SGLANG_DG_CACHE_DIR.get()
    Statement("sglang==0.5.23", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py",
              "os.environ['DG_JIT_CACHE_DIR']", "DeepGEMM JIT cache as SGLang sets it"),
    # v0.5.17 python/sglang/kernels/jit/utils/compile.py: SGLang's JIT kernels build under
    # TVM_FFI_CACHE_DIR (default ~/.cache/tvm-ffi); there is no SGLANG_JIT_CACHE_* variable yet.
    Statement("sglang==0.5.17", "sglang/kernels/jit/utils/compile.py", "cache_dir", "SGLang JIT kernels"),
    # v0.5.23 python/sglang/kernels/jit/utils/compile/cache.py: SGLANG_JIT_CACHE_DIR, else
    # ~/.cache/sglang/jit (not under SGLANG_CACHE_DIR).
    Statement("sglang==0.5.23", "sglang/kernels/jit/utils/compile/cache.py", "configured", "SGLang JIT kernels"),
)


# ---- `sglang serve` options ----

# RUN: tests/sglang_cli.py reads the option strings `sglang serve` declares from the installed source
# (0.5.17: ServerArgs fields in sglang/srt/server_args.py; 0.5.23: the field groups in
# sglang/srt/arg_groups/fields/*.py, as add_cli_args_from_dataclass in sglang/srt/arg_groups/arg_utils.py
# turns them into flags, plus the add_argument calls of ServerArgs.add_cli_args) and parses our argv with
# them on argparse.ArgumentParser(prog="sglang serve"), allow_abbrev left on as prepare_server_args sets it.
FIELD_SOURCES = {
    "0.5.17": ("sglang/srt/server_args.py",),
    "0.5.23": ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/*.py"),
}
ADD_ARGUMENT_SOURCES = ("sglang/srt/server_args.py",)


# ---- /metrics (with --enable-metrics, which policy/engines/sglang.py passes) ----

_COLLECTOR = "sglang/srt/observability/metrics_collector.py"
# The collectors' labelnames are labels.keys() of a dict built at run time, so the tool cannot read
# them; read by hand: both collectors' dicts start with "model_name" (--served-model-name) and
# "engine_type". 0.5.17: scheduler sglang/srt/observability/metrics_collector.py (labels = {...} in
# the scheduler collector context), tokenizer sglang/srt/managers/tokenizer_manager.py (labels =
# {...} under enable_metrics); 0.5.23: metrics_collector.py, the scheduler context and
# tokenizer_metric_labels().
_LABELS = ("model_name", "engine_type")
# RUN (tests/test_dashboards.py): the files whose `labels = {"model_name": ..., "engine_type": ...}`
# dicts label the scheduler and the tokenizer collectors, per release.
LABEL_DICTS = {"0.5.17": {_COLLECTOR: 1, "sglang/srt/managers/tokenizer_manager.py": 1}, "0.5.23": {_COLLECTOR: 2}}
# name -> (kind, label names the alerts and dashboards rely on, defining file at 0.5.17 | 0.5.23)
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # SchedulerMetricsCollector: self.num_running_reqs / self.num_queue_reqs = Gauge(name=
    # "sglang:num_running_reqs" / "sglang:num_queue_reqs", ...): requests in flight, which the load
    # test's idle check sums (openai_client.IN_FLIGHT_GAUGES)
    "sglang:num_running_reqs": ("gauge", _LABELS, _COLLECTOR),
    "sglang:num_queue_reqs": ("gauge", _LABELS, _COLLECTOR),
    # SchedulerMetricsCollector: self.token_usage = Gauge(name="sglang:token_usage", ...), a 0-1 ratio
    "sglang:token_usage": ("gauge", _LABELS, _COLLECTOR),
    # TokenizerMetricsCollector: self.histogram_time_to_first_token / histogram_inter_token_latency /
    # (0.5.23 only) histogram_request_time_per_output_token = Histogram(...)
    "sglang:time_to_first_token_seconds": ("histogram", _LABELS, _COLLECTOR),
    "sglang:inter_token_latency_seconds": ("histogram", _LABELS, _COLLECTOR),
    "sglang:request_time_per_output_token_seconds": ("histogram", _LABELS, _COLLECTOR),
    # TokenizerMetricsCollector: self.generation_tokens_total = Counter(name=
    # "sglang:generation_tokens_total"): prometheus_client strips the _total and exposes it again
    "sglang:generation_tokens_total": ("counter", _LABELS, _COLLECTOR),
    # 0.5.17 sglang/srt/utils/common.py add_prometheus_track_response_middleware, 0.5.23
    # sglang/srt/observability/http_request_metrics.py _HttpRequestMetrics: Counter
    # "sglang:http_responses_total" labels endpoint, status_code (str(response.status_code)),
    # method. SGLang has no unprefixed http_requests_total.
    "sglang:http_responses_total": ("counter", ("endpoint", "status_code", "method"),
                                    "sglang/srt/utils/common.py | sglang/srt/observability/http_request_metrics.py"),
}

# Recorded metrics a release before this one does not define anywhere under sglang/: 0.5.17 has no
# TPOT histogram (the dashboards' TPOT panel shows SGLang from 0.5.23 on).
SINCE = {"sglang:request_time_per_output_token_seconds": "0.5.23"}


def metrics_at(release: int) -> tuple[dict[str, tuple[str, tuple[str, ...], str]], tuple[str, ...]]:
    """The recorded metrics RELEASES[release] defines, and those it must not define."""
    absent = tuple(n for n, since in SINCE.items() if RELEASES.index(since) > release)
    return {n: v for n, v in METRICS.items() if n not in absent}, absent


# sglang/srt/utils/auth.py decide_request_auth: /metrics and /health* pass without the API key, so
# Prometheus scrapes an engine started with --api-key.
METRICS_PATH_NEEDS_KEY = False


# ---- hierarchical KV cache (HiCache), issue 13 ----

# RUN: tests/test_kv_offload.py reads these fields' types from the installed source and parses our argv
# with each release's own option strings (tests/test_engine_flags.py). 0.5.17 sglang/srt/server_args.py,
# 0.5.23 sglang/srt/arg_groups/fields/memory.py: enable_hierarchical_cache (bool; 0.5.23 adds the alias
# --enable-hicache, so we render the long name both know) and hicache_size (int, "The size of host KV cache
# memory pool in gigabytes", overriding hicache_ratio).
HICACHE_FIELDS = {"enable_hierarchical_cache": "bool", "hicache_size": "int"}
# READ: the size is 10^9 bytes per rank and split over the pools of one rank: memory_pool_host.py
# HostKVCache (`host_size * 1e9 // size_per_token`), hybrid_cache/hybrid_pool_assembler.py _split_hicache_size
# (share of hicache_size by device pool bytes); every TP rank builds its own host pools.
HICACHE_BYTES_PER_UNIT = 10 ** 9
# READ: without a storage backend the host pool is an anonymous MAP_SHARED mmap (storage/mmap/mmap_allocator.py
# alloc_mmap) registered with cudaHostRegister (mem_cache/pool_host/common.py alloc_with_host_register,
# get_allocator_type "default"): pinned memory charged to the container, nothing under /dev/shm (only the
# "shm" storage backend, which we never set, allocates there).
HICACHE_IN_DEV_SHM = False
# READ: SGLang refuses "--enable-hierarchical-cache" with "--disable-radix-cache" (0.5.17 server_args.py
# _handle_cache_compatibility, 0.5.23 arg_groups/kv_cache_hook.py: "mutually exclusive").
HICACHE_REFUSED_WITH = ("--disable-radix-cache",)
# READ, and checked against both installed releases by tests/test_kv_offload.py: DeepSeek-V4 (the model every
# stack serves) keeps its KV in DeepSeekV4TokenToKVPool on CUDA (mem_cache/kv_cache_configurator.py
# _build_dsv4_kv_pool), a hybrid-SWA pool, so HiCache goes through UnifiedRadixCache.init_hicache
# (mem_cache/registry.py) to _DeepSeekV4Strategy and build_deepseek_v4_hicache_stack, whose
# _deepseek_v4_num_host_pages (mem_cache/hybrid_cache/hybrid_pool_assembler.py, 0.5.17 and 0.5.23) raises
# ValueError on any --hicache-size > 0. The host pool is then sized only by --hicache-ratio x the device KV
# pool, which the engine sizes at start from the GPU memory left: no fixed host size the pod could reserve.
DSV4_HICACHE_SIZE_SOURCE = "sglang/srt/mem_cache/hybrid_cache/hybrid_pool_assembler.py"
DSV4_HICACHE_SIZE_REFUSAL = "DeepSeek V4 HiCache currently does not support --hicache-size"

# docker/Dockerfile as stored at commit 004740a9cb3dbf6153455fb38b447021e3e07236 (the image, not the
# wheel): FROM nvidia/cuda:<CUDA>-cudnn-devel-ubuntu22.04 (image env NVIDIA_VISIBLE_DEVICES=all), no
# ENTRYPOINT of its own (the CUDA base's stays), python3 on PATH via
# `update-alternatives --set python3 /usr/bin/python3.12`. The pre-pull holder's `command` replaces it.
IMAGE_ENTRYPOINT: tuple[str, ...] | None = None
IMAGE_PYTHON = "/usr/bin/python3"


# ---- a model spanning nodes (issue 29; /work/briefs/facts-engines.md 6-8), READ from the 0.5.23 wheel and checked
# against the installed source by tests/test_multinode_engines.py ----
MULTI_NODE_RELEASE = "0.5.23"
# --dist-init-addr's alias (sglang/srt/arg_groups/fields/parallel.py class Parallel); there is no --headless.
DIST_INIT_ALIAS = "--nccl-init-addr"
MULTI_NODE_SOURCE = (
    ("sglang/srt/arg_groups/fields/parallel.py", 'aliases=["--nccl-init-addr"],'),
    # get_local_ip_auto: SGLANG_HOST_IP (or HOST_IP) first, else a NIC or the route to 8.8.8.8.
    ("sglang/srt/utils/network.py", 'host_ip = os.getenv("SGLANG_HOST_IP", "") or os.getenv("HOST_IP", "")'),
    # Ranks >= 1 run no tokenizer and no OpenAI API, but a dummy health server on --host:--port answering
    # /ping, /health and /health_generate: a worker pod is probed like the leader (WORKER_SERVES_HTTP).
    ("sglang/srt/entrypoints/engine.py", "if get_parallel().node_rank >= 1:"),
    ("sglang/srt/entrypoints/engine.py", "launch_dummy_health_check_server("),
    ("sglang/srt/utils/common.py", '@app.get("/health")'),
    ("sglang/srt/utils/common.py", '@app.get("/ping")'),
    ("sglang/srt/entrypoints/http_server.py", "if get_parallel().node_rank >= 1:"),
)
