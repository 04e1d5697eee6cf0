"""Around the engines: gateway routes, platform pins, day-2 Jobs, monitoring, network policy."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from config_model import k8s
from config_model.clients import Clients
from config_model.egress import Egress
from config_model.infra import ImageRef
from config_model.names import GatewayPath, LabelKey, NonEmptyLabelValue, StorageClassName, checked
from config_model.types import DnsLabel, Model, text, url_text

# The paths AIBrix v0.7.0 routes per model (pkg/controller/modelrouter), all PathPrefix.
AIBRIX_PATHS = ["/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings",
                "/v1/rerank", "/v1/classify", "/generate", "/generatevideo", "/v1/audio/transcriptions",
                "/v1/audio/translations"]
# A request the AIBrix v0.7.0 gateway plugin routes by strategy (every model of this program:
# components/routing.py) is sent on AIBrix's own Envoy route `original_route`, which its
# EnvoyPatchPolicy aibrix-epp puts ahead of every HTTPRoute with this timeout
# (config/gateway/gateway.yaml; tests/upstream_aibrix.py ORIGINAL_ROUTE): no HTTPRoute timeout of ours
# shortens or lengthens it.
AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS = 120


class Gateway(Model):
    """Routes through the AIBrix gateway (field report 10, 11.1): per served model one HTTPRoute in
    the gateway namespace and one Service here, managed by this program, never by a workload."""

    enabled: bool = Field(True, description="Create the Services' HTTPRoutes and the ReferenceGrant.")
    routing_layer: Literal["aibrix", "inferencePool"] = Field(
        "aibrix", description="Who picks the pod of each request: `aibrix`, the AIBrix v0.7.0 gateway plugin on its "
        "Envoy Gateway (field report 10, 11); `inferencePool`, per model a Gateway API Inference Extension "
        "InferencePool with its endpoint picker (GIE v1.5.0's), routed by `gateway.name`, a Gateway of an "
        "implementation that supports InferencePool (docs/gateway-and-network.md).")
    implementation: Literal["istio", "nginxGatewayFabric", "agentgateway", "envoyAiGateway"] | None = Field(
        None, description="routingLayer inferencePool, required there: what runs the Gateway `name`, which decides "
        "where its proxy pods run and which labels they carry (the NetworkPolicies admit them), how they reach the "
        "endpoint pickers, how the route's timeout is applied and whether consumers' limits can be: `istio` (1.30.1), "
        "`nginxGatewayFabric` (NGINX Gateway Fabric v2.6.0), `agentgateway` (v1.0.0), `envoyAiGateway` (Envoy Gateway "
        "v1.8.1 with the Envoy AI Gateway v1.1.0 extension). GKE's Gateway is not offered: its load balancer is "
        "Google's, with no proxy pods a NetworkPolicy can select, and GIE has conformance reports for it only at "
        "v1alpha2 (docs/gateway-and-network.md). Ignored by the aibrix layer.")
    namespace: DnsLabel = Field("aibrix-system", description="Namespace of the Gateway and of the HTTPRoutes.")
    name: DnsLabel = Field("aibrix-eg", description="The Gateway the routes attach to.")
    proxy_namespace: DnsLabel = Field(
        "envoy-gateway-system", description="Namespace where Envoy Gateway runs this Gateway's proxy pods (v1.2.8, "
        "which AIBrix v0.7.0 installs, runs them in its own namespace); the engines accept requests from them. "
        "routingLayer inferencePool, unset: where `implementation` runs them (the Gateway's namespace, or "
        "envoy-gateway-system for envoyAiGateway).")
    proxy_pod_labels: dict[LabelKey, NonEmptyLabelValue] | None = Field(
        None, min_length=1, description="routingLayer inferencePool: labels of the Gateway's proxy pods in "
        "proxyNamespace, admitted to the engines and the endpoint pickers, overriding the implementation's. Unset: the "
        "labels `implementation` puts on them (gateway.networking.k8s.io/gateway-name = name for istio, "
        "nginxGatewayFabric and agentgateway; Envoy Gateway's own and its owning-gateway labels for envoyAiGateway; "
        "docs/gateway-and-network.md). The aibrix layer always selects Envoy Gateway's own labels.")
    external_endpoint: checked(k8s.kubelet_expansions, base=url_text(
            r"^https?://[^\s/]+$", "an http(s)://host[:port] base URL without a path")) | None = Field(
        None, description="Stable external base URL of the gateway (a DNS name, never a Pod IP); exported with /v1.")
    in_cluster_endpoint: checked(k8s.kubelet_expansions, base=url_text(
            r"^https?://[^\s/]+$", "an http(s)://host[:port] base URL without a path")) | None = Field(
        None, description="routingLayer inferencePool: the in-cluster base URL of the Gateway's own Service (its name is "
        "the implementation's: Istio and NGINX Gateway Fabric `<gateway>-<gatewayClassName>`, agentgateway `<gateway>`; "
        "`kubectl get svc -n <gateway.namespace>` shows it); exported with /v1 as each model's url, so in-cluster "
        "consumers go through the endpoint picker too, naming the model in the header `model`. Unset: each model's "
        "own Service, which no picker scores. The aibrix layer exports its Envoy proxy's Service itself.")
    request_timeout_seconds: int = Field(120, ge=1, le=3600, description="HTTPRoute request timeout in seconds (AIBrix default 120), "
        "and that of the strategy-path routes the consumers' limits add. Other requests the AIBrix gateway plugin routes "
        "by strategy take AIBrix's own route and its 120 s timeout (docs/gateway-and-network.md); the engines' drain "
        "waits for the longer of the two.")
    default_requests_per_minute: int | None = Field(
        None, gt=0, le=4294967295, description="Requests per minute per Envoy replica for every request whose bearer "
        "key belongs to no consumer (keyless requests included): per model route and path prefix on the requests "
        "naming the model in a `model` header (each route's BackendTrafficPolicy), and in one bucket for the requests "
        "the AIBrix plugin routes by strategy (every model here), on a route added before AIBrix's original_route. "
        "That bucket is gateway-wide: it also takes such requests for models of other stacks on the same Gateway, so "
        "set it in one stack per Gateway (docs/gateway-and-network.md). Unset: such requests are not limited. On "
        "routingLayer inferencePool: per model route with implementation envoyAiGateway, refused by the others.")
    paths: list[GatewayPath] = Field(
        default_factory=lambda: list(AIBRIX_PATHS), min_length=1, max_length=64,
        description="Path prefixes routed to each model, matched together with the header `model`.")

    @property
    def inference_pools(self) -> bool:
        """Whether the stack routes through InferencePools (components/routing_layers/inference_pool.py)."""
        return self.enabled and self.routing_layer == "inferencePool"

    @property
    def longest_request_seconds(self) -> int:
        """How long a request in flight may still run: the HTTPRoute's timeout, and through the gateway
        at least AIBrix's original_route's, which carries the plugin-routed requests. The engines'
        preStop drain waits this long, and their grace period covers it. The same whatever the routing
        layer: switching layers must not change an engine's pod template (a rollout, with Recreate a window
        without the model), so the inferencePool layer keeps AIBrix's floor too."""
        if not self.enabled:
            return self.request_timeout_seconds
        return max(self.request_timeout_seconds, AIBRIX_ORIGINAL_ROUTE_TIMEOUT_SECONDS)


