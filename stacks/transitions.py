"""What an update changes from: the GPU workloads the stack's last deployment runs, and how the ones
this program adds take the place of the ones it drops without needing both fleets of GPUs at once.

The engine creates every new resource before it deletes a dropped one: the deletes of resources the
program no longer registers are generated only after it has exited (pulumi/pulumi v3.259.0
pkg/resource/deploy/step_generator.go GenerateDeletes), and a replacement is create-before-delete
unless the provider or the deleteBeforeReplace option says otherwise (generateStepsFromDiff; the
delete of the old copy "is generated later on, after all creates/updates finish"). Renaming a model,
switching its orchestrator or topology, or the namespace therefore starts the new GPU pods while the
old ones still hold the GPUs: where the budget has no room for both, the new pods stay Pending, the
create's await times out, and the old workload is never deleted.

So the program reads its own last deployment (the engine's builtin invoke
pulumi:pulumi:readStackResourceOutputs, pkg/resource/deploy/builtins.go, which answers from the
stack's checkpoint in preview and update alike) and, where the budget has no room for old and new at
once, makes each added GPU workload the replacement of a dropped one: an alias to its URN, replaced on
any change, delete first. The engine then deletes the old workload and creates the new one in one
`pulumi up` (the model serves nothing in between: changes.md and the preview's warning name the
downtime). Where more workloads are dropped than added (pd -> combined) no alias can free them all:
the update is refused before anything is registered, with the commands that work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.time_to_serving import time_to_serving
from components.topologies import gpu_workloads
from config_model import StackConfig
from policy.stack_rules import workload_gpus
from policy.unknowns import is_unknown

SELF_STATE = "pulumi:pulumi:readStackResourceOutputs"
WorkloadId = tuple[str, str]   # (namespace, object name): what the scheduler and the GPUs see


@dataclass(frozen=True)
class Workload:
    urn: str
    kind: str
    namespace: str
    name: str
    gpus: int

    @property
    def id(self) -> WorkloadId:
        return (self.namespace, self.name)

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} ({self.gpus} GPUs)"


@dataclass(frozen=True)
class Planned:
    namespace: str
    name: str
    gpus: int
    # From the new pods' scheduling to their first token (components/time_to_serving.py): how long the
    # model serves nothing when its old workload goes first.
    downtime_seconds: float = 0.0

    @property
    def id(self) -> WorkloadId:
        return (self.namespace, self.name)


@dataclass
class Transition:
    """Per added GPU workload, the dropped one whose place it takes; what cannot be done in one
    update; and what the preview should say about the rest."""

    budget: int
    planned_total: int
    previous: dict[WorkloadId, Workload] = field(default_factory=dict)
    dropped_gpus: int = 0
    takes_place_of: dict[WorkloadId, Workload] = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)
    downtime: dict[WorkloadId, float] = field(default_factory=dict)

    def room_for(self, gpus: int) -> bool:
        """Whether the whole new stack, the dropped workloads and `gpus` more fit the budget at once."""
        return self.planned_total + self.dropped_gpus + gpus <= self.budget

    def notes(self) -> list[str]:
        return [f"{old.describe()} is deleted before {new_id[0]}/{new_id[1]} starts: gpuBudget {self.budget} has no "
                f"room for both, so the model serves nothing until the new pods are ready "
                f"(about {self.downtime.get(new_id, 0) / 60:.0f} min)"
                for new_id, old in self.takes_place_of.items()]


def gpu_workloads_of(state: dict[str, dict]) -> list[Workload]:
    """The GPU workloads among a stack's resources (URN -> {type, outputs}), by the same count the
    policy pack applies to every stack (policy/stack_rules.py workload_gpus)."""
    found = []
    for urn, entry in state.items():
        rtype = str(entry.get("type") or "")
        props = entry.get("outputs") or {}
        if not rtype.startswith("kubernetes:") or not isinstance(props, dict):
            continue
        gpus = workload_gpus(rtype, props)
        if is_unknown(gpus) or not gpus:
            continue
        meta = props.get("metadata") or {}
        found.append(Workload(urn=urn, kind=str(props.get("kind") or rtype.rsplit(":", 1)[-1]),
                              namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                              gpus=int(gpus)))
    return found


# The DIY (file://) backend answers this invoke by reading the checkpoint the engine rewrites after
# every step, and that read is not atomic: gocloud.dev fileblob (the pseudo-version pulumi v3.276.0
# pins) renames the checkpoint into place but truncates and rewrites its `.attrs` sidecar in place
# (blob/fileblob/attrs.go setAttrs), so a read that lands in between fails with
# "failed to load checkpoint: EOF" (seen in CI right after the Stack resource was created). The next
# read finds both files whole; a bounded retry rides it out and anything else still fails.
READ_ATTEMPTS = 5
READ_FIRST_DELAY_SECONDS = 0.1


def read_previous(invoke: Callable[..., Any] = pulumi.runtime.invoke,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, dict]:
    """URN -> {type, outputs} of every resource of this stack's last deployment; {} for a new stack.
    The offline render answers the same invoke from `--previous DIR` (render/runtime.py)."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    for attempt in range(READ_ATTEMPTS):
        try:
            value: Any = invoke(SELF_STATE, {"stackName": name}).value or {}
            return dict(value.get("outputs") or {})
        except Exception as err:  # the SDK raises a bare Exception for a failed invoke (runtime/invoke.py)
            if attempt + 1 == READ_ATTEMPTS:
                raise pulumi.RunError(
                    f"could not read this stack's last deployment ({SELF_STATE}, {READ_ATTEMPTS} attempts), "
                    f"which the program needs to plan GPU workload replacements: {err}") from None
            sleep(READ_FIRST_DELAY_SECONDS * 2 ** attempt)
    raise AssertionError("unreachable")


