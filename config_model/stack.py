"""The whole stack config, and the secrets it needs.

Keys in the stack file are camelCase under the `llm-serving:` namespace (Pulumi's convention);
the Python attributes are their snake_case twins. Every field carries a description and a unit in
its name (GiB, Seconds) so that `pulumi config` users and reviewers read the same contract.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from config_model.consumers import SECRET_KEY as CONSUMER_KEYS
from config_model.consumers import Consumer
from config_model.infra import (
    Cluster,
    CompileCache,
    Environment,
    GpuPool,
    ImageRef,
    Images,
    ModelSync,
    ModelVolume,
)
from config_model.object_store import ObjectStore
from config_model.operations import Gateway, NetworkPolicy, Operations, Platform
from config_model.serving import ServedModel
from config_model.types import DnsLabel, Model
from policy.engines import engine_named


class StackConfig(Model):
    """Everything under `llm-serving:` in a stack file, except the secrets."""

    # An enum is strict only against Environment instances; its text comes from the CLI.
    environment: Environment = Field(..., strict=False, description="dev, staging or prod; outside dev, data-holding resources are protected.")
    namespace: DnsLabel = Field(..., description="Namespace of every namespaced object.")
    gpu_budget: int = Field(..., ge=0, description="GPUs this stack may hold at once, rollouts included and "
                            "autoscalers at their maxReplicas.")
    allow_scale_to_zero: bool = Field(
        False, description="Let models[].autoscaling.minReplicas be 0. With no engine pod, the gateway refuses the "
        "model's requests and nothing scales it up again by itself; the first request after an operator scales it "
        "up waits a full cold start.")
    cluster: Cluster = Field(default_factory=Cluster, description="Cluster access.")
    object_store: ObjectStore = Field(..., description="The weights bucket.")
    model_volume: ModelVolume = Field(..., description="The read-only model volume.")
    gpu_pool: GpuPool = Field(default_factory=GpuPool, description="GPU node pool settings.")
    images: Images = Field(..., description="Images pinned by digest.")
    compile_cache: CompileCache = Field(default_factory=CompileCache, description="JIT/compile cache volume.")
    model_sync: ModelSync = Field(default_factory=ModelSync, description="The model sync Job.")
    gateway: Gateway = Field(default_factory=Gateway, description="Gateway routes.")
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy, description="NetworkPolicies of the namespace.")
    consumers: list[Consumer] = Field(
        default_factory=list, description="Teams that call the models, each with its own key (secret config "
        "consumerKeys.<name>), its namespace and its request limit (docs/consumers.md).")
    platform: Platform = Field(default_factory=Platform, description="Cluster prerequisites.")
    operations: Operations = Field(default_factory=Operations, description="Day-2 Jobs, monitoring, OpenWebUI, disruption budgets.")
    models: list[ServedModel] = Field(..., min_length=1, description="Served models; the first is the stack's primary endpoint.")

    @model_validator(mode="after")
    def _groups_span_nodes(self) -> StackConfig:
        """A model whose parallel size (TP x PP, x DP for vLLM) is larger than one node of the pool spans
        nodes: an unset gpusPerPod is then a whole node, and each replica is a group of parallel size /
        gpusPerNode pods (components/topologies group_size). A size that is no whole number of nodes keeps
        it unset, and stacks/rules/multinode.py refuses it naming the fields. The value is derived, not
        declared: it stays out of model_fields_set."""
        per_node = self.gpu_pool.gpus_per_node
        for m in self.models:
            engine = engine_named(m.engine)
            size = engine.parallel_size(engine.section(m))
            if m.gpus_per_pod is None and size > per_node and size % per_node == 0:
                object.__setattr__(m, "gpus_per_pod", per_node)
        return self

    @staticmethod
    def image_path(key: str) -> str:
        """The stack-file path of an image key of all_images()."""
        return "operations.openWebUI.image" if key == "openWebUI" else f"images.{key}"

    def all_images(self) -> dict[str, ImageRef]:
        """Every image the stack runs, by stack-file key: the images section plus optional apps."""
        named = self.images.named()
        if self.operations.open_webui.enabled and self.operations.open_webui.image is not None:
            named["openWebUI"] = self.operations.open_webui.image
        return named


# Secret config keys: never in the model above, always read with require_secret.
SECRET_KEYS = {
    "apiKey": "API key clients must present to the engine (env VLLM_API_KEY).",
    CONSUMER_KEYS: "Each consumer's secret, a map by consumer name set member by member; the consumer's token "
                   "is `<name>.<secret>` (docs/consumers.md).",
    "kubeconfig": "kubeconfig contents, when cluster.kubeconfigPath is not used.",
    "objectStoreAccessKeyId": "Read-only access key id of the object store, when the stack creates none "
                              "(objectStore.createCredentials false) and uses no objectStore.workloadIdentity.",
    "objectStoreSecretAccessKey": "Secret access key of that read-only key.",
    "cephUserKey": "Key of the Ceph user of modelVolume.cephfs.user.",
    "registryDockerConfigJson": "Docker config JSON with credentials for images.mirror.registry.host (pods pull with it, the copy Job pushes with it).",
}


def secret_command(key: str, namespace: str) -> str:
    """How a secret setting is set: a map (consumerKeys) member by member with --path (`consumerKeys.<name>`
    names the member; the bare key gives `<name>`), any other whole."""
    root, _, member = key.partition(".")
    if root == CONSUMER_KEYS:
        return f"pulumi config set --secret --path '{namespace}:{root}.{member or '<name>'}' <secret>"
    return f"pulumi config set --secret {namespace}:{key} <value>"


def required_secret_keys(cfg: StackConfig) -> list[str]:
    """Secret keys the given config cannot do without (kubeconfig is always optional)."""
    keys = ["apiKey"] + ([CONSUMER_KEYS] if cfg.consumers else [])
    store = cfg.object_store
    if not store.create_credentials and store.workload_identity is None:
        keys += ["objectStoreAccessKeyId", "objectStoreSecretAccessKey"]
    if cfg.model_volume.kind == "cephfs":
        keys.append("cephUserKey")
    if cfg.images.mirror.kind == "registry":
        keys.append("registryDockerConfigJson")
    return keys
