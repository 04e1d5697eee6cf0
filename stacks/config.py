"""The typed stack configuration: one pydantic model of everything a stack file may say.

Keys in the stack file are camelCase under the `llm-serving:` namespace (Pulumi's convention);
the Python attributes are their snake_case twins. Every field carries a description and a unit in
its name (GiB, Seconds) so that `pulumi config` users and reviewers read the same contract.

Single-field rules (types, ranges, patterns) live here. Rules that relate several fields, such as
GPUs against the budget, live in `stacks/rules.py` so that every broken rule is reported at once.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# A Kubernetes label value, non-empty.
LABEL_VALUE = r"^[A-Za-z0-9]([A-Za-z0-9._\-]{0,61}[A-Za-z0-9])?$"
# Pattern -> what it allows, in words, for error messages (stacks/loader.py).
PATTERN_MEANING: dict[str, str] = {}


def text(pattern: str, meaning: str) -> Any:
    """A string type constrained by `pattern`, whose error message says `meaning`."""
    PATTERN_MEANING[pattern] = meaning
    return Annotated[str, StringConstraints(pattern=pattern)]


DnsLabel = text(DNS_LABEL, "a DNS label: 1-63 lowercase letters, digits or '-', alphanumeric at both ends")
NonEmpty = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


# The error type of a credential found in a plain field: stacks/loader.py never prints its value.
CREDENTIAL_ERROR = "credential_in_plain_field"
# Any userinfo in a URL (RFC 3986 section 3.2.1): user:password@ or a bare token@.
_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@")


def _no_userinfo(value: Any) -> Any:
    """Plain config is stored and shown in plaintext (stack file, state, `pulumi config`): a URL
    carrying credentials would leak them, so it is refused before its pattern is even checked."""
    if isinstance(value, str) and _USERINFO.match(value.strip()):
        raise PydanticCustomError(CREDENTIAL_ERROR, "must not carry credentials (userinfo before '@'): plain "
                                  "config reaches the stack file and the state unencrypted; give the bare host and "
                                  "keep keys in secret config")
    return value


def _path_not_contents(value: Any) -> Any:
    """A kubeconfig pasted here instead of into the secret would sit in plaintext in the stack file."""
    if isinstance(value, str) and ("\n" in value or "\r" in value or value.lstrip().startswith("{") or re.search(
            r"apiVersion|\bclusters\b\W*:|\busers\b\W*:|-data\W*:|\btoken\W*:", value)):
        raise PydanticCustomError(CREDENTIAL_ERROR, "must be a path to a kubeconfig file, not its contents: set "
                                  "the contents with pulumi config set --secret llm-serving:kubeconfig instead")
    return value


def url_text(pattern: str, meaning: str) -> Any:
    """A URL string type: `pattern` as in text(), and never any userinfo."""
    return Annotated[text(pattern, meaning), BeforeValidator(_no_userinfo)]


def stack_key(field_name: str) -> str:
    """snake_case attribute -> camelCase stack-file key, keeping the unit spelled GiB."""
    return re.sub(r"Gib(?=[A-Z]|$)", "GiB", to_camel(field_name))


class Model(BaseModel):
    """Base for every config section: camelCase keys, unknown keys refused, immutable."""

    # strict: the Pulumi CLI reads stack files as YAML 1.2, where `off` and "8" are text; lax
    # validation would turn them back into false and 8 (and true into 1).
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=stack_key,
        populate_by_name=True,
        validate_default=True,
    )


class Environment(str, Enum):
    dev = "dev"
    staging = "staging"
    prod = "prod"


class Cluster(Model):
    """How to reach the Kubernetes cluster. The kubeconfig itself, if not a path, is the secret
    `llm-serving:kubeconfig`."""

    kubeconfig_path: Annotated[str, BeforeValidator(_path_not_contents)] | None = Field(
        None, description="Path to a kubeconfig file; unset means the secret llm-serving:kubeconfig, "
        "or the ambient kubeconfig when neither is set.")
    context: str | None = Field(None, description="kubeconfig context to use.")
    kubernetes_version: text(r"^1\.(2[9]|3[0-7])$", "a supported minor version, '1.29' to '1.37' (quoted)") = Field(
        "1.33", description="Minor version of the cluster (1.29 to 1.37 are supported); decides "
        "which volume drivers are allowed and which schema the manifests are validated against.")
    create_namespace: bool = Field(True, description="Create the namespace; false adopts an existing one.")


class ObjectStore(Model):
    """The bucket that holds the weights (field report 3.2)."""

    bucket_name: text(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$", "an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'") = Field(
        ..., description="Bucket name (S3 naming rules).")
    create: bool = Field(True, description="Create and manage the bucket; false adopts an existing "
                         "bucket by name without managing it (the usual choice for non-AWS endpoints).")
    region: NonEmpty = Field("us-east-1", description="Region of the bucket or of the S3-compatible service.")
    endpoint: url_text(r"^https://[^\s/]+/?$", "an https:// endpoint without a path") | None = Field(
        None, description="S3-compatible endpoint (for example Tencent COS), https only. Unset means AWS S3. "
        "With virtual-hosted addressing give the service endpoint; the bucket is prefixed by the client.")
    addressing_style: Literal["virtual", "path"] = Field(
        "virtual", description="S3 addressing style. Some S3-compatible stores (COS) refuse path-style "
        "requests with PathStyleDomainForbidden (field report 3.2, 11.1).")
    create_credentials: bool = Field(
        True, description="On AWS, create a dedicated IAM user and key limited to reading the model "
        "prefix. Must be false for a non-AWS endpoint: keys then come from secret config "
        "llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey.")
    kms_key_arn: str | None = Field(None, description="KMS key for server-side encryption; unset uses SSE-S3 (AES256).")


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
    mount_path: text(r"^/[^\s]*$", "an absolute path without spaces") = Field(
        "/models", description="Where serving pods see the model root.")
    cephfs: CephFsVolume | None = Field(None, description="Settings when kind is cephfs.")
    nfs: NfsVolume | None = Field(None, description="Settings when kind is nfs.")
    existing_claim: ExistingClaim | None = Field(None, description="Settings when kind is existingClaim.")


class Toleration(Model):
    key: NonEmpty = Field(..., description="Taint key.")
    operator: Literal["Equal", "Exists"] = Field("Exists", description="Toleration operator.")
    value: str | None = Field(None, description="Taint value (Equal only).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Taint effect; unset tolerates all.")


class GpuPool(Model):
    """The GPU nodes serving pods run on; defaults are field report 2.1 (8 x H20 96 GB)."""

    node_selector: dict[NonEmpty, NonEmpty] = Field(
        default_factory=lambda: {"nvidia.com/gpu.product": "NVIDIA-H20"},
        description="Node labels a GPU node must carry. Their keys also keep the sync Job off GPU nodes.")
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
        description="Tolerations for the GPU node taints.")
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs on one node of the pool.")
    gpu_architecture: text(r"^sm[0-9]{2,3}a?$", "a CUDA architecture such as 'sm90'") = Field(
        "sm90", description="CUDA architecture of the pool (H20 is Hopper, sm90); part of the JIT cache key.")
    driver_version: text(r"^[0-9][0-9.]*$", "an NVIDIA driver version such as '570.133.20' (quoted)") | None = Field(
        None, description="NVIDIA driver on the pool's nodes; part of the JIT cache key (field report 12.2).")
    cpu_request: int = Field(64, ge=1, description="CPU cores requested per engine pod (field report 2.1).")
    cpu_limit: int = Field(128, ge=1, description="CPU core limit per engine pod.")
    memory_request_gib: int = Field(320, ge=1, description="Memory requested per engine pod in GiB.")
    memory_limit_gib: int = Field(512, ge=1, description="Memory limit per engine pod in GiB.")
    shm_size_gib: int = Field(128, ge=1, description="Size of /dev/shm (a Memory emptyDir) in GiB; at least 8 GiB per GPU.")


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

    vllm: ImageRef = Field(..., description="vLLM OpenAI server image (needs DeepSeek V4 support, field report 2.2).")
    sglang: ImageRef | None = Field(None, description="SGLang image, required by sglang models (field report 12: v0.5.17, CUDA 13.0).")
    vllm_ray: RayImageRef | None = Field(None, description="Ray-enabled vLLM image for RayClusterFleet P/D.")
    model_sync: ImageRef = Field(..., description="Image with the AWS CLI, for the model sync Job.")
    model_verify: ImageRef = Field(..., description="Image with python3, for the integrity check and ready marker.")
    mirror: Mirror = Field(default_factory=Mirror, description="Where pods pull the images from.")

    def named(self) -> dict[str, ImageRef]:
        """Every configured image by its stack-file key."""
        return {stack_key(name): ref for name in type(self).model_fields
                if isinstance(ref := getattr(self, name), ImageRef)}


class CompileCache(Model):
    """Writable JIT/compile cache, kept apart from the read-only model (field report 3.1, 12.2)."""

    kind: Literal["emptyDir", "existingClaim"] = Field(
        "emptyDir", description="emptyDir (lost with the pod) or an existing writable claim shared by restarts.")
    claim_name: DnsLabel | None = Field(None, description="Claim name when kind is existingClaim.")
    size_gib: int = Field(50, gt=0, description="Size limit of the emptyDir cache in GiB.")


class ModelSync(Model):
    """The CPU-only Job that fills the model volume from the bucket (field report 3.2)."""

    max_concurrent_requests: int = Field(20, ge=1, le=256, description="AWS CLI s3 max_concurrent_requests (field report 3.2 suggests trying 10, 20, 32).")
    backoff_limit: int = Field(4, ge=0, le=20, description="Pod retries of the Job (Kubernetes backs off exponentially between them).")
    sync_attempts: int = Field(3, ge=1, le=10, description="`aws s3 sync` attempts inside one pod, with doubling sleeps between them.")
    active_deadline_seconds: int = Field(7200, ge=600, description="Upper bound for one Job run in seconds (one 156 GiB download took about 6 min).")
    cpu_request: int = Field(4, ge=1, description="CPU cores for download and hashing.")
    memory_request_gib: int = Field(8, ge=1, description="Memory for download and hashing in GiB.")
    node_selector: dict[NonEmpty, NonEmpty] = Field(default_factory=dict, description="Labels of the CPU nodes the Job may use.")


class Rollout(Model):
    """How engine pods are replaced. A surge pod would need a full set of GPUs that the budget does
    not have, so surge is fixed at 0 (field report 11.2 saw the count overshoot)."""

    strategy: Literal["Recreate", "RollingUpdate"] | None = Field(
        None, description="Recreate (Deployment only) or RollingUpdate with maxSurge 0; unset means Recreate for a "
        "Deployment and RollingUpdate for StormService and RoleBasedGroup, which have no Recreate.")
    max_unavailable: int = Field(1, ge=1, description="Pods taken down at once by a RollingUpdate.")
    max_surge: int = Field(0, ge=0, description="Extra pods during a rollout. Must be 0: the engine rollout never raises the GPU count.")


class Vllm(Model):
    """vLLM engine arguments; defaults are the validated command of field report section 5."""

    tensor_parallel_size: int = Field(8, ge=1, le=16, description="--tensor-parallel-size.")
    data_parallel_size: int = Field(1, ge=1, le=16, description="--data-parallel-size (1 omits the flag).")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"] = Field("fp8", description="--kv-cache-dtype.")
    block_size: int = Field(256, ge=1, le=256, description="--block-size (DeepSeek V4 pages are 256 tokens).")
    gpu_memory_utilization: float = Field(0.88, gt=0, le=0.95, description="--gpu-memory-utilization; at 0.88 the report saw about 93 GiB used per H20 card, little headroom (section 1).")
    max_model_len: int = Field(204800, ge=1024, description="--max-model-len in tokens.")
    max_num_seqs: int = Field(64, ge=1, le=1024, description="--max-num-seqs, set explicitly so CUDA Graphs are not captured for unused shapes (section 5).")
    tokenizer_mode: NonEmpty = Field("deepseek_v4", description="--tokenizer-mode.")
    tool_call_parser: NonEmpty = Field("deepseek_v4", description="--tool-call-parser (enables --enable-auto-tool-choice).")
    reasoning_parser: NonEmpty = Field("deepseek_v4", description="--reasoning-parser.")
    enable_prefix_caching: bool = Field(True, description="--enable-prefix-caching.")
    speculative_decoding: Literal["off", "dspark"] = Field(
        "off", description="DSpark A/B switch; off gives the target-only baseline section 5 asks for first.")
    dspark_num_speculative_tokens: int = Field(5, ge=1, le=16, description="num_speculative_tokens when DSpark is on.")
    enforce_eager: bool = Field(False, description="--enforce-eager: skip CUDA Graphs (faster start, slower steady state).")


class Sglang(Model):
    """SGLang server arguments; defaults are the validated H20 command of field report 12.1.
    SGLang spells the parsers differently from vLLM (deepseek-v4, deepseekv4): kept as SGLang spells them."""

    tensor_parallel_size: int = Field(8, ge=1, le=16, description="--tensor-parallel-size (the declared alias of --tp-size).")
    moe_runner_backend: NonEmpty = Field("marlin", description="--moe-runner-backend; marlin is the MXFP4 path on Hopper/H20 (FlashInfer MXFP4 is for Blackwell).")
    speculative_algorithm: Literal["off", "DSPARK"] = Field("off", description="--speculative-algorithm; DSPARK uses the checkpoint's built-in DSpark head.")
    mem_fraction_static: float = Field(0.82, gt=0, le=0.95, description="--mem-fraction-static.")
    chunked_prefill_size: int = Field(4096, ge=-1, description="--chunked-prefill-size in tokens (-1 disables).")
    swa_full_tokens_ratio: float = Field(0.1, gt=0, le=1, description="--swa-full-tokens-ratio.")
    reasoning_parser: NonEmpty = Field("deepseek-v4", description="--reasoning-parser (SGLang spelling).")
    tool_call_parser: NonEmpty = Field("deepseekv4", description="--tool-call-parser (SGLang spelling).")
    max_running_requests: int | None = Field(None, ge=1, description="--max-running-requests; lower it with cudaGraphMaxBs to capture fewer graph shapes (section 12.2), re-benchmark after.")
    cuda_graph_max_bs: int | None = Field(None, ge=1, description="--cuda-graph-max-bs-decode (0.5.23 refuses the ambiguous --cuda-graph-max-bs).")
    context_length: int | None = Field(None, ge=1024, description="--context-length in tokens; unset keeps the checkpoint's.")


class Rdma(Model):
    resource_name: NonEmpty = Field(..., description="Extended resource of the RDMA devices, e.g. rdma/rdma_shared_device_a.")
    count: int = Field(1, ge=1, le=16, description="RDMA devices per engine pod.")


class Pd(Model):
    """Prefill/decode disaggregation on two AIBrix RayClusterFleets (field report 11.2-11.4). Both
    sides are built from this model's one vLLM argument set, so they cannot differ."""

    roleset_name: DnsLabel | None = Field(None, description="roleset-name label pairing the two sides; unset means <name>-pd.")
    side_channel_port: int = Field(5600, ge=1024, le=65535, description="VLLM_NIXL_SIDE_CHANNEL_PORT on both sides (one engine per pod).")
    kv_load_failure_policy: Literal["recompute", "fail"] = Field(
        "recompute", description="NixlConnector kv_load_failure_policy, always explicit. recompute drops failed remote KV "
        "and recomputes locally instead of generating from invalid KV (11.3); such requests are not P/D successes.")
    prompt_len_bucket_min_length: int = Field(
        2049, ge=1, description="Hybrid only: shortest prompt (tokens) the P/D roleset serves; shorter prompts go to combined pods (11.5).")
    rollout_overshoot_pods: int = Field(
        1, ge=0, le=4, description="Extra 8-GPU pods the GPU budget reserves for the pair: the Fleet controller replaced a "
        "briefly NotReady RayCluster and exceeded its GPU target even with maxSurge 0 (11.2).")
    rdma: Rdma | None = Field(None, description="RDMA devices for KV transfer; adds IPC_LOCK and nothing broader.")


