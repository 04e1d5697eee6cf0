"""Where the stack runs and what it pulls: cluster, bucket, volumes, GPU pool, images, caches, sync Job."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.names import (
    NAME_ERROR,
    ExtendedResourceName,
    GpuNodeLabelKey,
    LabelKey,
    LabelValue,
    MountPath,
    NonEmptyLabelValue,
    StorageClassName,
    checked,
)
from config_model.types import (
    DnsLabel,
    KubeconfigPath,
    Model,
    NonEmpty,
    stack_key,
    text,
)
from policy import gpus


class Environment(str, Enum):
    dev = "dev"
    staging = "staging"
    prod = "prod"


class Cluster(Model):
    """How to reach the Kubernetes cluster. The kubeconfig itself, if not a path, is the secret
    `llm-serving:kubeconfig`."""

    kubeconfig_path: KubeconfigPath | None = Field(
        None, description="Path to a kubeconfig file; unset means the secret llm-serving:kubeconfig, "
        "or the ambient kubeconfig when neither is set.")
    context: str | None = Field(None, description="kubeconfig context to use.")
    kubernetes_version: text(r"^1\.(2[9]|3[0-7])$", "a supported minor version, '1.29' to '1.37' (quoted)") = Field(
        "1.33", description="Minor version of the cluster (1.29 to 1.37 are supported); decides "
        "which volume drivers are allowed and which schema the manifests are validated against.")
    create_namespace: bool = Field(True, description="Create the namespace; false adopts an existing one.")



class CephFsVolume(Model):
    """A static CephFS volume, field report 3.3. `csi` is ceph-csi's static volume; `in-tree` is the
    legacy `cephfs:` volume source, removed from Kubernetes in 1.31."""

    driver: Literal["csi", "in-tree"] = Field("csi", description="Volume driver: ceph-csi (csi) or the legacy in-tree plugin.")
    monitors: list[NonEmpty] = Field(default_factory=list, description="Ceph monitors host:port (in-tree only; ceph-csi reads them from its cluster config).")
    cluster_id: str | None = Field(None, description="ceph-csi clusterID (csi only).")
    fs_name: str | None = Field(None, description="CephFS file system name (csi only).")
    path: text(r"^/", "an absolute path") = Field(..., description="Absolute path of the model root inside CephFS.")
    user: NonEmpty = Field(..., description="Ceph user; its key is the secret llm-serving:cephUserKey.")


class NfsVolume(Model):
    server: NonEmpty = Field(..., description="NFS server host name or address.")
    path: text(r"^/", "an absolute path") = Field(..., description="Exported path of the model root.")


class ExistingClaim(Model):
    claim_name: DnsLabel = Field(..., description="Existing PersistentVolumeClaim holding the model root. "
                                 "Serving pods mount it read-only; the sync Job writes to it.")


class ModelVolume(Model):
    """Where the weights live inside the cluster: reusable storage, never emptyDir (field report 3.2,
    11.1: an emptyDir re-downloads about 156 GiB on every pod re-creation while 8 GPUs wait)."""

    kind: Literal["cephfs", "nfs", "existingClaim"] = Field(..., description="Volume source of the model root.")
    capacity_gib: int = Field(400, gt=0, description="Capacity of the static volumes in GiB (the default model is about 156 GiB).")
    mount_path: MountPath = Field(
        "/models", description="Where serving pods see the model root: absolute and normalized, apart from the "
        "mounts the program adds (scripts, caches, /dev/shm, /tmp).")
    cephfs: CephFsVolume | None = Field(None, description="Settings when kind is cephfs.")
    nfs: NfsVolume | None = Field(None, description="Settings when kind is nfs.")
    existing_claim: ExistingClaim | None = Field(None, description="Settings when kind is existingClaim.")


class Toleration(Model):
    key: checked(k8s.label_key, base=NonEmpty) = Field(..., description="Taint key (a label key).")
    operator: Literal["Equal", "Exists"] = Field("Exists", description="Toleration operator.")
    value: LabelValue | None = Field(None, description="Taint value (Equal only; a label value).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Taint effect; unset tolerates all.")

    @field_validator("value")
    @classmethod
    def _no_value_with_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        # pkg/apis/core/validation ValidateTolerations: "value must be empty when `operator` is 'Exists'".
        if value and info.data.get("operator") == "Exists":
            raise PydanticCustomError(NAME_ERROR, "must be unset when operator is 'Exists' (the API server refuses "
                                      "a value with Exists); use operator 'Equal' to match this value")
        return value


class Rdma(Model):
    resource_name: ExtendedResourceName = Field(..., description="Extended resource of the RDMA devices, e.g. rdma/rdma_shared_device_a.")
    count: int = Field(1, ge=1, le=16, description="RDMA devices per engine pod.")


# NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME and NCCL_IB_HCA lists: comma-separated names or prefixes, the list
# optionally led by '^' (exclude) or '=' (exact match) (NCCL environment variables documentation).
_IFACES = r"^[\^=]?[A-Za-z0-9_.-]{1,15}(,[A-Za-z0-9_.-]{1,15})*$"
_HCAS = r"^[\^=]?[A-Za-z0-9_.-]{1,64}(:[0-9]{1,3})?(,[A-Za-z0-9_.-]{1,64}(:[0-9]{1,3})?)*$"


class NodeNetwork(Model):
    """How the pods of a model spanning nodes reach each other (issue 29; field report 2.1: past one node,
    RDMA, NCCL topology, failure domains and gang scheduling need their own validation). NCCL carries the
    tensor and pipeline traffic over RDMA where the pool declares it, else over TCP sockets, NCCL's own fallback
    (plan.md says which); Gloo carries the engines' CPU-side setup. Read by the group pods only: one node's
    engine talks NVLink/PCIe."""

    socket_interface: text(_IFACES, "interface names or prefixes, comma-separated, optionally led by '^' or '='") | None = Field(
        None, description="NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME of the group pods: the interface (or prefix list) "
        "their sockets bind, e.g. eth0; unset: NCCL's and Gloo's own choice (NCCL skips lo and docker*, and may pick an "
        "interface the other node cannot reach).")
    ib_hca: text(_HCAS, "HCA names with optional :port, comma-separated, optionally led by '^' or '='") | None = Field(
        None, description="NCCL_IB_HCA of the group pods: the InfiniBand/RoCE adapters NCCL uses, e.g. mlx5_0:1,mlx5_1:1; "
        "needs rdma.")
    rdma: Rdma | None = Field(None, description="RDMA devices each group pod requests (and IPC_LOCK to pin memory "
                              "for them, nothing broader); unset: NCCL runs over TCP sockets.")
    topology_key: LabelKey | None = Field(
        None, description="A node label whose value names a topology domain (a rack, a network block such as "
        "cloud.google.com/gce-topology-block, or topology.kubernetes.io/zone): every pod of one replica lands on nodes "
        "of one domain. Unset: anywhere in the pool.")


# The scheduler names their upstream installs register: scheduler-plugins' as-a-second-scheduler Helm chart
# (sigs.k8s.io/scheduler-plugins v0.31.8 manifests/install/charts/as-a-second-scheduler/values.yaml
# scheduler.name) and Volcano's, as LWS's Volcano sample sets it (kubernetes-sigs/lws v0.10.0
# docs/examples/sample/gang-scheduling/lws-sample-volcano.yaml: "Need to set the scheduler name to Volcano").
GANG_SCHEDULER_NAMES = {"coscheduling": "scheduler-plugins-scheduler", "volcano": "volcano"}


class GangScheduling(Model):
    """How the pods of one replica of a model spanning nodes are scheduled together or not at all (issue
    29): without it, two groups can each bind part of their pods and hold those GPUs while neither starts.
    Each orchestrator creates the scheduler's pod group itself (docs/topologies.md, multi-node): AIBrix
    StormService and RBG a scheduler-plugins PodGroup (coscheduling), LeaderWorkerSet v0.10.0 a Volcano
    PodGroup when its controller is configured for Volcano."""

    scheduler: Literal["coscheduling", "volcano", "none"] | None = Field(
        None, description="coscheduling (scheduler-plugins' Coscheduling plugin, PodGroup scheduling.x-k8s.io/"
        "v1alpha1), volcano, or none: no gang (a group may bind partly and hold its GPUs; plan.md says so). "
        "Required when a model spans nodes.")
    scheduler_name: text(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", "a scheduler name (a DNS subdomain)") | None = Field(
        None, description="spec.schedulerName of the group pods: the name the cluster's gang scheduler runs under; "
        "unset: scheduler-plugins-scheduler for coscheduling (scheduler-plugins' second-scheduler chart), volcano "
        "for volcano.")
    timeout_seconds: int | None = Field(
        None, ge=1, le=86400, description="How long a group's pods wait for the rest of the group before the "
        "scheduler gives up and retries (PodGroup scheduleTimeoutSeconds; coscheduling only); unset: the "
        "scheduler's own default.")

    @property
    def pod_scheduler_name(self) -> str | None:
        """The group pods' spec.schedulerName; None: the cluster's default scheduler."""
        if self.scheduler in (None, "none"):
            return None
        return self.scheduler_name or GANG_SCHEDULER_NAMES[self.scheduler]


class GpuPool(Model):
    """The GPU nodes serving pods run on: what hardware they are (gpuType, policy/gpus.py), where they are
    (nodeSelector, tolerations) and what one node holds (gpusPerNode, nodeCpu, nodeMemoryGiB). The engine
    pods' CPU, memory and /dev/shm follow from it (config_model/resources.py pool_pod)."""

    gpu_type: text(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", "a GPU type name such as H20 or H100-80GB") | None = Field(
        None, description="The pool's GPU, one of the catalogue (policy/gpus.py): " + gpus.listing() + ". It gives the "
        "GPU memory the memory-fit rule counts, gpuArchitecture and the default nodeSelector. Unset: the catalogue "
        "entry whose product label nodeSelector names (nvidia.com/gpu.product); a type the catalogue lacks needs "
        "gpuMemoryGiB, gpuArchitecture and nodeSelector.")
    gpu_memory_gib: float | None = Field(
        None, gt=0, le=4096, description="Memory of one GPU in GiB as the card reports it (nvidia-smi memory.total / "
        "1024); unset: gpuType's. Required for a gpuType the catalogue lacks.")
    node_selector: dict[GpuNodeLabelKey, NonEmptyLabelValue] | None = Field(
        None, description="Node labels a GPU node must carry; unset: {nvidia.com/gpu.product: <gpuType's product "
        "label>} (GPU Feature Discovery's label; the catalogue entry says which variant, SXM or PCIe, it is). Their "
        "keys also keep the sync Job off GPU nodes.")
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        description="Tolerations for the GPU node taints.")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs on one node of the pool.")
    network: NodeNetwork = Field(default_factory=NodeNetwork, description="How the pods of a model spanning nodes "
                                 "reach each other: sockets, RDMA adapters, topology domain (docs/topologies.md).")
    gang_scheduling: GangScheduling = Field(default_factory=GangScheduling, description="How the pods of a model "
                                            "spanning nodes are scheduled together (docs/topologies.md).")
    node_count: int | None = Field(
        None, ge=1, le=4096, description="Nodes in the pool; when set, a model spanning more nodes per replica is "
        "refused, and plan.md says how many of them the stack's pods may hold at once and whether one is left to spare "
        "for the pods of a lost or drained node.")
    gpu_architecture: text(r"^sm[0-9]{2,3}a?$", "a CUDA architecture such as 'sm90'") | None = Field(
        None, description="CUDA architecture of the pool; part of the JIT cache key. Unset: gpuType's (H20, H100 "
        "and H200 sm90, A100 sm80, L40S and L4 sm89, B200 sm100).")
    driver_version: text(r"^[0-9][0-9.]*$", "an NVIDIA driver version such as '570.133.20' (quoted)") | None = Field(
        None, description="NVIDIA driver on the pool's nodes; part of the JIT cache key (field report 12.2).")
    node_cpu: int | None = Field(
        None, ge=1, description="Allocatable CPU cores of one node (kubectl get node -o "
        "jsonpath='{.status.allocatable.cpu}', less what other DaemonSets request). When set, an engine pod's CPU "
        "defaults to its share of the node (its GPUs / gpusPerNode of nodeCpu less one core for this stack's pre-pull "
        "pods), request and limit alike, and the pods one node may hold must fit in it.")
    node_memory_gib: int | None = Field(
        None, ge=1, description="Allocatable memory of one node in GiB (kubectl get node -o "
        "jsonpath='{.status.allocatable.memory}', less what other DaemonSets take; this stack's pre-pull pods are counted). "
        "When set, an engine pod's memory defaults to its share of the node (its GPUs / gpusPerNode of nodeMemoryGiB "
        "less 1 GiB for the pre-pull pods, less its KV offload and sidecars), request and limit alike, with a quarter "
        "of it as /dev/shm; required when a model offloads KV cache, and the engine pods that may share a node must "
        "fit in it with their memory limits.")
    cpu_request: int | None = Field(
        None, ge=1, description="CPU cores requested per engine pod; unset: the pod's share of nodeCpu, or without "
        "nodeCpu field report 2.1's 8-GPU pod scaled to the pod's GPUs (8 cores per GPU).")
    cpu_limit: int | None = Field(
        None, ge=1, description="CPU core limit per engine pod; unset: the request when derived from nodeCpu, else 16 "
        "cores per GPU (field report 2.1: 128 for 8 GPUs).")
    memory_request_gib: int | None = Field(
        None, ge=1, description="Memory requested per engine pod in GiB; unset: the pod's share of nodeMemoryGiB, else "
        "40 GiB per GPU (field report 2.1: 320 for 8 GPUs).")
    memory_limit_gib: int | None = Field(
        None, ge=1, description="Memory limit per engine pod in GiB; unset: the request when derived from "
        "nodeMemoryGiB, else 64 GiB per GPU (field report 2.1: 512 for 8 GPUs).")
    shm_size_gib: int | None = Field(
        None, ge=1, description="Size of /dev/shm (a Memory emptyDir) in GiB, at least 8 GiB per GPU; unset: a quarter "
        "of the pod's memory limit when derived from nodeMemoryGiB, else 16 GiB per GPU (field report 2.1: 128 for 8 GPUs).")

    @model_validator(mode="before")
    @classmethod
    def _from_gpu_type(cls, data: Any) -> Any:
        """gpuType unset: the catalogue entry the nodeSelector's product label names. A catalogue gpuType
        fills an unset nodeSelector and gpuArchitecture; anything else is left to stacks/rules/hardware.py,
        which names the field."""
        if not isinstance(data, dict):
            return data

        def given(field: str) -> Any:
            return data.get(stack_key(field), data.get(field))

        def has(field: str) -> bool:
            return stack_key(field) in data or field in data
        selector = given("node_selector")
        if not has("gpu_type") and isinstance(selector, dict):
            entry = gpus.by_product(selector.get(gpus.PRODUCT_LABEL))
            if entry is not None:
                data = {**data, "gpuType": entry.name}
        entry = gpus.named(given("gpu_type")) if isinstance(given("gpu_type"), str) else None
        if entry is None:
            return data
        filled = {}
        if not has("node_selector"):
            filled["nodeSelector"] = {gpus.PRODUCT_LABEL: entry.product}
        if not has("gpu_architecture"):
            filled["gpuArchitecture"] = entry.architecture
        return {**data, **filled}

    @property
    def gpu(self) -> gpus.GpuType | None:
        """The catalogue entry of gpuType, if it names one."""
        return gpus.named(self.gpu_type)

    @property
    def memory_per_gpu_gib(self) -> float | None:
        """One GPU's memory: gpuMemoryGiB, else the catalogue's; None when neither says."""
        if self.gpu_memory_gib is not None:
            return self.gpu_memory_gib
        return self.gpu.memory_gib if self.gpu is not None else None


