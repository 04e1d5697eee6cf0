"""The serving engines, one module each (vllm.py, sglang.py), and the one place their names are
switched on: whatever depends on the engine (the components, the config rules, the render, the policy
pack) asks the engine module of a model (`engine_named(model.engine)`) or of an argv
(`engine_of_argv`). Adding an engine is a module here, its entry in ENGINES and its name in
config_model's `engine` Literal (config_model is a leaf and cannot ask).

Inside policy/, the pack's publish boundary, and standard library only, so the pack reads manifests
with the same facts the program renders them from.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from policy.engines import sglang, vllm


class Engine(Protocol):
    """What every engine module provides (tests/test_engine_modules.py checks each has all of it)."""

    NAME: str
    PICKER_METRICS: dict[str, str]
    PICKER_CACHE_INFO_LABELS: dict[str, str]
    DISPLAY_NAME: str
    COMMAND: str
    SECTION: str
    IMAGE_KEY: str
    PORT: int
    API_KEY_ENV: str
    ENV: dict[str, str]
    API_KEY_FLAG: str
    UNRENDERED_OWNED_FLAGS: tuple[str, ...]
    EVERY_BRANCH: dict[str, Any]
    TENSOR_PARALLEL_FLAGS: tuple[str, ...]
    DATA_PARALLEL_FLAGS: tuple[str, ...]
    IN_FLIGHT_GAUGES: tuple[str, str]
    QUEUE_GAUGE: str
    KV_CACHE_GAUGE: str
    TTFT_HISTOGRAM: str
    TPOT_HISTOGRAM: str
    ITL_HISTOGRAM: str
    GENERATION_TOKENS_TOTAL: str
    HTTP_RESPONSES: tuple[str, str, str]
    OFFLOAD_BACKEND: str
    OFFLOAD_IN_SHM: bool
    OFFLOAD_REFUSED: str | None
    CONTEXT_FIELD: str
    MEMORY_FRACTION_FIELD: str
    SPECULATIVE_FIELD: str
    PERSISTENT_COMPILE_CACHE: str | None
    MULTI_KEY_REFUSED: str | None
    MULTI_KEY_ENV: dict[str, str]
    REGISTERED_NAMES: dict[str, dict[str, frozenset[str]]]
    PIPELINE_PARALLEL_FLAGS: tuple[str, ...]
    GROUP_FLAGS: tuple[str, ...]
    HOST_IP_ENV: str
    WORKER_SERVES_HTTP: bool
    NODES_FLAGS: tuple[str, ...]

    def section(self, model: Any) -> Any: ...
    def cache_env(self, mount: str) -> dict[str, str]: ...
    def parallel_size(self, section: Any) -> int: ...
    def describe_parallel_size(self, section: Any) -> str: ...
    def parallel_size_of_argv(self, argv: list[str]) -> int: ...
    def nodes_of_argv(self, argv: list[str]) -> int: ...
    def gpus_per_node_of_argv(self, argv: list[str]) -> int: ...
    def serves_http(self, argv: list[str]) -> bool: ...
    def max_model_len(self, section: Any) -> int | None: ...
    def tokenizer_mode(self, section: Any) -> str: ...
    def memory_fraction(self, section: Any) -> float | None: ...
    def memory_fraction_at_most(self, section: Any, gpu_mib: float) -> float: ...
    def kv_cache_dtype(self, section: Any) -> str: ...
    def speculative_decoding(self, section: Any) -> bool: ...
    def with_speculative_decoding(self, section: Any, on: bool) -> Any: ...
    def serve_args(self, model_path: str, served_model_name: str, port: int, section: Any) -> list[str]: ...
    def offload_args(self, size_gib: int) -> list[str]: ...
    def offload_host_gib(self, size_gib: float, ranks: int) -> float: ...
    def offload_memory_gib(self, section: Any, size_gib: int) -> int: ...
    def offload_gib_of_argv(self, argv: list[str]) -> float: ...
    def multi_key_args(self, env_names: list[str]) -> list[str]: ...
    def group_address(self, leader_address: str) -> str: ...
    def group_args(self, nodes: int, rank: str, address: str, leader: bool) -> list[str]: ...


# In the order dashboards, alerts and plan.md list them.
ENGINES: tuple[Engine, ...] = (vllm, sglang)  # type: ignore[assignment]  # modules, structurally Engine
NAMES = tuple(e.NAME for e in ENGINES)


def engine_named(name: str) -> Engine:
    for e in ENGINES:
        if e.NAME == name:
            return e
    raise KeyError(f"no engine {name!r}; the engines are {', '.join(NAMES)}")


def engine_offloading_with(backend: str) -> Engine | None:
    """The engine whose KV offload models[].kvCacheOffload.backend names, if any."""
    return next((e for e in ENGINES if e.OFFLOAD_BACKEND == backend), None)


def release_of_image(upstream: str) -> str | None:
    """The engine release an image's tag names: `vllm/vllm-openai:v0.26.0-cu129` -> 0.26.0,
    `lmsysorg/sglang:v0.5.23-cu130` -> 0.5.23; None for a tag without one (or no tag)."""
    last = upstream.rpartition("/")[2]
    tag = last.rpartition(":")[2] if ":" in last else ""
    found = re.match(r"v?(\d+\.\d+\.\d+)(?![\d.])", tag)
    return found[1] if found else None


def _runs(word: str, command: str) -> bool:
    """`vllm`, `/usr/local/bin/vllm`, or the Python module form `python3 -m vllm.entrypoints...`."""
    return word == command or word.rsplit("/", 1)[-1] == command or word.startswith(command + ".")


def engine_of_argv(argv: list[str]) -> Engine | None:
    """The engine an engine container's command + args run: the first word naming one, each argument
    split at whitespace too, so a shell wrapper's script (a Ray head's `sh -c ... exec "$@"` passes the
    engine as its first argument) or `python3 -m sglang.launch_server` are seen through."""
    for word in (w for a in argv for w in str(a).split()):
        for e in ENGINES:
            if _runs(word, e.COMMAND):
                return e
    return None
