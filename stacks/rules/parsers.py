"""Parser and tokenizer-mode names against the engine release the stack runs: a name the release does
not register passes `vllm serve`'s argument parsing (vLLM checks it when the server starts) or fails
SGLang's at pod start, in both cases after the download and the wait for GPUs. The names are the
engine modules' (policy/engines/ REGISTERED_NAMES, read back from each pinned release's source by
tests/test_profiles.py); the release is the one the engine image's tag names."""

from __future__ import annotations

from typing import Iterator

from config_model import ServedModel, StackConfig, stack_key
from policy.engines import Engine, engine_named, release_of_image
from stacks.rules.problem import Problem


def _images(cfg: StackConfig, m: ServedModel) -> list[tuple[str, str]]:
    """(stack-file key, image) of every engine image the model's pods run."""
    if m.engine == "sglang":
        refs = [("images.sglang", cfg.images.sglang)]
    else:
        refs = [("images.vllm", cfg.images.vllm)]
        if m.orchestrator == "rayclusterfleet":
            refs.append(("images.vllmRay", cfg.images.vllm_ray))
    return [(key, ref.upstream) for key, ref in refs if ref is not None]


def _known(engine: Engine, field: str, images: list[tuple[str, str]]) -> tuple[frozenset[str], str]:
    """The names every release the model's images name registers, and those releases in words. An
    image whose tag names no pinned release is held to the names some pinned release registers."""
    table = engine.REGISTERED_NAMES[field]
    releases = {key: release_of_image(image) for key, image in images}
    pinned = [r for r in releases.values() if r in table]
    if pinned and len(pinned) == len(releases):
        names = frozenset.intersection(*(table[r] for r in pinned))
        return names, " and ".join(f"{engine.DISPLAY_NAME} {r} (the release {key} names)" for key, r in releases.items())
    return frozenset.union(*table.values()), f"any {engine.DISPLAY_NAME} release the program pins ({', '.join(table)})"


def parser_names(cfg: StackConfig) -> Iterator[Problem]:
    for i, m in enumerate(cfg.models):
        engine = engine_named(m.engine)
        section = engine.section(m)
        images = _images(cfg, m)
        for field in engine.REGISTERED_NAMES:
            value = getattr(section, field)
            if value is None:
                continue
            names, where = _known(engine, field, images)
            if value not in names:
                what = field.replace("_", " ")
                yield Problem(f"models[{i}].{engine.SECTION}.{stack_key(field)}", value,
                              f"is not a {what} that {where} registers; it has: {', '.join(sorted(names))} "
                              "(null or 'off' renders none)")
