"""plan.md's per-GPU memory budget: for each model, one GPU of its engine, what the weights and one sequence
of its longest context take of what the engine may use, and what is left; each figure with its source. The
arithmetic and the verdict are the memory-fit rule's (stacks/rules/hardware.py, policy/memory_fit.py)."""

from __future__ import annotations

from typing import Any

from stacks.rules.hardware import model_budget


def section(cfg: Any) -> list[str]:
    if cfg is None:
        return []
    rows, sources = [], []
    for i, m in enumerate(cfg.models):
        mb = model_budget(cfg, i)
        if mb is None:
            continue
        b = mb.budget
        kv = f"{b.kv_gib:.2f} GiB ({b.context} tokens, {mb.kv_dtype})" if b.kv_gib is not None else "unknown"
        verdict = "fits" if b.fits else "**does not fit**"
        rows.append(f"| {m.name} | {mb.gpu_name}, {b.gpu_gib:.2f} GiB | {b.utilization:g} | {b.usable_gib:.2f} GiB | "
                    f"{b.weights_gib:.2f} GiB ({mb.size_gib:g} / TP {mb.tensor_parallel}"
                    f"{f' x PP {mb.pipeline_parallel}' if mb.pipeline_parallel > 1 else ''}) | {kv} | "
                    f"{b.headroom_gib:.2f} GiB | {verdict} |")
        sources.append(f"- {m.name}: GPU memory: {mb.sources['gpu']}; utilisation: {mb.sources['utilization']}; "
                       f"weights: {mb.sources['weights']}; KV cache: {mb.sources['kv']}.")
    if not rows:
        return []
    return (["", "## GPU memory per engine GPU", "",
             "One GPU of each model's engine: its weights (size / tensor parallel) and the KV cache of one sequence of "
             "its longest context must fit in what the engine may use (memory x utilisation; vLLM refuses to start "
             "otherwise). What is left holds activations, CUDA graphs (vLLM counts them inside the utilisation; SGLang "
             "keeps 1 - memFractionStatic apart for them) and the rest of the KV cache pool. A KV cache shown unknown "
             "is not counted: set models[].kvCache from the checkpoint's config.json.", "",
             "| Model | GPU | Utilisation | Usable | Weights per GPU | KV cache, one max-length sequence | "
             "Headroom left | Verdict |", "|---|---|---|---|---|---|---|---|"] + rows + ["", "Sources:", ""] + sources)
