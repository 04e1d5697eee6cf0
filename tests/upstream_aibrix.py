"""AIBrix v0.7.0 behaviour the stacks, the day-2 Jobs and the fakes depend on, ported from its source:
the one place a maintainer re-checks when bumping the AIBrix pin (config_model/operations.py
Platform.aibrix_version).

Every entry names the file it ports, at tag v0.7.0 of github.com/vllm-project/aibrix. Read with
`git -C <mirror> show v0.7.0:<path>`. The Go code cannot run here (a controller and an Envoy
ext_proc server), so the branch logic is ported line for line; tests import it from here, and
tests/fake_openai.py's gateway answers with these values. Re-check on a bump: `git -C <mirror> diff
v0.7.0 <new tag> -- <each path below>`, and the Envoy Gateway version AIBrix installs
(tests/upstream_envoy_gateway.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

TAG = "v0.7.0"

# The release this module was read at, machine-readable (tests/test_upstream_releases.py compares it with
# the AIBrix the stacks are built for, config_model Platform.aibrix_version, and names these files on a
# mismatch).
PORTED_FROM = {
    "repo": "vllm-project/aibrix", "release": TAG, "component": "aibrix",
    "files": (
        "pkg/constants/model.go", "pkg/cache/cache_metrics.go", "pkg/cache/utils.go", "pkg/cache/informers.go",
        "pkg/plugins/gateway/gateway.go", "pkg/plugins/gateway/types.go", "pkg/plugins/gateway/util.go",
        "pkg/plugins/gateway/gateway_req_body.go", "pkg/plugins/gateway/gateway_req_headers.go",
        "pkg/plugins/gateway/gateway_rsp_headers.go", "pkg/plugins/gateway/configprofiles/configprofiles.go",
        "pkg/plugins/gateway/algorithms/", "pkg/types/router_context.go", "pkg/utils/pod.go", "pkg/utils/util.go",
        "pkg/controller/modelrouter/modelrouter_controller.go", "pkg/controller/stormservice/",
        "pkg/controller/roleset/", "pkg/controller/podset/podset_controller.go", "pkg/webhook/stormservice_webhook.go",
        "api/orchestration/v1alpha1/podset_types.go", "pkg/controller/rayclusterfleet/sync.go",
        "pkg/controller/rayclusterreplicaset/rayclusterreplicaset_utils.go", "pkg/controller/constants/stormservice.go",
        "pkg/controller/util/controller_utils.go", "pkg/controller/podautoscaler/", "pkg/metrics/",
        "api/autoscaling/v1alpha1/podautoscaler_types.go", "api/orchestration/v1alpha1/stormservice_types.go",
        "config/crd/", "config/default/kustomization.yaml", "config/gateway/gateway.yaml",
        "config/gateway/gateway-plugin/gateway-plugin.yaml", "config/rbac/controller-manager/role.yaml",
        ".github/workflows/release-build.yaml", ".github/workflows/installation-tests.yml",
        "deployment/terraform/kubernetes/data.tf", "python/aibrix/aibrix/metadata/api/v1/models.py",
    ),
}
AIBRIX_NAMESPACE = "aibrix-system"          # pkg/plugins/gateway: defaultAIBrixNamespace

# Every name the algorithms package registers at init (pkg/plugins/gateway/algorithms/*.go,
# Register/RegisterProvider): random.go, least_request.go, least_busy_time.go, least_gpu_cache.go,
# least_kv_cache.go, least_latency.go, least_util.go ("least-utilization"), throughput.go,
# prefix_cache.go, prefix_cache_preble.go, power_of_two.go, simple_session_affinity.go,
# vtc/vtc_router.go ("vtc-basic"), slo.go (four slo names), pd_disaggregation.go ("pd").
REGISTERED_STRATEGIES = frozenset({
    "random", "least-request", "least-busy-time", "least-gpu-cache", "least-kv-cache", "least-latency",
    "least-utilization", "throughput", "prefix-cache", "prefix-cache-preble", "power-of-two",
    "session-affinity", "vtc-basic", "slo", "slo-pack-load", "slo-least-load", "slo-least-load-pulling", "pd",
})

# pkg/constants/model.go
LABEL_NAME = "model.aibrix.ai/name"
LABEL_PORT = "model.aibrix.ai/port"
LABEL_METRIC_PORT = "model.aibrix.ai/metric-port"
ANN_CONFIG = "model.aibrix.ai/config"
DEFAULT_METRIC_PORT = 8000                  # pkg/cache/cache_metrics.go defaultMetricPort
HEADER_ROUTING_STRATEGY = "routing-strategy"  # pkg/plugins/gateway/types.go HeaderRoutingStrategy


@dataclass
class Pod:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    ready: bool = True


def metric_port(pod: Pod) -> int:
    """pkg/cache/utils.go getPodMetricPort: the label if it parses as an int, else 8000."""
    value = pod.labels.get(LABEL_METRIC_PORT, "")
    try:
        return int(value) if value else DEFAULT_METRIC_PORT
    except ValueError:
        return DEFAULT_METRIC_PORT


def model_of(pod: Pod) -> str | None:
    """pkg/cache/informers.go getModelNameFromPod / addPod: label first, then annotation; Ray worker
    pods are ignored (isWorkerPod)."""
    if pod.labels.get("ray.io/node-type") == "worker":
        return None
    return pod.labels.get(LABEL_NAME) or pod.annotations.get(LABEL_NAME) or None


def parse_model_config(text: str) -> dict | None:
    """configprofiles/configprofiles.go ParseModelConfig: JSON with a non-empty `profiles`."""
    text = text.strip()
    if not text:
        return None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(cfg, dict) or not cfg.get("profiles"):
        return None
    return cfg


def get_profile(cfg: dict, name: str) -> dict | None:
    """configprofiles.go GetProfile: the named profile, else defaultProfile or "default"."""
    profiles = cfg["profiles"]
    if name and name in profiles:
        return profiles[name]
    return profiles.get(cfg.get("defaultProfile") or "default")


def resolve_profile(pods: list[Pod], header_profile: str = "") -> dict | None:
    """configprofiles.go ResolveProfile: the first pod (cache order) whose annotation parses."""
    for pod in pods:
        cfg = parse_model_config(pod.annotations.get(ANN_CONFIG, ""))
        if cfg is not None:
            return get_profile(cfg, header_profile)
    return None


def derive_routing_strategy(headers: dict[str, str], profile: dict | None,
                            env_routing_algorithm: str | None) -> tuple[str, bool]:
    """util.go deriveRoutingStrategyFromContext (lines 517-539): header (case-insensitive, non-blank),
    then the profile's routingStrategy, then ROUTING_ALGORITHM (LookupEnv: set means enabled)."""
    for k, v in headers.items():
        if k.lower() == HEADER_ROUTING_STRATEGY:
            if v.strip():
                return v, True
            break
    if profile is not None and str(profile.get("routingStrategy", "")).strip():
        return profile["routingStrategy"].strip(), True
    if env_routing_algorithm is None:
        return "", False
    return env_routing_algorithm, True


