"""Explicit providers: default providers are disabled in Pulumi.yaml, so nothing can silently
deploy to whatever cluster or account the ambient environment points at."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from config_model import StackConfig

# The provider of the Kubernetes objects Pulumi never deletes (retainOnDelete outside dev: the
# Namespace, the bench-results and OpenWebUI data claims). pulumi-kubernetes v4.29.0+ creates new
# objects client-side and fails with AlreadyExists on an object already in the cluster (v4.32.0
# provider/pkg/await/await.go Creation: server-side apply only with UpsertExistingObjects or a Patch
# resource), so a retained claim could never be managed again once its feature is switched back on, nor
# a retained Namespace by a new stack. upsertExistingObjects turns that create into an apply of the
# existing object. Its documented hazard, a rename whose create adopts the object and whose delete then
# removes it (CHANGELOG 4.29.0), cannot occur here: every resource on this provider is retained, and
# the engine's delete of a retained resource never calls the provider (pulumi/pulumi v3.259.0,
# pkg/resource/deploy/step.go DeleteStep.Apply: "RetainOnDelete ... is a no-op").
RETAINED_PROVIDER = "kubernetes-retained"


@dataclass
class Providers:
    kubernetes: k8s.Provider
    # None when the stack manages nothing on AWS (an adopted bucket with keys from secret config and no
    # ECR mirror): a provider resource alone makes every `pulumi up` load and configure the AWS plugin.
    aws: aws.Provider | None
    # The arguments of `kubernetes`, for the retained provider, registered only when a resource needs it.
    kubernetes_args: dict | None = None
    _retained: k8s.Provider | None = None

    def retained(self) -> k8s.Provider:
        """The same cluster and namespace as `kubernetes`, with upsertExistingObjects. Moving a resource
        from `kubernetes` to it does not replace the resource: the engine asks the new provider's
        DiffConfig (pulumi/pulumi v3.259.0 step_generator.go providerChanged), which drops every
        replacement while clusterIdentifier is set and unchanged (pulumi-kubernetes v4.32.0
        provider/pkg/provider/provider.go DiffConfig)."""
        if self._retained is None:
            assert self.kubernetes_args is not None
            self._retained = k8s.Provider(RETAINED_PROVIDER, **self.kubernetes_args, upsert_existing_objects=True)
        return self._retained

    def opts(self) -> pulumi.ResourceOptions:
        providers: dict[str, pulumi.ProviderResource] = {"kubernetes": self.kubernetes}
        if self.aws is not None:
            providers["aws"] = self.aws
        return pulumi.ResourceOptions(providers=providers)


def manages_aws(cfg: StackConfig) -> bool:
    """Whether the stack registers any AWS resource: the bucket, its read-only IAM user or role, or ECR mirrors."""
    store = cfg.object_store
    return (store.create or store.create_credentials or store.workload_identity is not None
            or cfg.images.mirror.kind == "ecr")


def make_providers(cfg: StackConfig, kubeconfig: pulumi.Output[str] | None,
                   access_key_id: pulumi.Output[str] | None,
                   secret_access_key: pulumi.Output[str] | None) -> Providers:
    cluster = cfg.cluster
    k8s_args = dict(
        kubeconfig=kubeconfig if kubeconfig is not None else cluster.kubeconfig_path,
        context=cluster.context,
        namespace=cfg.namespace,
        # Rotating kubeconfig credentials must not replace the provider (and with it every object).
        cluster_identifier=f"{cluster.context or 'default'}",
    )
    k8s_provider = k8s.Provider("kubernetes", **k8s_args)
    if not manages_aws(cfg):
        return Providers(kubernetes=k8s_provider, aws=None, kubernetes_args=k8s_args)
    store = cfg.object_store
    aws_args: dict = {"region": store.region, "s3_use_path_style": store.addressing_style == "path"}
    if store.endpoint and store.on_aws:
        # AWS S3 through an endpoint of its own (FIPS, dual-stack, VPC): the usual AWS credentials.
        aws_args["endpoints"] = [{"s3": store.endpoint}]
    elif store.endpoint:
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
    return Providers(kubernetes=k8s_provider, aws=aws.Provider("aws", **aws_args), kubernetes_args=k8s_args)
