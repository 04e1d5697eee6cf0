"""Model profiles, one module each (deepseek_v4.py, generic.py): every fact that belongs to a model
family rather than to an engine or a topology. The engine modules (policy/engines/) say how an engine
is run; a profile says what a model of its family needs from it: parsers, tokenizer mode, block size,
context length, trust-remote-code, the files a complete checkpoint holds, the shard count and size
its stack file may leave unset, the smoke test's prompt, answer and checks with the chat-template
kwarg that switches reasoning, and the measured cold start. `models[].profile` names one; a field the
stack file leaves unset takes the profile's value (config_model/serving.py). Adding a model family is
a module here and its entry in PROFILES.

Standard library only, like policy/engines/: the pack and the config model both read it.
"""

from __future__ import annotations

from typing import Any, Protocol

from policy.profiles import deepseek_v4, generic


class Profile(Protocol):
    """What every profile module provides (tests/test_profiles.py checks each has all of it)."""

    NAME: str
    DESCRIPTION: str
    # Per engine (policy/engines NAME): field of its settings section (model_dump name) -> the value an
    # unset field takes. None renders no flag (False for a switch).
    ENGINE_DEFAULTS: dict[str, dict[str, Any]]
    REQUIRED_FILES: tuple[str, ...]          # besides the weights and a tokenizer payload; the index if sharded
    EXPECTED_SHARD_COUNT: int | None         # None: models[].expectedShardCount, else the index's count
    SIZE_GIB: float | None                   # None: models[].sizeGiB is required
    SMOKE_PROMPT: str
    SMOKE_EXPECTED_TEXT: str
    REASONING_KWARG: str | None              # chat_template_kwargs key switching reasoning; None sends none
    REASONING_TAGS: tuple[str, str] | None   # start and end of its reasoning (vLLM --reasoning-config)
    DSPARK: bool                             # the checkpoint has a DSpark head speculative decoding may use
    COLD_START_ESTIMATE_SECONDS: dict[str, int]       # per engine, pod creation to Ready; absent: not measured
    COLD_START_INCLUDES_IMAGE_PULL: dict[str, bool]
    # Per engine: the field report section the cold start was measured in; absent: measured elsewhere (the
    # module says where). A startup budget derived from a field-report measurement is listed as inherited.
    COLD_START_FIELD_REPORT: dict[str, str]
    ASSUMED_CONTEXT: dict[str, int]          # per engine: context when the section sets none; absent: unknown


PROFILES: dict[str, Profile] = {p.NAME: p for p in (deepseek_v4, generic)}  # type: ignore[misc]  # modules
NAMES = tuple(PROFILES)
DEFAULT = deepseek_v4.NAME


def profile_named(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"no profile {name!r}; the profiles are {', '.join(NAMES)}") from None