IMAGE_UPSTREAM = text(r"^[a-z0-9][A-Za-z0-9._\-/:]*$",
                      "an image reference registry/repository[:tag] without a digest, e.g. vllm/vllm-openai:v0.26.0-cu129")
SHA256_DIGEST = text(r"^sha256:[0-9a-f]{64}$", "a digest: sha256: and 64 lowercase hex digits")


class ImageRef(Model):
    """An upstream image and the digest it must resolve to. The tag documents; the digest pins."""

    upstream: IMAGE_UPSTREAM = Field(..., description="Upstream reference, repository[:tag], no digest.")
    digest: SHA256_DIGEST = Field(..., description="sha256 digest the image is pinned to (field report 11.3: verify it, then pin it).")
    cuda_version: text(r"^[0-9]+\.[0-9]+$", "a CUDA version such as '12.9' (quoted)") | None = Field(
        None, description="CUDA runtime inside the image; part of the JIT cache key (field report 12.2).")


class RayImageRef(ImageRef):
    """The Ray-enabled vLLM image P/D on RayClusterFleet needs: an image of its own, with Ray
    installed at build time rather than pip-installed at every start (field report 11.3)."""

    ray_version: text(r"^[0-9]+\.[0-9]+\.[0-9]+$", "a Ray version such as '2.47.1' (quoted)") = Field(
        ..., description="The ray[default] version baked into the image (2.47.1 in the field report).")


