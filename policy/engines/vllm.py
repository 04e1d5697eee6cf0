"""vLLM: everything the program and the policy pack know about it, once. Pinned facts are read at
the releases tests/upstream_vllm.py names; tests/test_engine_modules.py checks each against them.

Standard library only (the pack imports it). The functions are pure and duck-typed over the
config's `vllm` section (config_model.Vllm), which this package must not import.
"""

from __future__ import annotations

import json
from typing import Any

from policy.manifests import flag_value

NAME = "vllm"                  # models[].engine, and the model.aibrix.ai/engine label AIBrix reads
DISPLAY_NAME = "vLLM"
COMMAND = "vllm"               # the executable: `vllm serve`
SECTION = "vllm"               # the served model's settings section (models[].vllm)
IMAGE_KEY = "vllm"             # its image in the stack file (images.vllm)
PORT = 8000
# vLLM reads the key from this variable itself (a Secret-backed env var), so it is never an argument.
API_KEY_ENV = "VLLM_API_KEY"
# Environment the engine container must run with besides the caches (none for vLLM).
ENV: dict[str, str] = {}

# The API key flag, which vLLM takes besides API_KEY_ENV; the program owns it (models[].vllm.extraArgs).
API_KEY_FLAG = "--api-key"
# ---- several keys (issue 21: one per consumer beside the shared key) ----
# `--api-key` takes a list: FrontendArgs.api_key is `list[str] | None` (vllm/entrypoints/openai/cli_args.py at
# v0.26.0, vllm/entrypoints/common/cli_args.py at v0.33.0), which get_kwargs (vllm/engine/arg_utils.py, both)
# turns into nargs "+"; the middleware accepts any of them (AuthenticationMiddleware, v0.26.0
# vllm/entrypoints/serve/utils/server_utils.py, v0.33.0 vllm/entrypoints/serve/middleware/authenticate.py).
# VLLM_API_KEY holds one key, and is not read at all once --api-key is given: `args.api_key or
# [envs.VLLM_API_KEY]` (v0.26.0 vllm/entrypoints/openai/api_server.py, v0.33.0
# vllm/entrypoints/serve/middleware/register.py). So every key goes in the argv, as `$(VAR)` of a
# secretKeyRef variable that Kubernetes expands at container start: the pod spec holds only names.
MULTI_KEY_REFUSED: str | None = None
# At startup vLLM logs its non-default args at INFO; v0.26.0 prints --api-key's values in that line
# (log_non_default_args, vllm/entrypoints/serve/utils/api_utils.py, called by setup_server in
# vllm/entrypoints/openai/api_server.py), v0.33.0 masks them (redact_sensitive_args,
# vllm/entrypoints/common/startup.py _SENSITIVE_ARG_FIELDS). The image tag does not say which vLLM
# runs, so an engine given keys in its argv logs at WARNING: the "vllm" logger and its handler take
# this level (vllm/logger.py DEFAULT_LOGGING_CONFIG at both), and the line is an INFO of a child logger.
MULTI_KEY_ENV = {"VLLM_LOGGING_LEVEL": "WARNING"}


def multi_key_args(env_names: list[str]) -> list[str]:
    """`--api-key` with one `$(VAR)` per key, in one flag (nargs "+": a second --api-key would replace
    the first list). Each expanded value is one argv word whatever it holds (Kubernetes expansion)."""
    return [API_KEY_FLAG, *(f"$({name})" for name in env_names)]


# Options the program owns without rendering them: another spelling of the model (EngineArgs.model, which
# the positional path sets) and the parallel layout it does not model, whose GPUs the pod would not have
# (vllm/engine/arg_utils.py parallel group: -tp, -dp, -pp and --pipeline-parallel-size, --data-parallel-size-local).
# stacks/rules/passthrough.py refuses them in extraArgs beside every flag serve_args renders.
# Settings of models[].vllm (model_dump names) under which serve_args takes every branch: every flag it
# can render appears (stacks/rules/passthrough.py reads the owned flags off that argv).
EVERY_BRANCH = {"data_parallel_size": 2, "pipeline_parallel_size": 2, "speculative_decoding": "dspark", "enforce_eager": True,
                "enable_prefix_caching": True, "tokenizer_mode": "auto", "tool_call_parser": "x", "reasoning_parser": "x",
                "block_size": 16, "max_model_len": 4096, "trust_remote_code": True, "kv_cache_dtype": "fp8",
                "gpu_memory_utilization": 0.5}