def plan(previous: list[Workload], planned: list[Planned], budget: int, planned_total: int) -> Transition:
    """Pure: how the planned GPU workloads take over from the previous ones within `budget`."""
    planned_ids = {p.id for p in planned}
    previous_ids = {w.id for w in previous}
    dropped = [w for w in previous if w.id not in planned_ids]
    out = Transition(budget=budget, planned_total=planned_total, previous={w.id: w for w in previous},
                     dropped_gpus=sum(w.gpus for w in dropped), downtime={p.id: p.downtime_seconds for p in planned})
    if out.room_for(0):
        return out
    free = list(dropped)
    for p in planned:
        if p.id not in previous_ids and free:
            out.takes_place_of[p.id] = free.pop(0)
    if free:
        held = sum(w.gpus for w in free)
        out.refusals.append(
            f"this update starts {planned_total} GPUs of workloads while "
            f"{', '.join(w.describe() for w in free)} would hold {held} more until it ends: {planned_total + held} of "
            f"gpuBudget {budget}; the new pods would stay Pending until `pulumi up` times out. Free them first "
            f"(the model stops serving): `pulumi destroy --target-dependents "
            f"{' '.join('--target ' + repr(w.urn) for w in free)}`, then `pulumi up`")
    return out


def options_for(transition: Transition, props: dict, rtype: str) -> pulumi.ResourceOptions | None:
    """The options a GPU workload being registered takes from the transition, None for the rest."""
    if not rtype.startswith("kubernetes:") or not isinstance(props, dict):
        return None
    gpus = workload_gpus(rtype, props)
    if is_unknown(gpus) or not gpus:
        return None
    meta = props.get("metadata") or {}
    wid = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    kind = str(props.get("kind") or rtype.rsplit(":", 1)[-1])
    old = transition.takes_place_of.get(wid)
    if old is not None:
        # Replaced on any difference (name, namespace): the dropped workload goes first.
        return pulumi.ResourceOptions(aliases=[old.urn], delete_before_replace=True, replace_on_changes=["*"])
    same_name = transition.previous.get(wid)
    room = transition.room_for(int(gpus))
    if same_name is not None:
        # The object this one is, whatever its URN was: a topology switch (combined -> pd-same-pod: another
        # component, the same Deployment) would otherwise create an object that exists, and the engine
        # delete the old URN's object, this one, at the end. An alias to its own URN changes nothing:
        # getOldResource looks the URN up first (step_generator.go).
        if same_name.kind != kind:
            # Another kind under one name: replaced, since pulumi-kubernetes v4.32.0
            # provider/pkg/provider/diff.go replaces a custom resource only on a name or namespace change
            # and would update the object of the other kind in place.
            return pulumi.ResourceOptions(aliases=[same_name.urn], replace_on_changes=["*"],
                                          delete_before_replace=not transition.room_for(same_name.gpus))
        # Delete first only without room; with room the provider decides (same name: delete first).
        return pulumi.ResourceOptions(aliases=[same_name.urn], delete_before_replace=None if room else True)
    if transition.planned_total + int(gpus) > transition.budget:
        # Created now; a later update that replaces it (a namespace or selector change) would hold its
        # old copy beside the whole new stack until the end unless it goes first.
        return pulumi.ResourceOptions(delete_before_replace=True)
    return None


def install(transition: Transition) -> None:
    """Apply the transition to every resource the program registers from here on (an SDK-side stack
    transformation: it runs under the engine and under the offline render's mocks alike)."""
    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        extra = options_for(transition, args.props, args.type_)
        if extra is None:
            return None
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, extra))
    pulumi.runtime.register_stack_transformation(transform)


def planned_workloads(cfg: StackConfig, models) -> list[Planned]:
    def downtime(m, gpus: int) -> float:
        return time_to_serving(m.size_gib, m.engine, gpus, pre_pulled=cfg.operations.image_pre_pull.enabled,
                               profile=m.profile,
                               download_mib_per_second=cfg.object_store.download_rate_mibps).gpu_wait_seconds
    return [Planned(cfg.namespace, w.name, w.peak_gpus, downtime(m, w.peak_gpus)) for m in models
            for w in gpu_workloads(m)]
