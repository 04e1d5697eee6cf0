"""The rollout key: what names a served model's smoke, warm-up and load-test Jobs, so that a change of
any engine pod template of the model brings new Jobs (they run after the rollout) and nothing else
does (issue 18 case 7).

It is derived from the pod templates themselves, rebuilt by the engine components' own builders from
their own args (components/combined.py TemplateSource), so an input that reaches a template reaches
the key by construction, and one that does not (sizeGiB, replicas, the autoscaler's bounds, the
workload's update strategy) leaves it alone. The one Output a template holds, the engine image of
a mirror, is replaced by its stack-file form (EngineImage.known): the key is known in the preview of
the first `pulumi up` as well. A rotated API key reaches it through the templates' secret tag
(components/secrets.py content_tag)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from components.combined import TemplateSource


def engine_templates(sources: Iterable[TemplateSource]) -> dict[str, dict]:
    """Every engine pod template of one served model, by workload name, as known in preview."""
    out: dict[str, dict] = {}
    for source in sources:
        for name, template in source.known_templates().items():
            assert name not in out, f"two engine workloads named {name}"
            out[name] = template
    return out


def rollout_key(namespace: str, templates: dict[str, dict]) -> str:
    """8 hex digits of the templates' canonical JSON (and the namespace: a new one means new pods)."""
    text = json.dumps({"namespace": namespace, "templates": templates}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]