UNRENDERED_OWNED_FLAGS = ("--model", "-tp", "-dp", "-pp", "--data-parallel-size-local", "-dpl",
                          "--data-parallel-address", "-dpa", "--data-parallel-rpc-port", "-dpp",
                          "--data-parallel-start-rank", "-dpr", "--data-parallel-rank", "-dpn",
                          "--data-parallel-backend", "-dpb", "--distributed-executor-backend", "--api-server-count",
                          "-asc", "-n", "-r")

# ---- a model spanning nodes (issue 29): vLLM's native multi-node mode, read from the installed 0.33.0
# (vllm/engine/arg_utils.py EngineArgs.add_cli_args, vllm/config/parallel.py ParallelConfig: --nnodes/-n,
# --node-rank/-r, --master-addr, --master-port default 29501; --nnodes > 1 picks the mp executor itself and
# refuses ray). Every node runs the same argv but its rank; the workers run --headless, which opens no HTTP
# port and no /health (vllm/entrypoints/cli/serve.py run_headless), so only the leader serves and is probed.
# The leader hosts torch's rendezvous at --master-addr:--master-port; the leader-to-worker message queues and
# NCCL/Gloo bind OS-assigned ports (vllm/distributed/device_communicators/shm_broadcast.py MessageQueue binds
# tcp://<ip>:0), so the group's pods must reach each other on every TCP port. ----
MASTER_PORT = 29501
# vLLM's own address on the group network: unset, it takes the source address of a route to 8.8.8.8
# (vllm/utils/network_utils.py get_ip), which need not be the pod network; the pod IP is set explicitly.
HOST_IP_ENV = "VLLM_HOST_IP"
# A worker rank serves no port: it is neither probed nor drained.
WORKER_SERVES_HTTP = False
# What the pack reads back (declared by the 0.33.0 serve parser, /work/briefs/facts-engines.md section 1):
# the nodes one engine spans, and the switch that makes a rank serve nothing (serves_http).
NODES_FLAGS = ("--nnodes", "-n")
HEADLESS_FLAG = "--headless"


def group_address(leader_address: str) -> str:
    """What --master-addr takes: the leader's host name alone (the port is --master-port)."""
    return leader_address


def group_args(nodes: int, rank: str, address: str, leader: bool) -> list[str]:
    """The flags that make one pod a rank of a group of `nodes` pods: `rank` and `address` (group_address)
    as `$(VAR)`s Kubernetes expands from the pod's environment."""
    return (["--nnodes", str(nodes), "--node-rank", rank, "--master-addr", address,
             "--master-port", str(MASTER_PORT)] + ([] if leader else ["--headless"]))


# Every flag group_args renders, read off a worker's argv (stacks/rules/passthrough.py refuses them in extraArgs).
GROUP_FLAGS = tuple(a for a in group_args(2, "1", "leader", leader=False) if a.startswith("-"))

