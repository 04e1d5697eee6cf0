"""The CrossGuard policies: the same pure rules as the tests, wrapped for `pulumi preview
--policy-pack policy`. Building the PolicyPack object starts a server, so only policy/__main__.py
does it; this module just returns the policies."""

from __future__ import annotations

import threading
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
from policy.unknowns import decide, is_unknown, known_or_unknown, plain

STACK_FACTS = "llm-serving:stack:Facts"

# Breaking any of these breaks serving or safety on a GPU cluster: preview fails.
MANDATORY = {
    "engine-probes-tcp", "no-generative-health", "model-read-only", "gpu-parallel-size", "image-digest",
    "no-privileged", "no-host-access", "secret-refs", "pd-wiring", "aibrix-profiles-schema", "capabilities-minimal",
    "no-router-owned-routes", "custom-resources-awaited", "daemonsets-no-gpu", "gateway-no-resend",
    "gpu-budget", "data-protected", "gpu-budget-stack", "data-protected-stack", "pd-rolesets", "model-writers",
    "group-patches", "endpoint-picker-probes", "inference-pool-pods", "inference-pool-picker", "inference-pool-routes",
}


def level(name: str) -> EnforcementLevel:
    return EnforcementLevel.MANDATORY if name in MANDATORY else EnforcementLevel.ADVISORY


def _report_failure(report_violation, name: str, err: Exception) -> None:
    """A rule that fails on data it did not expect reports that, at its own level, instead of raising:
    the engine turns a raising policy into "failed to run policy" and fails the whole preview."""
    report_violation(f"policy {name} could not evaluate this resource ({type(err).__name__}: {err}); "
                     "treating it as a violation.", None)


def _resource_validate(name: str, check: Callable[[str, dict], list[str]]):
    def validate(args: ResourceValidationArgs, report_violation) -> None:
        try:
            messages = check(args.resource_type, plain(args.props))
        except Exception as err:  # noqa: BLE001 - see _report_failure
            _report_failure(report_violation, name, err)
            return
        for message in messages:
            report_violation(message, None)
    return validate


def _seconds(value: float) -> str:
    return f"{int(value)}s" if value else ""


def stack_of(urn: str) -> str:
    """The stack segment of `urn:pulumi:<stack>::<project>::<type>::<name>`."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:")


class Operation:
    """What the pack has seen so far in one preview or update, per stack.

    The engine analyzes every resource as the program registers it, before any change (pulumi/pulumi
    v3.259.0 pkg/resource/deploy/step_generator.go: analyzeAll before the resource's steps; a
    mandatory violation stops the deployment there), while stack policies see the stack only after
    every change in `pulumi up`. So the rules that must block before a change carry state between
    resources: the stack facts, each GPU workload's peak GPUs and the bucket resources still waiting
    for the facts, keyed by URN so a re-analysis replaces, never adds. The SDK registers a resource
    when its inputs resolve, not in program order; the facts have no inputs to wait for and come
    first in practice, and whichever of a fact and a workload comes second reports the violation.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[str, dict[str, Any]] = {}
        self._gpus: dict[str, dict[str, int]] = {}
        self._waiting: dict[str, dict[str, tuple[str, str, dict, bool]]] = {}
        # Per stack: GPU workloads by (kind, namespace, name) -> (urn, type, props), and the largest
        # maxReplicas a PodAutoscaler gives each target, whichever of the two came first.
        self._workloads: dict[str, dict[tuple, tuple[str, str, dict]]] = {}
        self._scaled: dict[str, dict[tuple, int]] = {}

    def record_facts(self, urn: str, facts: dict[str, Any]) -> int:
        """Record the facts; the GPU total of the workloads that came before them."""
        stack = stack_of(urn)
        with self._lock:
            self._facts[stack] = facts
            return sum(self._gpus.get(stack, {}).values())

    def take_waiting(self, urn: str, facts: dict[str, Any]) -> list[tuple[str, str, dict, bool]]:
        """Record the facts; the bucket resources that waited for them, now taken."""
        stack = stack_of(urn)
        with self._lock:
            self._facts[stack] = facts
            return list(self._waiting.pop(stack, {}).values())

    def facts(self, urn: str) -> dict[str, Any] | None:
        with self._lock:
            return self._facts.get(stack_of(urn))

    def add_gpus(self, urn: str, gpus: int) -> tuple[int, dict[str, Any] | None]:
        """Record one workload's peak GPUs; the stack's total so far and its facts, if known yet."""
        stack = stack_of(urn)
        with self._lock:
            seen = self._gpus.setdefault(stack, {})
            seen[urn] = gpus
            return sum(seen.values()), self._facts.get(stack)

    def workload(self, urn: str, key: tuple, resource_type: str, props: dict) -> int | None:
        """Record a GPU workload; the maxReplicas an autoscaler registered before it gives it, if any."""
        stack = stack_of(urn)
        with self._lock:
            self._workloads.setdefault(stack, {})[key] = (urn, resource_type, props)
            return self._scaled.get(stack, {}).get(key)

    def autoscaler(self, urn: str, key: tuple, max_replicas: int) -> tuple[int, tuple[str, str, dict] | None]:
        """Record an autoscaler's maxReplicas for its target (the largest wins); that figure and the
        target workload, if registered yet."""
        stack = stack_of(urn)
        with self._lock:
            scaled = self._scaled.setdefault(stack, {})
            scaled[key] = max(scaled.get(key, 0), max_replicas)
            return scaled[key], self._workloads.get(stack, {}).get(key)

    def bucket_part(self, urn: str, part: tuple[str, str, dict, bool]) -> dict[str, Any] | None:
        """The facts, or None after keeping the part until they arrive."""
        stack = stack_of(urn)
        with self._lock:
            if stack in self._facts:
                return self._facts[stack]
            self._waiting.setdefault(stack, {})[urn] = part
            return None