class SamePodPd(Model):
    """4P+4D in one pod (field report 9): for functional validation only; 9.4 measured 3.7-12.1% of
    TP=8 throughput."""

    prefill_port: int = Field(8100, ge=1024, le=65535, description="Prefill engine port.")
    decode_port: int = Field(8200, ge=1024, le=65535, description="Decode engine port.")
    proxy_port: int = Field(8000, ge=1024, le=65535, description="Proxy port the Service targets.")
    prefill_side_channel_port: int = Field(5559, ge=1024, le=65535, description="Prefill VLLM_NIXL_SIDE_CHANNEL_PORT.")
    decode_side_channel_port: int = Field(5659, ge=1024, le=65535, description="Decode VLLM_NIXL_SIDE_CHANNEL_PORT.")
    enforce_eager: bool = Field(True, description="--enforce-eager on both engines, as validated in 9.2.")


# The routing strategies the AIBrix v0.7.0 gateway plugin registers (pkg/plugins/gateway/algorithms,
# every Register/RegisterProvider call; checked against the source in tests/upstream_aibrix.py). Any
# other name makes the plugin answer 400 "incorrect routing strategy".
ROUTING_STRATEGIES = ("random", "least-request", "least-busy-time", "least-gpu-cache", "least-kv-cache",
                      "least-latency", "least-utilization", "throughput", "prefix-cache", "prefix-cache-preble",
                      "power-of-two", "session-affinity", "vtc-basic", "slo", "slo-pack-load", "slo-least-load",
                      "slo-least-load-pulling", "pd")