class Platform(Model):
    """Cluster prerequisites, pinned. Install them from exactly one stack per cluster (they are
    cluster-wide); every stack exports the versions it was built for."""

    install: bool = Field(False, description="Install AIBrix (with its KubeRay and Envoy Gateway), RBG and LeaderWorkerSet "
                          "from this stack.")
    aibrix_version: text(r"^v[0-9]+\.[0-9]+\.[0-9]+$", "a release tag such as 'v0.7.0'") = Field(
        "v0.7.0", description="AIBrix release; its dependency bundle brings KubeRay v1.2.1 and Envoy Gateway v1.2.8.")
    rbg_version: text(r"^v[0-9]+\.[0-9]+\.[0-9]+$", "a release tag such as 'v0.7.0'") = Field(
        "v0.7.0", description="RoleBasedGroup controller release.")
    lws_version: text(r"^v[0-9]+\.[0-9]+\.[0-9]+$", "a release tag such as 'v0.7.0'") = Field(
        "v0.10.0", description="LeaderWorkerSet controller release (models[].orchestrator leaderworkerset), installed from "
        "its release manifest, which runs without gang scheduling.")


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
    prompt: checked(k8s.kubelet_expansions) | None = Field(
        None, description="Deterministic prompt, sent with temperature 0 and reasoning off, for every model that sets no "
        "models[].smoke.prompt; unset: each model's profile's (policy/profiles/).")
    expected_text: checked(k8s.kubelet_expansions) | None = Field(
        None, description="The exact answer the deterministic prompt must return, for every model that sets no "
        "models[].smoke.expectedText; unset: each model's profile's.")
    max_tokens: int | None = Field(
        None, ge=1, le=4096, description="max_tokens of the deterministic request, for every model that sets no "
        "models[].smoke.maxTokens; unset: each model's profile's (32, or room for the reasoning a family always "
        "writes before its answer: gpt-oss, Qwen3 Thinking).")