class EcrMirror(Model):
    repository_prefix: DnsLabel = Field("llm-serving", description="Prefix of the ECR repositories and pull-through cache rules.")
    upstream_credential_arns: dict[NonEmpty, NonEmpty] = Field(
        default_factory=dict, description="Secrets Manager ARN (name prefixed ecr-pullthroughcache/) per upstream registry "
        "that needs one for pull-through caching, keyed by registry host (docker.io, ghcr.io).")
    keep_images: int = Field(30, ge=5, le=1000, description="Images kept per repository by the lifecycle policy.")


class RegistryMirror(Model):
    host: text(r"^[a-z0-9][a-z0-9.\-]*(:[0-9]+)?$", "a registry host[:port]") = Field(..., description="Internal registry host, e.g. registry.internal:5000.")
    repository_prefix: text(r"^[a-z0-9][a-z0-9._\-/]*[a-z0-9]$", "a repository path prefix") = Field(
        "llm-serving", description="Path under the host where mirrored repositories live.")
    copy_image: ImageRef = Field(..., description="Image with skopeo for the copy Job; pulled from upstream, not the mirror.")


class Mirror(Model):
    kind: Literal["none", "ecr", "registry"] = Field("none", description="none pulls from upstream; ecr or registry pulls from a mirror.")
    ecr: EcrMirror | None = Field(None, description="Settings when kind is ecr.")
    registry: RegistryMirror | None = Field(None, description="Settings when kind is registry (credentials: secret llm-serving:registryDockerConfigJson).")