class ServedModel(Model):
    """One served model: where its weights are and how its combined engine runs."""

    name: DnsLabel = Field(..., description="Kubernetes name of the model's workloads and Service.")
    served_model_name: text(LABEL_VALUE, "a Kubernetes label value: 1-63 letters, digits, '.', '_' or '-', alphanumeric at both ends") = Field(
        ..., description="--served-model-name; what clients put in `model`. It is also the AIBrix "
        "label model.aibrix.ai/name, so it must be a valid label value.")
    directory: text(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$", "a non-empty directory name: letters, digits, '.', '_' or '-', no '/'") = Field(
        ..., description="Directory of the weights under the model root.")
    object_prefix: text(r"^[^/\s][^\s]*[^/\s]$|^[^/\s]$", "a non-empty key prefix without spaces or leading/trailing '/'") = Field(
        ..., description="Key prefix of the weights in the bucket, without leading or trailing slash.")
    revision: text(r"^[A-Za-z0-9._\-]+$", "a non-empty revision: letters, digits, '.', '_' or '-'") = Field(
        ..., description="Model revision; the sync Job writes it into the ready marker and pods refuse another.")
    expected_shard_count: int = Field(48, ge=1, description="Safetensors shards the weight index must name (48 for DeepSeek-V4-Flash, field report 3.1).")
    engine: Literal["vllm", "sglang"] = Field("vllm", description="Serving engine.")
    orchestrator: Literal["deployment", "stormservice", "rolebasedgroup", "rayclusterfleet"] = Field(
        "deployment", description="What runs the engine pods: a Deployment, an AIBrix StormService (11.1), an RBG "
        "RoleBasedGroup (12) or, for P/D, two AIBrix RayClusterFleets (11.2). For hybrid it runs the combined pods.")
    topology: Literal["combined", "pd", "pd-same-pod", "hybrid"] = Field(
        "combined", description="combined: one engine does prefill and decode (field report 7); pd: prefill and decode "
        "fleets (11.2); pd-same-pod: 4P+4D in one pod (9, validation only); hybrid: combined pods for every prompt "
        "plus a P/D roleset for long prompts (11.5).")
    dspark_of: DnsLabel | None = Field(
        None, description="Makes this model the DSpark arm of an A/B pair: the name of the target-only model it must "
        "equal in everything but speculative decoding, name and served name (field report 5, 8.1, 12.5).")
    replicas: int = Field(1, ge=0, le=64, description="Engine pods.")
    gpus_per_pod: int | None = Field(None, ge=1, description="GPUs per engine pod; unset means the parallel size. When set it must equal it.")
    startup_budget_seconds: int | None = Field(
        None, ge=60, description="Time from pod start to a port that accepts connections, in seconds; unset means "
        "1800 for vLLM and 2700 for SGLang. It must cover the measured cold start: about 12 min for vLLM TP=8 "
        "(field report 6) and 23 min for SGLang (12.2).")
    termination_grace_seconds: int = Field(
        180, ge=10, le=3600, description="Grace period to drain in-flight requests, in seconds; at least the gateway "
        "request timeout plus 30 s for endpoint removal and shutdown.")
    rollout: Rollout = Field(default_factory=Rollout, description="Rollout of the engine pods.")
    vllm: Vllm = Field(default_factory=Vllm, description="vLLM arguments (engine vllm).")
    pd: Pd = Field(default_factory=Pd, description="P/D settings (topology pd or hybrid).")
    same_pod: SamePodPd = Field(default_factory=SamePodPd, description="Same-pod 4P+4D settings (topology pd-same-pod).")
    sglang: Sglang = Field(default_factory=Sglang, description="SGLang arguments (engine sglang).")
    routing_strategy: Literal[ROUTING_STRATEGIES] | None = Field(
        None, description="AIBrix gateway routing strategy written into every engine pod's model.aibrix.ai/config "
        "profile; unset means pd for topologies pd and hybrid, prefix-cache with 2 or more replicas, least-request "
        "with 1. A client's routing-strategy header still overrides it.")