def parse_multi_router_config(text: str) -> list[str] | None:
    """algorithms/router.go ParseMultiRouterConfig: "a:2,b" -> names with weight > 0; pd and slo*
    are exclusive. None on a parse error."""
    if not text:
        return None
    names = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            return None
        name, weight = part, 1
        if ":" in part:
            pieces = part.split(":")
            if len(pieces) != 2 or not pieces[0].strip():
                return None
            name = pieces[0].strip()
            try:
                weight = int(pieces[1].strip())
            except ValueError:
                return None
            if not 0 <= weight <= 1_000_000:
                return None
        if weight > 0:
            names.append(name)
    if not names:
        return None
    for name in names:
        if name == "pd" or name.startswith("slo"):
            return [name]
    return names


def validate(strategy: str) -> bool:
    """algorithms/router.go Validate: every parsed name registered (multi-strategy scorers aside)."""
    names = parse_multi_router_config(strategy)
    return names is not None and all(n in REGISTERED_STRATEGIES for n in names)


def httproute_name(model: str) -> str:
    """gateway.go validateHTTPRouteStatus, modelrouter_controller.go createHTTPRoute."""
    return f"{model}-router"


def httproute_accepted(route: dict | None) -> bool:
    """gateway.go validateHTTPRouteStatus (lines 460-527): the route must exist; every parent
    status needs conditions, Accepted with reason Accepted, ResolvedRefs with reason ResolvedRefs."""
    if route is None:
        return False
    for parent in (route.get("status") or {}).get("parents") or []:
        conditions = parent.get("conditions") or []
        if not conditions:
            return False
        for c in conditions:
            if c.get("type") == "Accepted" and c.get("reason") != "Accepted":
                return False
            if c.get("type") == "ResolvedRefs" and c.get("reason") != "ResolvedRefs":
                return False
    return True


def pd_pairs(pods: list[Pod]) -> tuple[list[Pod], list[Pod]]:
    """algorithms/pd_disaggregation.go collectAndBucketPods, bucketing off: prefill and decode pods
    of rolesets (label roleset-name) that have both roles (label role-name); pods with a
    stormservice pod-group-index other than 0 carry no HTTP server (isPodWithHTTPServer)."""
    by_roleset: dict[str, tuple[list[Pod], list[Pod]]] = {}
    for pod in pods:
        roleset, role = pod.labels.get("roleset-name"), pod.labels.get("role-name")
        if roleset is None or role is None:
            continue
        if pod.labels.get("stormservice.orchestration.aibrix.ai/pod-group-index", "0") != "0":
            continue
        if role in ("prefill", "decode"):
            by_roleset.setdefault(roleset, ([], []))[0 if role == "prefill" else 1].append(pod)
    prefill = [p for ps, ds in by_roleset.values() if ps and ds for p in ps]
    decode = [d for ps, ds in by_roleset.values() if ps and ds for d in ds]
    return prefill, decode


@dataclass(frozen=True)
class Decision:
    status: int              # HTTP status the client sees from the plugin (200: forwarded)
    branch: str              # which branch of HandleRequestBody decided
    strategy: str = ""


def handle_request_body(model: str, pods_by_model: dict[str, list[Pod]], headers: dict[str, str],
                        routes: dict[tuple[str, str], dict], env_routing_algorithm: str | None = None,
                        config_profile: str = "") -> Decision:
    """gateway_req_body.go HandleRequestBody (lines 74-155), for a JSON body naming `model`:
    - validateModelAvailability: unknown model 400, no routable pod 503;
    - applyConfigProfile + deriveRoutingStrategyFromContext; an invalid strategy is 400;
    - no strategy: validateHTTPRouteStatus on aibrix-system/<model>-router, 503 unless Accepted,
      else the header `model` is set and Envoy routes by HTTPRoute;
    - a strategy: selectTargetPod (gateway.go 424-455), 503 when it finds no pod; for pd the P/D
      router needs a complete prefill/decode roleset (pd_disaggregation.go filterPrefillDecodePods)."""
    if model not in pods_by_model:
        return Decision(400, "model-not-found")
    pods = pods_by_model[model]
    routable = [p for p in pods if p.ready]
    if not routable:
        return Decision(503, "no-ready-pod")
    profile = resolve_profile(pods, config_profile)
    strategy, enabled = derive_routing_strategy(headers, profile, env_routing_algorithm)
    if enabled and not validate(strategy):
        return Decision(400, "incorrect-routing-strategy", strategy)
    if not enabled:
        if not httproute_accepted(routes.get((AIBRIX_NAMESPACE, httproute_name(model)))):
            return Decision(503, "httproute-not-accepted")
        return Decision(200, "route-by-model-header")
    names = parse_multi_router_config(strategy) or []
    if names == ["pd"]:
        prefill, decode = pd_pairs(routable)
        if not prefill or not decode:
            return Decision(503, "pd-no-pair", strategy)
    return Decision(200, "target-pod", strategy)


