"""Reading workload manifests for the policies: names, pod templates, engine containers, argv.

The pod templates of every kind come from policy.workloads.pod_templates; everything here is a pure
read of the camelCase properties CrossGuard (and the offline render) hands over.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from policy import quantity
from policy.unknowns import UnknownTouched, decide, is_unknown, items_of
from policy.workloads import (
    PodTemplateRef,
    containers,
    gpu_count,
    pod_gpus,
    pod_templates,
)

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL)", re.IGNORECASE)
ROLE = "llm-serving.io/role"
PARALLEL_SIZE = "llm-serving.io/parallel-size"
STARTUP_BUDGET = "llm-serving.io/startup-budget-seconds"
# /dev/shm per GPU, for the config rules and the pack alike: NCCL and the engine's worker queues live
# there; the field report asks for 64-128 GiB on an 8-GPU pod (section 2.1), i.e. at least 8 GiB per GPU.
SHM_GIB_PER_GPU = 8
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
# Workload kinds Pulumi awaits by itself (pulumi-kubernetes v4.32.0 provider/pkg/await/awaiters.go,
# the awaiters map); custom resources need pulumi.com/waitFor.
BUILTIN = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "Pod"}


def kind_of(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def _text(read, default: str) -> str:
    try:
        value = read()
        return "(unknown)" if is_unknown(value) else str(value if value is not None else default)
    except UnknownTouched:
        return "(unknown)"


def name_of(props: dict) -> str:
    """`Kind namespace/name` for messages; never raises, whatever is unknown."""
    meta = lambda: props.get("metadata") or {}  # noqa: E731
    return (f"{_text(lambda: props.get('kind'), '?')} {_text(lambda: meta().get('namespace'), '-')}/"
            f"{_text(lambda: meta().get('name'), '?')}")


def templates(resource_type: str, props: dict) -> list[PodTemplateRef]:
    if not resource_type.startswith("kubernetes:"):
        return []
    return pod_templates(kind_of(resource_type), props)


def annotations_of(template: dict) -> dict:
    return (template.get("metadata") or {}).get("annotations") or {}


def volumes_of(template: dict) -> dict[str, dict]:
    return {v.get("name"): v for v in (template.get("spec") or {}).get("volumes") or []}


def is_engine(template: dict) -> bool:
    return annotations_of(template).get(ROLE) == "engine" or pod_gpus(template) > 0


def _is_engine_container(group: str, c: dict) -> list[bool]:
    return [group == "containers" and (c.get("name") == "engine" or max(gpu_count(c)) > 0)]


def engine_containers(template: dict) -> list[dict]:
    """The engine containers; one whose name and GPU count are unknown is left out (undecided)."""
    return [c for g, c in containers(template) if decide(_is_engine_container, g, c) == [True]]


def _engine_pod(ref: PodTemplateRef) -> list[tuple[PodTemplateRef, list[dict]]]:
    return [(ref, engine_containers(ref.template))] if is_engine(ref.template) else []


def engine_pods(resource_type: str, props: dict) -> Iterator[tuple[PodTemplateRef, list[dict]]]:
    """Engine pod templates of a workload, with their engine containers; a template whose
    engine-ness depends on unknown values is not yielded (undecided until `pulumi up`)."""
    for ref in templates(resource_type, props):
        yield from decide(_engine_pod, ref)


def each_container(resource_type: str, props: dict, check) -> list[str]:
    """check(ref, container) over every container of every pod template, each decided alone."""
    out: list[str] = []
    for ref in templates(resource_type, props):
        for _, c in decide(lambda r: list(containers(r.template)), ref):
            out += decide(check, ref, c)
    return out


def each_engine_container(resource_type: str, props: dict, check) -> list[str]:
    """check(ref, container) over every engine container, each decided alone."""
    out: list[str] = []
    for ref, engines in engine_pods(resource_type, props):
        for c in engines:
            out += decide(check, ref, c)
    return out


def quantity_gib(q: Any) -> float:
    """GiB of a memory quantity as the API server reads it (policy.quantity: "200G", "2048Ki", "1e9" and
    ".5Gi" too), as a float for the messages; 0 where the server refuses it (apivalidation reports that)."""
    if is_unknown(q):
        raise UnknownTouched()
    value = quantity.try_parse_field(q)
    return float(quantity.gib(value)) if value is not None else 0.0


LOOPBACK = ("localhost", "127.", "::1")


def env_value(container: dict, name: str) -> str | None:
    """The literal value of env `name`; raises UnknownTouched when it (or an earlier name) is unknown."""
    return next((e.get("value") for e in items_of(container.get("env")) if e.get("name") == name), None)


def argv_of(container: dict) -> list[str]:
    """command + args as text; raises UnknownTouched when any element is unknown (flags are read by position)."""
    return [str(a) for a in items_of(container.get("command")) + items_of(container.get("args"))]


def flag_value(argv: list[str], *flags: str) -> str | None:
    """The value of the first of `flags` in argv, as `--flag value` or `--flag=value`."""
    for i, a in enumerate(argv):
        for flag in flags:
            if a == flag and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    return None