# The paths AIBrix v0.7.0 routes per model (pkg/controller/modelrouter), all PathPrefix.
AIBRIX_PATHS = ["/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings",
                "/v1/rerank", "/v1/classify", "/generate", "/generatevideo", "/v1/audio/transcriptions",
                "/v1/audio/translations"]


class Gateway(Model):
    """Routes through the AIBrix gateway (field report 10, 11.1): per served model one HTTPRoute in
    the gateway namespace and one Service here, managed by this program, never by a workload."""

    enabled: bool = Field(True, description="Create the Services' HTTPRoutes and the ReferenceGrant.")
    namespace: DnsLabel = Field("aibrix-system", description="Namespace of the Gateway and of the HTTPRoutes.")
    name: DnsLabel = Field("aibrix-eg", description="The Gateway the routes attach to.")
    proxy_namespace: DnsLabel = Field(
        "envoy-gateway-system", description="Namespace where Envoy Gateway runs this Gateway's proxy pods (v1.2.8, "
        "which AIBrix v0.7.0 installs, runs them in its own namespace); the engines accept requests from them.")
    external_endpoint: url_text(r"^https?://[^\s/]+$", "an http(s)://host[:port] base URL without a path") | None = Field(
        None, description="Stable external base URL of the gateway (a DNS name, never a Pod IP); exported with /v1.")
    request_timeout_seconds: int = Field(120, ge=1, le=3600, description="HTTPRoute request timeout in seconds (AIBrix default 120).")
    paths: list[text(r"^/[^\s]*$", "an absolute path")] = Field(
        default_factory=lambda: list(AIBRIX_PATHS), min_length=1, max_length=64,
        description="Path prefixes routed to each model, matched together with the header `model`.")