class Images(Model):
    """Container images, each an upstream reference plus a sha256 digest: a tag can move under a
    running fleet, a digest cannot (field report 11.3)."""

    vllm: ImageRef | None = Field(None, description="vLLM OpenAI server image, required by vllm models and by "
                                  "operations.loadTest (`vllm bench serve`); DeepSeek V4 needs a release that supports "
                                  "it (field report 2.2).")
    sglang: ImageRef | None = Field(None, description="SGLang image, required by sglang models (field report 12: v0.5.17, CUDA 13.0).")
    vllm_ray: RayImageRef | None = Field(None, description="Ray-enabled vLLM image for RayClusterFleet P/D.")
    endpoint_picker: ImageRef | None = Field(
        None, description="The Gateway API Inference Extension's endpoint picker, required by gateway.routingLayer "
        "inferencePool: registry.k8s.io/gateway-api-inference-extension/epp at v1.5.0 (policy/endpoint_picker.py).")
    model_sync: ImageRef = Field(..., description="Image with the AWS CLI, for the model sync Job.")
    model_verify: ImageRef = Field(..., description="Image with python3, for the integrity check and ready marker.")
    mirror: Mirror = Field(default_factory=Mirror, description="Where pods pull the images from.")

    def named(self) -> dict[str, ImageRef]:
        """Every configured image by its stack-file key."""
        return {stack_key(name): ref for name in type(self).model_fields
                if isinstance(ref := getattr(self, name), ImageRef)}


