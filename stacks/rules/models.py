"""Rules over each model: unique names, the engine/orchestrator/topology combinations the field report
validated, parallel size against the pod and node, /dev/shm per GPU, DSpark A/B pairs, and the names
and deadlines the model derives."""

from __future__ import annotations

from typing import Iterator

from components.engines import (
    cold_start_estimate_seconds,
    engine_of,
    parallel_size,
    profile_of,
    speculative_decoding,
    startup_budget_seconds,
)
from components.gateway import service_name
from components.operations import engines_service
from components.orchestrators import ORCHESTRATORS, rollout_deadline_seconds
from components.topologies import TOPOLOGIES, gpus_per_pod, pod_resources, topology_of
from config_model import ServedModel, StackConfig, k8s, stack_key
from config_model.resources import GIB
from policy.engines import ENGINES
from policy.manifests import SHM_GIB_PER_GPU
from stacks.rules.multinode import exceeds_one_node
from stacks.rules.problem import Problem


def supported() -> set[tuple[str, str, str]]:
    """(topology, engine, orchestrator) the field report validated, as each topology states them."""
    return {(name, e, o) for name, t in TOPOLOGIES.items() for e, o in t.supported}


def orchestrator_may_surge(m: ServedModel) -> bool:
    return m.orchestrator in ORCHESTRATORS and ORCHESTRATORS[m.orchestrator].may_surge


def orchestrator_has_recreate(m: ServedModel) -> bool:
    return m.orchestrator in ORCHESTRATORS and ORCHESTRATORS[m.orchestrator].has_recreate


def each_model(cfg: StackConfig) -> Iterator[Problem]:
    seen_names: dict[str, int] = {}
    seen_served: dict[str, int] = {}
    by_directory: dict[str, int] = {}
    for i, m in enumerate(cfg.models):
        at = f"models[{i}]"
        if m.name in seen_names:
            yield Problem(f"{at}.name", m.name, f"must be unique; models[{seen_names[m.name]}] uses it")
        seen_names.setdefault(m.name, i)
        if m.served_model_name in seen_served:
            yield Problem(f"{at}.servedModelName", m.served_model_name,
                          f"must be unique; models[{seen_served[m.served_model_name]}] uses it")
        seen_served.setdefault(m.served_model_name, i)

        # Models may share a directory (one sync, e.g. a DSpark A/B beside the baseline) only if
        # they agree on what the directory holds.
        first = by_directory.setdefault(m.directory, i)
        other = cfg.models[first]
        for field, mine, theirs in (("profile", m.profile, other.profile),
                                    ("objectPrefix", m.object_prefix, other.object_prefix),
                                    ("revision", m.revision, other.revision),
                                    ("expectedShardCount", m.expected_shard_count, other.expected_shard_count),
                                    ("sizeGiB", m.size_gib, other.size_gib),
                                    ("keepRevisions", m.keep_revisions, other.keep_revisions)):
            if first != i and mine != theirs:
                yield Problem(f"{at}.{field}", mine, f"must equal models[{first}].{field} {theirs!r}: "
                              f"both models use directory {m.directory!r}")

        # expectedShardCount may stay unset: the verifier and the gate count the index's shards.
        if m.size_gib is None:
            yield Problem(f"{at}.sizeGiB", None, f"is required for profile {m.profile!r}: it knows no checkpoint "
                          "of this model")

        size, engine = parallel_size(m), engine_of(m)
        if speculative_decoding(m) and not profile_of(m).DSPARK:
            yield Problem(f"{at}.{engine.SECTION}.{stack_key(engine.SPECULATIVE_FIELD)}",
                          getattr(engine.section(m), engine.SPECULATIVE_FIELD),
                          f"needs a checkpoint with a DSpark head; profile {m.profile!r} has none (set it 'off')")
        per_node = cfg.gpu_pool.gpus_per_node
        if "gpus_per_pod" in m.model_fields_set and m.gpus_per_pod != min(size, per_node):
            how = engine.describe_parallel_size(engine.section(m))
            yield Problem(f"{at}.gpusPerPod", m.gpus_per_pod,
                          f"must equal the parallel size {size} ({how})" if size <= per_node else
                          f"must equal gpuPool.gpusPerNode {per_node}: a model of {size} GPUs ({how}) spans whole "
                          "nodes, one pod each")
        elif gpus_per_pod(m) > per_node and topology_of(m).engines_per_pod > 1:
            section = engine.section(m)
            unset = ("" if "tensor_parallel_size" in section.model_fields_set else
                     " (unset, so the field report's 8-GPU node's: set it for this pool)")
            yield Problem(f"{at}.{engine.SECTION}.tensorParallelSize", section.tensor_parallel_size,
                          f"one engine pod needs {gpus_per_pod(m)} GPUs but gpuPool.gpusPerNode is "
                          f"{cfg.gpu_pool.gpus_per_node}; a {m.topology} pod holds both engines and must fit on one "
                          f"node{unset}")

        estimate = cold_start_estimate_seconds(m)
        if estimate is not None and startup_budget_seconds(m) < estimate:
            yield Problem(f"{at}.startupBudgetSeconds", m.startup_budget_seconds,
                          f"must be at least {estimate} (the measured {m.engine} cold start of profile "
                          f"{m.profile!r}, field report); a shorter budget kills every cold start")

        need_shm = SHM_GIB_PER_GPU * gpus_per_pod(m)
        if pod_resources(cfg.gpu_pool, m).shm < need_shm * GIB:
            yield Problem(*((f"{at}.resources.shm", m.resources.shm) if m.resources.shm is not None
                            else ("gpuPool.shmSizeGiB", cfg.gpu_pool.shm_size_gib)),
                          f"must be at least {need_shm} GiB for {at} ({m.name}) with "
                          f"{gpus_per_pod(m)} GPUs per pod (TP={parallel_size(m)}"
                          f"{' per engine, two engines' if topology_of(m).engines_per_pod == 2 else ''})")

        yield from _engine_and_orchestrator(cfg, i, m)
        yield from _rollout(at, m)