class Platform(Model):
    """Cluster prerequisites, pinned. Install them from exactly one stack per cluster (they are
    cluster-wide); every stack exports the versions it was built for."""

    install: bool = Field(False, description="Install AIBrix (with its KubeRay and Envoy Gateway) and RBG from this stack.")
    aibrix_version: text(r"^v[0-9]+\.[0-9]+\.[0-9]+$", "a release tag such as 'v0.7.0'") = Field(
        "v0.7.0", description="AIBrix release; its dependency bundle brings KubeRay v1.2.1 and Envoy Gateway v1.2.8.")
    rbg_version: text(r"^v[0-9]+\.[0-9]+\.[0-9]+$", "a release tag such as 'v0.7.0'") = Field(
        "v0.7.0", description="RoleBasedGroup controller release.")


class Warmup(Model):
    """Requests sent after every rollout, before traffic: JIT still compiled kernels under the first
    real load and drove p95 TTFT to 33 s (field report 8.2)."""

    enabled: bool = Field(True, description="Run the warm-up Job after each rollout.")
    concurrency_levels: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: [1, 8], min_length=1, description="Target concurrency levels to cover.")
    input_tokens: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [128, 4096], min_length=1, description="Common input lengths in tokens.")
    near_max_input_fraction: float = Field(0.9, gt=0, lt=1, description="A near-maximum input: this fraction of maxModelLen.")
    output_tokens: int = Field(32, ge=1, le=4096, description="Tokens generated per warm-up request.")
    timeout_seconds: int = Field(1800, ge=60, description="Upper bound for the warm-up Job in seconds.")


