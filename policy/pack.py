"""The CrossGuard policies: the same pure rules as the tests, wrapped for `pulumi preview
--policy-pack policy`. Building the PolicyPack object starts a server, so only policy/__main__.py
does it; this module just returns the policies."""

from __future__ import annotations

from typing import Any, Callable

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy import resource_rules, stack_rules
from policy.stack_rules import StackResource

STACK_FACTS = "llm-serving:stack:Facts"

# Breaking any of these breaks serving or safety on a GPU cluster: preview fails.
MANDATORY = {
    "engine-probes-tcp", "no-generative-health", "model-read-only", "gpu-parallel-size", "image-digest",
    "no-privileged", "no-host-access", "secret-refs", "pd-wiring", "aibrix-profiles-schema", "capabilities-minimal",
    "no-router-owned-routes", "custom-resources-awaited",
    "gpu-budget", "data-protected", "pd-rolesets", "model-writers",
}


def level(name: str) -> EnforcementLevel:
    return EnforcementLevel.MANDATORY if name in MANDATORY else EnforcementLevel.ADVISORY


def _resource_validate(check: Callable[[str, dict], list[str]]):
    def validate(args: ResourceValidationArgs, report_violation) -> None:
        for message in check(args.resource_type, dict(args.props)):
            report_violation(message, None)
    return validate


def _seconds(value: float) -> str:
    return f"{int(value)}s" if value else ""


def to_stack_resource(r: PolicyResource) -> StackResource:
    timeouts = r.opts.custom_timeouts
    options = {
        "protect": r.opts.protect,
        "customTimeouts": {k: v for k, v in (("create", _seconds(timeouts.create_seconds)),
                                              ("update", _seconds(timeouts.update_seconds))) if v},
    }
    provider = r.provider.urn if r.provider is not None else ""
    return StackResource(type=r.resource_type, name=r.name, props=dict(r.props), options=options,
                         provider=provider, custom=not r.resource_type.startswith("llm-serving:"),
                         parent=r.opts.parent or "")


def stack_facts(resources: list[PolicyResource]) -> dict[str, Any]:
    facts = next((r for r in resources if r.resource_type == STACK_FACTS), None)
    return dict(facts.props) if facts is not None else {}


def _stack_validate(check: Callable[[list[StackResource], dict[str, Any]], list[str]]):
    def validate(args: StackValidationArgs, report_violation) -> None:
        facts = stack_facts(args.resources)
        for message in check([to_stack_resource(r) for r in args.resources], facts):
            report_violation(message, None)
    return validate


def _budget(resources: list[StackResource], facts: dict[str, Any]) -> list[str]:
    if "gpuBudget" not in facts:
        return [f"No {STACK_FACTS} resource states the GPU budget; the stack was not built by llm-serving."]
    return stack_rules.gpus_within_budget(resources, int(facts["gpuBudget"]))


STACK_CHECKS: dict[str, tuple[str, Callable[[list[StackResource], dict[str, Any]], list[str]]]] = {
    "gpu-budget": ("GPU total, rollout surge and known overshoot included, within the stack's budget.", _budget),
    "data-protected": ("Outside dev the weights bucket is protected and versioned.",
                       lambda rs, f: stack_rules.data_is_protected(rs, str(f.get("environment", "prod")), check_retain=False)),
    "pd-rolesets": ("P/D rolesets are complete and their sides match.",
                    lambda rs, f: stack_rules.pd_rolesets_are_complete_and_matched(rs)),
    "model-writers": ("Only the sync Job writes a model claim.", lambda rs, f: stack_rules.only_sync_jobs_write_models(rs)),
    "await-timeouts": ("GPU workloads are awaited at least their progress deadline or startup budget.",
                       lambda rs, f: stack_rules.await_timeouts_cover_rollout(rs)),
    "reference-grants": ("Cross-namespace route backends have a ReferenceGrant.",
                         lambda rs, f: stack_rules.routes_have_reference_grants(rs)),
    "explicit-providers": ("Every resource uses an explicit provider.", lambda rs, f: stack_rules.explicit_providers_only(rs)),
}


def policies() -> list:
    out: list = [ResourceValidationPolicy(name=p.name, description=p.description, validate=_resource_validate(p.check),
                                          enforcement_level=level(p.name))
                 for p in resource_rules.RESOURCE_POLICIES]
    out += [StackValidationPolicy(name=name, description=description, validate=_stack_validate(check),
                                  enforcement_level=level(name))
            for name, (description, check) in STACK_CHECKS.items()]
    return out