# ---- names each pinned release registers (tests/test_profiles.py reads them back from the installed
# sources). vLLM's parser takes any string for these and only checks it when the server starts
# (validate_api_server_args, vllm/entrypoints/openai/cli_args.py at v0.26.0, vllm/entrypoints/common/cli_args.py
# at v0.33.0): after the download and the GPU wait, so stacks/rules/parsers.py checks them in preview.
# Setting (model_dump name) -> release -> names: vllm/reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER,
# vllm/tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER, vllm/config/model.py TokenizerMode. ----
REGISTERED_NAMES: dict[str, dict[str, frozenset[str]]] = {
    "reasoning_parser": {
        "0.26.0": frozenset("""cohere_command3 cohere_command4 deepseek_r1 deepseek_v3 deepseek_v4 ernie45 gemma4
            glm45 glm47 granite holo2 hunyuan_a13b hy_v3 inkling kimi_k2 mimo minimax_m2 minimax_m2_append_think
            minimax_m3 mistral nemotron_v3 olmo3 openai_gptoss poolside_v1 qwen3 seed_oss step3 step3p5""".split()),
        "0.33.0": frozenset("""beam cohere_command3 cohere_command4 deepseek_r1 deepseek_v3 deepseek_v4 deepseek_v41
            ernie45 gemma4 glm45 glm47 granite granite_thinking_parser hf holo2 hunyuan_a13b hy_v3 hy_v4 inkling
            k2_horizon kimi_k2 kimi_k3 ling3 mimo minicpmv minimax_m2 minimax_m2_append_think minimax_m3 mistral muse
            muse_glimmer musespark1x nemotron_v3 olmo3 openai_gptoss plamo3 poolside_v1 qwen3 seed_oss step3 step3p5
            step5""".split())},
    "tool_call_parser": {
        "0.26.0": frozenset("""apertus cohere_command3 cohere_command4 deepseek_v3 deepseek_v31 deepseek_v32 deepseek_v4
            ernie45 functiongemma gemma4 gigachat3 glm45 glm47 granite granite-20b-fc granite4 hermes hunyuan_a13b
            hy_v3 inkling internlm jamba kimi_k2 lfm2 llama3_json llama4_json llama4_pythonic longcat mimo minicpm5
            minimax_m2 minimax_m3 mistral olmo3 openai phi4_mini_json poolside_v1 pythonic qwen3_coder qwen3_xml
            seed_oss step3 step3p5 xlam""".split()),
        "0.33.0": frozenset("""apertus beam cohere_command3 cohere_command4 deepseek_v3 deepseek_v31 deepseek_v32
            deepseek_v4 deepseek_v41 dots ernie45 functiongemma gemma4 gigachat3 glm45 glm47 granite granite-20b-fc
            granite4 hermes hf hunyuan_a13b hy_v3 hy_v4 inkling internlm jamba k2_horizon kimi_k2 kimi_k3 lfm2 ling3
            llama3_json llama4_json llama4_pythonic longcat mimo minicpm5 minimax_m2 minimax_m3 mistral muse
            muse_glimmer musespark1x olmo3 openai phi4_mini_json plamo3 poolside_v1 pythonic qwen3_coder qwen3_json
            qwen3_xml seed_oss step3 step3p5 step5 xlam""".split())},
    "tokenizer_mode": {
        "0.26.0": frozenset("auto deepseek_v32 deepseek_v4 hf inkling mistral slow".split()),
        "0.33.0": frozenset("alpamayo2_super auto cohere deepseek_v32 deepseek_v4 hf inkling kimi_k3 mistral".split())},
}

# ---- `vllm serve` options the pack reads back (declared names only: tests/test_engine_flags.py asks vLLM's parsers) ----
TENSOR_PARALLEL_FLAGS = ("--tensor-parallel-size",)
PIPELINE_PARALLEL_FLAGS = ("--pipeline-parallel-size",)
DATA_PARALLEL_FLAGS = ("--data-parallel-size",)
OFFLOAD_SIZE_FLAG = "--kv-offloading-size"
OFFLOAD_BACKEND_FLAG = "--kv-offloading-backend"

# ---- /metrics (tests/upstream_vllm.py METRICS): histograms by name (exposed as _bucket/_sum/_count),
# counters by their exposed _total name ----
IN_FLIGHT_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")   # running, waiting
QUEUE_GAUGE = "vllm:num_requests_waiting"
# What the inferencePool layer's endpoint picker reads from this engine (policy/endpoint_picker.py, keys of its
# ENGINE_CONFIG_FIELDS): GIE v1.5.0's own defaults for vLLM (pkg/epp/framework/plugins/datalayer/extractor/
# metrics/factories.go defaultEngineConfigs, tests/upstream_gie.py UPSTREAM_METRICS), every one defined by
# vLLM 0.26.0 and 0.33.0 (vllm/v1/metrics/loggers.py); vllm:lora_requests_info only while LoRA is on, and
# no scorer the stacks configure reads it. cache_config_info's labels are the picker's defaults
# (block_size, num_gpu_blocks): no label names to give.
PICKER_METRICS = {"queued": "vllm:num_requests_waiting", "running": "vllm:num_requests_running",
                  "kv_cache_usage": "vllm:kv_cache_usage_perc", "lora": "vllm:lora_requests_info",
                  "cache_info": "vllm:cache_config_info"}
PICKER_CACHE_INFO_LABELS: dict[str, str] = {}
KV_CACHE_GAUGE = "vllm:kv_cache_usage_perc"
TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds"
TPOT_HISTOGRAM = "vllm:request_time_per_output_token_seconds"
ITL_HISTOGRAM = "vllm:inter_token_latency_seconds"
GENERATION_TOKENS_TOTAL = "vllm:generation_tokens_total"
# HTTP answers: prometheus-fastapi-instrumentator's counter, status grouped as "5xx"; it leaves
# /metrics out itself. (series, matchers on every request, matcher of a failed one)
HTTP_RESPONSES = ("http_requests_total", "", 'status="5xx"')
# NixlConnector (P/D pods only), on the decode side; failures and expired KV on either side.
NIXL_TRANSFERS_HISTOGRAM = "vllm:nixl_xfer_time_seconds"
NIXL_BYTES_HISTOGRAM = "vllm:nixl_bytes_transferred"
NIXL_FAILURE_COUNTERS = ("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications",
                         "vllm:nixl_num_kv_expired_reqs")   # exposed with _total

