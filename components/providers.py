"""Explicit providers: default providers are disabled in Pulumi.yaml, so nothing can silently
deploy to whatever cluster or account the ambient environment points at."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config_model import StackConfig


@dataclass(frozen=True)
class Providers:
    kubernetes: k8s.Provider
    # None when the stack manages nothing on AWS (an adopted bucket with keys from secret config and no
    # ECR mirror): a provider resource alone makes every `pulumi up` load and configure the AWS plugin.
    aws: aws.Provider | None

    def opts(self) -> pulumi.ResourceOptions:
        providers: dict[str, pulumi.ProviderResource] = {"kubernetes": self.kubernetes}
        if self.aws is not None:
            providers["aws"] = self.aws
        return pulumi.ResourceOptions(providers=providers)


def manages_aws(cfg: StackConfig) -> bool:
    """Whether the stack registers any AWS resource: the bucket, its read-only IAM user, or ECR mirrors."""
    store = cfg.object_store
    return store.create or store.create_credentials or cfg.images.mirror.kind == "ecr"


def make_providers(cfg: StackConfig, kubeconfig: pulumi.Output[str] | None,
                   access_key_id: pulumi.Output[str] | None,
                   secret_access_key: pulumi.Output[str] | None) -> Providers:
    cluster = cfg.cluster
    k8s_provider = k8s.Provider(
        "kubernetes",
        kubeconfig=kubeconfig if kubeconfig is not None else cluster.kubeconfig_path,
        context=cluster.context,
        namespace=cfg.namespace,
        # Rotating kubeconfig credentials must not replace the provider (and with it every object).
        cluster_identifier=f"{cluster.context or 'default'}",
    )
    if not manages_aws(cfg):
        return Providers(kubernetes=k8s_provider, aws=None)
    store = cfg.object_store
    aws_args: dict = {"region": store.region, "s3_use_path_style": store.addressing_style == "path"}
    if store.endpoint:
        # An S3-compatible service (e.g. Tencent COS, field report 3.2 and 11.1) has no STS, IAM or
        # instance metadata: skip those checks and use the keys from secret config.
        aws_args.update(
            endpoints=[{"s3": store.endpoint}],
            skip_credentials_validation=True,
            skip_requesting_account_id=True,
            skip_metadata_api_check=True,
            skip_region_validation=True,
            access_key=access_key_id,
            secret_key=secret_access_key,
        )
    return Providers(kubernetes=k8s_provider, aws=aws.Provider("aws", **aws_args))