def _rollout(at: str, m: ServedModel) -> Iterator[Problem]:
    """A surge pod only on a Deployment's RollingUpdate (its room in gpuBudget: capacity.budget), and a
    rollout that can make progress (the API server refuses maxSurge and maxUnavailable both 0)."""
    r = m.rollout
    if r.max_surge:
        if not orchestrator_may_surge(m):
            yield Problem(f"{at}.rollout.maxSurge", r.max_surge,
                          f"must be 0 for orchestrator {m.orchestrator!r}: only a Deployment rolls with a surge pod "
                          "here; StormService, RoleBasedGroup and the P/D fleets replace pods without one (field "
                          "report 11.2 saw the fleet controller overshoot)")
        elif r.strategy == "Recreate":
            yield Problem(f"{at}.rollout.maxSurge", r.max_surge, "must be 0 with rollout.strategy Recreate, which "
                          "stops every pod before starting new ones; use RollingUpdate for a surge pod")
    elif r.max_unavailable == 0:
        yield Problem(f"{at}.rollout.maxUnavailable", 0, "must be at least 1 with maxSurge 0: the rollout could "
                      "neither add nor take down a pod (the API server refuses both 0)")


def _engine_and_orchestrator(cfg: StackConfig, i: int, m: ServedModel) -> Iterator[Problem]:
    at = f"models[{i}]"
    topology = topology_of(m)
    # A model spanning nodes runs where an orchestrator runs groups: stacks/rules/multinode.py says which.
    group_only = m.orchestrator in ORCHESTRATORS and not ORCHESTRATORS[m.orchestrator].single_node
    if (m.engine, m.orchestrator) not in topology.supported and not exceeds_one_node(cfg, m) and not group_only:
        combos = ", ".join(f"{t} {e}+{o}" for t, e, o in sorted(supported()))
        yield Problem(f"{at}.orchestrator", m.orchestrator,
                      f"topology {m.topology!r} with engine {m.engine!r} on {m.orchestrator!r} is not a combination "
                      f"this program supports; supported (validated in the field report): {combos}")
    if topology.fleets and cfg.images.vllm_ray is None:
        yield Problem("images.vllmRay", None, f"is required: {at} runs P/D on RayClusterFleets, whose image must "
                      "bring Ray itself (field report 11.3)")
    if topology.same_pod:
        sp = m.same_pod
        ports = {"prefillPort": sp.prefill_port, "decodePort": sp.decode_port, "proxyPort": sp.proxy_port,
                 "prefillSideChannelPort": sp.prefill_side_channel_port, "decodeSideChannelPort": sp.decode_side_channel_port}
        seen: dict[int, str] = {}
        for key, port in ports.items():
            if port in seen:
                yield Problem(f"{at}.samePod.{key}", port, f"must differ from samePod.{seen[port]}: one pod, one port each")
            seen.setdefault(port, key)
    for other in ENGINES:
        if other.NAME != m.engine and other.SECTION in m.model_fields_set:
            yield Problem(f"{at}.{other.SECTION}", "(set)",
                          f"must be unset for engine {m.engine!r}: only the {m.engine} section applies")
    if not orchestrator_has_recreate(m) and m.rollout.strategy == "Recreate":
        yield Problem(f"{at}.rollout.strategy", "Recreate",
                      f"{m.orchestrator} has no Recreate; it rolls with RollingUpdate, maxSurge 0")
    engine = engine_of(m)
    if getattr(cfg.images, engine.IMAGE_KEY) is None:
        yield Problem(f"images.{engine.IMAGE_KEY}", None, f"is required: {at} ({m.name}) runs {engine.DISPLAY_NAME}")
    if engine.PERSISTENT_COMPILE_CACHE and cfg.compile_cache.claim is None:
        yield Problem("compileCache.kind", cfg.compile_cache.kind,
                      f"must be 'claim' (the stack makes it) or 'existingClaim' for {engine.DISPLAY_NAME} ({at}): "
                      f"{engine.PERSISTENT_COMPILE_CACHE}")


