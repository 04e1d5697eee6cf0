"""SGLang: everything the program and the policy pack know about it, once. Pinned facts are read at
the releases tests/upstream_sglang.py names; tests/test_engine_modules.py checks each against the
installed wheels.

Standard library only (the pack imports it). The functions are pure and duck-typed over the
config's `sglang` section (config_model.Sglang), which this package must not import.
"""

from __future__ import annotations

from typing import Any

from policy.manifests import flag_value

NAME = "sglang"                # models[].engine, and the model.aibrix.ai/engine label AIBrix reads
DISPLAY_NAME = "SGLang"
COMMAND = "sglang"             # the executable: `sglang serve`
SECTION = "sglang"             # the served model's settings section (models[].sglang)
IMAGE_KEY = "sglang"           # its image in the stack file (images.sglang)
PORT = 30000
# Our Secret-backed variable; SGLang gets the key as `--api-key $(VAR)`, which Kubernetes expands.
API_KEY_ENV = "SGLANG_API_KEY"
# /health only checks the process instead of running a one-token generation every probe period
# (field report 12.4). Not configurable: the probes are TCP anyway, and this keeps any other /health
# caller from injecting prefill traffic into the engine. The pack refuses an SGLang container without it.
ENV = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0"}

API_KEY_FLAG = "--api-key"     # rendered as `--api-key $(API_KEY_ENV)`
# ---- several keys (issue 21): SGLang takes one ----
# ServerArgs.api_key is `Optional[str]` (sglang/srt/server_args.py at 0.5.17, sglang/srt/arg_groups/fields/
# serving.py at 0.5.23) and decide_request_auth compares the bearer token with that one key
# (sglang/srt/utils/auth.py, both); admin_api_key is a second key only for admin endpoints, which the
# normal ones do not accept. A stack with consumers is refused on it (stacks/rules/consumers.py).
MULTI_KEY_REFUSED: str | None = (
    "takes one API key: SGLang's --api-key is a single string (sglang/srt/server_args.py at 0.5.17, "
    "sglang/srt/arg_groups/fields/serving.py at 0.5.23) and sglang/srt/utils/auth.py decide_request_auth "
    "compares the request's bearer token with that one key (its admin key does not open the OpenAI "
    "endpoints), so it cannot accept the shared key and a key per consumer; serve this model with vLLM, or "
    "declare no consumers")
MULTI_KEY_ENV: dict[str, str] = {}


def multi_key_args(env_names: list[str]) -> list[str]:
    raise ValueError(f"SGLang {MULTI_KEY_REFUSED}")


# Options the program owns without rendering them: --model, the alias of --model-path, and the parallel and
# multi-node layout it does not model, whose GPUs and peers the pod would not have (declared at 0.5.17 and
# 0.5.23, tests/test_profiles.py reads them from the installed sources). stacks/rules/passthrough.py refuses
# them in extraArgs beside every flag serve_args renders.
# Settings of models[].sglang (model_dump names) under which serve_args takes every branch: every flag it
# can render appears (stacks/rules/passthrough.py reads the owned flags off that argv).
EVERY_BRANCH = {"speculative_algorithm": "DSPARK", "pipeline_parallel_size": 2, "max_running_requests": 1, "cuda_graph_max_bs": 1,
                "context_length": 4096, "moe_runner_backend": "x", "swa_full_tokens_ratio": 0.5,
                "reasoning_parser": "x", "tool_call_parser": "x", "trust_remote_code": True,
                "mem_fraction_static": 0.5, "chunked_prefill_size": 1024}
UNRENDERED_OWNED_FLAGS = ("--model", "--pp-size", "--nccl-init-addr", "--dist-timeout", "--nccl-port")

# ---- a model spanning nodes (issue 29), read from the installed 0.5.23 (sglang/srt/arg_groups/fields/
# parallel.py: --nnodes, --node-rank, --dist-init-addr alias --nccl-init-addr; host:port, a DNS name is fine,
# utils/network.py NetworkAddress.parse). Every node runs the same argv but its rank; node 0 hosts the
# rendezvous at --dist-init-addr. Ranks >= 1 run no OpenAI API but a placeholder /health and /ping on
# --host:--port (entrypoints/engine.py _launch_subprocesses, launch_dummy_health_check_server), so every
# rank is TCP-probed alike. Message queues and NCCL/Gloo bind ephemeral ports (SGLANG_PORT unset), so the
# group's pods must reach each other on every TCP port. The port below is the one RBG's and LWS's SGLang
# examples use (rbg v0.7.0 examples/deprecated/v1alpha1/multi-nodes/sglang.yaml: $(LWS_LEADER_ADDRESS):20000). ----
DIST_INIT_PORT = 20000
# SGLang's own address: unset, HOST_IP, a NIC, or the route to 8.8.8.8 (utils/network.py get_local_ip_auto).
HOST_IP_ENV = "SGLANG_HOST_IP"
WORKER_SERVES_HTTP = True
NODES_FLAGS = ("--nnodes",)   # what the pack reads back: the nodes one engine spans


