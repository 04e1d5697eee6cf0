"""Compose one stack: validated config -> components -> outputs. Called by __main__.py under
`pulumi up` and by the offline render under the mock runtime, so both build the same thing."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import labels
from components.combined import CombinedEngine, CombinedEngineArgs
from components.providers import make_providers
from components.scripts import ModelScripts
from components.secrets import SecretsArgs, ServingSecrets
from components.storage import ModelStore, ModelStoreArgs
from components.sync_job import ModelSyncArgs, ModelSyncJob
from components.volume import ModelVolumeArgs, ModelVolumeClaims
from stacks import loader, rules
from stacks.config import Environment, StackConfig


@dataclass(frozen=True)
class StackSecrets:
    api_key: pulumi.Output[str]
    kubeconfig: pulumi.Output[str] | None = None
    object_store_access_key_id: pulumi.Output[str] | None = None
    object_store_secret_access_key: pulumi.Output[str] | None = None
    ceph_user_key: pulumi.Output[str] | None = None


def read_secrets() -> StackSecrets:
    c = pulumi.Config(loader.NAMESPACE)
    return StackSecrets(
        api_key=c.require_secret("apiKey"),
        kubeconfig=c.get_secret("kubeconfig"),
        object_store_access_key_id=c.get_secret("objectStoreAccessKeyId"),
        object_store_secret_access_key=c.get_secret("objectStoreSecretAccessKey"),
        ceph_user_key=c.get_secret("cephUserKey"),
    )


def build(cfg: StackConfig, secrets: StackSecrets) -> dict[str, pulumi.Input]:
    """Register every resource of the stack and return the stack outputs (flat camelCase keys)."""
    providers = make_providers(cfg, secrets.kubeconfig, secrets.object_store_access_key_id,
                               secrets.object_store_secret_access_key)
    opts = providers.opts()
    ns = cfg.namespace
    protect_data = cfg.environment != Environment.dev

    depends: list[pulumi.Resource] = []
    if cfg.cluster.create_namespace:
        depends.append(k8s.core.v1.Namespace(
            "namespace", metadata={"name": ns, "labels": labels(ns, "namespace")},
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=protect_data))))
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))

    store = ModelStore("model-store", ModelStoreArgs(
        store=cfg.object_store, model_prefixes=[m.object_prefix for m in cfg.models],
        protect_data=protect_data, name_prefix=f"llm-serving-{ns}-{pulumi.get_stack()}"), opts)

    ceph = None
    if cfg.model_volume.kind == "cephfs":
        assert cfg.model_volume.cephfs is not None and secrets.ceph_user_key is not None
        ceph = (cfg.model_volume.cephfs.user, secrets.ceph_user_key, cfg.model_volume.cephfs.driver)
    access_key_id = store.access_key_id or secrets.object_store_access_key_id
    secret_access_key = store.secret_access_key or secrets.object_store_secret_access_key
    assert access_key_id is not None and secret_access_key is not None
    serving_secrets = ServingSecrets("secrets", SecretsArgs(
        namespace=ns, api_key=secrets.api_key, object_store_access_key_id=access_key_id,
        object_store_secret_access_key=secret_access_key, ceph=ceph), opts)

    volume = ModelVolumeClaims("model-volume", ModelVolumeArgs(
        volume=cfg.model_volume, namespace=ns, ceph_secret_name=serving_secrets.ceph_secret_name),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[serving_secrets])))
    scripts = ModelScripts("model-scripts", ns, opts)

    engines: list[CombinedEngine] = []
    syncs: dict[str, ModelSyncJob] = {}
    sync_opts = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(depends_on=[volume, scripts, serving_secrets, store]))
    for m in cfg.models:
        if m.directory not in syncs:
            syncs[m.directory] = ModelSyncJob(f"sync-{m.name}", ModelSyncArgs(
                namespace=ns, model=m, store=cfg.object_store, sync=cfg.model_sync, gpu_pool=cfg.gpu_pool,
                bucket_name=cfg.object_store.bucket_name, sync_claim_name=volume.sync_claim_name,
                credentials_secret=serving_secrets.object_store_secret_name,
                scripts_config_map=scripts.config_map_name,
                sync_image=cfg.images.model_sync, verify_image=cfg.images.model_verify), sync_opts)
        sync = syncs[m.directory]
        # GPU pods are created only after the weights are verified: no GPU idles through a download
        # (field report 3.2, optimization 3).
        engines.append(CombinedEngine(m.name, CombinedEngineArgs(
            namespace=ns, model=m, gpu_pool=cfg.gpu_pool, compile_cache=cfg.compile_cache,
            image=cfg.images.vllm, model_claim_name=volume.serving_claim_name,
            model_mount_path=cfg.model_volume.mount_path,
            api_key_secret=serving_secrets.api_key_secret_name,
            scripts_config_map=scripts.config_map_name),
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[sync]))))

    primary = cfg.models[0]
    return {
        "endpoint": engines[0].endpoint,
        "servedModelName": primary.served_model_name,
        "topology": primary.topology,
        "endpoints": {m.served_model_name: e.endpoint for m, e in zip(cfg.models, engines)},
        "namespace": ns,
        "bucketName": store.bucket_name,
        "modelClaimName": volume.serving_claim_name,
        "engineImage": cfg.images.vllm,
        "modelSyncImage": cfg.images.model_sync,
        "modelVerifyImage": cfg.images.model_verify,
        "gpuTotal": rules.gpu_total(cfg),
        "gpuBudget": cfg.gpu_budget,
    }


def run() -> dict[str, pulumi.Input]:
    """Validate the running stack's config (raising loader.ConfigError before any resource is
    registered), then build it."""
    cfg = loader.from_pulumi()
    return build(cfg, read_secrets())