OPERATION = Operation()


def _facts_of(props: dict) -> dict[str, Any]:
    return {k: props[k] for k in ("gpuBudget", "environment") if k in props and not is_unknown(props[k])}


def _budget_messages(total: int, facts: dict[str, Any]) -> list[str]:
    if "gpuBudget" not in facts:
        return [f"{STACK_FACTS} states no GPU budget; the stack was not built by llm-serving."]
    return stack_rules.budget_message(total, int(facts["gpuBudget"]), partial=True)


def _gpu_budget(args: ResourceValidationArgs, report_violation) -> None:
    """As each GPU workload is registered: the GPUs of the workloads registered so far, its own
    included, fit the budget the stack facts state. Blocks the workload that would exceed it (or the
    facts, when they come after the workloads)."""
    props = plain(args.props)
    if args.resource_type == STACK_FACTS:
        facts = _facts_of(props)
        total = OPERATION.record_facts(args.urn, facts)
        messages = _budget_messages(total, facts) if total else []
    elif stack_rules.is_autoscaler(args.resource_type):
        # An autoscaler may grow its target to maxReplicas: the target's GPUs are counted at that.
        target = decide(lambda: [stack_rules.autoscaler_target(args.resource_type, props)])
        if not target or target[0][1] is None or is_unknown(target[0][1]):
            return  # unknown in preview: `pulumi up` decides before the change
        key, max_replicas = target[0]
        most, workload = OPERATION.autoscaler(args.urn, key, int(max_replicas))
        if workload is None:
            return  # the workload, when it comes, is counted with this maxReplicas
        workload_urn, workload_type, workload_props = workload
        gpus = stack_rules.workload_gpus(workload_type, workload_props, most)
        if is_unknown(gpus):
            return
        total, facts = OPERATION.add_gpus(workload_urn, int(gpus))
        messages = _budget_messages(total, facts) if facts is not None else []
        messages = _naming(messages, workload_type, workload_props, most)
    else:
        gpus = stack_rules.workload_gpus(args.resource_type, props)
        if is_unknown(gpus) or not gpus:
            return  # no GPUs, or a count unknown in preview: `pulumi up` decides before the change
        key = known_or_unknown(lambda: stack_rules.workload_key(args.resource_type, props))
        most = None if is_unknown(key) else OPERATION.workload(args.urn, key, args.resource_type, props)
        if most is not None:
            gpus = stack_rules.workload_gpus(args.resource_type, props, most)
            if is_unknown(gpus):
                return
        total, facts = OPERATION.add_gpus(args.urn, int(gpus))
        messages = _budget_messages(total, facts) if facts is not None else []
        messages = _naming(messages, args.resource_type, props, most)
    for message in messages:
        report_violation(message, None)


