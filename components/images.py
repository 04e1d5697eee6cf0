"""Image references pinned by digest, optionally served from a mirror (field report 11.3).

- none: pods pull `upstream@digest` directly.
- ecr: one ECR repository per image (lifecycle policy, scan on push) behind a pull-through cache
  rule for its upstream registry, so the first pull fills the mirror. Registries ECR cannot cache
  are refused by the config rules.
- registry: an existing internal registry, filled by a CPU-only Job that copies every image by
  digest with `skopeo copy --all --preserve-digests` and then checks the digest is there.
Pods then reference `mirror/...@sha256:...`; a digest means the same bytes wherever it is pulled.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.base import Component, job_metadata, labels
from components.combined import EngineImage
from components.image_refs import (
    PULL_THROUGH_UPSTREAMS,
    copy_list,
    ecr_prefix,
    lifecycle_policy,
    parse_upstream,
    registry_repository,
    upstream_reference,
)
from components.pod_template import SCRIPTS_MOUNT, container_security, cpu_job_pod
from config_model import GpuPool, ImageRef, Images

COPY_TIMEOUT_SECONDS = 3600
# HOME and TMPDIR of skopeo. A registry-to-registry copy streams each blob from source to destination: the
# only temporary file on that path is for --dest-precompute-digests, which mirror_images.sh does not pass
# (containers/image v5.36.1 docker/docker_image_dest.go PutBlobWithOptions: streamdigest.ComputeBlobInfo only
# with DockerRegistryPushPrecomputeDigests; the other big-file temporaries are docker-archive, oci-archive,
# sif and containers-storage transports). So it holds skopeo's blob-info cache and the like: 1Gi, not the
# image sizes (it was 100Gi, which every pod would now have to reserve on a CPU node's disk).
COPY_TMP = "1Gi"

@dataclass(frozen=True)
class ImageMirrorArgs:
    images: Images
    namespace: str
    gpu_pool: GpuPool
    pull_secret_name: str | None      # dockerconfigjson Secret for the registry mirror
    scripts_config_map: str
    named: dict[str, ImageRef]        # every image the stack runs, by stack-file key
    aws_region: str = ""              # the aws provider's region: part of an ECR mirror's reference
    # Label keys of the models' own node pools (config_model/resources.py model_node_label_keys): CPU Jobs avoid them too.
    model_label_keys: tuple[str, ...] = ()


def ecr_repository_name(repository_prefix: str, ref: ImageRef) -> str:
    up = parse_upstream(ref.upstream)
    return f"{ecr_prefix(repository_prefix, up.registry)}/{up.repository}"


class ImageMirror(Component):
    """References for every configured image, by stack-file key (vllm, sglang, modelSync ...)."""

    references: dict[str, Any]
    # The same references as far as the stack file decides them, known in every preview: the reference
    # itself, or for ECR its region, repository and digest (the account comes from the provider's
    # credentials). The rollout key reads these (components/rollout.py).
    known_references: dict[str, str]
    pull_secrets: list[str]

    def __init__(self, name: str, args: ImageMirrorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:images:ImageMirror", name, opts)
        images = args.images
        named = args.named
        self.pull_secrets = []
        kind = images.mirror.kind
        if kind == "ecr":
            self.references = self._ecr(name, images, named)
            assert images.mirror.ecr is not None
            self.known_references = {key: f"ecr:{args.aws_region}/{ecr_repository_name(images.mirror.ecr.repository_prefix, ref)}"
                                          f"@{ref.digest}" for key, ref in named.items()}
        elif kind == "registry":
            self.references = self._registry(name, args, named)
            self.known_references = dict(self.references)
        else:
            self.references = {key: upstream_reference(ref) for key, ref in named.items()}
            self.known_references = dict(self.references)
        self.register_outputs({"references": self.references})

    def engine_image(self, key: str) -> EngineImage:
        return EngineImage(self.references[key], self.known_references[key])

    def _ecr(self, name: str, images: Images, named: dict[str, ImageRef]) -> dict[str, Any]:
        ecr = images.mirror.ecr
        assert ecr is not None
        refs: dict[str, Any] = {}
        rules: set[str] = set()
        for key, ref in sorted(named.items()):
            up = parse_upstream(ref.upstream)
            prefix = ecr_prefix(ecr.repository_prefix, up.registry)
            if up.registry not in rules:
                rules.add(up.registry)
                url, alias, _ = PULL_THROUGH_UPSTREAMS[up.registry]
                aws.ecr.PullThroughCacheRule(
                    f"{name}-cache-{alias}", ecr_repository_prefix=prefix, upstream_registry_url=url,
                    credential_arn=ecr.upstream_credential_arns.get(up.registry), opts=self.child_opts())
            # force_delete: the mirror holds copies of public images pinned by digest, which the
            # pull-through cache rule fetches again on the next pull. Without it ECR refuses to delete
            # a repository that holds images (RepositoryNotEmptyException), so dropping an image or
            # `pulumi destroy` fails (pulumi_aws 7.51.1 ecr.Repository force_delete; the bridged
            # hashicorp/terraform-provider-aws internal/service/ecr/repository.go resourceRepositoryDelete
            # sends Force from the state, and changing it is an update of the state alone).
            repo = aws.ecr.Repository(
                f"{name}-{key}", name=ecr_repository_name(ecr.repository_prefix, ref), force_delete=True,
                image_tag_mutability="MUTABLE",
                image_scanning_configuration={"scan_on_push": True},
                encryption_configurations=[{"encryption_type": "AES256"}], opts=self.child_opts())
            aws.ecr.LifecyclePolicy(f"{name}-{key}-lifecycle", repository=repo.name,
                                    policy=lifecycle_policy(ecr.keep_images), opts=self.child_opts())
            refs[key] = repo.repository_url.apply(lambda url, d=ref.digest: f"{url}@{d}")
        return refs

    def _registry(self, name: str, args: ImageMirrorArgs, named: dict[str, ImageRef]) -> dict[str, Any]:
        images = args.images
        mirror = images.mirror.registry
        assert mirror is not None and args.pull_secret_name is not None
        self.pull_secrets = [args.pull_secret_name]
        plan = copy_list(named, mirror)
        job_name = f"image-mirror-{hashlib.sha256(plan.encode()).hexdigest()[:8]}"
        copier = {
            "name": "copy",
            # The copier itself cannot come from the mirror it fills.
            "image": upstream_reference(mirror.copy_image),
            "command": ["/bin/sh", f"{SCRIPTS_MOUNT}/mirror_images.sh"],
            "env": [{"name": "IMAGE_LIST", "value": plan},
                    {"name": "AUTHFILE", "value": "/auth/.dockerconfigjson"},
                    {"name": "HOME", "value": "/var/tmp"}, {"name": "TMPDIR", "value": "/var/tmp"}],
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "securityContext": container_security(non_root=True),
            "volumeMounts": [{"name": "auth", "mountPath": "/auth", "readOnly": True},
                             {"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                             {"name": "tmp", "mountPath": "/var/tmp"}],
        }
        pod = cpu_job_pod(args.gpu_pool, [copier], [
            {"name": "auth", "secret": {"secretName": args.pull_secret_name}},
            {"name": "scripts", "configMap": {"name": args.scripts_config_map, "defaultMode": 0o555}},
            {"name": "tmp", "emptyDir": {"sizeLimit": COPY_TMP}}], model_label_keys=args.model_label_keys)
        timeout = f"{COPY_TIMEOUT_SECONDS}s"
        self.copy_job = k8s.batch.v1.Job(
            f"{name}-copy",
            metadata=job_metadata(job_name, args.namespace, "image-mirror"),
            spec={"backoffLimit": 3, "activeDeadlineSeconds": COPY_TIMEOUT_SECONDS,
                  "template": {"metadata": {"labels": labels(job_name, "image-mirror")}, "spec": pod}},
            opts=self.child_opts(delete_before_replace=True,
                                 custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)))
        return {key: f"{registry_repository(ref, mirror)}@{ref.digest}" for key, ref in named.items()}
