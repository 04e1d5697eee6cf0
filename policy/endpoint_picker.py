"""The endpoint picker (EPP) of the Gateway API Inference Extension (GIE): its facts and the pure builders
of its container arguments, its EndpointPickerConfig and its InferencePool, as
`kubernetes-sigs/gateway-api-inference-extension v1.5.0` builds and reads them (module source:
sigs.k8s.io/gateway-api-inference-extension@v1.5.0 in the Go module cache). v1.5.0 is the last release
that ships the full EPP (scorers, config file, config loader); v1.6.x ships only pkg/lwepp.

tests/upstream_gie.py holds the upstream facts with their citations and a port of v1.5.0's config
loader and flag set; tests/test_endpoint_picker.py checks what is built here against them, against the
pinned engines' own sources and against the InferencePool CRD. Re-check on a bump: each file cited below.

Standard library only (the policy pack's publish boundary, tests/test_layers.py).
"""

from __future__ import annotations

import copy

from policy.engines import NAMES, engine_named

# `kubernetes-sigs/gateway-api-inference-extension v1.5.0 config/charts/inferencepool/values.yaml`
# inferenceExtension.image: registry registry.k8s.io, repository gateway-api-inference-extension/epp,
# tag v1.5.0.
EPP_VERSION = "v1.5.0"
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp"

# `... v1.5.0 pkg/epp/server/options.go` NewOptions: GRPCPort DefaultGrpcPort 9002 (ext_proc),
# GRPCHealthPort 9003, MetricsPort 9090; config/charts/epplib/templates/_deployment.yaml names the
# container ports grpc / grpc-health / metrics.
GRPC_PORT = 9002
HEALTH_PORT = 9003
METRICS_PORT = 9090
# `... v1.5.0 config/charts/epplib/templates/_deployment.yaml`: with one replica both probes ask the
# grpc health service "inference-extension". cmd/epp/runner/health.go Check: without leader election
# every service name answers SERVING once the pool has synced (datastore.PoolHasSynced), NOT_SERVING
# before, so the name only labels the probe.
HEALTH_SERVICE = "inference-extension"
# `... v1.5.0 config/charts/epplib/templates/_service.yaml`: the chart's Service exposes ext_proc and metrics
# only (the health port is the kubelet's, probed on the pod).
SERVICE_PORTS = [{"name": "grpc-ext-proc", "protocol": "TCP", "port": GRPC_PORT},
                 {"name": "http-metrics", "protocol": "TCP", "port": METRICS_PORT}]

# `... v1.5.0 api/v1` (the group the EPP watches: options.go PoolGroup default; the chart passes it).
POOL_GROUP = "inference.networking.k8s.io"
POOL_API_VERSION = f"{POOL_GROUP}/v1"
POOL_KIND = "InferencePool"
# `... v1.5.0 config/charts/inferencepool/values.yaml` inferenceExtension.failureMode "FailOpen", which
# templates/inferencepool.yaml writes into endpointPickerRef.failureMode (the CRD's default is FailClose).
FAILURE_MODE = "FailOpen"
# templates/inferencepool.yaml: appProtocol "http" for modelServerProtocol http (the engines speak HTTP/1.1).
APP_PROTOCOL = "http"

# `... v1.5.0 apix/config/v1alpha1` (zz_generated.register.go group/version, EndpointPickerConfig type).
CONFIG_API_VERSION = "inference.networking.x-k8s.io/v1alpha1"
CONFIG_KIND = "EndpointPickerConfig"
# `... v1.5.0 config/charts/inferencepool/values.yaml` pluginsConfigFile "default-plugins.yaml": the
# ConfigMap key (epplib _config.yaml), mounted at /config (_deployment.yaml plugins-config-volume).
CONFIG_FILE = "default-plugins.yaml"
CONFIG_MOUNT = "/config"