def group_address(leader_address: str) -> str:
    """What --dist-init-addr takes: host:port of node 0's rendezvous."""
    return f"{leader_address}:{DIST_INIT_PORT}"


def group_args(nodes: int, rank: str, address: str, leader: bool) -> list[str]:
    """The flags that make one pod a rank of a group of `nodes` pods (the same for leader and workers):
    `rank` and `address` (group_address) as `$(VAR)`s Kubernetes expands from the pod's environment."""
    return ["--nnodes", str(nodes), "--node-rank", rank, "--dist-init-addr", address]


# Every flag group_args renders, read off a worker's argv (stacks/rules/passthrough.py refuses them in extraArgs).
GROUP_FLAGS = tuple(a for a in group_args(2, "1", "leader", leader=False) if a.startswith("-"))

# ---- names each pinned release registers (tests/test_profiles.py reads them back from the installed
# sources; "auto" detects from the chat template or checkpoint). SGLang's own parser refuses any other
# (choices of --reasoning-parser and --tool-call-parser) when the pod starts, after the download, so
# stacks/rules/parsers.py checks them in preview. Setting (model_dump name) -> release -> names:
# 0.5.17 sglang/srt/parser/reasoning_parser.py ReasoningParser.DetectorMap and
# sglang/srt/function_call/function_call_parser.py FunctionCallParser.ToolCallParserEnum; 0.5.23
# sglang/srt/parser/reasoning_parser_names.py and sglang/srt/function_call/parser_names.py. ----
REGISTERED_NAMES: dict[str, dict[str, frozenset[str]]] = {
    "reasoning_parser": {
        "0.5.17": frozenset("""auto apertus2509 cohere_command4 deepseek-r1 deepseek-v3 deepseek-v4 gemma4 glm45
            gpt-oss hunyuan inkling interns1 kimi kimi_k2 kimi_k3 mimo minimax minimax-append-think minimax-m3
            mistral nemotron_3 poolside_v1 qwen3 qwen3-thinking step3 step3p5""".split()),
        "0.5.23": frozenset("""auto apertus2509 beam cohere_command4 deepseek-r1 deepseek-v3 deepseek-v4 deepseek-v41
            dots gemma4 gigachat35 glm45 gpt-oss granite_thinking_parser hunyuan inkling interns1 iquest_q1
            k2_horizon kimi kimi_k2 kimi_k3 ling3 mimo minimax minimax-append-think minimax-m3 mistral muse nanbeige
            nemotron_3 poolside_v1 qwen3 qwen3-thinking response_template step3 step3p5""".split())},
    "tool_call_parser": {
        "0.5.17": frozenset("""auto apertus2509 cohere_command4 deepseekv3 deepseekv31 deepseekv32 deepseekv4 gemma4
            gigachat3 glm glm45 glm47 gpt-oss hermes hunyuan inkling interns1 kimi_k2 kimi_k3 lfm2 llama3 mimo
            minicpm5 minimax-m2 minimax-m3 mistral poolside_v1 pythonic qwen qwen25 qwen3_coder step3 step3p5
            trinity""".split()),
        "0.5.23": frozenset("""auto apertus2509 beam cohere_command4 deepseekv3 deepseekv31 deepseekv32 deepseekv4
            deepseekv41 dots gemma4 gigachat3 gigachat35 glm glm45 glm47 gpt-oss hermes hunyuan inkling interns1
            iquest_q1 k2_horizon kimi_k2 kimi_k3 lfm2 ling3 llama3 mimo minicpm5 minimax-m2 minimax-m3 mistral muse
            nanbeige poolside_v1 pythonic qwen qwen25 qwen3_coder response_template spark25 step3 step3p5
            trinity""".split())},
}