class LoadScenario(Model):
    input_len: int = Field(..., ge=1, description="--random-input-len in tokens.")
    output_len: int = Field(..., ge=1, description="--random-output-len in tokens.")
    concurrency: int = Field(..., ge=1, le=1024, description="--max-concurrency.")
    num_prompts: int = Field(..., ge=1, description="--num-prompts.")
    num_warmups: int = Field(..., ge=0, description="--num-warmups; at least the concurrency (field report 8.2).")
    request_rate: text(r"^(inf|[0-9]+(\.[0-9]+)?)$", "'inf' or a number of requests per second") = Field(
        "inf", description="--request-rate.")


class LoadTest(Model):
    """`vllm bench serve` rounds as in field report 8.4 and 11.4; off by default (it occupies the engine).
    The Job is not awaited: `pulumi up` starts it and goes on, and neither that `pulumi up` nor a later
    one fails or re-runs because of it (components/operations.py)."""

    enabled: bool = Field(False, description="Run the load-test Job after each rollout.")
    scenarios: list[LoadScenario] = Field(
        default_factory=lambda: [
            LoadScenario(input_len=128, output_len=64, concurrency=1, num_prompts=16, num_warmups=2),
            LoadScenario(input_len=128, output_len=64, concurrency=8, num_prompts=64, num_warmups=8),
            LoadScenario(input_len=4096, output_len=128, concurrency=4, num_prompts=16, num_warmups=4)],
        min_length=1, description="Rounds, by default the three of field report 11.4.")
    results_size_gib: int = Field(10, ge=1, description="Size of the claim that keeps --save-result files after the Job.")
    storage_class: StorageClassName | None = Field(None, description="StorageClass of the results claim; unset uses the cluster default.")
    timeout_seconds: int = Field(7200, ge=300, description="Upper bound for the load-test Job in seconds.")
    allow_live_traffic: bool = Field(
        False, description="Allow the load test on a prod stack, whose engines serve users: its rounds then compete "
        "with live requests (the idle check only delays a round until nothing runs at that moment). Refused unless set.")


# The Grafana sidecar (kiwigrid/k8s-sidecar) loads a ConfigMap whose label LABEL has the value
# LABEL_VALUE; kube-prometheus-stack sets grafana_dashboard: "1" (tests/upstream_grafana.py).
GRAFANA_SIDECAR_LABEL = "grafana_dashboard"
GRAFANA_SIDECAR_LABEL_VALUE = "1"
# k8s-sidecar's FOLDER_ANNOTATION default: its value is the sub-folder the file lands in.
GRAFANA_SIDECAR_FOLDER_ANNOTATION = "k8s-sidecar-target-directory"


class Dashboards(Model):
    """Grafana dashboards as ConfigMaps the Grafana sidecar picks up by label (field report 8, 11.4,
    12.5, 13: TTFT/TPOT/ITL p50/p95/p99, tok/s and tok/s per GPU, queue, KV cache, GPU memory, NIXL)."""

    enabled: bool = Field(True, description="Create the dashboard ConfigMap while monitoring is enabled.")
    label_key: LabelKey = Field(
        GRAFANA_SIDECAR_LABEL, description="Label the Grafana sidecar selects dashboard ConfigMaps by "
        "(sidecar.dashboards.label of the grafana and kube-prometheus-stack charts).")
    label_value: NonEmptyLabelValue = Field(
        GRAFANA_SIDECAR_LABEL_VALUE, description="Its value (kube-prometheus-stack: \"1\"; the grafana chart's "
        "empty labelValue matches any value).")
    namespace: DnsLabel | None = Field(
        None, description="Namespace of the dashboard ConfigMap; unset: the stack's namespace. The sidecar must "
        "watch it (sidecar.dashboards.searchNamespace).")
    folder: text(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,62}$", "a folder name: letters, digits, ' ', '.', '_' or '-', "
                 "at most 63, starting with a letter or digit") | None = Field(
        None, description="Grafana folder, set as the sidecar's folder annotation (Grafana makes it a folder with "
        "the chart's sidecar.dashboards.provider.foldersFromFilesStructure); unset: the sidecar's folder.")
    folder_annotation: LabelKey = Field(
        GRAFANA_SIDECAR_FOLDER_ANNOTATION, description="Annotation the sidecar reads the folder from (its "
        "FOLDER_ANNOTATION).")