def _naming(messages: list[str], resource_type: str, props: dict, most: Any) -> list[str]:
    """Budget messages reported on a workload (or its autoscaler) lead with what that workload holds."""
    held = decide(lambda: [stack_rules.workload_gpu_text(resource_type, props, most)])
    return [f"{held[0]}; {m[0].lower()}{m[1:]}" if held else m for m in messages]


def _protection_messages(part: tuple[str, str, dict, bool], facts: dict[str, Any]) -> list[str]:
    resource_type, name, props, protect = part
    environment = str(facts.get("environment", "prod"))  # no environment stated: the strict one
    return stack_rules.bucket_part_protected(resource_type, name, props, {"protect": protect}, environment,
                                             check_retain=False)


def _data_protected(args: ResourceValidationArgs, report_violation) -> None:
    """Each weights-bucket resource outside dev is protected, and versioning stays Enabled; checked as
    it is registered, or when the facts that say which environment this is arrive."""
    if args.resource_type == STACK_FACTS:
        facts = _facts_of(plain(args.props))
        messages = [m for part in OPERATION.take_waiting(args.urn, facts) for m in _protection_messages(part, facts)]
    elif args.resource_type in stack_rules.BUCKET_PARTS:
        part = (args.resource_type, args.name, plain(args.props), bool(args.opts.protect))
        facts = OPERATION.bucket_part(args.urn, part)
        messages = _protection_messages(part, facts) if facts is not None else []
    else:
        return
    for message in messages:
        report_violation(message, None)


def _guarded(name: str, validate: Callable[[ResourceValidationArgs, Any], None]):
    def run(args: ResourceValidationArgs, report_violation) -> None:
        try:
            validate(args, report_violation)
        except Exception as err:  # noqa: BLE001 - see _report_failure
            _report_failure(report_violation, name, err)
    return run


def to_stack_resource(r: PolicyResource) -> StackResource:
    timeouts = r.opts.custom_timeouts
    options = {
        "protect": r.opts.protect,
        "customTimeouts": {k: v for k, v in (("create", _seconds(timeouts.create_seconds)),
                                              ("update", _seconds(timeouts.update_seconds))) if v},
    }
    # The engine gives every custom resource a provider reference (a default one when the program
    # passed none); the root stack and components have none.
    provider = r.provider.urn if r.provider is not None else ""
    return StackResource(type=r.resource_type, name=r.name, props=plain(r.props), options=options,
                         provider=provider, custom=r.provider is not None,
                         parent=r.opts.parent or "")


def stack_facts(resources: list[StackResource]) -> dict[str, Any]:
    """The facts component's outputs: what it passed to register_outputs (AnalyzeStack sees outputs)."""
    facts = next((r for r in resources if r.type == STACK_FACTS), None)
    return _facts_of(facts.props) if facts is not None else {}


def _stack_validate(name: str, check: Callable[[list[StackResource], dict[str, Any]], list[str]]):
    def validate(args: StackValidationArgs, report_violation) -> None:
        try:
            resources = [to_stack_resource(r) for r in args.resources]
            messages = check(resources, stack_facts(resources))
        except Exception as err:  # noqa: BLE001 - see _report_failure
            _report_failure(report_violation, name, err)
            return
        for message in messages:
            report_violation(message, None)
    return validate


def _budget(resources: list[StackResource], facts: dict[str, Any]) -> list[str]:
    if "gpuBudget" not in facts:
        return [f"No {STACK_FACTS} resource states the GPU budget; the stack was not built by llm-serving."]
    return stack_rules.gpus_within_budget(resources, int(facts["gpuBudget"]))