# `... v1.5.0 pkg/epp/framework/plugins/datalayer/extractor/metrics/mapping_registry.go`
# DefaultEngineTypeLabelKey: a pod label naming its engine overrides the extractor's defaultEngine.
ENGINE_TYPE_LABEL = "inference.networking.k8s.io/engine-type"

# ---- the chart's sizing and lifecycle, epplib _deployment.yaml and inferencepool/values.yaml ----
# values.yaml inferenceExtension.replicas 1. "The current recommended EPP deployment pattern is to have a
# single active replica. This ensures optimal performance of the stateful operations such prefix cache
# aware scorer." (_deployment.yaml); more replicas need --ha-enable-leader-election and a leases Role.
REPLICAS = 1
# values.yaml inferenceExtension.resources: "These defaults are sized for a standard EPP deployment with
# built-in scheduling plugins. CPU limits are intentionally unset to allow bursting to all available node
# CPUs during scheduling spikes. Memory limit is set to 16Gi to avoid putting the node under memory pressure
# in case of a memory leak. These values were validated with scale testing at high QPS, achieving p90
# scheduler latency within 100ms."
RESOURCES = {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}
# The one change to the chart's resources: a CPU limit, at the chart's own request. Every container of the stacks has
# one, and both scanners hold them to it: checkov's CKV_K8S_11 (make test) and kube-score's container-resources
# (make e2e), which is never excepted here because ignoring it silences kube-score's ephemeral-storage check too
# (components/scanner_exceptions.py NEVER_IGNORED). So the picker does not burst past the 4 CPUs the chart's
# scale test requested (tests/test_scan.py and e2e/test_kube_score.py score the picker).
CONTAINER_RESOURCES = {"requests": dict(RESOURCES["requests"]),
                       "limits": {"cpu": RESOURCES["requests"]["cpu"], **RESOURCES["limits"]}}
# _deployment.yaml, one replica: grpc probes on the health port.
LIVENESS_PROBE = {"grpc": {"port": HEALTH_PORT, "service": HEALTH_SERVICE}, "initialDelaySeconds": 5,
                  "periodSeconds": 10}
READINESS_PROBE = {"grpc": {"port": HEALTH_PORT, "service": HEALTH_SERVICE}, "periodSeconds": 2}
# _deployment.yaml: "The Recreate strategy the old replica is killed immediately, and allow the new
# replica(s) to quickly take over."
STRATEGY = {"type": "Recreate"}
# _deployment.yaml: "Conservatively, this timeout should mirror the longest grace period of the pods
# within the pool".
TERMINATION_GRACE_PERIOD_SECONDS = 130
# values.yaml inferenceExtension.flags {v: 1}, passed as `--v "1"`.
LOG_VERBOSITY = 1
# _deployment.yaml env: the EPP falls back to NAMESPACE when --pool-namespace is empty (cmd/epp/runner
# resolvePoolNamespace) and reads POD_NAME only in standalone mode; we pass --pool-namespace, the chart's
# env is kept so the container matches it.
ENV = [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
       {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]

# ---- RBAC in the pool's namespace ----
# epplib templates/_rbac.yaml Role "<name>-sa" and inferencepool templates/rbac.yaml Role "<name>-non-sa".
# All three are needed, all read-only (the EPP writes nothing: pkg/epp/controller only Gets):
# - pods: server/runserver.go SetupWithManager starts the PodReconciler in every mode;
# - inferencepools: the InferencePoolReconciler, cached by name in the pool's namespace
#   (server/controller_manager.go defaultManagerOptions);
# - inferenceobjectives, inferencemodelrewrites: server/controller_config.go starts their reconcilers
#   whenever discovery finds the CRDs in the cluster (any installed GIE of v1.5.0 or older brings them);
#   without the rule their informers never sync and the manager gives up at start.
# Not needed with one replica: leases and events (_leader-election-rbac.yaml, only for replicas > 1); the
# ClusterRole for tokenreviews/subjectaccessreviews (_rbac.yaml, only with ServiceMonitor auth), which
# --metrics-endpoint-auth=false below makes unnecessary.
ROLE_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
    {"apiGroups": ["inference.networking.x-k8s.io"], "resources": ["inferenceobjectives", "inferencemodelrewrites"],
     "verbs": ["get", "watch", "list"]},
    {"apiGroups": [POOL_GROUP], "resources": ["inferencepools"], "verbs": ["get", "watch", "list"]},
]

