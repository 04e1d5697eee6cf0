"""Model profiles, one module each (deepseek_v4.py, qwen3.py, llama3.py, gpt_oss.py, generic.py): every
fact that belongs to a model family rather than to an engine or a topology. The engine modules
(policy/engines/) say how an engine is run; a profile says what a model of its family needs from it:
parsers, tokenizer mode, block size, context length, trust-remote-code, the memory settings where the
family has measured ones, the files a complete checkpoint holds, the shard count and size its stack
file may leave unset, the smoke test's prompt, answer and checks with the chat-template kwarg that
switches reasoning, its KV-cache shape where the family has one, and the measured cold start.

`models[].profile` names one; left out, the program chooses it from the model's `directory` and
`servedModelName` only where exactly one profile's NAME_PATTERN matches them (`choose` below), and
refuses the model otherwise: no family is ever assumed. A field the stack file leaves unset takes the
profile's value (config_model/serving.py). Adding a model family is a module here and its entry in
PROFILES.

Standard library only, like policy/engines/: the pack and the config model both read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from policy.kv_cache import KvCacheShape
from policy.profiles import deepseek_v4, generic, gpt_oss, llama3, qwen3


class Profile(Protocol):
    """What every profile module provides (tests/test_profiles.py checks each has all of it)."""

    NAME: str
    DESCRIPTION: str
    # Searched (case-insensitive) in models[].directory and servedModelName when models[].profile is left
    # out; None: never chosen by name (generic).
    NAME_PATTERN: str | None
    # Per engine (policy/engines NAME): field of its settings section (model_dump name) -> the value an
    # unset field takes. None renders no flag (False for a switch): the engine's own default.
    ENGINE_DEFAULTS: dict[str, dict[str, Any]]
    # Per engine: the ENGINE_DEFAULTS entries that are figures of the field report's one deployment
    # (DeepSeek-V4-Flash on 8 x H20) rather than facts of the model -> the report's section. plan.md
    # lists each one a stack leaves unset under "Defaults this stack inherits" (config_model/profile_defaults.py).
    FIELD_REPORT_DEFAULTS: dict[str, dict[str, str]]
    # Per engine: field -> (the CUDA architectures its profile value is for, why). On another architecture
    # a stack that leaves the field unset is refused (stacks/rules/hardware.py architecture_defaults).
    ARCHITECTURE_DEFAULTS: dict[str, dict[str, tuple[tuple[str, ...], str]]]
    REQUIRED_FILES: tuple[str, ...]          # besides the weights and a tokenizer payload; the index if sharded
    EXPECTED_SHARD_COUNT: int | None         # None: models[].expectedShardCount, else the index's count
    SIZE_GIB: float | None                   # None: models[].sizeGiB is required
    # The attention shape of config.json (policy/kv_cache.py) when every checkpoint of the family has
    # the same one; None when sizes differ or the shape is not one KvCacheShape models.
    KV_CACHE: KvCacheShape | None
    SMOKE_PROMPT: str
    SMOKE_EXPECTED_TEXT: str
    SMOKE_MAX_TOKENS: int                    # room for the answer, and for reasoning the model cannot switch off
    REASONING_KWARG: str | None              # chat_template_kwargs key switching reasoning; None sends none
    REASONING_TAGS: tuple[str, str] | None   # start and end of its reasoning (vLLM --reasoning-config)
    DSPARK: bool                             # the checkpoint has a DSpark head speculative decoding may use
    COLD_START_ESTIMATE_SECONDS: dict[str, int]       # per engine, pod creation to Ready; absent: not measured
    COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool]
    # Per engine: the field report section the cold start was measured in; absent: measured elsewhere (the
    # module says where). A startup budget derived from a field-report measurement is listed as inherited.
    COLD_START_FIELD_REPORT: dict[str, str]
    ASSUMED_CONTEXT: dict[str, int]          # per engine: context when the section sets none; absent: unknown


PROFILES: dict[str, Profile] = {p.NAME: p for p in (deepseek_v4, qwen3, llama3, gpt_oss, generic)}  # type: ignore[misc]  # modules
NAMES = tuple(PROFILES)
# The stack-file field a model's family is named by.
FIELD = "profile"


def profile_named(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"no profile {name!r}; the profiles are {', '.join(NAMES)}") from None


def listing() -> str:
    """Every profile with what it is for, as a refusal lists them."""
    return "; ".join(f"{p.NAME!r} ({p.DESCRIPTION})" for p in PROFILES.values())


@dataclass(frozen=True)
class Choice:
    """The profile chosen for a model that names none, and why; or why none could be (name None)."""

    name: str | None
    why: str


def choose(directory: str, served_model_name: str) -> Choice:
    """The profile whose NAME_PATTERN matches the model's directory or served name, when exactly one
    does. Both names are searched: the directory usually carries the checkpoint's name and the served
    name is often a short alias; a name matching two families (a DeepSeek-V4 directory served as
    "qwen3-8b") is ambiguous and refused, as is a name no family matches."""
    named = {"directory": directory, "servedModelName": served_model_name}
    hits: dict[str, list[str]] = {}
    for p in PROFILES.values():
        if p.NAME_PATTERN is None:
            continue
        for field, value in named.items():
            if re.search(p.NAME_PATTERN, value, re.IGNORECASE):
                hits.setdefault(p.NAME, []).append(f"{field} {value!r}")
    if len(hits) == 1:
        [(name, where)] = hits.items()
        return Choice(name, f"inferred from {' and '.join(where)}")
    if hits:
        found = ", ".join(f"{n!r} by {' and '.join(w)}" for n, w in hits.items())
        return Choice(None, f"is required: directory {directory!r} and servedModelName {served_model_name!r} name "
                      f"more than one model family ({found}); set it to one of: {listing()}")
    return Choice(None, f"is required: neither directory {directory!r} nor servedModelName {served_model_name!r} "
                  f"names a model family the program knows; set it to one of: {listing()}")
