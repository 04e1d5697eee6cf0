"""Rules over the GPU hardware: the pool names a GPU the program knows, or says enough of one it does not
(policy/gpus.py), and each model's weights, with the KV cache of one sequence of its longest context, fit
in what its engine may use of one GPU (policy/memory_fit.py). `model_budget` is also plan.md's per-GPU
budget (render/gpu_budget_md.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from components.engines import engine_of, max_model_len, profile_of
from config_model import ServedModel, StackConfig
from config_model.types import stack_key
from policy import gpus, memory_fit
from policy.kv_cache import ELEMENT_BYTES, KvCacheShape
from stacks.rules.problem import Problem

# Tensor-parallel sizes a "larger TP" suggestion offers (the engines split attention heads by it).
TP_SIZES = (1, 2, 4, 8, 16)


def gpu_type(cfg: StackConfig) -> Iterator[Problem]:
    """gpuType names a catalogue entry (its nodeSelector and gpuArchitecture follow), or, for a type the
    catalogue lacks, gpuMemoryGiB, gpuArchitecture and nodeSelector say what it is; unset, a nodeSelector
    product label naming an entry stands for it (config_model/infra.py GpuPool)."""
    pool = cfg.gpu_pool
    catalogue = f"the catalogue (policy/gpus.py): {gpus.listing()}"
    if pool.gpu is None and pool.gpu_memory_gib is None:
        if pool.gpu_type is None:
            yield Problem("gpuPool.gpuType", None, f"is required: name the pool's GPU, one of {catalogue}. Its memory "
                          "decides whether the models fit, and it gives gpuArchitecture and the default nodeSelector "
                          "(a nodeSelector nvidia.com/gpu.product naming an entry stands for it). For a GPU the "
                          "catalogue lacks, name it and set gpuPool.gpuMemoryGiB, gpuArchitecture and nodeSelector")
        else:
            yield Problem("gpuPool.gpuType", pool.gpu_type, f"is not in {catalogue}. For a GPU the catalogue lacks "
                          "set gpuPool.gpuMemoryGiB (nvidia-smi memory.total / 1024), gpuArchitecture and nodeSelector")
        return
    if pool.gpu is None:
        what = f"gpuType {pool.gpu_type!r}, which the catalogue lacks" if pool.gpu_type else "a GPU without gpuType"
        if pool.gpu_architecture is None:
            yield Problem("gpuPool.gpuArchitecture", None, f"is required for {what}: the CUDA architecture (sm80, "
                          "sm89, sm90, sm100) keys the JIT cache")
        if pool.node_selector is None:
            yield Problem("gpuPool.nodeSelector", None, f"is required for {what}: the node labels of its GPU nodes "
                          f"(e.g. {gpus.PRODUCT_LABEL}: <the product label GPU Feature Discovery sets>)")
        return
    selected = gpus.by_product((pool.node_selector or {}).get(gpus.PRODUCT_LABEL))
    if selected is not None and selected is not pool.gpu:
        yield Problem("gpuPool.nodeSelector", pool.node_selector, f"selects {gpus.PRODUCT_LABEL} {selected.product}, "
                      f"the catalogue's {selected.name}, but gpuPool.gpuType is {pool.gpu.name} "
                      f"({pool.gpu.product}): name the GPU the nodes carry")


@dataclass(frozen=True)
class ModelBudget:
    """One GPU of one model's engine, with where each figure came from (stack-file path or catalogue)."""

    budget: memory_fit.GpuBudget
    tensor_parallel: int
    pipeline_parallel: int
    size_gib: float
    gpu_name: str
    kv_bytes_per_token: int | None
    kv_dtype: str
    sources: dict[str, str]


def architecture_defaults(cfg: StackConfig) -> Iterator[Problem]:
    """A profile value chosen for one GPU architecture (ARCHITECTURE_DEFAULTS, e.g. DeepSeek-V4's marlin MoE
    path on Hopper) that a model on another architecture would inherit: refused, naming the field to set."""
    for i, m in enumerate(cfg.models):
        arch = model_architecture(cfg, m)
        engine = engine_of(m)
        section = engine.section(m)
        for field, (archs, why) in profile_of(m).ARCHITECTURE_DEFAULTS.get(engine.NAME, {}).items():
            value = getattr(section, field)
            if arch is None or arch in archs or field in section.model_fields_set or value is None:
                continue
            yield Problem(f"models[{i}].{engine.SECTION}.{stack_key(field)}", value,
                          f"is profile {m.profile}'s value for {', '.join(archs)}, and this model runs on {arch}: "
                          f"{why}; set it for this GPU, or to 'off' to let {engine.DISPLAY_NAME} choose")


def _own_gpu(m: ServedModel) -> gpus.GpuType | None:
    """The catalogue GPU the model's own nodeSelector's product label names, if it names one."""
    return gpus.by_product((m.node_selector or {}).get(gpus.PRODUCT_LABEL))


