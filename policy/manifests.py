"""Reading workload manifests for the policies: names, pod templates, engine containers, argv.

The pod templates of every kind come from policy.workloads.pod_templates; everything here is a pure
read of the camelCase properties CrossGuard (and the offline render) hands over.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

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
SHM_GIB_PER_GPU = 8
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
# Workload kinds Pulumi awaits by itself; custom resources need pulumi.com/waitFor.
BUILTIN = {"Deployment", "StatefulSet", "ReplicaSet", "Job", "Pod"}


def kind_of(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def name_of(props: dict) -> str:
    meta = props.get("metadata") or {}
    return f"{props.get('kind', '?')} {meta.get('namespace', '-')}/{meta.get('name', '?')}"


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


def engine_containers(template: dict) -> list[dict]:
    return [c for g, c in containers(template) if g == "containers" and (max(gpu_count(c)) > 0 or c.get("name") == "engine")]


def engine_pods(resource_type: str, props: dict) -> Iterator[tuple[PodTemplateRef, list[dict]]]:
    """Engine pod templates of a workload, with their engine containers."""
    for ref in templates(resource_type, props):
        if is_engine(ref.template):
            yield ref, engine_containers(ref.template)


def quantity_gib(q: Any) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Gi|Mi|Ti)?", str(q))
    if not m:
        return 0.0
    return float(m.group(1)) * {"Gi": 1, "Mi": 1 / 1024, "Ti": 1024, None: 1 / 1024 ** 3}[m.group(2)]


LOOPBACK = ("localhost", "127.", "::1")


def env_value(container: dict, name: str) -> str | None:
    return next((e.get("value") for e in container.get("env") or [] if e.get("name") == name), None)


def argv_of(container: dict) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def flag_value(argv: list[str], *flags: str) -> str | None:
    """The value of the first of `flags` in argv, as `--flag value` or `--flag=value`."""
    for i, a in enumerate(argv):
        for flag in flags:
            if a == flag and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    return None
