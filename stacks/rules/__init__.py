"""Rules that relate several fields of a valid-typed stack config.

Each rule returns Problems instead of raising, so a stack file with three mistakes is reported
with three messages in one run. Paths are the stack file's camelCase paths. The rules live by what
they are about (models, capacity, storage, operations); this list keeps the order their messages
are reported in.
"""

from __future__ import annotations

from typing import Callable, Iterator

from config_model import StackConfig, derived
from stacks.rules import (
    capacity,
    consumers,
    hardware,
    models,
    multinode,
    network,
    operations,
    parsers,
    passthrough,
    routing,
    storage,
)
from stacks.rules.capacity import gpu_demand, gpu_total
from stacks.rules.problem import Problem

__all__ = ["Problem", "check", "gpu_demand", "gpu_total"]

RULES: list[Callable[[StackConfig], Iterator[Problem]]] = [
    hardware.gpu_type, models.each_model, multinode.multi_node, models.dspark_pairs, capacity.autoscaling_bounds, capacity.budget,
    capacity.gpu_pool, capacity.kv_cache_offload, capacity.node_fit, hardware.memory_fit_rule, hardware.architecture_defaults, storage.model_volume,
    storage.model_capacity, storage.object_store, storage.compile_cache, operations.images, operations.operations,
    operations.gateway_needed, routing.routing_layer, storage.mounts, models.int32_deadlines, models.names_apart, network.clients, network.egress,
    consumers.consumers, passthrough.passthrough, parsers.parser_names,
]


def _derived_names(cfg: StackConfig, stack: str | None) -> Iterator[Problem]:
    for path, value, allowed in derived.problems(cfg, stack):
        yield Problem(path, value, allowed)


def check(cfg: StackConfig, stack: str | None = None) -> list[Problem]:
    """Every problem; `stack` (the stack's name) lets the names derived from it be checked too."""
    return [p for rule in RULES for p in rule(cfg)] + list(_derived_names(cfg, stack))