def model_architecture(cfg: StackConfig, m: ServedModel) -> str | None:
    """The CUDA architecture of the model's nodes: its own nodeSelector's catalogue GPU, else gpuPool's."""
    own = _own_gpu(m)
    return own.architecture if own is not None else cfg.gpu_pool.gpu_architecture


def model_gpu(cfg: StackConfig, m: ServedModel) -> tuple[str, float, str] | None:
    """(GPU name, memory GiB, source) of the model's nodes: its own nodeSelector's product label where that names
    a catalogue entry, else gpuPool's; None when nothing says."""
    own = _own_gpu(m)
    if own is not None:
        return own.name, own.memory_gib, f"{own.memory_source} (policy/gpus.py {own.name}, the model's nodeSelector)"
    pool = cfg.gpu_pool
    if pool.gpu_memory_gib is not None:
        return pool.gpu_type or "GPU", pool.gpu_memory_gib, "gpuPool.gpuMemoryGiB"
    if pool.gpu is not None:
        return pool.gpu.name, pool.gpu.memory_gib, f"{pool.gpu.memory_source} (policy/gpus.py {pool.gpu.name})"
    return None


def kv_shape(m: ServedModel) -> tuple[KvCacheShape | None, str]:
    """models[].kvCache, else the profile's KV_CACHE (None where the family has no one shape)."""
    if m.kv_cache is not None:
        return m.kv_cache.shape, "kvCache"
    return profile_of(m).KV_CACHE, f"profile {m.profile} KV_CACHE"


def model_budget(cfg: StackConfig, i: int) -> ModelBudget | None:
    m = cfg.models[i]
    gpu = model_gpu(cfg, m)
    if gpu is None or m.size_gib is None:
        return None
    engine, at = engine_of(m), f"models[{i}]"
    section = engine.section(m)
    tp, pp = section.tensor_parallel_size, section.pipeline_parallel_size
    profile = profile_of(m)
    # The context the engine and the warm-up take (components/engines.py max_model_len), and where it comes from.
    context, declared = max_model_len(m), engine.max_model_len(section)
    if context is None:
        context_source = "unknown: the checkpoint's, which the engine reads at start"
    elif declared is None:
        context_source = f"profile {m.profile} ASSUMED_CONTEXT"
    elif profile.ENGINE_DEFAULTS.get(engine.NAME, {}).get("max_model_len") == declared:
        context_source = f"profile {m.profile}"
    else:
        context_source = f"{at}.{engine.SECTION}.{engine.CONTEXT_FIELD}"
    shape, shape_source = kv_shape(m)
    dtype = engine.kv_cache_dtype(section)
    per_token = shape.bytes_per_token_per_gpu(tp, ELEMENT_BYTES.get(dtype, 2), pp) if shape is not None else None
    fraction = engine.memory_fraction(section)
    utilization_source = _fraction_source(m, at)
    if fraction is None:
        # SGLang computes its share at start: the fit takes the most it could be (policy/engines/sglang.py).
        fraction = engine.memory_fraction_at_most(section, gpu[1] * 1024)
        utilization_source = (f"unset: {engine.DISPLAY_NAME} computes it at start, at most {fraction:g} on this GPU "
                              f"(policy/engines/{engine.NAME}.py memory_fraction_at_most)")
    b = memory_fit.budget(m.size_gib, tp, gpu[1], fraction, per_token, context, pipeline_parallel=pp)
    size_source = f"profile {m.profile}" if profile.SIZE_GIB == m.size_gib else f"{at}.sizeGiB"
    return ModelBudget(b, tp, pp, m.size_gib, gpu[0], per_token, dtype, {
        "weights": f"{size_source} / {engine.SECTION}.tensorParallelSize"
                   + (" x pipelineParallelSize" if pp > 1 else ""),
        "kv": (f"{f'{at}.kvCache' if shape_source == 'kvCache' else shape_source}, {engine.SECTION} kvCacheDtype {dtype}, "
               f"context {context_source}") if shape is not None else
              f"unknown: no {at}.kvCache and profile {m.profile} has no KV_CACHE",
        "gpu": gpu[2], "utilization": utilization_source})


def m_fraction_set(m: ServedModel) -> bool:
    """Whether the stack file sets the engine's memory fraction itself (not the profile, not the engine's default)."""
    engine = engine_of(m)
    return any(stack_key(f) == engine.MEMORY_FRACTION_FIELD for f in engine.section(m).model_fields_set)


def _fraction_source(m: ServedModel, at: str) -> str:
    """Where the engine's memory fraction comes from: the stack file, the profile (a field-report figure says its
    section), or the engine's own default (vLLM's 0.92; SGLang's is computed at start: model_budget says so)."""
    engine = engine_of(m)
    if m_fraction_set(m):
        return f"{at}.{engine.SECTION}.{engine.MEMORY_FRACTION_FIELD}"
    field = next((f for f in type(engine.section(m)).model_fields if stack_key(f) == engine.MEMORY_FRACTION_FIELD), None)
    profile = profile_of(m)
    if field is not None and profile.ENGINE_DEFAULTS.get(engine.NAME, {}).get(field) is not None:
        report = profile.FIELD_REPORT_DEFAULTS.get(engine.NAME, {}).get(field)
        return f"profile {m.profile}" + (f" (field report {report}, the H20 deployment's figure)" if report else "")
    return f"unset: {engine.DISPLAY_NAME}'s default"


