"""Which settings of a validated stack fall back to a figure of the field report's one deployment
(DeepSeek-V4-Flash on 8 x H20) instead of something the stack file declared or the program derived from
it. A field says so with `json_schema_extra=field_report(section)` (config_model/types.py); a value
worked out elsewhere (a profile's, a catalogue entry's, a derived startup budget) says so by an
`Inherited` of its own from a function beside where it is derived, listed once in SOURCES. plan.md lists
them all under "Defaults this stack inherits".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from pydantic import BaseModel

from config_model.profile_defaults import profile_inherited
from config_model.startup import startup_budget_inherited
from config_model.types import FIELD_REPORT, Inherited, stack_key

if TYPE_CHECKING:
    from config_model.stack import StackConfig

__all__ = ["SOURCES", "Inherited", "inherited", "marked_defaults"]


def marked_defaults(section: BaseModel, at: str = "") -> Iterator[Inherited]:
    """Every field below `section` that the stack file left unset and whose default is marked as the
    field report's, depth first in declaration order."""
    unused = getattr(section, "unused_sections", lambda: set())()
    for name, info in type(section).model_fields.items():
        if name in unused:
            continue
        value = getattr(section, name)
        key = info.alias or stack_key(name)
        path = f"{at}.{key}" if at else key
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if FIELD_REPORT in extra and name not in section.model_fields_set:
            yield Inherited(path, value, str(extra[FIELD_REPORT]))
        if isinstance(value, BaseModel):
            yield from marked_defaults(value, path)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from marked_defaults(item, f"{path}[{i}]")


# Every source of inherited settings, a function of the validated stack, in the order plan.md lists
# them. A new source (a profile's figures, the GPU pool's fallback sizing) is one line here; build its
# Inherited from config_model.types, which imports nothing back.
SOURCES: tuple[Callable[[StackConfig], Iterable[Inherited]], ...] = (
    marked_defaults,
    lambda cfg: profile_inherited(cfg.models),
    lambda cfg: startup_budget_inherited(cfg.models),
)


def inherited(cfg: StackConfig) -> list[Inherited]:
    """Every setting of the stack that fell back to a field-report figure, from every source."""
    return [item for source in SOURCES for item in source(cfg)]