# ---- `sglang serve` options the pack reads back: declared names (--tp-size and its alias
# --tensor-parallel-size, --dp-size and its alias --data-parallel-size, at 0.5.17 and 0.5.23); SGLang
# has no --tp or --dp, they only parse as abbreviations (tests/test_engine_modules.py) ----
TENSOR_PARALLEL_FLAGS = ("--tensor-parallel-size", "--tp-size")
PIPELINE_PARALLEL_FLAGS = ("--pipeline-parallel-size", "--pp-size")
DATA_PARALLEL_FLAGS = ("--data-parallel-size", "--dp-size")

# ---- /metrics with --enable-metrics (tests/upstream_sglang.py METRICS): histograms by name, counters by
# their exposed _total name ----
IN_FLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")   # running, waiting
QUEUE_GAUGE = "sglang:num_queue_reqs"
# What the inferencePool layer's endpoint picker reads from this engine (policy/endpoint_picker.py): GIE
# v1.5.0's defaults for SGLang (factories.go defaultEngineConfigs; no LoRA spec) but sglang:cache_config_info,
# which SGLang 0.5.17 and 0.5.23 define nowhere under sglang/ (their metrics are in srt/observability/
# metrics_collector.py; tests/test_endpoint_picker.py searches both releases). Without it the picker cannot
# learn the engines' page size and count: its prefix-cache producer (requestcontrol/dataproducer/
# approximateprefix/plugin.go) falls back to its own block size and LRU capacity; queue, running and KV-usage
# scoring are unaffected. The label names GIE reads cache info from for SGLang, once a release exports it:
PICKER_METRICS = {"queued": "sglang:num_queue_reqs", "running": "sglang:num_running_reqs",
                  "kv_cache_usage": "sglang:token_usage"}
PICKER_CACHE_INFO_LABELS = {"cacheBlockSizeLabelName": "page_size", "cacheNumBlocksLabelName": "num_pages"}
KV_CACHE_GAUGE = "sglang:token_usage"
TTFT_HISTOGRAM = "sglang:time_to_first_token_seconds"
TPOT_HISTOGRAM = "sglang:request_time_per_output_token_seconds"   # from 0.5.23 on
ITL_HISTOGRAM = "sglang:inter_token_latency_seconds"
GENERATION_TOKENS_TOTAL = "sglang:generation_tokens_total"
# HTTP answers: SGLang's own counter, which also counts the scrapes of its /metrics.
# (series, matchers on every request, matcher of a failed one)
HTTP_RESPONSES = ("sglang:http_responses_total", 'endpoint!="/metrics"', 'status_code=~"5.."')

# ---- KV-cache offload: HiCache (models[].kvCacheOffload.backend hicache) ----
OFFLOAD_BACKEND = "hicache"
# Refused by the config rules for DeepSeek-V4, which both pinned releases give no --hicache-size
# (stacks/rules/capacity.py kv_cache_offload, tests/upstream_sglang.py DSV4_HICACHE_SIZE_*): nothing renders it,
# so the pack reads no HiCache flag either.
OFFLOAD_IN_SHM = False         # pinned anonymous memory, nothing under /dev/shm (HICACHE_IN_DEV_SHM)
# Offered by the program's config, but refused for the model it serves (the config rules say why).
OFFLOAD_REFUSED = ("is not offered: both pinned SGLang releases (0.5.17, 0.5.23) "
                   "refuse --hicache-size for DeepSeek-V4's KV pool (mem_cache/hybrid_cache/hybrid_pool_assembler.py "
                   "_deepseek_v4_num_host_pages: \"DeepSeek V4 HiCache currently does not support --hicache-size; "
                   "use --hicache-ratio instead\"), so the engine would fail at start; a ratio sizes the host pool "
                   "from the GPU KV pool the engine sizes at start, which leaves nothing fixed for the pod's memory "
                   "to reserve. Set kvCacheOffload.backend 'off'")
# Field names of its settings section (models[].sglang) the config rules point at.
CONTEXT_FIELD = "contextLength"
# The share of GPU memory the static pool (weights and KV cache) may take (policy/memory_fit.py).
MEMORY_FRACTION_FIELD = "memFractionStatic"
SPECULATIVE_FIELD = "speculative_algorithm"   # the switch a DSpark A/B pair may differ in (model_dump name)
# Its JIT and graph capture are most of a 23-minute cold start and must survive the pod (field report
# 12.2): the compile cache has to be an existing claim.
PERSISTENT_COMPILE_CACHE = "its JIT and graph capture are most of a 23-minute cold start and must survive the pod (field report 12.2)"


