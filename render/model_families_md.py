"""plan.md's line per served model saying its family (models[].profile) and why it has it: declared in
the stack file, or chosen from the names its directory and served name carry (policy/profiles choose)."""

from __future__ import annotations

from config_model.profile_defaults import profile_choice
from render.runtime import Rendered


def plan_section(rendered: Rendered) -> list[str]:
    cfg = rendered.config
    if cfg is None:
        return []
    lines = ["", "## Model families", "",
             "Each model's profile (policy/profiles/, docs/models.md) gives every model-specific setting its "
             "stack file leaves unset.", ""]
    lines += [f"- `{m.name}` (served as `{m.served_model_name}`): **{m.profile}**, {profile_choice(m)}"
              for m in cfg.models]
    return lines
