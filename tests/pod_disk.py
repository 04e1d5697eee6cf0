"""An engine container's ephemeral storage, read off the one rule (policy/ephemeral_storage.py)."""

from __future__ import annotations

import copy

from policy import ephemeral_storage as es


def engine_disk(pod: dict, container: dict) -> dict:
    """The engine container's resources without its ephemeral storage, which must be the rule's for an engine
    (policy/ephemeral_storage.py): logs, the engine's writable-layer allowance and the compile-cache emptyDir
    shared by the engine containers that mount it."""
    res = copy.deepcopy(container["resources"])
    disk = {k: v.pop(es.RESOURCE) for k, v in res.items()}
    cache = next(v for v in pod["volumes"] if v["name"] == "compile-cache")
    size = es.disk_empty_dirs([cache]).get("compile-cache", 0)
    sharing = sum(1 for c in pod["containers"] if any(m["name"] == "compile-cache" for m in c.get("volumeMounts", [])))
    share = -(-size // sharing) if size else 0
    assert disk == {k: es.text(es.LOGS + w + share) for k, w in zip(("requests", "limits"), es.ENGINE_WRITABLE)}
    return res
