"""Turn a Rendered stack into the build/<stack>/ files: kubernetes.yaml, resources.json, outputs.json
(render/serialize.py) and plan.md (render/plan_md.py, from the facts render/manifest_facts.py reads
off the objects)."""

from __future__ import annotations

from pathlib import Path

from render.manifest_facts import ab_pairs, served_model_gpus, time_to_serving_inputs, workload_rows
from render.plan_md import plan_md
from render.runtime import Rendered
from render.serialize import is_kubernetes_object, kubernetes_objects, kubernetes_yaml, outputs_json, resources_json

__all__ = ["ab_pairs", "is_kubernetes_object", "kubernetes_objects", "kubernetes_yaml", "outputs_json", "plan_md",
           "resources_json", "served_model_gpus", "time_to_serving_inputs", "workload_rows", "write"]


def write(rendered: Rendered, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "kubernetes.yaml": kubernetes_yaml(rendered),
        "resources.json": resources_json(rendered),
        "outputs.json": outputs_json(rendered),
        "plan.md": plan_md(rendered),
    }
    written = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