def section(model: Any) -> Any:
    return getattr(model, SECTION)


def cache_env(mount: str) -> dict[str, str]:
    """SGLang's caches under the keyed cache mount (tests/upstream_sglang.py ENVIRON, STATEMENTS)."""
    return {
        # The root its other defaults derive from (and 0.5.23's third-party redirects).
        "SGLANG_CACHE_DIR": f"{mount}/sglang",
        # 0.5.23 JIT kernels: unset means ~/.cache/sglang/jit, not under SGLANG_CACHE_DIR.
        "SGLANG_JIT_CACHE_DIR": f"{mount}/sglang-jit",
        # SGLang overwrites DeepGEMM's DG_JIT_CACHE_DIR from this at import; both name one path.
        "SGLANG_DG_CACHE_DIR": f"{mount}/deep_gemm",
    }


def parallel_size(sglang: Any) -> int:
    """GPUs one engine drives, on one node or several: TP x PP (the program sets no data parallelism for
    SGLang)."""
    return sglang.tensor_parallel_size * sglang.pipeline_parallel_size


def describe_parallel_size(sglang: Any) -> str:
    """The settings the parallel size comes from, as a config message names them."""
    return (f"sglang.tensorParallelSize {sglang.tensor_parallel_size} x pipelineParallelSize "
            f"{sglang.pipeline_parallel_size}")


def parallel_size_of_argv(argv: list[str]) -> int:
    """TP x PP x DP as the argv asks. SGLang's --enable-dp-attention would run DP inside the TP group; the
    program renders neither, and this does not model it."""
    return (int(flag_value(argv, *TENSOR_PARALLEL_FLAGS) or 1)
            * int(flag_value(argv, *PIPELINE_PARALLEL_FLAGS) or 1)
            * int(flag_value(argv, *DATA_PARALLEL_FLAGS) or 1))


def nodes_of_argv(argv: list[str]) -> int:
    """--nnodes (default 1; sglang/srt/arg_groups/fields/parallel.py at 0.5.23)."""
    return int(flag_value(argv, *NODES_FLAGS) or 1)


def gpus_per_node_of_argv(argv: list[str]) -> int:
    """GPUs the engine drives on each of its nodes: (TP x PP) // nnodes, the split
    entrypoints/engine.py _calculate_rank_ranges makes (check_server_args asserts nnodes divides TP x PP, which
    parallel_size_of_argv % nodes_of_argv shows; it refuses DP > 1 across nodes)."""
    return parallel_size_of_argv(argv) // nodes_of_argv(argv)


def serves_http(argv: list[str]) -> bool:
    """Every rank listens on --host:--port: rank 0 the OpenAI server, ranks >= 1 a placeholder /health and
    /ping (0.5.23 entrypoints/engine.py _launch_subprocesses, launch_dummy_health_check_server); SGLang has no
    headless mode (its parser refuses --headless)."""
    return True


def max_model_len(sglang: Any) -> int | None:
    """Longest prompt plus output the engine accepts, in tokens; None: the checkpoint's, unknown here."""
    return sglang.context_length


def memory_fraction(sglang: Any) -> float | None:
    """Share of each GPU's memory for weights and KV pool: --mem-fraction-static, or None when unset, as
    SGLang then computes it at start from the GPU's memory, chunked-prefill size and CUDA-graph batch
    sizes (_handle_gpu_memory_settings: sglang/srt/server_args.py at 0.5.17,
    sglang/srt/arg_groups/memory_hook.py at 0.5.23)."""
    return sglang.mem_fraction_static


def memory_fraction_at_most(sglang: Any, gpu_mib: float) -> float:
    """The largest share of a GPU of `gpu_mib` MiB SGLang takes for weights and KV pool: --mem-fraction-static,
    or when unset the share SGLang 0.5.23 leaves after the smallest reserve any branch of its own computation
    takes, 1536 MiB plus tp x pp / 8 GiB (handle_gpu_memory_settings, post-capture KV sizing; the other branch
    reserves more: sglang/srt/arg_groups/memory_hook.py at v0.5.23). A fit refused at this share is refused
    at whatever SGLang computes."""
    if sglang.mem_fraction_static is not None:
        return sglang.mem_fraction_static
    return round((gpu_mib - (1536 + sglang.tensor_parallel_size * sglang.pipeline_parallel_size / 8 * 1024)) / gpu_mib, 3)


