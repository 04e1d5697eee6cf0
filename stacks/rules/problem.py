"""A rule's finding: the stack file path (camelCase), the value found there, and what is allowed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    path: str
    value: Any
    allowed: str

    def render(self, stack_file: str) -> str:
        return f"{stack_file}: llm-serving:{self.path} = {_show(self.value)}: {self.allowed}"


def _show(value: Any) -> str:
    """The value as a stack file spells it: never Python's True, False or None."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "(unset)"
    if isinstance(value, (bool, dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)
