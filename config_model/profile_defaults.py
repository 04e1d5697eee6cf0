"""What a model takes from its profile (policy/profiles/) rather than from its stack file, for plan.md:
why it has the profile it has, and which of the values it took are figures of the field report's one
deployment (DeepSeek-V4-Flash on 8 x H20) rather than facts of the model. The figures are listed by the
profiles themselves (FIELD_REPORT_DEFAULTS); this only asks which a stack left unset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

from config_model.types import Inherited, stack_key
from policy.engines import engine_named
from policy.profiles import FIELD as PROFILE_FIELD
from policy.profiles import choose, profile_named

if TYPE_CHECKING:
    from config_model.serving import ServedModel


def profile_choice(model: ServedModel) -> str:
    """"declared" when the stack file names the profile, else the names it was inferred from."""
    if PROFILE_FIELD in model.model_fields_set:
        return "declared"
    return choose(model.directory, model.served_model_name).why


def profile_inherited(models: Iterable[ServedModel]) -> Iterator[Inherited]:
    """Every engine setting of the models' engines that the stack file leaves unset and that took a value
    its profile marks as a field-report figure, e.g. models[0].vllm.gpuMemoryUtilization 0.88 (section 5)."""
    for i, m in enumerate(models):
        engine = engine_named(m.engine)
        section = engine.section(m)
        marked = profile_named(m.profile).FIELD_REPORT_DEFAULTS.get(engine.NAME, {})
        for field, report_section in marked.items():
            if field not in section.model_fields_set:
                yield Inherited(f"models[{i}].{engine.SECTION}.{stack_key(field)}", getattr(section, field),
                                report_section)