class Smoke(Model):
    """Correctness before traffic: /health=200 proves nothing about output (field report 12.3)."""

    enabled: bool = Field(True, description="Run the smoke Job after each rollout.")
    prompt: str = Field("只回答：你好", description="Deterministic prompt, sent with temperature 0 and thinking disabled.")
    expected_text: str = Field("你好", description="The exact answer the deterministic prompt must return.")
    max_tokens: int = Field(32, ge=1, le=1024, description="max_tokens of the deterministic request.")


class LoadScenario(Model):
    input_len: int = Field(..., ge=1, description="--random-input-len in tokens.")
    output_len: int = Field(..., ge=1, description="--random-output-len in tokens.")
    concurrency: int = Field(..., ge=1, le=1024, description="--max-concurrency.")
    num_prompts: int = Field(..., ge=1, description="--num-prompts.")
    num_warmups: int = Field(..., ge=0, description="--num-warmups; at least the concurrency (field report 8.2).")
    request_rate: text(r"^(inf|[0-9]+(\.[0-9]+)?)$", "'inf' or a number of requests per second") = Field(
        "inf", description="--request-rate.")


class LoadTest(Model):
    """`vllm bench serve` rounds as in field report 8.4 and 11.4; off by default (it occupies the engine)."""

    enabled: bool = Field(False, description="Run the load-test Job after each rollout.")
    scenarios: list[LoadScenario] = Field(
        default_factory=lambda: [
            LoadScenario(input_len=128, output_len=64, concurrency=1, num_prompts=16, num_warmups=2),
            LoadScenario(input_len=128, output_len=64, concurrency=8, num_prompts=64, num_warmups=8),
            LoadScenario(input_len=4096, output_len=128, concurrency=4, num_prompts=16, num_warmups=4)],
        min_length=1, description="Rounds, by default the three of field report 11.4.")
    results_size_gib: int = Field(10, ge=1, description="Size of the claim that keeps --save-result files after the Job.")
    storage_class: str | None = Field(None, description="StorageClass of the results claim; unset uses the cluster default.")
    timeout_seconds: int = Field(7200, ge=300, description="Upper bound for the load-test Job in seconds.")