def memory_fit_rule(cfg: StackConfig) -> Iterator[Problem]:
    """Weights per GPU (size / tensor parallel) and one max-length sequence of KV cache, where the shape and
    context are known, within GPU memory x the engine's fraction; refused with the numbers and what would fit."""
    for i, m in enumerate(cfg.models):
        mb = model_budget(cfg, i)
        if mb is None or mb.budget.fits:
            continue
        b, engine = mb.budget, engine_of(m)
        kv = (f" and {b.kv_gib:.2f} GiB of KV cache for one {b.context}-token sequence ({mb.kv_dtype})"
              if b.kv_gib is not None else "")
        yield Problem(f"models[{i}].sizeGiB", m.size_gib,
                      f"does not fit: {b.weights_gib:.2f} GiB of weights per GPU ({m.size_gib:g} GiB / "
                      f"{engine.SECTION}.tensorParallelSize {mb.tensor_parallel}"
                      f"{f' x pipelineParallelSize {mb.pipeline_parallel}' if mb.pipeline_parallel > 1 else ''}){kv} need "
                      f"{b.weights_gib + (b.kv_gib or 0):.2f} GiB, more than the {b.usable_gib:.2f} GiB "
                      f"{engine.DISPLAY_NAME} may use of one {mb.gpu_name} ({b.gpu_gib:.2f} GiB x "
                      f"{engine.SECTION}.{engine.MEMORY_FRACTION_FIELD} {b.utilization:g}"
                      f"{'' if m_fraction_set(m) else ', ' + _unset_words(m)}). Would fit: "
                      + "; ".join(_what_fits(cfg, m, mb)))


def _unset_words(m: ServedModel) -> str:
    """How the refusal says where an unset fraction came from."""
    engine = engine_of(m)
    if engine.memory_fraction(engine.section(m)) is None:
        return "the most it computes when unset"
    source = _fraction_source(m, "")
    return f"from {source}" if source.startswith("profile") else f"{engine.DISPLAY_NAME}'s default when unset"


def _what_fits(cfg: StackConfig, m: ServedModel, mb: ModelBudget) -> list[str]:
    engine, b = engine_of(m), mb.budget
    shape, _ = kv_shape(m)
    element = ELEMENT_BYTES.get(mb.kv_dtype, 2)

    pp = mb.pipeline_parallel

    def fits(tp: int, gpu_gib: float, stages: int = pp) -> bool:
        per_token = shape.bytes_per_token_per_gpu(tp, element, stages) if shape is not None else None
        return memory_fit.budget(mb.size_gib, tp, gpu_gib, b.utilization, per_token, b.context,
                                 pipeline_parallel=stages).fits
    out = []
    per_node = cfg.gpu_pool.gpus_per_node
    larger = [tp for tp in TP_SIZES if tp > mb.tensor_parallel and tp * pp <= per_node and fits(tp, b.gpu_gib)]
    if larger:
        out.append(f"{engine.SECTION}.tensorParallelSize {larger[0]} ({larger[0] * pp} GPUs per pod)")
    else:
        # Past one node: pipeline stages of one node's GPUs each (docs/topologies.md, multi-node).
        tp_node = max((tp for tp in TP_SIZES if tp <= per_node), default=1)
        stages = next((n for n in range(2, 17) if fits(tp_node, b.gpu_gib, n)), None)
        out.append(f"a model spanning {stages} nodes: {engine.SECTION}.tensorParallelSize {tp_node} x "
                   f"pipelineParallelSize {stages} ({stages} pods of {tp_node} GPUs per replica, on an orchestrator "
                   "that runs multi-node groups: docs/topologies.md)" if stages else
                   "no tensorParallelSize x pipelineParallelSize up to 16 nodes on this GPU")
    bigger = [t.name for t in gpus.CATALOGUE.values() if t.memory_gib > b.gpu_gib and fits(mb.tensor_parallel, t.memory_gib)]
    if bigger:
        out.append(f"a GPU with more memory at this parallel size: {', '.join(bigger)} (gpuPool.gpuType)")
    largest = memory_fit.largest_weights_gib(b, mb.tensor_parallel, pp)
    out.append(f"a quantised checkpoint of at most {largest:.0f} GiB at this parallel size (FP8 weights take half "
               "of BF16's)" if largest > 0 else "no checkpoint at this parallel size: the KV cache alone does not fit")
    longest = memory_fit.longest_context(b, mb.kv_bytes_per_token)
    if b.kv_gib is not None and longest:
        out.append(f"{engine.SECTION}.{engine.CONTEXT_FIELD} at most {longest} tokens")
    return out