def controller_names(kind: str, name: str, namespace: str, pod_labels: list[dict[str, str]],
                     top_labels: dict[str, str]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the objects AIBrix's controllers create for one of our objects:
    - StormService: a headless Service named after it (pkg/controller/stormservice/sync.go
      syncHeadlessService, Name: service.Name);
    - Deployment or RayClusterFleet with the model label at top level: HTTPRoute
      aibrix-system/<model>-router and ReferenceGrant aibrix-system-reserved-referencegrant-in-<ns>
      (pkg/controller/modelrouter/modelrouter_controller.go createHTTPRoute, createReferenceGrant)."""
    out: set[tuple[str, str, str]] = set()
    if kind == "StormService":
        out.add(("Service", namespace, name))
    if kind in ("Deployment", "RayClusterFleet") and LABEL_NAME in top_labels:
        out.add(("HTTPRoute", AIBRIX_NAMESPACE, httproute_name(top_labels[LABEL_NAME])))
        if namespace != AIBRIX_NAMESPACE:
            out.add(("ReferenceGrant", namespace, f"{AIBRIX_NAMESPACE}-reserved-referencegrant-in-{namespace}"))
    return out


# config/gateway/gateway.yaml: the EnvoyPatchPolicy `epp` (aibrix-epp) adds, at index 0 of the Gateway's
# RouteConfiguration "aibrix-system/aibrix-eg/http", the Envoy route `original_route`: any request with a
# `routing-strategy` header goes to the ORIGINAL_DST cluster `original_destination_cluster`, which reads
# the pod from the `target-pod` header, with a 120 s route timeout and no retry policy or rate limit.
# The plugin sets both headers on the "target-pod" branch of handle_request_body (gateway_req_body.go
# buildEnvoyProxyHeaders(HeaderRoutingStrategy, ..., HeaderTargetPod, ...)). Envoy picks the route only
# after the plugin's body response (ext_proc holds the headers until then in Buffered mode, and the
# header response cleared the route cache: gateway_req_headers.go ClearRouteCache: true), and the
# HTTP filters after ext_proc, the router and the local rate limit among them (Envoy Gateway v1.2.8
# internal/xds/translator/httpfilters.go orders ext_proc 8+, local_ratelimit 202, router 204), read
# that route's configuration. So a request on that branch never meets an HTTPRoute of ours, nor any
# policy attached to one; a request routed by the `model` header ("route-by-model-header") ends on the
# HTTPRoute that matches it.
ORIGINAL_ROUTE = {"name": "original_route", "match_header": HEADER_ROUTING_STRATEGY, "timeout_seconds": 120,
                  "cluster": "original_destination_cluster", "pod_header": "target-pod"}


# The same EnvoyPatchPolicy's patch of that RouteConfiguration, as written at v0.7.0 (its other two
# patches add the cluster and change a listener field), and its priority: none, so 0.
ORIGINAL_ROUTE_PATCH = {
    "type": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    "name": "aibrix-system/aibrix-eg/http",
    "operation": {"op": "add", "path": "/virtual_hosts/0/routes/0", "value": {
        "name": "original_route",
        "match": {"prefix": "/", "headers": [{"name": "routing-strategy",
                                              "string_match": {"safe_regex": {"regex": ".*"}}}]},
        "route": {"cluster": "original_destination_cluster", "timeout": "120s"},
        "typed_per_filter_config": {
            "envoy.filters.http.ext_proc/envoyextensionpolicy/aibrix-system/aibrix-gateway-plugins-extension-policy/extproc/0": {
                "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "config": {}}}}},
}
ORIGINAL_ROUTE_PATCH_PRIORITY = 0


def final_route(decision: Decision) -> str:
    """The Envoy route a request the plugin forwarded ends on: AIBrix's original_route, or an HTTPRoute."""
    assert decision.status == 200, decision
    return ORIGINAL_ROUTE["name"] if decision.branch == "target-pod" else "httproute"


# Objects the AIBrix install itself owns (config/gateway/gateway-plugin/gateway-plugin.yaml, with the
# kustomize prefix aibrix- and namespace aibrix-system): the entry route that runs the plugin and the
# metadata route.
INSTALLED = {("HTTPRoute", AIBRIX_NAMESPACE, "aibrix-reserved-router"),
             ("HTTPRoute", AIBRIX_NAMESPACE, "aibrix-reserved-router-metadata-endpoint")}


# ---- Installation and the plugin's own traffic (components/platform.py, components/network.py) ----

# .github/workflows/release-build.yaml at v0.7.0 builds three assets, applied in this order by the
# README's "Install stable distribution" (all --server-side): `kustomize build config/dependency`,
# `config/crd` (new in v0.7.0: config/default/kustomization.yaml leaves the CRDs out, "so that
# uninstalling the AIBrix operator does not cascade-delete user CRs", aibrix#2062) and
# `config/overlays/release`.
RELEASE_ASSETS = ("aibrix-dependency-{tag}.yaml", "aibrix-core-crds-{tag}.yaml", "aibrix-core-{tag}.yaml")
RELEASE_URL = "https://github.com/vllm-project/aibrix/releases/download/{tag}/"

# config/gateway/gateway-plugin/gateway-plugin.yaml: the plugin Deployment's pod labels, in
# config/default's namespace aibrix-system; config/gateway/gateway.yaml: Gateway `eg`, renamed
# aibrix-eg by config/default's namePrefix.
GATEWAY_PLUGIN_POD_LABELS = {"app": "gateway-plugins"}
GATEWAY_NAME = "aibrix-eg"
# Another AIBrix pod in the same namespace, which never calls an engine.
CONTROLLER_MANAGER_POD_LABELS = {"control-plane": "controller-manager"}


def model_port(labels: dict[str, str]) -> int:
    """pkg/utils/pod.go GetModelPortForPod: the pod the plugin picks gets the request (and, for P/D,
    the plugin's own prefill request, algorithms/pd/prefill/default.go) on this port; 8000 when
    the label is missing or not a number."""
    try:
        return int(labels.get(LABEL_PORT, ""))
    except ValueError:
        return DEFAULT_METRIC_PORT


# pkg/utils/util.go getDataParallelSize: the env variable the plugin reads, by this exact name.
ENV_DATA_PARALLEL_SIZE = "data-parallel-size"


def ports_for_pod(labels: dict[str, str], env: list[tuple[str, str]]) -> list[int]:
    """pkg/utils/util.go GetPortsForPod: none without a valid model.aibrix.ai/port label (1-65535);
    the base port alone unless some container's env sets data-parallel-size above 1 (the first such
    variable in container order counts, a bad number counts as 0); else base .. base + size - 1."""
    try:
        base = int(labels.get(LABEL_PORT, ""))
    except ValueError:
        return []
    if not 0 < base <= 65535:
        return []
    size = 0
    for name, value in env:
        if name == ENV_DATA_PARALLEL_SIZE and value != "":
            try:
                size = max(int(value), 0)
            except ValueError:
                size = 0
            break
    return [base] if size <= 1 else [base + i for i in range(size)]


def picks_without_strategy(routable: list[tuple[dict[str, str], list[tuple[str, str]]]]) -> bool:
    """pkg/plugins/gateway/gateway.go selectTargetPod (lines 424-455): after FilterRoutablePods and the
    external filter, exactly one pod with at most one port gets the request directly; the strategy's
    Route (prefix indexing and all) runs only otherwise. Each pod is (labels, its containers' env)."""
    return len(routable) == 1 and len(ports_for_pod(*routable[0])) <= 1


# ---- What a client of the gateway sees (components/scripts/route_evidence.py, openai_client.py) ----

# pkg/plugins/gateway/types.go (HeaderRoutingStrategy, HeaderTargetPod, HeaderTargetPodIP,
# HeaderRequestID) and gateway_rsp_headers.go HandleResponseHeaders: a routed response carries these;
# target-pod-ip is "ip:port" (pkg/types/router_context.go TargetAddress).
GATEWAY_RESPONSE_HEADERS = (HEADER_ROUTING_STRATEGY, "target-pod", "target-pod-ip", "request-id")
# algorithms/pd_disaggregation.go Route: only when a prefill/decode pair was chosen; a combined pod
# (nil prefill) gets neither. Prefill requests copy the client's headers (pd/prefill/default.go).
PD_RESPONSE_HEADERS = ("prefill-target-pod", "prefill-target-pod-ip")
# types.go HeaderErrorNoModelBackends; gateway_req_body.go validateModelAvailability: 400 with
# `x-error-no-model-backends: <model>` while no pod of the model is known, 503 with `: true` while none
# is ready (the Decision branches "model-not-found" and "no-ready-pod" above).
NO_BACKENDS_HEADER = "x-error-no-model-backends"
# algorithms/pd/transfer/shfs.go: the prefill request carries these kv_transfer_params; the decode
# request the prefill's answer with remote_host set to the prefill pod IP.
SHFS_PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                       "remote_block_ids": None, "remote_host": None, "remote_port": None}
# config/gateway/gateway-plugin/gateway-plugin.yaml: /v1/models goes to aibrix-metadata-service, which
# lists the model.aibrix.ai/name labels of running pods (python/aibrix/aibrix/metadata/api/v1/models.py),
# never through the routing plugin.