# ---- KV-cache offload to CPU memory (issue 13) ----
OFFLOAD_BACKEND = "native"     # models[].kvCacheOffload.backend; lmcache is refused by the config rules
# 0.33.0 maps the buffer to one /dev/shm file for all ranks on CUDA; 0.26.0 allocates pinned anonymous
# memory. The image tag does not say which vLLM runs, so the pod gets the room in both places.
OFFLOAD_IN_SHM = True
OFFLOAD_REFUSED: str | None = None
# Field names of its settings section (models[].vllm) the config rules point at.
CONTEXT_FIELD = "maxModelLen"
# The share of GPU memory the engine may use, weights, activations and KV cache together (policy/memory_fit.py).
MEMORY_FRACTION_FIELD = "gpuMemoryUtilization"
SPECULATIVE_FIELD = "speculative_decoding"   # the switch a DSpark A/B pair may differ in (model_dump name)
PERSISTENT_COMPILE_CACHE: str | None = None  # its compile cache may be per pod


def section(model: Any) -> Any:
    return getattr(model, SECTION)


def cache_env(mount: str) -> dict[str, str]:
    """vLLM's own cache root under the keyed cache mount: torch.compile / inductor cache, DeepGEMM's
    default, FlashInfer autotune results (tests/upstream_vllm.py READ)."""
    return {"VLLM_CACHE_ROOT": f"{mount}/vllm"}


def parallel_size(vllm: Any) -> int:
    """GPUs one engine drives, on one node or several: TP x PP x DP (each data-parallel rank is an engine
    core of TP x PP GPUs; vllm/config/parallel.py world_size is TP x PP, DP multiplies it)."""
    return vllm.tensor_parallel_size * vllm.pipeline_parallel_size * vllm.data_parallel_size


def describe_parallel_size(vllm: Any) -> str:
    """The settings the parallel size comes from, as a config message names them."""
    return (f"tensorParallelSize {vllm.tensor_parallel_size} x pipelineParallelSize {vllm.pipeline_parallel_size} "
            f"x dataParallelSize {vllm.data_parallel_size}")


def parallel_size_of_argv(argv: list[str]) -> int:
    """GPUs of the whole engine, over every node it spans: TP x PP x DP."""
    return (int(flag_value(argv, *TENSOR_PARALLEL_FLAGS) or 1)
            * int(flag_value(argv, *PIPELINE_PARALLEL_FLAGS) or 1)
            * int(flag_value(argv, *DATA_PARALLEL_FLAGS) or 1))


def nodes_of_argv(argv: list[str]) -> int:
    """--nnodes (alias -n, default 1; vllm/config/parallel.py ParallelConfig.nnodes at 0.33.0)."""
    return int(flag_value(argv, *NODES_FLAGS) or 1)


def gpus_per_node_of_argv(argv: list[str]) -> int:
    """GPUs the engine drives on each of its nodes: world_size // nnodes, as vLLM 0.33.0 computes
    ParallelConfig.local_world_size (world_size = DP x PP x TP; EngineArgs.create_engine_config refuses an
    nnodes that does not divide it, which parallel_size_of_argv % nodes_of_argv shows)."""
    return parallel_size_of_argv(argv) // nodes_of_argv(argv)


def serves_http(argv: list[str]) -> bool:
    """Whether the argv opens the OpenAI server on --port: not with --headless, which runs the worker ranks
    only and never calls run_server (0.33.0 vllm/entrypoints/cli/serve.py ServeSubcommand.cmd -> run_headless)."""
    return HEADLESS_FLAG not in argv


def max_model_len(vllm: Any) -> int | None:
    """Longest prompt plus output the engine accepts, in tokens; None: the checkpoint's, unknown here."""
    return vllm.max_model_len


# What vLLM takes when the argv sets neither (CacheConfig.gpu_memory_utilization and cache_dtype,
# vllm/config/cache.py at v0.26.0 and v0.33.0): the memory fit's figures for a profile that sets none.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_KV_CACHE_DTYPE = "auto"      # the model's own dtype