class Monitoring(Model):
    """Prometheus Operator PodMonitor and PrometheusRule; thresholds are the alerting contract."""

    enabled: bool = Field(True, description="Create the PodMonitor and the PrometheusRule.")
    labels: dict[NonEmpty, NonEmpty] = Field(default_factory=dict, description="Labels the Prometheus selects monitors and rules by.")
    prometheus_namespace: DnsLabel = Field(
        "monitoring", description="Namespace of the Prometheus (Prometheus Operator) that scrapes the engines; the "
        "engines' metrics ports accept its scrapes.")
    max_failure_ratio: float = Field(0.01, gt=0, lt=1, description="Alert when this share of requests fail (5xx) over 10 min.")
    max_queue_length: int = Field(32, ge=1, description="Alert when this many requests wait in an engine queue for 5 min.")
    max_kv_cache_usage: float = Field(0.95, gt=0, le=1, description="Alert when KV-cache usage stays above this for 10 min.")
    ttft_p95_slo_seconds: float = Field(2.0, gt=0, description="Alert when p95 TTFT exceeds this SLO for 10 min.")
    min_gpu_memory_headroom_gib: float = Field(
        2.0, gt=0, description="Alert when free GPU memory (DCGM) falls below this; the field report ran at about 93 of 96 GiB.")