# config/gateway/gateway.yaml: Gateway `eg` (aibrix-eg after the namePrefix), listener `http` on port 80.
GATEWAY_LISTENER_PORT = 80
# The Envoy proxy Service of that Gateway as AIBrix's own scripts name it (deployment/terraform/
# kubernetes/data.tf, .github/workflows/installation-tests.yml port-forward), in namespace
# envoy-gateway-system; the naming rule is Envoy Gateway's (tests/upstream_envoy_gateway.py).
ENVOY_GATEWAY_SERVICE_AIBRIX_DEFAULT = "envoy-aibrix-system-aibrix-eg-903790dc"


# Request ids on a routed request (what the load test can and cannot correlate): gateway.go Process
# starts each stream with requestID uuid.New(); gateway_req_headers.go HandleRequestHeaders replaces
# it with the trace id of a W3C `traceparent` (util.go GetTraceID) and keeps only authorization,
# content-type, routing-strategy, the session, external-filter and traceparent headers in ReqHeaders;
# gateway_req_body.go HandleRequestBody sets `X-Request-Id: <that id>` on the request to the target
# pod (Envoy ext_proc set_headers: add or replace) and pd/prefill/default.go executeHTTP the same on
# the prefill request. A client's x-request-id never reaches an engine through the plugin.
def engine_request_id(client_headers: dict[str, str], new_uuid: str) -> str:
    traceparent = next((v for k, v in client_headers.items() if k.lower() == "traceparent"), "").strip()
    parts = traceparent.split("-")
    if traceparent and len(parts) == 4 and len(parts[1]) == 32:
        return parts[1]
    return new_uuid