# The claim the stack makes for compileCache.kind claim, unless claimName names another.
COMPILE_CACHE_CLAIM = "llm-compile-cache"


class CompileCache(Model):
    """Writable JIT/compile cache, kept apart from the read-only model (field report 3.1, 12.2). Every
    engine writes under its own directory of it, keyed by image, CUDA, driver, GPU architecture and
    arguments (components/pod_template.py compile_cache_key), so one claim serves every engine pod."""

    kind: Literal["emptyDir", "claim", "existingClaim"] = Field(
        "emptyDir", description="emptyDir (lost with the pod); claim: a ReadWriteMany claim the stack creates and "
        "keeps outside dev (beyond `pulumi destroy`), shared by restarts and every engine pod; existingClaim: a "
        "writable claim made beforehand, shared the same way.")
    claim_name: DnsLabel | None = Field(None, description="The claim: required when kind is existingClaim; with kind "
                                        f"claim, the name the stack gives it (default {COMPILE_CACHE_CLAIM}).")
    storage_class_name: StorageClassName | None = Field(
        None, description="StorageClass of the claim the stack creates (kind claim, required then): one that "
        "provisions ReadWriteMany volumes (CephFS, NFS, EFS and the like).")
    size_gib: int = Field(50, gt=0, description="Size of the cache in GiB: the emptyDir's size limit, or the storage "
                          "the claim of kind claim requests.")

    @property
    def claim(self) -> str | None:
        """The claim the engine pods mount, or None for an emptyDir."""
        if self.kind == "claim":
            return self.claim_name or COMPILE_CACHE_CLAIM
        return self.claim_name if self.kind == "existingClaim" else None


class ModelSync(Model):
    """The CPU-only Job that fills the model volume from the bucket (field report 3.2)."""

    max_concurrent_requests: int = Field(20, ge=1, le=256, description="AWS CLI s3 max_concurrent_requests (field report 3.2 suggests trying 10, 20, 32).")
    backoff_limit: int = Field(4, ge=0, le=20, description="Pod retries of the Job (Kubernetes backs off exponentially between them).")
    sync_attempts: int = Field(3, ge=1, le=10, description="`aws s3 sync` attempts inside one pod, with doubling sleeps between them.")
    active_deadline_seconds: int = Field(7200, ge=600, description="Upper bound for one Job run in seconds (one 156 GiB download took about 6 min).")
    cpu_request: int = Field(4, ge=1, description="CPU cores of each of the Job's two containers, the download and "
                             "the verifier beside it (its hashing threads); the pod requests twice this.")
    memory_request_gib: int = Field(8, ge=1, description="Memory of each of the Job's two containers in GiB; the pod "
                                    "requests twice this.")
    node_selector: dict[LabelKey, NonEmptyLabelValue] = Field(default_factory=dict, description="Labels of the CPU nodes the Job may use.")
