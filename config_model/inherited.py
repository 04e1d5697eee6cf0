"""Which settings of a validated stack fall back to a figure of the field report's one deployment
(DeepSeek-V4-Flash on 8 x H20) instead of something the stack file declared or the program derived from
it. A field says so with `json_schema_extra=field_report(section)` (config_model/types.py); a value
worked out elsewhere (a profile's, a catalogue entry's) says so by adding an `Inherited` of its own where
it is derived. plan.md lists them all under "Defaults this stack inherits".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from pydantic import BaseModel

from config_model.types import FIELD_REPORT, stack_key


@dataclass(frozen=True)
class Inherited:
    path: str        # stack-file path, e.g. models[0].vllm.gpuMemoryUtilization
    value: Any       # the value it took
    section: str     # where in the field report the figure comes from


def marked_defaults(section: BaseModel, at: str = "") -> Iterator[Inherited]:
    """Every field below `section` that the stack file left unset and whose default is marked as the
    field report's, depth first in declaration order."""
    for name, info in type(section).model_fields.items():
        value = getattr(section, name)
        path = f"{at}.{stack_key(name)}" if at else stack_key(name)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if FIELD_REPORT in extra and name not in section.model_fields_set:
            yield Inherited(path, value, str(extra[FIELD_REPORT]))
        if isinstance(value, BaseModel):
            yield from marked_defaults(value, path)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from marked_defaults(item, f"{path}[{i}]")
