"""What the stack file passes to the engines as written (issue 20): models[].vllm.extraArgs,
models[].sglang.extraArgs and models[].env. Each may add what the program does not model, never
what it renders itself. The flags and names it owns are not listed here: they are read from the
builders that render them (policy/engines/ serve_args, components/engines.py, components/disaggregated.py,
components/pod_template.py), so a flag the program starts to render is refused in extraArgs at once."""

from __future__ import annotations

import functools
import json
import re
from typing import Iterator

from components.disaggregated import fleet_engine_args, fleet_env, same_pod_engine_args, same_pod_env
from components.engines import OFFLINE_ENV, engine_command
from components.group import NETWORK_ENV
from components.pod_template import cache_env
from components.topologies import TOPOLOGIES
from config_model import ServedModel, StackConfig
from policy.engines import ENGINES, engine_named
from policy.profiles import NAMES as PROFILES
from stacks.rules.problem import Problem

_PROBE = "/probe"


def _every_branch(engine: str, profile: str) -> ServedModel:
    """A model whose argv builders take every branch: the engine's EVERY_BRANCH settings (every optional
    flag set), KV offload, a reasoning kwarg."""
    e = engine_named(engine)
    return ServedModel.model_validate({
        "name": "probe", "served_model_name": "probe", "directory": "probe", "object_prefix": "probe",
        "revision": "probe", "profile": profile, "expected_shard_count": 1, "size_gib": 1, "engine": engine,
        e.SECTION: e.EVERY_BRANCH, "kv_cache_offload": {"backend": e.OFFLOAD_BACKEND, "size_gib": 1},
        "smoke": {"reasoning_kwarg": "x"}}, by_alias=False, by_name=True)


def _flags(argv: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in argv if a.startswith("-")}


@functools.lru_cache(maxsize=None)
def owned_flags(engine: str) -> frozenset[str]:
    """Every flag the program renders for the engine, in any topology and profile, and the
    spellings it reads back (TP/DP aliases) or keeps to itself (the API key flag)."""
    e = engine_named(engine)
    out = {e.API_KEY_FLAG, *e.TENSOR_PARALLEL_FLAGS, *e.PIPELINE_PARALLEL_FLAGS, *e.DATA_PARALLEL_FLAGS,
           *e.UNRENDERED_OWNED_FLAGS, *e.GROUP_FLAGS}
    runs = {t for t in TOPOLOGIES.values() for name, _ in t.supported if name == engine}
    for profile in PROFILES:
        m = _every_branch(engine, profile)
        out |= _flags(engine_command(_PROBE, m).args)
        if any(t.fleets for t in runs):
            out |= _flags(fleet_engine_args(_PROBE, m))
        if any(t.same_pod for t in runs):
            out |= _flags(same_pod_engine_args(_PROBE, m, 1, "kv_producer"))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def owned_env() -> frozenset[str]:
    """Every variable the program sets on an engine container: caches, offline mode, the engines' own
    and API keys, the P/D side channel."""
    probe = _every_branch(ENGINES[0].NAME, PROFILES[0])
    return frozenset({*cache_env(), *OFFLINE_ENV, *(k for e in ENGINES for k in e.ENV), *(e.API_KEY_ENV for e in ENGINES),
                      *fleet_env(probe), *same_pod_env(probe, "1", 1), *(e.HOST_IP_ENV for e in ENGINES), *NETWORK_ENV})


# What the refusal of a multi-node flag says instead of a field (issue 29: no field sets them).
GROUP_HOW = ("the program renders it for a model spanning nodes, from tensorParallelSize x pipelineParallelSize and "
             "gpuPool.gpusPerNode, with each pod's rank and its leader's address from the orchestrator "
             "(docs/topologies.md, multi-node)")


# Second spellings the engines' parsers declare for a flag the program renders (vLLM 0.26.0/0.33.0
# vllm/engine/arg_utils.py EngineArgs.add_cli_args: -tp, -pp, -dp, -n, -r; SGLang 0.5.23
# sglang/srt/arg_groups/fields/parallel.py: --nccl-init-addr for --dist-init-addr; SGLang's --tp-size/--pp-size/
# --dp-size are in the engine module's own flag tuples): a refusal names the field, or the multi-node note, of
# the flag they stand for.
ALIASES = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
           "-n": "--nnodes", "-r": "--node-rank", "--nccl-init-addr": "--dist-init-addr"}


def _spellings(engine, flag: str) -> tuple[str, ...]:
    """`flag` and the spellings of the flag it stands for."""
    flag = ALIASES.get(flag, flag)
    for family in (engine.TENSOR_PARALLEL_FLAGS, engine.PIPELINE_PARALLEL_FLAGS, engine.DATA_PARALLEL_FLAGS):
        if flag in family:
            return tuple(family)
    return (flag,)


def _owner(flag: str, owned: frozenset[str]) -> str | None:
    """The owned flag `flag` would set: itself, its --no- form, or one it abbreviates (argparse's
    allow_abbrev, on in both engines' parsers)."""
    if flag in owned:
        return flag
    if flag.startswith("--no-") and f"--{flag[5:]}" in owned:
        return f"--{flag[5:]}"
    return next((o for o in sorted(owned) if flag.startswith("--") and len(flag) > 2 and o.startswith(flag)), None)


def _field_of(section: object, flag: str) -> tuple[str, str] | None:
    """The engine section's field that renders `flag`, as (attribute, stack-file spelling): the one
    whose description starts with it (config_model/serving.py describes each field by its flag)."""
    pattern = re.compile(rf"^{re.escape(flag)}(?![\w-])")
    for name, field in type(section).model_fields.items():
        if pattern.match(field.description or ""):
            return name, field.alias or name
    return None


def passthrough(cfg: StackConfig) -> Iterator[Problem]:
    for i, m in enumerate(cfg.models):
        engine = engine_named(m.engine)
        owned = owned_flags(m.engine)
        for j, arg in enumerate(engine.section(m).extra_args):
            flag = arg.split("=", 1)[0]
            if not flag.startswith("-"):
                continue
            owner = _owner(flag, owned)
            if owner is not None:
                what = "is" if owner == flag else f"sets {owner}, which is"
                section = engine.section(m)
                spellings = _spellings(engine, owner)
                field = next(filter(None, (_field_of(section, f) for f in spellings)), None)
                how = (f"set models[{i}].{engine.SECTION}.{field[1]} instead (now {json.dumps(getattr(section, field[0]))})"
                       if field else GROUP_HOW if set(spellings) & set(engine.GROUP_FLAGS)
                       else "set the model's own field for it (docs/config-reference.md)")
                yield Problem(f"models[{i}].{engine.SECTION}.extraArgs[{j}]", arg,
                              f"{what} rendered by the program; {how}, not extraArgs")
        for name in sorted(set(m.env) & owned_env()):
            yield Problem(f"models[{i}].env.{name}", m.env[name],
                          "is set by the program on the engine containers; choose another variable")
