"""Feed a Rendered stack to the CrossGuard pack's own `validate` functions, offline.

`pulumi preview --policy-pack policy` does this against the engine; tests and the benchmark
do it here, so the pack is exercised exactly as shipped without starting its server."""

from __future__ import annotations

import copy
from typing import Callable, Optional

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)

from render.runtime import Recorded, Rendered


def _seconds(value: str) -> float:
    return float(value.rstrip("s")) if value else 0.0


def _options(r: Recorded) -> PolicyResourceOptions:
    t = r.options["customTimeouts"]
    return PolicyResourceOptions(protect=r.options["protect"], ignore_changes=[],
                                 delete_before_replace=r.options["deleteBeforeReplace"], aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(_seconds(t.get("create", "")),
                                                                      _seconds(t.get("update", "")), 0),
                                 additional_secret_outputs=[], parent=r.parent or None)


def policy_resources(rendered: Rendered,
                     mutate: Optional[Callable[[Recorded, dict], None]] = None) -> list[PolicyResource]:
    """One PolicyResource per recorded resource; `mutate(recorded, props)` edits a private copy."""
    out = []
    for r in rendered.resources:
        props = copy.deepcopy(r.inputs)
        if mutate:
            mutate(r, props)
        out.append(PolicyResource(resource_type=r.type, props=props, urn=r.urn, name=r.name, opts=_options(r),
                                  provider=None if not r.provider else type("P", (), {"urn": r.provider})(),
                                  parent=None, dependencies=[], property_dependencies={}))
    return out


def violations(policy, resources: list[PolicyResource]) -> list[str]:
    """The messages one resource- or stack-validation policy reports over `resources`."""
    found: list[str] = []

    def report(message, urn=None):
        found.append(message)

    if isinstance(policy, ResourceValidationPolicy):
        for r in resources:
            policy.validate(ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, r.provider),
                            report)
    else:
        policy.validate(StackValidationArgs(resources), report)
    return found
