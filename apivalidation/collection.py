"""Cycle collection paused while validation parses schemas (the built-in kinds' JSON, the CRDs' YAML)
and walks the objects. Both make many short-lived, acyclic objects, and every full collection they
trigger re-scans the SDK's long-lived ones: in a render process that made loading the schemas several
times slower (render/runtime.py pauses it during the mock run for the same reason)."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
