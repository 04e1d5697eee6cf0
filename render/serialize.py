"""The build/<stack>/ files as bytes: kubernetes.yaml, resources.json, outputs.json. Everything is
sorted, so the same input gives the same bytes."""

from __future__ import annotations

import json

import yaml

from render.runtime import Recorded, Rendered
from render.stackfile import MASK
from render.yaml_scalars import plain_is_safe

# Apply order a reviewer expects: what others depend on first.
KIND_ORDER = ["Namespace", "Secret", "ConfigMap", "PersistentVolume", "PersistentVolumeClaim",
              "ServiceAccount", "Job", "Deployment", "StatefulSet", "Service"]


def is_kubernetes_object(r: Recorded) -> bool:
    return r.custom and r.type.startswith("kubernetes:") and "kind" in r.inputs


def kubernetes_objects(rendered: Rendered) -> list[dict]:
    objs = [r.inputs for r in rendered.resources if is_kubernetes_object(r)]

    def key(o: dict) -> tuple:
        kind = o.get("kind", "")
        meta = o.get("metadata") or {}
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        return (rank, kind, meta.get("namespace", ""), meta.get("name", ""))

    return sorted(objs, key=key)


class _ManifestDumper(yaml.SafeDumper):
    """Multi-line strings (the scripts ConfigMap) as literal blocks, readable in review; a string that
    some reader of the file would take as another type (render/yaml_scalars.py) single-quoted."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and not any(line.endswith(" ") for line in value.splitlines()) else None
    if style is None and not plain_is_safe(value):
        style = "'"   # the emitter falls back to double quotes where single quotes cannot carry the text
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _str)


def kubernetes_yaml(rendered: Rendered) -> str:
    docs = [yaml.dump(o, Dumper=_ManifestDumper, sort_keys=True, default_flow_style=False, width=120)
            for o in kubernetes_objects(rendered)]
    return "---\n" + "---\n".join(docs)


def resources_json(rendered: Rendered) -> str:
    # engineUrn/engineParent: the URNs as the engine builds them, which the update planner matches
    # old and new state by (render/changes.py); an older render without them is matched by urn.
    rows = [{"urn": r.urn, "type": r.type, "name": r.name, "custom": r.custom, "parent": r.parent,
             "provider": r.provider, "options": r.options, "inputs": r.inputs,
             "engineUrn": r.engine_urn, "engineParent": r.engine_parent} for r in rendered.resources]
    return json.dumps(rows, indent=2, sort_keys=True) + "\n"


def outputs_json(rendered: Rendered) -> str:
    masked = {k: (MASK if k in rendered.secret_outputs else v) for k, v in rendered.outputs.items()}
    return json.dumps(masked, indent=2, sort_keys=True) + "\n"