def kv_cache_dtype(sglang: Any) -> str:
    """The program sets no --kv-cache-dtype for SGLang: its default, auto, "will use model data type"
    (ServerArgs.kv_cache_dtype, sglang/srt/arg_groups/fields/model.py at 0.5.23)."""
    return "auto"


def tokenizer_mode(sglang: Any) -> str:
    """`vllm bench serve --tokenizer-mode` for this engine's model: SGLang's settings name none."""
    return "auto"


def speculative_decoding(sglang: Any) -> bool:
    return sglang.speculative_algorithm != "off"


def with_speculative_decoding(sglang: Any, on: bool) -> Any:
    """The same section with DSpark switched on or off and nothing else changed."""
    return sglang.model_copy(update={"speculative_algorithm": "DSPARK" if on else "off"})


def serve_args(model_path: str, served_model_name: str, port: int, sglang: Any) -> list[str]:
    """`sglang serve` arguments, the validated H20 command of field report 12.1, in its order, plus
    `--enable-metrics`. The API key is passed as `$(VAR)`, which Kubernetes expands from the
    Secret-backed env var, so the manifest never holds it.

    Every flag by an option string SGLang declares (tests/test_engine_flags.py parses the argv with
    the option strings of each pinned version): the report's `--tp` is only an argparse abbreviation
    of `--tp-size`; `--tensor-parallel-size` is its declared alias in 0.5.17 and 0.5.23, and the
    spelling vLLM and the policy pack read. `--cuda-graph-max-bs` is a deprecated alias in 0.5.17 and
    an ambiguous prefix of the -decode/-prefill pair in 0.5.23, which refuses it.
    """
    args = ["serve"] + (["--trust-remote-code"] if sglang.trust_remote_code else []) + [
        "--model-path", model_path,
        "--served-model-name", served_model_name,
        "--tensor-parallel-size", str(sglang.tensor_parallel_size),
    ] + (["--pipeline-parallel-size", str(sglang.pipeline_parallel_size)] if sglang.pipeline_parallel_size > 1 else [])
    args += _given("--moe-runner-backend", sglang.moe_runner_backend)
    if sglang.speculative_algorithm != "off":
        args += ["--speculative-algorithm", sglang.speculative_algorithm]
    if sglang.mem_fraction_static is not None:
        args += ["--mem-fraction-static", format(sglang.mem_fraction_static, "g")]   # no float noise
    args += _given("--chunked-prefill-size", sglang.chunked_prefill_size)
    if sglang.swa_full_tokens_ratio is not None:
        args += ["--swa-full-tokens-ratio", format(sglang.swa_full_tokens_ratio, "g")]
    args += _given("--reasoning-parser", sglang.reasoning_parser) + _given("--tool-call-parser", sglang.tool_call_parser)
    args += ["--host", "0.0.0.0", "--port", str(port)]
    if sglang.max_running_requests is not None:
        args += ["--max-running-requests", str(sglang.max_running_requests)]
    if sglang.cuda_graph_max_bs is not None:
        args += ["--cuda-graph-max-bs-decode", str(sglang.cuda_graph_max_bs)]
    if sglang.context_length is not None:
        args += ["--context-length", str(sglang.context_length)]
    # SGLang serves /metrics only when asked; monitoring, the load-test guard and the drain read it.
    return args + ["--enable-metrics", API_KEY_FLAG, f"$({API_KEY_ENV})"]


def _given(flag: str, value: Any) -> list[str]:
    """The flag with its value, or nothing when the setting is unset (the engine's own default)."""
    return [] if value is None else [flag, str(value)]


def offload_args(size_gib: int) -> list[str]:
    """None: HiCache is refused (see OFFLOAD_BACKEND)."""
    return []


def offload_host_gib(size_gib: float, tensor_parallel_size: int) -> float:
    """Host memory HiCache would hold: every TP rank builds its own host pool of the size in 10^9 bytes,
    reserved here as GiB (tests/upstream_sglang.py HICACHE_BYTES_PER_UNIT). Only the config rules'
    node-fit arithmetic of a refused stack reaches it."""
    return size_gib * tensor_parallel_size


def offload_memory_gib(sglang: Any, size_gib: int) -> int:
    return int(offload_host_gib(size_gib, sglang.tensor_parallel_size))


def offload_gib_of_argv(argv: list[str]) -> float:
    """Nothing renders HiCache (see OFFLOAD_BACKEND), so no flag of it is read back."""
    return 0.0