# ---- the engines' metrics the picker scores on ----
# `... v1.5.0 pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go` defaultEngineConfigs:
# what core-metrics-extractor reads per engine (an empty spec is not read: mapping.go parseStringToSpec).
# Keys here -> the engineConfigs field each fills.
ENGINE_CONFIG_FIELDS = {"queued": "queuedRequestsSpec", "running": "runningRequestsSpec",
                        "kv_cache_usage": "kvUsageSpec", "lora": "loraSpec", "cache_info": "cacheInfoSpec"}


def _engine(engine: str) -> str:
    if engine not in NAMES:
        raise ValueError(f"the endpoint picker has no metrics for engine {engine!r} (known: {', '.join(sorted(NAMES))})")
    return engine


def metric_names(engine: str) -> dict[str, str]:
    """What the EPP reads from an engine's /metrics (keys of ENGINE_CONFIG_FIELDS), only the names the
    pinned releases export (each engine module's PICKER_METRICS): the same at both pinned releases of each
    engine, so no release parameter."""
    return dict(engine_named(_engine(engine)).PICKER_METRICS)


def engine_config(engine: str) -> dict[str, str]:
    """core-metrics-extractor's engineConfigs entry (factories.go engineConfigParams) for the engine: the
    names of metric_names, an empty spec for every name it lacks (empty = not read, mapping.go)."""
    names = metric_names(engine)
    entry = {"name": engine}
    entry.update({field: names.get(key, "") for key, field in ENGINE_CONFIG_FIELDS.items()})
    if "cache_info" in names:
        entry.update(engine_named(engine).PICKER_CACHE_INFO_LABELS)
    return entry


# ---- the EndpointPickerConfig ----
# `... v1.5.0 config/charts/epplib/templates/_config.yaml`, latency predictor off (values.yaml): three
# scorers weighted 2/2/3 in the profile "default", the metrics data source with values.yaml
# metricsDataSource (http, /metrics, insecureSkipVerify true), core-metrics-extractor with
# `defaultEngine` when the pool's modelServerType is not vllm, and no parser for HTTP model servers
# (vllmgrpc-parser only for vLLM over gRPC). The loader fills the rest (pkg/epp/config/loader/defaults.go):
# single-profile-handler, max-score-picker, openai-parser, utilization-detector, the flow-control
# defaults, the data layer wiring metrics-data-source -> core-metrics-extractor, and the
# approx-prefix-cache-producer the prefix scorer needs (configloader.go instantiatePlugins).
SCORER_WEIGHTS = {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3}
METRICS_DATA_SOURCE = {"scheme": "http", "path": "/metrics", "insecureSkipVerify": True}


def picker_config(engine: str) -> dict:
    """The EndpointPickerConfig the chart writes for a pool of one engine, with one difference: the
    extractor is given the engine's engineConfigs entry (engine_config) instead of leaving it to
    factories.go's built-in table, so the config names exactly the metrics the pinned engines export and
    the picker does not poll a name they lack (for SGLang, sglang:cache_config_info). A user entry replaces
    the built-in one of the same name (factories.go newCoreMetricsExtractorPlugin). defaultEngine is set for
    vLLM too (the built-in default is "vllm": the same effect, said once)."""
    extractor = {"defaultEngine": _engine(engine), "engineConfigs": [engine_config(engine)]}
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": CONFIG_KIND,
        "plugins": [{"type": t} for t in SCORER_WEIGHTS]
        + [{"type": "metrics-data-source", "parameters": dict(METRICS_DATA_SOURCE)},
           {"type": "core-metrics-extractor", "parameters": extractor}],
        "schedulingProfiles": [{"name": "default",
                                "plugins": [{"pluginRef": t, "weight": w} for t, w in SCORER_WEIGHTS.items()]}],
    }