# pd/prefill/payload.go PreparePayload: the prefill request is the client's body (plus the SHFS
# kv_transfer_params) with these set, and without stream_options and min_tokens.
PREFILL_BODY_OVERRIDES = {"max_tokens": 1, "max_completion_tokens": 1, "stream": False}
PREFILL_BODY_DROPPED = ("stream_options", "min_tokens")


# ---- The PodAutoscaler (components/autoscaling.py, tests/test_autoscaling.py) ----
# api/autoscaling/v1alpha1/podautoscaler_types.go; CRD config/crd/autoscaling/autoscaling.aibrix.ai_podautoscalers.yaml.
PA_API_VERSION = "autoscaling.aibrix.ai/v1alpha1"
PA_KIND = "PodAutoscaler"
# podautoscaler_controller.go Reconcile: HPA creates a Kubernetes HPA (reconcileHPA/makeHPA: custom
# metrics then need an adapter); KPA and APA compute replicas themselves from metrics AIBrix fetches.
PA_SELF_FETCHING = ("KPA", "APA")
# GetPaMetricSources: "for now we only support one MetricsSource".
PA_MAX_METRIC_SOURCES = 1
# validatePodMetricSource: a pod source needs protocolType, port and path.
PA_POD_SOURCE_REQUIRED = ("protocolType", "port", "path")
# pkg/controller/podautoscaler/metrics/client.go stableWindowDuration: the APA average (fixed).
PA_STABLE_WINDOW_SECONDS = 180
# context/context.go NewBaseScalingContext; each settable by the annotation of types/annotations.go.
PA_ANN_SCALE_UP_COOLDOWN = "autoscaling.aibrix.ai/scale-up-cooldown-window"
PA_ANN_SCALE_DOWN_COOLDOWN = "autoscaling.aibrix.ai/scale-down-cooldown-window"
PA_DEFAULTS = {"maxScaleUpRate": 2.0, "maxScaleDownRate": 2.0, "upTolerance": 0.1, "downTolerance": 0.1,
               "scaleUpCooldownSeconds": 0, "scaleDownCooldownSeconds": 300}
# workload_scale.go: without subTargetSelector the scaler reads spec.replicas of the target object itself
# (GetCurrentReplicasFromScale: "the 'replicas' field was not found" otherwise) and writes it with an
# Update (SetDesiredReplicas); it selects pods by the target's spec.selector (GetPodSelectorFromScale).
# A StormService role (subTargetSelector.roleName, pooled mode) is patched in
# spec.template.spec.roles[].replicas (setDesiredReplicasForRole).
PA_REPLICAS_PATH = ("spec", "replicas")
PA_ROLE_REPLICAS_PATH = ("spec", "template", "spec", "roles", "[]", "replicas")
# config/rbac/controller-manager/role.yaml: API groups whose objects the controller manager may update.
# Deployments (apps) yes; nothing of workloads.x-k8s.io (RoleBasedGroup).
CONTROLLER_UPDATABLE_GROUPS = frozenset({"apps", "orchestration.aibrix.ai"})