class OpenWebUi(Model):
    """OpenWebUI for people (field report 10), pointed at the stable endpoint."""

    enabled: bool = Field(False, description="Deploy OpenWebUI in this stack.")
    image: ImageRef | None = Field(None, description="OpenWebUI image pinned by digest (required when enabled).")
    storage_gib: int = Field(10, ge=1, description="Size of its data claim (users, chats, admin settings).")
    storage_class: str | None = Field(None, description="StorageClass of the data claim; unset uses the cluster default.")


class Operations(Model):
    warmup: Warmup = Field(default_factory=Warmup, description="Warm-up Job.")
    smoke: Smoke = Field(default_factory=Smoke, description="Smoke-test Job.")
    load_test: LoadTest = Field(default_factory=LoadTest, description="Load-test Job.")
    monitoring: Monitoring = Field(default_factory=Monitoring, description="Monitoring and alerts.")
    open_webui: OpenWebUi = Field(default_factory=OpenWebUi, alias="openWebUI", description="OpenWebUI.")
    disruption_budget: bool = Field(True, description="A PodDisruptionBudget (maxUnavailable 1) per served model.")


class NetworkPolicy(Model):
    enabled: bool = Field(True, description="Deny ingress by default; open the engines' serving ports to the gateway's "
                          "Envoy proxies and AIBrix plugin, their metrics ports to Prometheus and the plugin, both to "
                          "this stack's pods, and KV transfer within a P/D roleset only.")


class StackConfig(Model):
    """Everything under `llm-serving:` in a stack file, except the secrets."""

    # An enum is strict only against Environment instances; its text comes from the CLI.
    environment: Environment = Field(..., strict=False, description="dev, staging or prod; outside dev, data-holding resources are protected.")
    namespace: DnsLabel = Field(..., description="Namespace of every namespaced object.")
    gpu_budget: int = Field(..., ge=0, description="GPUs this stack may hold at once, rollouts included.")
    cluster: Cluster = Field(default_factory=Cluster, description="Cluster access.")
    object_store: ObjectStore = Field(..., description="The weights bucket.")
    model_volume: ModelVolume = Field(..., description="The read-only model volume.")
    gpu_pool: GpuPool = Field(default_factory=GpuPool, description="GPU node pool settings.")
    images: Images = Field(..., description="Images pinned by digest.")
    compile_cache: CompileCache = Field(default_factory=CompileCache, description="JIT/compile cache volume.")
    model_sync: ModelSync = Field(default_factory=ModelSync, description="The model sync Job.")
    gateway: Gateway = Field(default_factory=Gateway, description="Gateway routes.")
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy, description="NetworkPolicies of the namespace.")
    platform: Platform = Field(default_factory=Platform, description="Cluster prerequisites.")
    operations: Operations = Field(default_factory=Operations, description="Day-2 Jobs, monitoring, OpenWebUI, disruption budgets.")
    models: list[ServedModel] = Field(..., min_length=1, description="Served models; the first is the stack's primary endpoint.")

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
    "kubeconfig": "kubeconfig contents, when cluster.kubeconfigPath is not used.",
    "objectStoreAccessKeyId": "Read-only access key id for a non-AWS object store.",
    "objectStoreSecretAccessKey": "Secret access key for a non-AWS object store.",
    "cephUserKey": "Key of the Ceph user of modelVolume.cephfs.user.",
    "registryDockerConfigJson": "Docker config JSON with credentials for images.mirror.registry.host (pods pull with it, the copy Job pushes with it).",
}


def required_secret_keys(cfg: StackConfig) -> list[str]:
    """Secret keys the given config cannot do without (kubeconfig is always optional)."""
    keys = ["apiKey"]
    if not cfg.object_store.create_credentials:
        keys += ["objectStoreAccessKeyId", "objectStoreSecretAccessKey"]
    if cfg.model_volume.kind == "cephfs":
        keys.append("cephUserKey")
    if cfg.images.mirror.kind == "registry":
        keys.append("registryDockerConfigJson")
    return keys