# Blocking before the change: run on each resource as it is registered, in preview and in up.
BLOCKING_RESOURCE_CHECKS: dict[str, tuple[str, Callable[[ResourceValidationArgs, Any], None]]] = {
    "gpu-budget": ("GPU total so far, rollout surge, known overshoot and autoscalers' maxReplicas included, within "
                   "the stack's budget.",
                   _gpu_budget),
    "data-protected": ("Outside dev the weights bucket and everything configuring it are protected, versioning on.",
                       _data_protected),
}

STACK_CHECKS: dict[str, tuple[str, Callable[[list[StackResource], dict[str, Any]], list[str]]]] = {
    "gpu-budget-stack": ("GPU total of the whole stack, rollouts and autoscalers' maxReplicas included, within the "
                         "stack's budget.", _budget),
    "data-protected-stack": ("Outside dev every weights bucket is protected and has versioning.",
                             lambda rs, f: stack_rules.data_is_protected(rs, str(f.get("environment", "prod")), check_retain=False)),
    "pd-rolesets": ("P/D rolesets are complete and their sides match.",
                    lambda rs, f: stack_rules.pd_rolesets_are_complete_and_matched(rs)),
    "model-writers": ("Only the sync Job writes a model claim.", lambda rs, f: stack_rules.only_sync_jobs_write_models(rs)),
    "sync-off-gpu-stack": ("Every Job excludes, with DoesNotExist, each node label key a GPU pod of the stack selects.",
                           lambda rs, f: resource_rules.jobs_avoid_every_gpu_pool([(r.type, r.props) for r in rs])),
    "await-timeouts": ("GPU workloads are awaited at least their progress deadline or startup budget.",
                       lambda rs, f: stack_rules.await_timeouts_cover_rollout(rs)),
    "reference-grants": ("Cross-namespace route backends have a ReferenceGrant.",
                         lambda rs, f: stack_rules.routes_have_reference_grants(rs)),
    "inference-pool-pods": ("Each InferencePool selects its model's serving pods (a group's leaders only, never the "
                            "picker's) on the port their engine serves.",
                            lambda rs, f: resource_rules.inference_pools_select_serving_pods(rs)),
    "inference-pool-picker": ("Each InferencePool's endpointPickerRef is a Service of the stack, on a port it has, in "
                              "front of the endpoint picker of that pool.",
                              lambda rs, f: resource_rules.inference_pools_have_their_picker(rs)),
    "inference-pool-routes": ("An HTTPRoute's InferencePool backend is a pool of the stack a ReferenceGrant opens to "
                              "the route's namespace.", lambda rs, f: resource_rules.routes_reach_inference_pools(rs)),
    "explicit-providers": ("Every resource uses an explicit provider.", lambda rs, f: stack_rules.explicit_providers_only(rs)),
    # Advisory in the pack, mandatory in prod (config.prod.json): networkPolicy.egress.enabled false is a choice
    # the config offers (a network plugin that enforces no egress policy, a DNS selector being fixed), which
    # dev and staging may make with a warning in every preview, and prod only by a reviewed policy config.
    "egress-default-deny": ("Every namespace running the stack's pods denies egress by default.",
                            lambda rs, f: stack_rules.namespaces_deny_egress(rs)),
}


def policies() -> list:
    out: list = [ResourceValidationPolicy(name=p.name, description=p.description, validate=_resource_validate(p.name, p.check),
                                          enforcement_level=level(p.name))
                 for p in resource_rules.RESOURCE_POLICIES]
    out += [ResourceValidationPolicy(name=name, description=description, validate=_guarded(name, validate),
                                     enforcement_level=level(name))
            for name, (description, validate) in BLOCKING_RESOURCE_CHECKS.items()]
    out += [StackValidationPolicy(name=name, description=description, validate=_stack_validate(name, check),
                                  enforcement_level=level(name))
            for name, (description, check) in STACK_CHECKS.items()]
    return out
