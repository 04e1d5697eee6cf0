"""How one served model runs: engine arguments, rollout, P/D, and the model itself."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config_model import k8s
from config_model.infra import Rdma, Toleration
from config_model.names import ModelName, NonEmptyLabelValue, checked
from config_model.resources import DEFAULT_GPU_RESOURCE, GpuResourceName, KvCache, ModelResources, NodeSelector
from config_model.startup import RULE_TEXT
from config_model.types import LABEL_VALUE, DnsLabel, Model, NonEmpty, field_report, key_prefix, stack_key, text
from policy.profiles import FIELD as PROFILE_FIELD
from policy.profiles import NAMES as PROFILE_NAMES
from policy.profiles import PROFILES, choose, profile_named


class Rollout(Model):
    """How engine pods are replaced (docs/operations.md, "Rollouts"). By default a rollout never raises
    the GPU count: a surge pod needs a whole pod's GPUs free beside the old pods. A Deployment may surge
    when its stack file says so (maxSurge 1) and gpuBudget counts that pod; StormService, RoleBasedGroup
    and the P/D fleets never do (field report 11.2 saw the fleet controller overshoot)."""

    strategy: Literal["Recreate", "RollingUpdate"] | None = Field(
        None, description="Recreate (Deployment only) or RollingUpdate; unset means, for a Deployment, Recreate when "
        "it never runs more than one pod (replicas and autoscaling.maxReplicas 1: the old pod's GPUs are free "
        "before the new pod is created) and RollingUpdate otherwise, so a rollout replaces one pod at a time while "
        "the others serve; StormService and RoleBasedGroup have no Recreate and always roll.")
    max_unavailable: int = Field(1, ge=0, description="Pods taken down at once by a RollingUpdate; 0 only with maxSurge 1 "
                                 "(every pod serves throughout).")
    pre_start_seconds: int = Field(600, ge=60, le=86400, description=(
        "What a rollout allows each pod before its startup budget starts counting: scheduling (a group waiting for all "
        "its nodes), the image pull (127 s for a 14 GB engine image, field report 12.2) and the model gate. `pulumi up` "
        "waits the startup budget plus this (x the rollout's waves on an update), then fails naming the workload; a "
        "Deployment's progressDeadlineSeconds is the same sum. Lower it to fail a stuck schedule sooner."))
    max_surge: int = Field(0, ge=0, le=1, description="Extra pods a Deployment's RollingUpdate starts before taking old "
                           "ones down: 0 (default) or 1, which gpuBudget must have room for (one more pod's GPUs at "
                           "peak). Opt-in: GPUs within the budget are not necessarily free in the cluster, and a surge "
                           "pod that cannot schedule holds the rollout until its deadline.")

# `sha256sum` output: what a pinned manifest digest must look like.
Sha256Hex = text(r"^[0-9a-f]{64}$", "a sha256 digest: 64 lowercase hex digits")

# An engine argument taken from the stack file as it is.
Arg = checked(k8s.kubelet_expansions, base=NonEmpty)


# How a profile-backed engine setting reads (policy/profiles/: models[].profile), from the profiles themselves.
def _profiles(engine: str, field: str) -> str:
    def show(v: Any) -> str:
        return "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
    return f"unset: the model's profile's ({_each(lambda p: show(p.ENGINE_DEFAULTS[engine][field]))})"


def _each(fact: Any, none: str = "none") -> str:
    """What each profile says: `deepseek-v4: 48; generic: required`."""
    return "; ".join(f"{name}: {none if fact(PROFILES[name]) is None else fact(PROFILES[name])}" for name in PROFILE_NAMES)


_OFF = "null or 'off' renders no flag (the engine's own default)."
# The names policy/engines/ REGISTERED_NAMES holds per pinned release (stacks/rules/parsers.py).
_NAMED = "A name the engine release of the image's tag does not register is refused."
_EXTRA = ("Further `{engine}` arguments, appended as written (e.g. {example}). Flags the program renders or owns "
          "(model path, served name, host, port, parallel sizes, API key and every flag it sets from this section, in "
          "any spelling, abbreviated or --no-) are refused: set their fields instead.")


class Vllm(Model):
    """vLLM engine arguments. Model-specific ones left unset take the model's profile's (policy/profiles/;
    deepseek-v4's are the validated command of field report section 5), else vLLM's own."""

    tensor_parallel_size: int = Field(8, ge=1, le=64, json_schema_extra=field_report("1"), description=(
        "--tensor-parallel-size; unset: 8, the field report's single 8-GPU node (1), listed among plan.md's "
        "inherited defaults: set it for this model and GPU (plan.md's GPU memory table says what fits). Larger "
        "than gpuPool.gpusPerNode, the model spans nodes (docs/topologies.md, multi-node)."))
    pipeline_parallel_size: int = Field(1, ge=1, le=16, description=(
        "--pipeline-parallel-size (1 omits the flag): pipeline stages, each of tensorParallelSize GPUs. TP x PP "
        "larger than gpuPool.gpusPerNode spans that many nodes' worth of GPUs per replica (docs/topologies.md)."))
    data_parallel_size: int = Field(1, ge=1, le=16, description="--data-parallel-size (1 omits the flag); within "
                                    "one node only.")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"] | None = Field(
        None, description=f"--kv-cache-dtype; {_profiles('vllm', 'kv_cache_dtype')}; none renders no flag (vLLM's auto: "
        "the model's dtype).")
    block_size: int | None = Field(None, ge=1, le=256, description=f"--block-size; {_profiles('vllm', 'block_size')}.")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=0.95, description=f"--gpu-memory-utilization; {_profiles('vllm', 'gpu_memory_utilization')}; "
        "none renders no flag (vLLM's 0.92 at 0.26.0 and 0.33.0). At 0.88 the report saw about 93 GiB used per H20 "
        "card, little headroom (section 1).")
    max_model_len: int | None = Field(None, ge=1024, description=f"--max-model-len in tokens; {_profiles('vllm', 'max_model_len')}.")
    max_num_seqs: int = Field(64, ge=1, le=1024, description="--max-num-seqs, set explicitly so CUDA Graphs are not captured for unused shapes (section 5).")
    tokenizer_mode: Arg | None = Field(None, description=f"--tokenizer-mode; {_profiles('vllm', 'tokenizer_mode')}. {_OFF} {_NAMED}")
    tool_call_parser: Arg | None = Field(None, description="--tool-call-parser, with --enable-auto-tool-choice; "
                                         f"{_profiles('vllm', 'tool_call_parser')}. {_OFF} {_NAMED}")
    reasoning_parser: Arg | None = Field(None, description=f"--reasoning-parser; {_profiles('vllm', 'reasoning_parser')}. {_OFF} {_NAMED}")
    trust_remote_code: bool | None = Field(None, description=f"--trust-remote-code; {_profiles('vllm', 'trust_remote_code')}.")
    enable_prefix_caching: bool = Field(True, description="--enable-prefix-caching.")
    speculative_decoding: Literal["off", "dspark"] = Field(
        "off", description="DSpark A/B switch; off gives the target-only baseline section 5 asks for first.")
    dspark_num_speculative_tokens: int = Field(5, ge=1, le=16, description="num_speculative_tokens when DSpark is on.")
    enforce_eager: bool = Field(False, description="--enforce-eager: skip CUDA Graphs (faster start, slower steady state).")
    extra_args: list[Arg] = Field(default_factory=list, max_length=64, description=_EXTRA.format(
        engine="vllm serve", example='["--max-num-batched-tokens", "8192"]'))


class Sglang(Model):
    """SGLang server arguments. Model-specific ones left unset take the model's profile's (deepseek-v4's
    are the validated H20 command of field report 12.1), else SGLang's own.
    SGLang spells the parsers differently from vLLM (deepseek-v4, deepseekv4): kept as SGLang spells them."""

    tensor_parallel_size: int = Field(8, ge=1, le=64, json_schema_extra=field_report("12.1"), description=(
        "--tensor-parallel-size (the declared alias of --tp-size); unset: 8, the field report's single 8-GPU node "
        "(12.1), listed among plan.md's inherited defaults. Larger than gpuPool.gpusPerNode, the model spans nodes "
        "(docs/topologies.md, multi-node)."))
    pipeline_parallel_size: int = Field(1, ge=1, le=16, description=(
        "--pipeline-parallel-size (the declared alias of --pp-size; 1 omits the flag): pipeline stages, each of "
        "tensorParallelSize GPUs. TP x PP larger than gpuPool.gpusPerNode spans nodes (docs/topologies.md)."))
    moe_runner_backend: Arg | None = Field(None, description="--moe-runner-backend (marlin is the MXFP4 path on Hopper/H20; FlashInfer MXFP4 is for Blackwell); "
                                          f"{_profiles('sglang', 'moe_runner_backend')}. {_OFF}")
    speculative_algorithm: Literal["off", "DSPARK"] = Field("off", description="--speculative-algorithm; DSPARK uses the checkpoint's built-in DSpark head.")
    mem_fraction_static: float | None = Field(
        None, gt=0, le=0.95, description=f"--mem-fraction-static; {_profiles('sglang', 'mem_fraction_static')}; none "
        "renders no flag (SGLang computes it from the GPU's memory at start).")
    chunked_prefill_size: int | None = Field(
        None, ge=-1, description=f"--chunked-prefill-size in tokens (-1 disables); {_profiles('sglang', 'chunked_prefill_size')}; "
        "none renders no flag (SGLang sizes it from the GPU's memory at start).")
    swa_full_tokens_ratio: float | None = Field(None, gt=0, le=1, description=f"--swa-full-tokens-ratio; {_profiles('sglang', 'swa_full_tokens_ratio')}. null renders no flag.")
    reasoning_parser: Arg | None = Field(None, description=f"--reasoning-parser (SGLang spelling); {_profiles('sglang', 'reasoning_parser')}. {_OFF} {_NAMED}")
    tool_call_parser: Arg | None = Field(None, description=f"--tool-call-parser (SGLang spelling); {_profiles('sglang', 'tool_call_parser')}. {_OFF} {_NAMED}")
    trust_remote_code: bool | None = Field(None, description=f"--trust-remote-code; {_profiles('sglang', 'trust_remote_code')}.")
    max_running_requests: int | None = Field(None, ge=1, description="--max-running-requests; lower it with cudaGraphMaxBs to capture fewer graph shapes (section 12.2), re-benchmark after.")
    cuda_graph_max_bs: int | None = Field(None, ge=1, description="--cuda-graph-max-bs-decode (0.5.23 refuses the ambiguous --cuda-graph-max-bs).")
    context_length: int | None = Field(None, ge=1024, description="--context-length in tokens; unset keeps the checkpoint's.")
    extra_args: list[Arg] = Field(default_factory=list, max_length=64, description=_EXTRA.format(
        engine="sglang serve", example='["--schedule-conservativeness", "0.3"]'))


class KvCacheOffload(Model):
    """KV-cache offload to CPU memory (issue 13): prefix KV evicted from the GPU is kept in host memory
    and loaded back on a hit instead of being recomputed. Off by default; the engine pods' memory
    request and limit, and /dev/shm where the backend keeps it there, grow by what the engine allocates."""

    backend: Literal["off", "native", "lmcache", "hicache"] = Field(
        "off", description="off; native: vLLM's own CPU offloading (--kv-offloading-backend native); lmcache: "
        "refused, see the README; hicache: refused, SGLang 0.5.17 and 0.5.23 take no --hicache-size for DeepSeek-V4.")
    size_gib: int = Field(
        0, ge=0, le=4096, description="Host memory for offloaded KV in GiB. native: per engine, summed over its "
        "tensor-parallel ranks (vLLM --kv-offloading-size; each data-parallel engine allocates it again).")


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


class ModelSmoke(Model):
    """The smoke test of one model (field report 12.3) and the request shapes its warm-up sends (8.2)."""

    prompt: checked(k8s.kubelet_expansions, base=NonEmpty) | None = Field(
        None, description="Deterministic prompt, sent with temperature 0 and reasoning off; unset: "
        f"operations.smoke.prompt, then the profile's ({_each(lambda p: repr(p.SMOKE_PROMPT))}).")
    expected_text: checked(k8s.kubelet_expansions, base=NonEmpty) | None = Field(
        None, description="The exact answer to the prompt; unset: operations.smoke.expectedText, then the profile's "
        f"({_each(lambda p: repr(p.SMOKE_EXPECTED_TEXT))}).")
    checks: list[Literal["reasoning", "tool-call"]] | None = Field(
        None, description="Checks besides the model list and the exact answer, also the warm-up's request shapes; "
        "unset: reasoning when a reasoning parser is set, tool-call when a tool-call parser is set.")
    max_tokens: int | None = Field(
        None, ge=1, le=4096, description="max_tokens of the deterministic request; unset: operations.smoke.maxTokens, "
        f"then the profile's ({_each(lambda p: p.SMOKE_MAX_TOKENS)}).")
    reasoning_kwarg: text(r"^[A-Za-z_][A-Za-z0-9_]*$", "an identifier") | None = Field(
        None, description="chat_template_kwargs key that switches reasoning on and off in the smoke and warm-up "
        f"requests; unset: the profile's ({_each(lambda p: p.REASONING_KWARG, 'none sent')}); null or 'off' sends none.")


# An environment variable name as the engines read them (a C identifier).
EnvName = text(r"^[A-Za-z_][A-Za-z0-9_]*$", "an environment variable name: letters, digits and '_', not starting with a digit")
OFF = "off"


# What a served model may scale on, each read by AIBrix v0.7.0's PodAutoscaler from the engine pods'
# /metrics (components/autoscaling.py maps each to AIBrix's metric name; tests/upstream_aibrix.py
# pins which engine metric that reads).
AUTOSCALING_METRICS = ("kv-cache-usage", "queue-length", "ttft")


class Autoscaling(Model):
    """Replicas that follow load: an AIBrix v0.7.0 PodAutoscaler (strategy APA, metrics read from the
    engine pods) scales the model's workload between minReplicas and maxReplicas. The GPU budget
    counts maxReplicas. `replicas` is the count the workload is created with and must lie in
    [minReplicas, maxReplicas]; after that the autoscaler owns it and `pulumi up` leaves it alone."""

    enabled: bool = Field(False, description="Create a PodAutoscaler for this model.")
    min_replicas: int = Field(1, ge=0, le=64, description="Fewest engine pods. 0 (scale to zero) needs allowScaleToZero: "
                              "with no pod left, AIBrix v0.7.0 has no metric to scale up on and the gateway refuses "
                              "requests until an operator scales the model up and a cold start completes.")
    max_replicas: int = Field(1, ge=1, le=64, description="Most engine pods; the GPU budget counts this many, rollout "
                              "extra pods included.")
    metric: Literal[AUTOSCALING_METRICS] = Field(
        "kv-cache-usage", description="kv-cache-usage (the engine's KV-cache usage, 0-1), queue-length (requests "
        "waiting per pod) or ttft (refused: AIBrix v0.7.0 reads a histogram as 0).")
    target_value: float | None = Field(
        None, gt=0, description="Per-pod value the autoscaler steers the metric's average to; unset means 0.8 for "
        "kv-cache-usage (a ratio, at most 1) and 4 for queue-length.")


# The routing strategies the AIBrix v0.7.0 gateway plugin registers (pkg/plugins/gateway/algorithms,
# every Register/RegisterProvider call; checked against the source in tests/upstream_aibrix.py). Any
# other name makes the plugin answer 400 "incorrect routing strategy".
ROUTING_STRATEGIES = ("random", "least-request", "least-busy-time", "least-gpu-cache", "least-kv-cache",
                      "least-latency", "least-utilization", "throughput", "prefix-cache", "prefix-cache-preble",
                      "power-of-two", "session-affinity", "vtc-basic", "slo", "slo-pack-load", "slo-least-load",
                      "slo-least-load-pulling", "pd")


class ServedModel(Model):
    """One served model: where its weights are and how its combined engine runs."""

    name: ModelName = Field(..., description="Kubernetes name of the model's workloads and Service (<name>-api): a "
                            "DNS-1035 label, short enough for the names derived from it (config_model/derived.py).")
    served_model_name: text(LABEL_VALUE, "a Kubernetes label value: 1-63 letters, digits, '.', '_' or '-', alphanumeric at both ends") = Field(
        ..., description="--served-model-name; what clients put in `model`. It is also the AIBrix "
        "label model.aibrix.ai/name, so it must be a valid label value.")
    directory: text(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$", "a non-empty directory name: letters, digits, '.', '_' or '-', no '/'") = Field(
        ..., description="Directory of the weights under the model root; each revision lives in "
        "`<directory>/<revision>/`, so a sync of the next revision never touches the files running pods read, "
        "and a rollback finds its files still there.")
    # After directory and servedModelName, which choose it when it is left out (_profile_chosen).
    profile: Literal[PROFILE_NAMES] | None = Field(
        None, validate_default=True, description="Model family (policy/profiles/): the values of every model-specific setting the "
        "stack file leaves unset (parsers, tokenizer mode, block size, context, trust-remote-code, memory settings, "
        "the files a complete checkpoint holds, shard count and size, the smoke test, the measured cold start). "
        f"{_each(lambda p: p.DESCRIPTION)}. Left out, it is chosen from `directory` and `servedModelName` where "
        "exactly one family's name pattern matches them (policy/profiles/ NAME_PATTERN, listed in docs/models.md), and "
        "is required otherwise.")
    object_prefix: checked(k8s.kubelet_expansions, base=key_prefix(text(
            r"^[^/\s][^\s]*[^/\s]$|^[^/\s]$", "a non-empty key prefix without spaces or leading/trailing '/'"))) = Field(
        ..., description="Key prefix of the weights in the bucket, without leading or trailing slash.")
    revision: NonEmptyLabelValue = Field(
        ..., description="Model revision; the sync Job writes it into the ready marker and pods refuse another. "
        "It labels the sync Job's pods, so it is a label value (1-63 characters, alphanumeric at both ends).")
    manifest_sha256: Sha256Hex | None = Field(
        None, description="sha256 of the model's SHA256SUMS (`sha256sum SHA256SUMS`); when set, the sync Job refuses "
        "a manifest with another digest and the pods' gate refuses a marker that records another, so the same "
        "revision with other content is never served.")
    keep_revisions: int = Field(
        2, ge=2, le=16, description="Revisions of this model kept under `<directory>/`, the one being synced "
        "included: the newest verified others stay (the previous one for a rollback without download and for the "
        "old pods that read it during the rollout). Older revision directories that carry the sync Job's marker or "
        "digest cache are removed once the bucket's listing shows the new revision, before its download fills "
        "the volume; a revision any model of the stack serves is always kept.")
    expected_shard_count: int | None = Field(
        None, ge=1, description="Safetensors shards the checkpoint's model.safetensors.index.json must name (a "
        "single model.safetensors without an index is 1); unset: the profile's "
        f"({_each(lambda p: p.EXPECTED_SHARD_COUNT, 'as many as the index names')}).")
    size_gib: float | None = Field(
        None, gt=0, le=100000, description="Size of the model's files in GiB; unset: the "
        f"profile's ({_each(lambda p: p.SIZE_GIB, 'required')}). plan.md's time to first token syncs "
        "this much at the measured 437 MiB/s (3.2), and modelVolume.capacityGiB must hold keepRevisions revisions of "
        "it for every directory.")
    # The KV-cache shape of the checkpoint (config_model/resources.py KvCache), for the memory-fit rule.
    kv_cache: KvCache | None = Field(
        None, description="Attention shape of the checkpoint as its config.json names it (layers, kvHeads and headDim, "
        "or latentDim), for the KV cache the memory-fit rule and plan.md count; unset: the profile's if it knows one.")
    engine: Literal["vllm", "sglang"] = Field("vllm", description="Serving engine.")
    orchestrator: Literal["deployment", "stormservice", "rolebasedgroup", "leaderworkerset", "rayclusterfleet"] = Field(
        "deployment", description="What runs the engine pods: a Deployment, an AIBrix StormService (11.1), an RBG "
        "RoleBasedGroup (12), a LeaderWorkerSet (models spanning nodes only) or, for P/D, two AIBrix "
        "RayClusterFleets (11.2). For hybrid it runs the combined pods. A model spanning nodes runs on "
        "leaderworkerset (vLLM, SGLang), stormservice (SGLang) or rolebasedgroup (SGLang): docs/topologies.md.")
    topology: Literal["combined", "pd", "pd-same-pod", "hybrid"] = Field(
        "combined", description="combined: one engine does prefill and decode (field report 7); pd: prefill and decode "
        "fleets (11.2); pd-same-pod: 4P+4D in one pod (9, validation only); hybrid: combined pods for every prompt "
        "plus a P/D roleset for long prompts (11.5).")
    dspark_of: ModelName | None = Field(
        None, description="Makes this model the DSpark arm of an A/B pair: the name of the target-only model it must "
        "equal in everything but speculative decoding, name and served name (field report 5, 8.1, 12.5).")
    replicas: int = Field(1, ge=0, le=64, description="Engine pods; with autoscaling, the count the workload starts with.")
    gpus_per_pod: int | None = Field(
        None, ge=1, description="GPUs per engine pod; unset means the parallel size (TP x PP, x DP for vLLM) where it "
        "fits gpuPool.gpusPerNode, else gpusPerNode: the model then spans parallel size / gpusPerPod pods on as many "
        "nodes per replica, scheduled as one group (docs/topologies.md, multi-node). When set it must divide the "
        "parallel size and fit a node.")
    # Per-model resources, node pool and GPU resource name (config_model/resources.py; unset: gpuPool's).
    resources: ModelResources = Field(default_factory=ModelResources, description="CPU, memory and /dev/shm of each "
                                      "engine pod; unset keys keep gpuPool's.")
    node_selector: NodeSelector | None = Field(
        None, description="Node labels the model's engine pods require (its node pool; not empty); unset means "
        "gpuPool.nodeSelector. Its keys also keep the CPU Jobs off these nodes.")
    tolerations: list[Toleration] | None = Field(
        None, description="Tolerations of the model's engine pods; unset means gpuPool.tolerations.")
    gpu_resource_name: GpuResourceName = Field(
        DEFAULT_GPU_RESOURCE, description="Extended resource the model's GPUs are requested under: nvidia.com/gpu, "
        "amd.com/gpu, gpu.intel.com/i915 or gpu.intel.com/xe, the names the policy pack counts against the GPU budget "
        "(policy/workloads.py GPU_RESOURCES).")
    startup_budget_seconds: int | None = Field(
        None, ge=60, description=f"Time from pod start to a port that accepts connections, in seconds; {RULE_TEXT}. "
        "It must cover the measured cold start of the model's profile on its engine in seconds "
        f"({_each(lambda p: ', '.join(f'{e} {t}' for e, t in p.COLD_START_ESTIMATE_SECONDS.items()) or None, 'none measured')}; field "
        "report 6 and 12.2).")
    termination_grace_seconds: int = Field(
        180, ge=10, le=3600, description="Grace period to drain in-flight requests, in seconds; at least the gateway "
        "request timeout plus 30 s for endpoint removal and shutdown.")
    rollout: Rollout = Field(default_factory=Rollout, description="Rollout of the engine pods.")
    vllm: Vllm = Field(default_factory=Vllm, validate_default=True, description="vLLM arguments (engine vllm).")
    pd: Pd = Field(default_factory=Pd, description="P/D settings (topology pd or hybrid).")
    same_pod: SamePodPd = Field(default_factory=SamePodPd, description="Same-pod 4P+4D settings (topology pd-same-pod).")
    sglang: Sglang = Field(default_factory=Sglang, validate_default=True, description="SGLang arguments (engine sglang).")
    # ---- issue 20: what the program does not model, and the smoke test per model ----
    env: dict[EnvName, checked(k8s.kubelet_expansions)] = Field(
        default_factory=dict, max_length=64, description="Further environment variables of the model's engine "
        "containers, name -> value. Names the program sets (its caches, offline mode, API key, NIXL side channel "
        "and the engine's own) are refused.")
    smoke: ModelSmoke = Field(default_factory=ModelSmoke, description="This model's smoke test and warm-up "
                              "shapes; unset fields: operations.smoke's, then the profile's.")
    kv_cache_offload: KvCacheOffload = Field(
        default_factory=KvCacheOffload, description="KV-cache offload to CPU memory; off by default.")
    autoscaling: Autoscaling = Field(default_factory=Autoscaling, description="Autoscaling of the engine pods (off by default).")
    routing_strategy: Literal[ROUTING_STRATEGIES] | None = Field(
        None, description="AIBrix gateway routing strategy written into every engine pod's model.aibrix.ai/config "
        "profile; unset means pd for topologies pd and hybrid, prefix-cache otherwise (also with one pod, which the "
        "gateway picks directly: scaling never changes the pods). A client's routing-strategy header still overrides it.")

    def unused_sections(self) -> set[str]:
        """The engine sections this model's engine does not read (config_model/inherited.py skips them)."""
        return {"vllm", "sglang"} - {self.engine}

    @model_validator(mode="before")
    @classmethod
    def _profile_checkpoint(cls, data: Any) -> Any:
        """expectedShardCount and sizeGiB left out: the profile's (declared or chosen by name). A profile
        without them (generic) leaves them unset: the shard count is then the checkpoint index's, and
        stacks/rules/models.py refuses an unset sizeGiB naming the field."""
        if not isinstance(data, dict):
            return data
        name = data.get(PROFILE_FIELD)
        if PROFILE_FIELD not in data:
            served = data.get(stack_key("served_model_name"), data.get("served_model_name", ""))
            name = choose(str(data.get("directory", "")), str(served)).name
        if name not in PROFILE_NAMES:
            return data
        profile = profile_named(name)
        known = {"expected_shard_count": profile.EXPECTED_SHARD_COUNT, "size_gib": profile.SIZE_GIB}
        filled = {stack_key(k): v for k, v in known.items()
                  if v is not None and k not in data and stack_key(k) not in data}
        return {**data, **filled} if filled else data

    @field_validator("profile", mode="before")
    @classmethod
    def _profile_chosen(cls, value: Any, info: ValidationInfo) -> Any:
        """Left out: the profile the model's directory or served name names (policy/profiles choose),
        refused naming every profile when none or several do. It stays out of model_fields_set, which
        says it was chosen, not declared (config_model/profile_defaults.py profile_choice)."""
        if value is not None or not {"directory", "served_model_name"} <= info.data.keys():
            return value      # declared, or a name is invalid and refused by itself
        chosen = choose(info.data["directory"], info.data["served_model_name"])
        if chosen.name is None:
            raise PydanticCustomError("profile_required", chosen.why)
        return chosen.name

    @field_validator("vllm", "sglang")
    @classmethod
    def _profile_engine(cls, section: Model, info: ValidationInfo) -> Model:
        """A setting the stack file leaves out takes the profile's value; null or 'off' takes none."""
        if info.data.get("profile") is None:
            return section
        defaults = profile_named(info.data["profile"]).ENGINE_DEFAULTS[info.field_name]
        update = {k: v for k, v in defaults.items() if k not in section.model_fields_set}
        update |= {k: None for k in defaults if k in section.model_fields_set and getattr(section, k) == OFF}
        filled = section.model_copy(update=update)
        # What the stack file set stays answerable (config_model/profile_defaults.py profile_inherited).
        object.__setattr__(filled, "__pydantic_fields_set__", set(section.model_fields_set))
        return filled