# pkg/metrics/metrics.go Metrics: AIBrix metric -> (raw type, engine -> the engine's metric it reads).
PA_METRICS = {
    "kv_cache_usage_perc": ("gauge", {"vllm": "vllm:kv_cache_usage_perc", "sglang": "sglang:token_usage"}),
    "gpu_cache_usage_perc": ("gauge", {"vllm": "vllm:gpu_cache_usage_perc", "sglang": "sglang:token_usage"}),
    "num_requests_waiting": ("gauge", {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs"}),
    "time_to_first_token_seconds": ("histogram", {"vllm": "vllm:time_to_first_token_seconds",
                                                  "sglang": "sglang:time_to_first_token_seconds"}),
}
LABEL_ENGINE = "model.aibrix.ai/engine"     # pkg/constants/model.go ModelLabelEngine


def engine_type(labels: dict[str, str]) -> str:
    """pkg/metrics/utils.go GetEngineType: the label, else "vllm"."""
    return labels.get(LABEL_ENGINE) or "vllm"


def pod_metric(metric: str, engine: str, exported: dict[str, float], has_ip: bool = True) -> float | None:
    """What metrics/fetcher.go RestMetricsFetcher.fetchFromPod gives the autoscaler for one pod: None
    (skipped by collector.go collectFromPods) without a pod IP; 0.0 when the metric cannot be read
    ("Returning zero value": a pod still cold-starting, an engine without the metric); a histogram's
    GetSimpleValue, which is 0.0 (pkg/metrics/types.go HistogramMetricValue); else the sample."""
    if not has_ip:
        return None
    kind, raw = PA_METRICS[metric]
    name = raw.get(engine)
    if name is None or name not in exported:
        return 0.0
    return 0.0 if kind == "histogram" else exported[name]


def apa_replicas(current: int, values: list[float], target: float, min_replicas: int, max_replicas: int,
                 up_rate: float = 2.0, down_rate: float = 2.0, up_tol: float = 0.1, down_tol: float = 0.1) -> int:
    """algorithm/apa.go computeTargetReplicas on the average of the pods' values (metrics/client.go
    UpdateMetrics averages each snapshot; one snapshot here), then applyConstraints (algorithm.go).
    No pods, no values: the window's average is 0 (types/metrics.go TimeWindow.Avg of an empty window)."""
    import math
    use = sum(values) / len(values) if values else 0.0
    if use / target > 1 + up_tol:
        desired = min(math.ceil(current * use / target), math.ceil(up_rate * current))
    elif use / target < 1 - down_tol:
        desired = max(math.ceil(current * use / target), math.floor(current / down_rate))
    else:
        desired = current
    return min(max(desired, min_replicas), max_replicas)


def pa_reconcile(current: int, values: list[float], target: float, min_replicas: int, max_replicas: int) -> int:
    """The target's replicas after one reconcile (podautoscaler_controller.go computeScaleDecision, run
    every 10 s, DefaultResyncInterval): at 0 with minReplicas above 0 it does not scale ("scaling
    disabled: current replicas is 0"); outside the bounds it moves to the nearest; else APA on the
    pods' values (windows 0 s, as rendered)."""
    if current == 0 and min_replicas != 0:
        return 0
    if current > max_replicas:
        return max_replicas
    if current < min_replicas:
        return min_replicas
    return apa_replicas(current, values, target, min_replicas, max_replicas)


def stabilize(history: list[tuple[float, int]], recommendation: int, current: int, now: float,
              up_window: float, down_window: float) -> int:
    """podautoscaler_controller.go stabilizeRecommendation (KPA/APA): the recommendation joins the
    history; above current, the MAX of the recommendations within the scale-up window, below it the
    MIN within the scale-down window (timestamp.After(cutoff): strictly newer). `history` is
    [(time, recommendation)] and is extended in place."""
    history.append((now, recommendation))
    if recommendation == current:
        return current
    window, pick = (up_window, max) if recommendation > current else (down_window, min)
    recent = [r for t, r in history if t > now - window]
    return pick(recent) if recent else recommendation


# ---- A StormService scaled by the PodAutoscaler (components/autoscaling.py, components/combined.py) ----
# workload_scale.go, PodAutoscaler without subTargetSelector: GetCurrentReplicasFromScale reads the
# StormService's own spec.replicas (the count of RoleSets), SetDesiredReplicas writes it with an Update
# of the whole object ("we have choice to use scale api, but it requires /scale RBAC": no /scale call,
# and config/rbac/controller-manager/role.yaml grants stormservices create/get/list/patch/update and no
# stormservices/scale). The annotation autoscaling.aibrix.ai/storm-service-mode is read only on the
# subTargetSelector (role) paths. getPodSelectorForRole selects the pods by the label below, plus
# pod-group-index 0 only for a role with podGroupSize > 1; podautoscaler_controller.go
# reconcileCustomPA / getScaleResource fetch the target object itself as the "scale" object.
SS_API_VERSION = "orchestration.aibrix.ai/v1alpha1"
SS_KIND = "StormService"
SS_NAME_LABEL = "storm-service-name"            # pkg/controller/constants/stormservice.go StormServiceNameLabelKey
SS_ROLE_NAME_LABEL = "role-name"                # RoleNameLabelKey
SS_ROLESET_NAME_LABEL = "roleset-name"          # RoleSetNameLabelKey
# The CRD's scale subresource (config/crd/orchestration/orchestration.aibrix.ai_stormservices.yaml, from
# api/orchestration/v1alpha1/stormservice_types.go +kubebuilder:subresource:scale): `kubectl scale` works.
SS_SCALE_SUBRESOURCE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.scalingTargetSelector"}
# stormservice_types.go StormServiceUpdateStrategy: +kubebuilder:validation:Enum={RollingUpdate,InPlaceUpdate}.
SS_UPDATE_STRATEGY_TYPES = ("RollingUpdate", "InPlaceUpdate")


def ss_pod_selector(ss_name: str, roles: list[dict]) -> dict[str, str]:
    """workload_scale.go getPodSelectorForRole without a role name: the StormService's pods, the first of
    each pod group where a role has podGroupSize > 1."""
    sel = {SS_NAME_LABEL: ss_name}
    if any((r.get("podGroupSize") or 1) > 1 for r in roles):
        sel["stormservice.orchestration.aibrix.ai/pod-group-index"] = "0"
    return sel


def ss_pod_labels(ss_name: str, roleset: str, role: dict) -> dict[str, str]:
    """pkg/controller/roleset/utils.go renderStormServicePod: the role template's labels, plus roleset-name,
    role-name, role-template-hash and storm-service-name (the RoleSet's label, stormservice/
    rolesetoperations.go renderRoleSet). Every RoleSet renders the same role template."""
    labels = dict(((role.get("template") or {}).get("metadata") or {}).get("labels") or {})
    labels.update({SS_ROLESET_NAME_LABEL: roleset, SS_ROLE_NAME_LABEL: role["name"], "role-template-hash": "h",
                   SS_NAME_LABEL: ss_name})
    return labels


def ss_fenceposts(max_surge: int | None, max_unavailable: int | None, desired: int) -> tuple[int, int]:
    """stormservice/utils.go ResolveFenceposts (integers): both unset count 0; both 0 makes unavailable 1."""
    surge, unavailable = max_surge or 0, max_unavailable or 0
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def ss_limits(spec: dict) -> tuple[int, int]:
    """(maxSurge, minAvailable) in RoleSets: utils.go MaxSurge, MinAvailable, MaxUnavailable. Only a
    RollingUpdate (or unset) strategy has either; InPlaceUpdate has 0 and 0."""
    strategy = spec.get("updateStrategy") or {}
    replicas = spec.get("replicas", 1)
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0, 0
    surge, unavailable = ss_fenceposts(strategy.get("maxSurge"), strategy.get("maxUnavailable"), replicas)
    unavailable = 0 if replicas == 0 else min(unavailable, replicas)
    return surge, replicas - unavailable


@dataclass
class RoleSet:
    revision: str
    ready: bool = False     # its Ready condition: every role's readyReplicas reached its replicas (roleset/sync.go)


def ss_reconcile(spec: dict, rolesets: list[RoleSet], update_revision: str) -> bool:
    """One pass of stormservice/sync.go sync over a replica-mode StormService (not paused, one
    revision being rolled out to), mutating `rolesets`: scaling() creates RoleSets at the update revision
    up to spec.replicas + maxSurge, or deletes down to spec.replicas stopping at minAvailable ready ones;
    only when it changed nothing, rollout() runs. RollingUpdate (rollingUpdate): delete outdated RoleSets,
    a ready one only while more than minAvailable are ready, then create min(replicas + maxSurge - all,
    replicas - updated) at the update revision, `all` being the RoleSets listed before the deletions: a
    deleted RoleSet is still listed until its pods are gone (roleset_controller.go adds
    orchestration.aibrix.ai/roleset-finalizer; roleset/sync.go finalize removes it only once no pod is
    left), so here a deleted RoleSet is gone by the next pass and never beside its replacement. InPlaceUpdate (inPlaceUpdate): every outdated RoleSet is
    relabelled to the update revision at once and rolls its own pods (updateRoleSet): marked here as
    not ready. Returns whether scaling() acted."""
    want = spec.get("replicas", 1)
    max_surge, min_available = ss_limits(spec)
    diff = len(rolesets) - want
    if diff < 0:
        budget = min(-diff, want + max_surge - len(rolesets))
        rolesets += [RoleSet(update_revision) for _ in range(max(budget, 0))]
        return budget > 0
    if diff > 0:
        ready = sum(r.ready for r in rolesets)
        rolesets.sort(key=lambda r: (r.revision == update_revision, r.ready))  # sortRoleSetByRevision
        doomed = []
        for r in rolesets:
            if diff == 0 or (r.ready and ready <= min_available):
                break
            doomed.append(r)
            ready -= r.ready
            diff -= 1
        for r in doomed:
            rolesets.remove(r)
        return bool(doomed)
    if sum(r.revision == update_revision for r in rolesets) == want:
        return False
    if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "InPlaceUpdate":
        for r in rolesets:
            if r.revision != update_revision:
                r.revision, r.ready = update_revision, False
        return False
    ready = sum(r.ready for r in rolesets)
    listed = len(rolesets)      # allRoleSets as listed before this pass deleted any
    outdated = sorted((r for r in rolesets if r.revision != update_revision), key=lambda r: r.ready)
    for r in outdated:
        if r.ready and ready <= min_available:
            break
        rolesets.remove(r)
        ready -= r.ready
    updated = sum(r.revision == update_revision for r in rolesets)
    create = max(0, min(want + max_surge - listed, want - updated))
    rolesets += [RoleSet(update_revision) for _ in range(create)]
    return False


def ss_status(spec: dict, rolesets: list[RoleSet], current_revision: str, update_revision: str,
              generation: int) -> dict:
    """stormservice/sync.go updateStatus, for RoleSets whose roles are all updated (a RoleSet is created
    at its revision in replica mode): replicas, updatedReplicas and updatedReadyReplicas count RoleSets,
    currentRevision becomes the update revision when no RoleSet is left at the old one, and Ready needs
    readyReplicas >= spec.replicas, updatedReplicas == replicas == spec.replicas and the two revisions equal.
    omitempty drops zero counts (stormservice_types.go)."""
    want = spec.get("replicas", 1)
    updated = sum(r.revision == update_revision for r in rolesets)
    updated_ready = sum(r.revision == update_revision and r.ready for r in rolesets)
    current = sum(r.revision == current_revision for r in rolesets)
    if current == 0:
        current_revision = update_revision
    ready = sum(r.ready for r in rolesets)
    is_ready = ready >= want and updated == want and len(rolesets) == want and current_revision == update_revision
    status = {"observedGeneration": generation, "currentRevision": current_revision, "updateRevision": update_revision,
              "conditions": [{"type": "Ready" if is_ready else "Progressing", "status": "True"}],
              "scalingTargetSelector": f"{SS_NAME_LABEL}=<name>"}
    for key, value in (("replicas", len(rolesets)), ("readyReplicas", ready), ("updatedReplicas", updated),
                       ("updatedReadyReplicas", updated_ready)):
        if value:
            status[key] = value
    return {"metadata": {"generation": generation}, "status": status}


# The controller ownerReference on the engine pods, which the Kubernetes disruption controller follows
# (tests/upstream_kubernetes.py), and the chain above it:
# - StormService -> RoleSet: stormservice/rolesetoperations.go renderRoleSet, NewControllerRef(stormService);
#   spec.replicas RoleSets (sync.go scaling).
# - RoleSet -> Pod: roleset/rolesyncer.go StatelessRoleSyncer.Scale (and StatefulRoleSyncer.Scale) create
#   each pod with util/controller_utils.go GetPodFromTemplate(&role.Template, roleSet,
#   NewControllerRef(roleSet, RoleSet)), for a role without podGroupSize > 1 (GetRoleSyncer; with it a
#   PodSet sits between, podset_rollsyncer.go).
# - RayClusterFleet -> RayClusterReplicaSet: rayclusterfleet/sync.go getNewReplicaSet, NewControllerRef(d);
#   RayClusterReplicaSet -> RayCluster: rayclusterreplicaset/rayclusterreplicaset_utils.go
#   constructRayCluster, NewControllerRef(replicaset); spec.replicas RayClusters. The pods are KubeRay's
#   (tests/upstream_kuberay.py POD_CONTROLLER).
# Whether RoleSet has /scale is read from its CRD (../shared/crds/aibrix), not stated here.
ROLESET_POD_CONTROLLER = ("orchestration.aibrix.ai/v1alpha1", "RoleSet")


# ---- a role with podGroupSize > 1: groups of pods across nodes (issue 29; /work/briefs/facts-aibrix.md) ----
PODSET_CONTROLLER = "pkg/controller/podset/podset_controller.go"
ROLESET_UTILS = "pkg/controller/roleset/utils.go"
PODSET_ROLLSYNCER = "pkg/controller/roleset/podset_rollsyncer.go"
SS_CONSTANTS = "pkg/controller/constants/stormservice.go"
# createPodFromTemplate puts these first into every container (a template variable of the same name is dropped),
# then the RoleSet's own, which injectContainerEnvVars put first into the PodSet's template.
PODSET_ENV = ("PODSET_NAME", "POD_GROUP_INDEX", "POD_GROUP_SIZE")
ROLESET_ENV = ("STORM_SERVICE_NAME", "ROLESET_NAME", "ROLESET_INDEX", "ROLE_NAME", "ROLE_TEMPLATE_HASH",
               "ROLE_REPLICA_INDEX")
GROUP_INDEX_LABEL = "stormservice.orchestration.aibrix.ai/pod-group-index"
PODSET_NAME_LABEL = "stormservice.orchestration.aibrix.ai/podset-name"
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# The role's podGroupSize is 1..100 (RoleSpec); a PodSet's, which only the RoleSet controller writes, 2..100 and
# required (api/orchestration/v1alpha1/podset_types.go, "an internal API").
ROLE_POD_GROUP_SIZE = (1, 100)
PODSET_POD_GROUP_SIZE = (2, 100)
# pkg/webhook/stormservice_webhook.go ValidateCreate: len(name) + longest podGroupSize role name + 36 <= 63.
PODSET_NAME_SUFFIX_ESTIMATE = 36


def podset_name(roleset: str, role: str, template_hash: str, role_index: int) -> str:
    """podset_rollsyncer.go createPodSetForRole (Shorten leaves a name under 63 characters as it is)."""
    return f"{roleset}-{role}-{template_hash}-{role_index}"


def podset_injected_env(stormservice: str, roleset: str, roleset_index: int, role: str, template_hash: str,
                        role_index: int, group_index: int, size: int) -> list[dict]:
    """What a container of pod `group_index` of a PodSet holds before its template's variables."""
    podset = podset_name(roleset, role, template_hash, role_index)
    values = (podset, group_index, size, stormservice, roleset, roleset_index, role, template_hash, role_index)
    return [{"name": n, "value": str(v)} for n, v in zip(PODSET_ENV + ROLESET_ENV, values, strict=True)]


def group_leader_address(podset: str, stormservice: str, namespace: str) -> str:
    """createPodFromTemplate sets hostname = the pod's name (<podset>-<index>) and subdomain = the StormService's
    name, whose headless Service (stormservice/sync.go syncHeadlessService) publishes not-ready pods too."""
    return f"{podset}-0.{stormservice}.{namespace}"


GROUP_SOURCE = (
    (SS_CONSTANTS, 'PodSetNameEnvKey       = "PODSET_NAME"'),
    (SS_CONSTANTS, 'PodSetIndexEnvKey      = "POD_GROUP_INDEX"'),
    (SS_CONSTANTS, 'PodSetSizeEnvKey       = "POD_GROUP_SIZE"'),
    (SS_CONSTANTS, f'PodGroupIndexLabelKey        = "{GROUP_INDEX_LABEL}"'),
    (SS_CONSTANTS, f'PodSetNameLabelKey           = "{PODSET_NAME_LABEL}"'),
    (SS_CONSTANTS, f'CoschedulingPodGroupNameLabelKey = "{COSCHEDULING_POD_GROUP_LABEL}"'),
    (PODSET_CONTROLLER, "{Name: constants.PodSetNameEnvKey, Value: podSet.Name},"),
    (PODSET_CONTROLLER, "pod.Spec.Hostname = pod.Name"),
    (PODSET_CONTROLLER, "pod.Spec.Subdomain = podSet.Labels[constants.StormServiceNameLabelKey]"),
    (PODSET_CONTROLLER, 'pod.Name = utils.Shorten(fmt.Sprintf("%s-%d", podSet.Name, podIndex), false, false)'),
    # One scheduler-plugins PodGroup per PodSet, its spec the role's strategy as given: minMember is never derived.
    (PODSET_CONTROLLER, "Spec:       schedulerpluginsv1aplha1.PodGroupSpec(*podSet.Spec.SchedulingStrategy."
                        "CoschedulingSchedulingStrategy),"),
    (PODSET_ROLLSYNCER, "podSet.Labels[constants.CoschedulingPodGroupNameLabelKey] = podSet.Name"),
    (PODSET_ROLLSYNCER, 'podSet.Name = utils.Shorten(fmt.Sprintf("%s-%s-%s-%d", roleSet.Name, role.Name, templateHash, '
                        '*roleIndex), false, false)'),
    (ROLESET_UTILS, "Name:  constants.StormServiceNameEnvKey,"),
    ("pkg/controller/roleset/rolesyncer.go", "if role.PodGroupSize != nil && *role.PodGroupSize > 1 {"),
    ("api/orchestration/v1alpha1/podset_types.go", "// +kubebuilder:validation:Minimum=2"),
    ("pkg/webhook/stormservice_webhook.go", "const estimatedPodNameSuffixLength = 36"),
    # Recovery is per pod (ReplaceUnhealthy, the PodSet CRD's default, never set from a StormService).
    (PODSET_CONTROLLER, "return r.handleReplaceUnhealthy(ctx, podSet, activePods, currentPodCount, desiredPodCount)"),
)
