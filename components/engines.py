"""Engine knowledge of a served model as pure functions: its engine module (policy/engines/, which
holds every engine-specific fact and argv builder) asked with the model's own settings, and the GPU
accounting of its workloads.

Nothing here registers a resource, so every flag can be tested without the Pulumi runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config_model import ServedModel, Smoke, startup
from policy.engines import Engine, engine_named, engine_offloading_with
from policy.profiles import Profile, profile_named


def engine_of(model: ServedModel) -> Engine:
    return engine_named(model.engine)


def profile_of(model: ServedModel) -> Profile:
    return profile_named(model.profile)


def cold_start_estimate_seconds(model: ServedModel) -> int | None:
    """The measured cold start of the model's family on its engine (policy/profiles/), pod creation to
    Ready; None where nothing was measured."""
    return profile_of(model).COLD_START_ESTIMATE_SECONDS.get(model.engine)


@dataclass(frozen=True)
class EngineCommand:
    """The container command of one engine and the environment it needs besides secrets."""

    command: list[str]
    args: list[str]
    env: dict[str, str]


def parallel_size(model: ServedModel) -> int:
    """GPUs one engine pod drives: TP x DP for vLLM, TP for SGLang."""
    engine = engine_of(model)
    return engine.parallel_size(engine.section(model))


def startup_budget_seconds(model: ServedModel) -> int:
    """The stack file's, else derived from the profile's measured cold start or the model's size
    (config_model/startup.py)."""
    return startup.startup_budget_seconds(model)


def max_model_len(model: ServedModel) -> int | None:
    """Longest prompt plus output the engine accepts, in tokens: the section's, else what the profile
    knows of its checkpoint; None when neither says (the engine takes the checkpoint's)."""
    engine = engine_of(model)
    return engine.max_model_len(engine.section(model)) or profile_of(model).ASSUMED_CONTEXT.get(model.engine)


def tokenizer_mode(model: ServedModel) -> str:
    engine = engine_of(model)
    return engine.tokenizer_mode(engine.section(model))


def speculative_decoding(model: ServedModel) -> bool:
    engine = engine_of(model)
    return engine.speculative_decoding(engine.section(model))


def with_speculative_decoding(model: ServedModel, on: bool) -> ServedModel:
    """The same model with DSpark switched on or off and nothing else changed."""
    engine = engine_of(model)
    return model.model_copy(update={engine.SECTION: engine.with_speculative_decoding(engine.section(model), on)})




# Weights come only from the read-only volume; a hub download would bypass the integrity check and
# the ready marker.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


# ---- KV-cache offload to CPU memory (issue 13): each engine module holds its backend and arithmetic ----

def kv_offload_args(model: ServedModel) -> list[str]:
    """The engine flags of models[].kvCacheOffload; none when it is off or not the engine's backend
    (stacks/rules/capacity.py refuses that, lmcache and, for DeepSeek-V4, SGLang's hicache)."""
    offload, engine = model.kv_cache_offload, engine_of(model)
    return engine.offload_args(offload.size_gib) if offload.backend == engine.OFFLOAD_BACKEND else []


def offload_memory_gib(model: ServedModel) -> int:
    """Host memory one engine container holds for offloaded KV, in GiB, by the arithmetic of the engine
    whose backend the model names."""
    offload = model.kv_cache_offload
    engine = engine_offloading_with(offload.backend)
    return 0 if engine is None else engine.offload_memory_gib(engine.section(model), offload.size_gib)


def offload_shm_gib(model: ServedModel) -> int:
    """What of the offload lives in /dev/shm: all of it where the backend's engine may map it there."""
    engine = engine_offloading_with(model.kv_cache_offload.backend)
    return offload_memory_gib(model) if engine is not None and engine.OFFLOAD_IN_SHM else 0


def program_env(model: ServedModel) -> dict[str, str]:
    """The variables the program sets on a combined engine container besides caches and the key."""
    return {**OFFLINE_ENV, **engine_of(model).ENV}


def engine_command(model_path: str, model: ServedModel) -> EngineCommand:
    """The engine's argv (its module's builder, KV offload, then extraArgs as written) and env
    (models[].env beside the program's, whose names stacks/rules/passthrough.py keeps apart)."""
    engine = engine_of(model)
    section = engine.section(model)
    return EngineCommand(command=[engine.COMMAND],
                         args=engine.serve_args(model_path, model.served_model_name, engine.PORT, section)
                         + kv_offload_args(model) + list(section.extra_args),
                         env={**program_env(model), **model.env})


# ---- consumers' keys (issue 21) ----

def consumer_key_fields(model: ServedModel, keys: Any) -> dict[str, tuple]:
    """The EngineContainer fields (components/pod_template.py) that make the engine accept every
    consumer's token beside the shared key: its multi-key argv over the variables, its variables, and
    the (variable, data key) pairs of the consumer-keys Secret (`keys`: components/secrets.py
    ConsumerKeys). None of it reaches the compile-cache key. An engine that takes one key is refused
    before this (stacks/rules/consumers.py; its module's MULTI_KEY_REFUSED says why)."""
    if keys is None or not keys.consumers:
        return {}
    engine = engine_of(model)
    refs = tuple(keys.env_refs())
    return {"key_args": tuple(engine.multi_key_args([engine.API_KEY_ENV, *(var for var, _ in refs)])),
            "key_env": tuple(sorted(engine.MULTI_KEY_ENV.items())), "key_refs": refs}


# ---- the smoke test and warm-up of a model (issue 20): models[].smoke, then operations.smoke, then the profile ----

@dataclass(frozen=True)
class SmokeSettings:
    prompt: str
    expected_text: str
    checks: tuple[str, ...]          # besides the model list and the exact answer: reasoning, tool-call
    reasoning_kwarg: str | None      # chat_template_kwargs key switching reasoning; None sends none
    max_tokens: int = 32             # of the deterministic request


def reasoning_kwarg(model: ServedModel) -> str | None:
    """models[].smoke.reasoningKwarg; unset: the profile's; null or 'off': none."""
    if "reasoning_kwarg" not in model.smoke.model_fields_set:
        return profile_of(model).REASONING_KWARG
    return None if model.smoke.reasoning_kwarg in (None, "off") else model.smoke.reasoning_kwarg


def smoke_settings(model: ServedModel, stack: Smoke) -> SmokeSettings:
    """What the smoke Job asks and checks; unset checks follow the parsers the engine runs with."""
    own, profile = model.smoke, profile_of(model)
    section = engine_of(model).section(model)
    checks = own.checks if own.checks is not None else [
        check for check, parser in (("reasoning", section.reasoning_parser), ("tool-call", section.tool_call_parser))
        if parser is not None]
    return SmokeSettings(prompt=own.prompt or stack.prompt or profile.SMOKE_PROMPT,
                         expected_text=own.expected_text or stack.expected_text or profile.SMOKE_EXPECTED_TEXT,
                         checks=tuple(checks), reasoning_kwarg=reasoning_kwarg(model),
                         max_tokens=own.max_tokens or stack.max_tokens or profile.SMOKE_MAX_TOKENS)