def memory_fraction(vllm: Any) -> float | None:
    """Share of each GPU's memory the engine takes for weights, KV cache and activations."""
    return vllm.gpu_memory_utilization if vllm.gpu_memory_utilization is not None else DEFAULT_GPU_MEMORY_UTILIZATION


def memory_fraction_at_most(vllm: Any, gpu_mib: float) -> float:
    """vLLM takes exactly its --gpu-memory-utilization (or its default) of every GPU."""
    return memory_fraction(vllm)


def kv_cache_dtype(vllm: Any) -> str:
    """--kv-cache-dtype as the engine runs it (policy/kv_cache.py ELEMENT_BYTES names)."""
    return vllm.kv_cache_dtype or DEFAULT_KV_CACHE_DTYPE


def tokenizer_mode(vllm: Any) -> str:
    """`vllm bench serve --tokenizer-mode` for this engine's model: the one the engine serves with."""
    return vllm.tokenizer_mode or "auto"


def speculative_decoding(vllm: Any) -> bool:
    return vllm.speculative_decoding != "off"


def with_speculative_decoding(vllm: Any, on: bool) -> Any:
    """The same section with DSpark switched on or off and nothing else changed."""
    return vllm.model_copy(update={"speculative_decoding": "dspark" if on else "off"})


def serve_args(model_path: str, served_model_name: str, port: int, vllm: Any) -> list[str]:
    """`vllm serve` arguments, exactly the validated command of field report section 5.

    DSpark stays off unless asked for, so the first deployment is the target-only baseline that
    section 5 wants before any A/B. The API key is not an argument: vLLM reads VLLM_API_KEY, which
    comes from a Secret, so it never shows in `ps` or in the manifest.
    """
    args = [
        "serve", model_path,
        "--served-model-name", served_model_name,
        "--host", "0.0.0.0",
        "--port", str(port),
    ]
    if vllm.trust_remote_code:
        args.append("--trust-remote-code")
    args += ["--tensor-parallel-size", str(vllm.tensor_parallel_size)]
    if vllm.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(vllm.pipeline_parallel_size)]
    if vllm.data_parallel_size > 1:
        args += ["--data-parallel-size", str(vllm.data_parallel_size)]
    args += _given("--kv-cache-dtype", vllm.kv_cache_dtype)
    args += _given("--block-size", vllm.block_size)
    if vllm.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", format(vllm.gpu_memory_utilization, "g")]   # 0.88, no float noise
    args += _given("--max-model-len", vllm.max_model_len)
    args += ["--max-num-seqs", str(vllm.max_num_seqs)]
    args += _given("--tokenizer-mode", vllm.tokenizer_mode)
    if vllm.tool_call_parser is not None:
        args += ["--tool-call-parser", vllm.tool_call_parser, "--enable-auto-tool-choice"]
    args += _given("--reasoning-parser", vllm.reasoning_parser)
    if vllm.enable_prefix_caching:
        args.append("--enable-prefix-caching")
    if vllm.speculative_decoding == "dspark":
        spec = {"method": "dspark", "num_speculative_tokens": vllm.dspark_num_speculative_tokens,
                "draft_sample_method": "greedy"}
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if vllm.enforce_eager:
        args.append("--enforce-eager")
    return args


def _given(flag: str, value: Any) -> list[str]:
    """The flag with its value, or nothing when the setting is unset (the engine's own default)."""
    return [] if value is None else [flag, str(value)]


def offload_args(size_gib: int) -> list[str]:
    """The size is GiB over all TP ranks of one engine (vllm/config/cache.py kv_offloading_size)."""
    return [OFFLOAD_BACKEND_FLAG, OFFLOAD_BACKEND, OFFLOAD_SIZE_FLAG, str(size_gib)]


def offload_host_gib(size_gib: float, data_parallel_size: int) -> float:
    """Host memory one engine container holds for offloaded KV: vLLM allocates the size once per engine
    core, and every data-parallel rank is an engine core of its own (its world size excludes DP)."""
    return size_gib * data_parallel_size


def offload_memory_gib(vllm: Any, size_gib: int) -> int:
    return int(offload_host_gib(size_gib, vllm.data_parallel_size))


def offload_gib_of_argv(argv: list[str]) -> float:
    """The same, read back from an engine argv (the policy pack's side)."""
    size = flag_value(argv, OFFLOAD_SIZE_FLAG)
    return 0.0 if size is None else offload_host_gib(float(size), int(flag_value(argv, *DATA_PARALLEL_FLAGS) or 1))