# ---- the container's arguments ----

def picker_args(engine: str, pool_name: str, pool_namespace: str, config_path: str) -> list[str]:
    """The EPP's arguments for one replica, in the order epplib _deployment.yaml passes them.

    - No legacy metric flags, although the chart passes --total-queued-requests-metric and three more for
      SGLang: v1.5.0's pkg/epp/server/options.go marks them deprecated and Validate refuses any of them set
      on the command line ("flag ... is deprecated and cannot be used; configure metrics via engineConfigs
      in EndpointPickerConfig"), so the chart's SGLang pool exits at start. They fed only the legacy metrics
      client (cmd/epp/runner Run -> backendmetrics.NewPodMetricsClientImpl), used only with the
      enableLegacyMetrics feature gate; what the EPP reads is core-metrics-extractor's engineConfigs
      (picker_config), so the engine shows in the config, not here.
    - --metrics-endpoint-auth=false: by default (true) the runner wraps the metrics server in
      controller-runtime's filters.WithAuthenticationAndAuthorization, which sends a TokenReview and a
      SubjectAccessReview per scrape and so needs a ClusterRole on tokenreviews/subjectaccessreviews
      (cluster-scoped; no namespaced Role can grant them) and a scraper token allowed nonResourceURL
      /metrics. The stacks create no cluster-scoped RBAC and scrape the engines without tokens, so the port
      is kept to the monitoring namespace by NetworkPolicy instead; the chart passes the same flag when its
      ServiceMonitor auth is off.
    - --enable-pprof=false: the default (true) adds /debug/pprof/* to that same, now unauthenticated,
      metrics server and sets runtime.SetBlockProfileRate(1) and SetMutexProfileFraction(1)
      (pkg/common/observability/profiling), which cost on every blocking event.
    - --secure-serving=true (the default, written out): the ext_proc server then serves TLS with a
      self-signed certificate (pkg/epp/server/runserver.go AsRunnable, no --cert-path), which is what the
      gateways expect of an EPP: the chart's Istio DestinationRule sets tls mode SIMPLE with
      insecureSkipVerify, GIE's test/testdata/envoy.yaml dials it with an UpstreamTlsContext. Plaintext would
      make them fail the TLS handshake.
    - --tracing=false: the chart's tracing.enabled false; tracing on would export to an OTLP collector the
      stacks do not run.
    """
    _engine(engine)
    return ["--pool-name", pool_name, "--pool-namespace", pool_namespace, "--pool-group", POOL_GROUP,
            "--zap-encoder", "json", "--config-file", config_path, "--v", str(LOG_VERBOSITY),
            "--tracing=false", "--metrics-endpoint-auth=false", "--enable-pprof=false", "--secure-serving=true"]


# ---- the InferencePool ----

def pool_spec(selector: dict[str, str], target_port: int, picker_service: str) -> dict:
    """An InferencePool's spec as `... v1.5.0 config/charts/inferencepool/templates/inferencepool.yaml`
    writes it: the serving pods' labels, the engine's port, and the EPP's Service on the ext_proc port.
    endpointPickerRef is required by v1.5.0's CRD (optional from v1.6.0), so it is always set."""
    return {
        "targetPorts": [{"number": target_port}],
        "appProtocol": APP_PROTOCOL,
        "selector": {"matchLabels": copy.deepcopy(selector)},
        "endpointPickerRef": {"name": picker_service, "port": {"number": GRPC_PORT}, "failureMode": FAILURE_MODE},
    }