# What may differ inside a DSpark A/B pair: identity and the speculative switch, nothing else.
_AB_IDENTITY = {"name", "served_model_name", "dspark_of"}


def _comparable(m: ServedModel) -> dict:
    data = m.model_dump(exclude=_AB_IDENTITY)
    for engine in ENGINES:
        data[engine.SECTION].pop(engine.SPECULATIVE_FIELD)
    return data


def _flatten(data: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def dspark_pairs(cfg: StackConfig) -> Iterator[Problem]:
    by_name = {m.name: (i, m) for i, m in enumerate(cfg.models)}
    for i, m in enumerate(cfg.models):
        if m.dspark_of is None:
            continue
        at = f"models[{i}].dsparkOf"
        if m.dspark_of not in by_name or m.dspark_of == m.name:
            yield Problem(at, m.dspark_of, "must name another model of this stack (the target-only arm)")
            continue
        j, base = by_name[m.dspark_of]
        if base.dspark_of is not None or speculative_decoding(base):
            yield Problem(at, m.dspark_of, f"models[{j}] must be target-only (speculative decoding off, no dsparkOf)")
        if not speculative_decoding(m):
            yield Problem(at, m.dspark_of, f"models[{i}] must turn DSpark on: it is the DSpark arm of the pair")
        mine, theirs = _flatten(_comparable(m)), _flatten(_comparable(base))
        differing = sorted(k for k in mine if mine[k] != theirs.get(k))
        if differing:
            yield Problem(at, m.dspark_of, "an A/B pair may differ only in speculative decoding, name and served "
                          f"name; models[{i}] and models[{j}] also differ in: {', '.join(differing)}")


def names_apart(cfg: StackConfig) -> Iterator[Problem]:
    """A model's name is its workload's, and controllers name their own Services after the workload
    (the StormService headless Service takes it whole: tests/upstream_aibrix.py), so no model may be
    named like a Service this program makes for another model (`<model>-api`, `<model>-engines`)."""
    ours = {name: m.name for m in cfg.models for name in (service_name(m), engines_service(m))}
    for i, m in enumerate(cfg.models):
        if m.name in ours:
            yield Problem(f"models[{i}].name", m.name, f"is the name of a Service this program makes for model "
                          f"{ours[m.name]!r}; a controller would name this model's own Service the same. Choose another name")


def int32_deadlines(cfg: StackConfig) -> Iterator[Problem]:
    """progressDeadlineSeconds is the startup budget plus rollout.preStartSeconds, an int32."""
    for i, m in enumerate(cfg.models):
        deadline = rollout_deadline_seconds(m)
        if deadline > k8s.INT32_MAX:
            yield Problem(f"models[{i}].startupBudgetSeconds", m.startup_budget_seconds,
                          f"derives progressDeadlineSeconds {deadline}, above the int32 maximum {k8s.INT32_MAX}; "
                          f"at most {m.startup_budget_seconds - (deadline - k8s.INT32_MAX)}")
