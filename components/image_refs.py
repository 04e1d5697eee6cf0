"""Pure image-reference helpers: parsing upstream references and naming their mirror copies.
No Pulumi here, so the config rules can use them before anything is registered."""

from __future__ import annotations

import json
from dataclasses import dataclass

from config_model import ImageRef, RegistryMirror

# ECR pull-through cache upstreams: registry host -> (upstream URL, prefix alias, needs a credential).
PULL_THROUGH_UPSTREAMS = {
    "docker.io": ("registry-1.docker.io", "docker-hub", True),
    "public.ecr.aws": ("public.ecr.aws", "ecr-public", False),
    "quay.io": ("quay.io", "quay", False),
    "registry.k8s.io": ("registry.k8s.io", "k8s", False),
    "ghcr.io": ("ghcr.io", "github", True),
    "registry.gitlab.com": ("registry.gitlab.com", "gitlab", True),
}


@dataclass(frozen=True)
class Upstream:
    registry: str
    repository: str
    tag: str | None


def parse_upstream(upstream: str) -> Upstream:
    """`vllm/vllm-openai:v1` -> docker.io, vllm/vllm-openai, v1; `python:3.12` -> docker.io, library/python."""
    first, _, rest = upstream.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", upstream
    name, _, tag = path.rpartition(":") if ":" in path.rsplit("/", 1)[-1] else (path, "", "")
    if registry == "docker.io" and "/" not in name:
        name = f"library/{name}"
    return Upstream(registry, name, tag or None)


def upstream_reference(ref: ImageRef) -> str:
    return f"{ref.upstream}@{ref.digest}"


def registry_repository(ref: ImageRef, mirror: RegistryMirror) -> str:
    up = parse_upstream(ref.upstream)
    return f"{mirror.host}/{mirror.repository_prefix}/{up.registry}/{up.repository}"


def ecr_prefix(repository_prefix: str, registry: str) -> str:
    return f"{repository_prefix}-{PULL_THROUGH_UPSTREAMS[registry][1]}"


def copy_list(named: dict[str, ImageRef], mirror: RegistryMirror) -> str:
    """Lines of `source destination digest` for the copy Job, in a stable order."""
    lines = []
    for _, ref in sorted(named.items()):
        up = parse_upstream(ref.upstream)
        lines.append(f"{up.registry}/{up.repository}@{ref.digest} "
                     f"{registry_repository(ref, mirror)}:{up.tag or 'pinned'} {ref.digest}")
    return "\n".join(lines)


def lifecycle_policy(keep: int) -> str:
    return json.dumps({"rules": [{
        "rulePriority": 1, "description": f"keep the newest {keep} images",
        "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep},
        "action": {"type": "expire"}}]}, sort_keys=True)