class Monitoring(Model):
    """Prometheus Operator PodMonitor and PrometheusRule; thresholds are the alerting contract."""

    enabled: bool = Field(True, description="Create the PodMonitor and the PrometheusRule.")
    labels: dict[LabelKey, NonEmptyLabelValue] = Field(default_factory=dict, description="Labels the Prometheus selects monitors and rules by.")
    prometheus_namespace: DnsLabel = Field(
        "monitoring", description="Namespace of the Prometheus (Prometheus Operator) that scrapes the engines; the "
        "engines' metrics ports accept its scrapes.")
    max_failure_ratio: float = Field(0.01, gt=0, lt=1, description="Alert when this share of requests fail (5xx) over 10 min.")
    max_queue_length: int = Field(32, ge=1, description="Alert when this many requests wait in an engine queue for 5 min.")
    max_kv_cache_usage: float = Field(0.95, gt=0, le=1, description="Alert when KV-cache usage stays above this for 10 min.")
    ttft_p95_slo_seconds: float = Field(2.0, gt=0, description="Alert when p95 TTFT exceeds this SLO for 10 min.")
    min_gpu_memory_headroom_gib: float = Field(
        2.0, gt=0, description="Alert when free GPU memory (DCGM) falls below this; the field report ran at about 93 of 96 GiB.")
    dashboards: Dashboards = Field(default_factory=Dashboards, description="Grafana dashboards (ConfigMaps for the Grafana sidecar).")


class OpenWebUi(Model):
    """OpenWebUI for people (field report 10), pointed at the stable endpoint."""

    enabled: bool = Field(False, description="Deploy OpenWebUI in this stack.")
    image: ImageRef | None = Field(None, description="OpenWebUI image pinned by digest (required when enabled).")
    storage_gib: int = Field(10, ge=1, description="Size of its data claim (users, chats, admin settings).")
    storage_class: StorageClassName | None = Field(None, description="StorageClass of the data claim; unset uses the cluster default.")


class ImagePrePull(Model):
    """Engine images pulled onto the GPU nodes while the sync Job runs, by a DaemonSet per image that
    requests no GPU, so the engine pod starts with its ~14 GB image present (127 s to pull in field
    report 12.2, time the engine's GPUs would otherwise sit idle)."""

    enabled: bool = Field(True, description="Run one GPU-less pre-pull DaemonSet per distinct engine image on the GPU pool.")


class Operations(Model):
    warmup: Warmup = Field(default_factory=Warmup, description="Warm-up Job.")
    smoke: Smoke = Field(default_factory=Smoke, description="Smoke-test Job.")
    load_test: LoadTest = Field(default_factory=LoadTest, description="Load-test Job.")
    monitoring: Monitoring = Field(default_factory=Monitoring, description="Monitoring and alerts.")
    open_webui: OpenWebUi = Field(default_factory=OpenWebUi, alias="openWebUI", description="OpenWebUI.")
    disruption_budget: bool = Field(True, description="A PodDisruptionBudget per served model letting one engine pod go at a time: maxUnavailable 1 "
                                     "for Deployment pods, else minAvailable (pods - 1), which the disruption controller computes "
                                     "without the scale subresource RoleSets, RoleInstances and RayClusters lack; a model spanning "
                                     "nodes, whose group goes down with any of its pods, one group at a time (docs/operations.md).")
    image_pre_pull: ImagePrePull = Field(default_factory=ImagePrePull, description="Engine image pre-pull on the GPU nodes.")


class NetworkPolicy(Model):
    enabled: bool = Field(True, description="Deny ingress by default; open the engines' serving ports to the gateway's "
                          "Envoy proxies and AIBrix plugin, their metrics ports to Prometheus and the plugin, both to "
                          "this stack's pods, and KV transfer within a P/D roleset only.")
    clients: Clients = Field(
        default_factory=Clients, description="Other teams' namespaces admitted to the path the exported per-model URL "
        "names (outputs `models.<name>.url`): with the gateway, its Envoy proxies, which these policies already "
        "admit and which a policy here cannot restrict further; without it, the model's Service, opened to these "
        "namespaces on its serving port only (docs/gateway-and-network.md).")
    egress: Egress = Field(default_factory=Egress, description="What this stack's pods may connect to: default-deny "
                           "egress with the allowances each pod needs (docs/gateway-and-network.md).")
