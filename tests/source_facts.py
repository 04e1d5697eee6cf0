"""The two kinds of upstream fact the cache test consumes (tests/test_engine_caches.py), shared by
the per-project citation modules tests/upstream_<project>.py.

RUN: code the tests execute from the PyPI wheels that `make test` installs --no-deps into
.venv-engines/<pin> (requirements-engines.txt); a bump is a new pin there and a new entry in the
project's module, and the tests then run the new code. READ: code that cannot run here (it needs
torch, CUDA or a GPU driver), recorded as read, with the file; a bump means re-reading it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Statement:
    """RUN: one assignment in an installed upstream file, executed as written with the container's env.
    `target` is the assignment's left side as ast.unparse prints it; the first match in the file runs."""

    pin: str        # directory under .venv-engines, e.g. "sglang==0.5.23"
    path: str       # file inside that directory
    target: str
    why: str


@dataclass(frozen=True)
class ReadAt:
    """READ: an environment variable a cache writer reads, where, and what happens when it is unset."""

    variable: str
    engines: tuple[str, ...]
    source: str
    unset: str
