"""The Gateway API Inference Extension's endpoint picker (EPP) at v1.5.0, the release the stacks pin
(policy/endpoint_picker.py EPP_VERSION): the facts tests/test_endpoint_picker.py checks our builders
against, and ports of the two parts of the EPP that read what we render, so `make test` checks them
without Go:

- FLAGS / parse_args: the EPP's command line, pkg/epp/server/options.go AddFlags + Validate and
  pkg/common/observability/logging/options.go, parsed as spf13/pflag v1.0.10 flag.go parseArgs does
  (cmd/epp/runner/runner.go Run: opts.AddFlags(pflag.CommandLine); pflag.Parse(); Complete; Validate);
- load_config: pkg/epp/config/loader (configloader.go LoadRawConfig + InstantiateAndConfigure,
  validation.go, defaults.go) with the plugin registrations of cmd/epp/runner/runner.go
  registerInTreePlugins and the factories of the plugins the chart's config names.

Source: the Go module sigs.k8s.io/gateway-api-inference-extension@v1.5.0 (`go mod download`; `make`
does it, apivalidation/module_crds.py MODULE_SOURCES), which is the repository at the tag. Re-check on a
bump: `diff -r` the old and new module directories over the files in PORTED_FROM.
"""

from __future__ import annotations

import copy
import csv
import re

TAG = "v1.5.0"
MODULE = ("sigs.k8s.io/gateway-api-inference-extension", TAG)

_FILES = ("cmd/epp/runner/runner.go", "cmd/epp/runner/health.go", "pkg/epp/server/options.go",
          "pkg/epp/server/runserver.go", "pkg/epp/server/controller_config.go",
          "pkg/epp/server/controller_manager.go", "pkg/common/observability/logging/options.go",
          "pkg/common/observability/profiling/", "pkg/epp/config/loader/", "apix/config/v1alpha1/",
          "pkg/epp/framework/plugins/datalayer/", "pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/",
          "pkg/epp/flowcontrol/registry/config.go", "config/charts/inferencepool/", "config/charts/epplib/",
          "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml")
_NOT_DEPLOYED = ("no shipped stack sets gateway.routingLayer inferencePool; the EPP release is policy/endpoint_picker.py "
                 "EPP_VERSION, which tests/test_endpoint_picker.py holds equal to TAG")
PORTED_FROM = (
    {"repo": "kubernetes-sigs/gateway-api-inference-extension", "release": TAG, "files": _FILES,
     "not_deployed": _NOT_DEPLOYED},
    # The EPP's go.mod at v1.5.0 requires these; read at those tags.
    {"repo": "kubernetes-sigs/controller-runtime", "release": "v0.23.3", "not_deployed": _NOT_DEPLOYED,
     "files": ("pkg/log/zap/zap.go", "pkg/log/zap/flags.go", "pkg/metrics/filters/filters.go")},
    {"repo": "spf13/pflag", "release": "v1.0.10", "not_deployed": _NOT_DEPLOYED,
     "files": ("flag.go", "golangflag.go", "bool.go", "int.go", "int_slice.go", "duration.go")},
)

# ---- the command line ----
# name -> value kind. options.go AddFlags, logging/options.go AddFlags (-v, and controller-runtime v0.23.3
# pkg/log/zap/zap.go BindFlags: the zap-* flags, added through AddGoFlagSet).
FLAGS = {
    "grpc-port": "int", "ha-enable-leader-election": "bool", "pool-group": "string", "pool-namespace": "string",
    "pool-name": "string", "endpoint-selector": "string", "endpoint-target-ports": "intSlice",
    "disable-endpoint-subset-filter": "bool", "model-server-metrics-scheme": "string",
    "model-server-metrics-path": "string", "model-server-metrics-port": "int",
    "model-server-metrics-https-insecure-skip-verify": "bool", "refresh-metrics-interval": "duration",
    "refresh-prometheus-metrics-interval": "duration", "metrics-staleness-threshold": "duration",
    "total-queued-requests-metric": "string", "total-running-requests-metric": "string",
    "kv-cache-usage-percentage-metric": "string", "lora-info-metric": "string", "cache-info-metric": "string",
    "v": "int", "zap-devel": "bool", "zap-encoder": "encoder", "zap-log-level": "level",
    "zap-stacktrace-level": "stacktrace", "zap-time-encoding": "time-encoding",
    "tracing": "bool", "health-checking": "bool", "metrics-port": "int", "grpc-health-port": "int",
    "enable-pprof": "bool", "cert-path": "string", "enable-cert-reload": "bool", "secure-serving": "bool",
    "metrics-endpoint-auth": "bool", "config-file": "string", "config-text": "string",
}
SHORTHANDS = {"v": "v"}   # logging/options.go fs.IntVarP(..., "v", "v", ...)
# options.go Validate: "flag %q is deprecated and cannot be used; configure metrics via engineConfigs in
# EndpointPickerConfig instead" when any of these is set on the command line.
REFUSED_WHEN_SET = ("total-queued-requests-metric", "total-running-requests-metric",
                    "kv-cache-usage-percentage-metric", "lora-info-metric", "cache-info-metric")
# NewOptions: the defaults our arguments rely on.
DEFAULTS = {"grpc-port": 9002, "grpc-health-port": 9003, "metrics-port": 9090, "pool-group": "inference.networking.k8s.io",
            "secure-serving": True, "metrics-endpoint-auth": True, "enable-pprof": True, "tracing": True,
            "health-checking": False, "model-server-metrics-scheme": "http"}
# controller-runtime v0.23.3 pkg/log/zap/flags.go: the values each zap flag's Set accepts.
_ZAP = {"encoder": {"json", "console"}, "stacktrace": {"info", "error", "panic"},
        "time-encoding": {"rfc3339nano", "rfc3339", "iso8601", "millis", "nanos", "epoch"}}
_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)")   # Go time.ParseDuration


def _value(kind: str, text: str) -> object:
    """The flag kinds' Set (pflag bool.go strconv.ParseBool, int.go strconv.ParseInt(s, 0, 64),
    int_slice.go, duration.go time.ParseDuration; zap flags.go)."""
    if kind == "string":
        return text
    if kind == "bool":
        if text in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if text in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise ValueError(f"strconv.ParseBool: parsing {text!r}: invalid syntax")
    if kind == "int":
        return int(text, 0)
    if kind == "intSlice":
        return [int(x) for x in next(csv.reader([text]))] if text else []
    if kind == "duration":
        if not _DURATION.fullmatch(text):
            raise ValueError(f"time: invalid duration {text!r}")
        return text
    if kind == "level":   # debug/info/error/panic or an integer > 0
        if text.lower() in ("debug", "info", "error", "panic") or (text.lstrip("-").isdigit() and int(text) > 0):
            return text
        raise ValueError(f'invalid log level "{text}"')
    if text.lower() not in _ZAP[kind]:
        raise ValueError(f'invalid {kind} value "{text}"')
    return text


def parse_args(args: list[str]) -> tuple[dict[str, object], list[str]]:
    """(the flags set, with their values; the problems), as the EPP would meet `args`. pflag stops at the
    first error (ExitOnError); so does this. Positional arguments are accepted by pflag and then ignored
    by the runner (it never reads pflag.Args()): reported here, since a `--bool value` would land there."""
    values: dict[str, object] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            return values, [f"positional arguments {rest} are ignored by the EPP"] if rest else []
        if not arg.startswith("-") or arg == "-":
            return values, [f"positional argument {arg!r} is ignored by the EPP (a bool flag takes its value as --flag=value)"]
        if arg.startswith("--"):
            name, eq, text = arg[2:].partition("=")
            if not name or name[0] in "-=":
                return values, [f"bad flag syntax: {arg}"]
        else:   # a shorthand: -v 1, -v=1, -v1
            name, text = SHORTHANDS.get(arg[1], ""), arg[2:].removeprefix("=")
            eq = "=" if text else ""
            if not name:
                return values, [f"unknown shorthand flag: {arg[1]!r} in {arg}"]
        if name not in FLAGS:
            return values, [f"unknown flag: --{name}"]
        kind = FLAGS[name]
        if not eq:
            if kind == "bool":       # NoOptDefVal "true" (pflag bool.go; golangflag.go for Go bool flags)
                text = "true"
            elif rest:
                text = rest.pop(0)
            else:
                return values, [f"flag needs an argument: --{name}"]
        try:
            values[name] = _value(kind, text)
        except ValueError as err:
            return values, [f'invalid argument "{text}" for "--{name}" flag: {err}']
    return values, validate(values)


def validate(values: dict[str, object]) -> list[str]:
    """options.go Validate (logging Validate refuses nothing: a negative -v becomes the default)."""
    pool, selector = values.get("pool-name", ""), values.get("endpoint-selector", "")
    if bool(pool) == bool(selector):
        return ["either pool-name or endpoint-selector must be set"]
    if selector:
        ports = values.get("endpoint-target-ports", [])
        if not 1 <= len(ports) <= 8:
            return ['flag "endpoint-target-ports" should have length from 1 to 8']
        if any(not 0 <= p <= 65535 for p in ports):
            return ['invalid port number in "endpoint-target-ports"']
    if values.get("config-text") and values.get("config-file"):
        return ['both the "configText" and "configFile" flags can not be set at the same time']
    if values.get("model-server-metrics-scheme", "http") not in ("http", "https"):
        return ['unexpected value for "model-server-metrics-scheme" flag, it can only be set to \'http\' or \'https\'']
    for name in REFUSED_WHEN_SET:
        if name in values:
            return [f'flag "{name}" is deprecated and cannot be used; configure metrics via engineConfigs in '
                    "EndpointPickerConfig instead"]
    return []


# ---- the configuration ----

class ConfigError(ValueError):
    pass


# apix/config/v1alpha1 endpointpickerconfig_types.go: every field of every type (strict decoding:
# configloader.go decodeRawConfig uses serializer.EnableStrict, so an unknown or duplicate field fails).
API_VERSION, KIND = "inference.networking.x-k8s.io/v1alpha1", "EndpointPickerConfig"
_FIELDS = {
    "config": {"apiVersion": str, "kind": str, "featureGates": list, "plugins": list, "schedulingProfiles": list,
               "saturationDetector": dict, "dataLayer": dict, "flowControl": dict, "parser": dict},
    "plugin": {"name": str, "type": str, "parameters": object},
    "profile": {"name": str, "plugins": list},
    "profilePlugin": {"pluginRef": str, "weight": (int, float)},
    "ref": {"pluginRef": str},
    "dataLayer": {"sources": list},
    "source": {"pluginRef": str, "extractors": list},
    "flowControl": {"maxBytes": (str, int), "maxRequests": (str, int), "defaultRequestTTL": str,
                    "defaultPriorityBand": dict, "priorityBands": list, "usageLimitPolicyPluginRef": str},
}
# cmd/epp/runner/runner.go parseConfigurationPhaseOne: the feature gates it registers (datalayer/factory.go,
# flowcontrol/config.go).
FEATURE_GATES = {"dataLayer", "enableLegacyMetrics", "flowControl"}
# runner.go registerInTreePlugins: every type the EPP knows, with the interfaces the loader asks of it
# (the `var _ framework.Scorer = ...` assertions in each plugin's file; "" for request-control plugins and
# flow-control policies, which the loader only instantiates).
PLUGIN_TYPES = {
    "prefix-cache-scorer": "scorer", "max-score-picker": "picker", "random-picker": "picker",
    "weighted-random-picker": "picker", "single-profile-handler": "profile-handler",
    "kv-cache-utilization-scorer": "scorer", "queue-scorer": "scorer", "running-requests-size-scorer": "scorer",
    "lora-affinity-scorer": "scorer", "token-load-scorer": "scorer",
    "global-strict-fairness-policy": "", "round-robin-fairness-policy": "", "fcfs-ordering-policy": "",
    "edf-ordering-policy": "", "slo-deadline-ordering-policy": "", "static-usage-limit-policy": "",
    "approx-prefix-cache-producer": "", "predicted-latency-scorer": "scorer", "predicted-latency-producer": "",
    "latency-slo-admitter": "", "prefix-cache-affinity-filter": "filter", "slo-headroom-tier-filter": "filter",
    "latency-scorer": "scorer", "inflight-load-producer": "", "header-based-testing-filter": "filter",
    "destination-endpoint-served-verifier": "", "metrics-data-source": "data-source",
    "core-metrics-extractor": "extractor", "k8s-notification-source": "data-source",
    "endpoint-notification-source": "data-source", "request-attribute-reporter": "",
    "openai-parser": "parser", "vllmgrpc-parser": "parser", "passthrough-parser": "parser",
    "concurrency-detector": "filter saturation-detector", "utilization-detector": "filter saturation-detector",
}
# extractor/metrics/factories.go defaultEngineConfigs (names only) and mapping_registry.go DefaultEngineType.
ENGINE_DEFAULTS = ("vllm", "sglang", "trtllm-serve", "triton-tensorrt-llm")
# extractor/metrics/spec.go parseStringToSpec: a PromQL vector selector, label values quoted for it.
_SPEC = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{\s*(?:[a-zA-Z_]\w*\s*=\s*"?[^",}]*"?\s*,?\s*)*\})?')


def _fields(obj: object, shape: str, where: str) -> dict:
    if not isinstance(obj, dict):
        raise ConfigError(f"failed to decode configuration JSON/YAML: {where} is not an object")
    for key, value in obj.items():
        want = _FIELDS[shape].get(key)
        if want is None:
            raise ConfigError(f'failed to decode configuration JSON/YAML: strict decoding error: unknown field "{where}.{key}"')
        if want is not object and value is not None and (isinstance(value, bool) or not isinstance(value, want)):
            raise ConfigError(f"failed to decode configuration JSON/YAML: {where}.{key} has the wrong type")
    return obj


def _decode(doc: dict) -> dict:
    """configloader.go decodeRawConfig: the registered group/version/kind only, every field known."""
    cfg = copy.deepcopy(_fields(doc, "config", "config"))
    if (cfg.get("apiVersion"), cfg.get("kind")) != (API_VERSION, KIND):
        raise ConfigError(f"failed to decode configuration JSON/YAML: no kind {cfg.get('kind')!r} is registered for "
                          f"version {cfg.get('apiVersion')!r}")
    for i, p in enumerate(cfg.get("plugins") or []):
        _fields(p, "plugin", f"plugins[{i}]")
    for i, prof in enumerate(cfg.get("schedulingProfiles") or []):
        for j, ref in enumerate(_fields(prof, "profile", f"schedulingProfiles[{i}]").get("plugins") or []):
            _fields(ref, "profilePlugin", f"schedulingProfiles[{i}].plugins[{j}]")
    for key in ("saturationDetector", "parser"):
        if cfg.get(key) is not None:
            _fields(cfg[key], "ref", key)
    if cfg.get("dataLayer") is not None:
        for i, src in enumerate(_fields(cfg["dataLayer"], "dataLayer", "dataLayer").get("sources") or []):
            for j, ext in enumerate(_fields(src, "source", f"dataLayer.sources[{i}]").get("extractors") or []):
                _fields(ext, "ref", f"dataLayer.sources[{i}].extractors[{j}]")
    if cfg.get("flowControl") is not None:
        _fields(cfg["flowControl"], "flowControl", "flowControl")
    return cfg


def _instantiate(spec: dict) -> None:
    """The factories' own checks, for the plugins whose parameters the chart's config sets or implies
    (other types' parameters are not ported)."""
    kind, params = spec["type"], spec.get("parameters")
    params = params if params is not None else {}
    if not isinstance(params, dict):
        raise ConfigError(f"failed to create plugin '{spec['name']}' (type: {kind}): parameters are not an object")
    if kind == "metrics-data-source":   # source/metrics/datasource.go, source/http/datasource.go NewHTTPDataSource
        scheme = params.get("scheme", "http")
        if scheme not in ("http", "https"):
            raise ConfigError(f"failed to create plugin '{spec['name']}' (type: {kind}): unsupported scheme: {scheme}")
    elif kind == "core-metrics-extractor":   # extractor/metrics/factories.go newCoreMetricsExtractorPlugin
        configs = list(params.get("engineConfigs") or [])
        named = {c.get("name") for c in configs}
        names = [c.get("name") for c in configs] + [n for n in ENGINE_DEFAULTS if n not in named]
        for c in configs:
            if not c.get("name"):
                raise ConfigError("engine config name cannot be empty")
            if c["name"] == "default":
                raise ConfigError('engine config name cannot be "default" (reserved)')
            for field in ("queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "loraSpec", "cacheInfoSpec",
                          "cacheBlockSizeSpec", "cacheNumBlocksSpec"):
                if c.get(field) and not _SPEC.fullmatch(c[field]):
                    raise ConfigError(f"failed to create mapping for engine {c['name']!r}: bad {field} {c[field]!r}")
        if len(set(names)) != len(names):
            raise ConfigError("failed to register engine mapping: duplicate engine name")
        if (params.get("defaultEngine") or "vllm") not in names:
            raise ConfigError(f"defaultEngine {params.get('defaultEngine')!r} not found in engineConfigs")
    elif kind in ("prefix-cache-scorer", "approx-prefix-cache-producer"):   # approximateprefix/plugin.go newPrepareData
        auto, tokens = params.get("autoTune", True), params.get("blockSizeTokens", 16)
        if params.get("blockSize", 0) > 0 and tokens <= 0:
            raise ConfigError("invalid configuration: BlockSize is deprecated; use BlockSizeTokens")
        if not auto and tokens <= 0:
            raise ConfigError("invalid configuration: BlockSizeTokens must be > 0 when AutoTune is disabled")
        if params.get("maxPrefixTokensToMatch", 0) < 0:
            raise ConfigError("invalid configuration: MaxPrefixTokensToMatch must be >= 0")


def load_config(doc: dict) -> dict:
    """The effective configuration the v1.5.0 EPP runs with, or ConfigError with the loader's message:
    LoadRawConfig (decode, applyStaticDefaults, validateFeatureGates), then InstantiateAndConfigure
    (instantiatePlugins, applySystemDefaults, validateConfig, buildSchedulerConfig, buildDataLayerConfig,
    buildParserConfig, the saturation detector). The result carries `handle`: every plugin instantiated
    by name, including those the loader adds only to the handle."""
    cfg = _decode(doc)
    plugins = cfg.setdefault("plugins", []) or []
    cfg["plugins"] = plugins
    for p in plugins:                                        # defaults.go applyStaticDefaults
        p["name"] = p.get("name") or p.get("type") or ""
    gates = cfg.get("featureGates") or []
    cfg["featureGates"] = gates
    for gate in gates:                                       # validation.go validateFeatureGates
        if gate not in FEATURE_GATES:
            raise ConfigError(f"feature gate validation failed: feature gate '{gate}' is unknown or unregistered")
    if "flowControl" in gates:
        raise ConfigError("not ported: the flowControl gate's configuration (pkg/epp/flowcontrol NewConfigFromAPI)")
    handle: dict[str, str] = {}                              # name -> type
    for p in plugins:                                        # configloader.go instantiatePlugins
        if not p.get("type"):
            raise ConfigError(f"plugin instantiation failed: plugin '{p['name']}' is missing a type")
        if p["name"] in handle:
            raise ConfigError(f"plugin instantiation failed: duplicate plugin name '{p['name']}'")
        if p["type"] not in PLUGIN_TYPES:
            raise ConfigError(f"plugin instantiation failed: plugin type '{p['type']}' is not registered")
        _instantiate(p)
        handle[p["name"]] = p["type"]
    prefix = [p for p in plugins if p["type"] == "prefix-cache-scorer"]
    if prefix and "approx-prefix-cache-producer" not in handle.values():
        _instantiate({"name": "approx-prefix-cache-producer", "type": "approx-prefix-cache-producer",
                      "parameters": prefix[-1].get("parameters")})
        handle["approx-prefix-cache-producer"] = "approx-prefix-cache-producer"
    _system_defaults(cfg, handle)
    _validate(cfg)
    _build(cfg, handle)
    return {**cfg, "handle": handle}


def _role(handle: dict[str, str], name: str | None) -> str:
    return PLUGIN_TYPES.get(handle.get(name or "", ""), "")


def _add_default(cfg: dict, handle: dict[str, str], kind: str) -> None:
    """defaults.go registerDefaultPlugin: named by its type, added to the handle and to plugins."""
    handle[kind] = kind
    cfg["plugins"].append({"name": kind, "type": kind})


def _system_defaults(cfg: dict, handle: dict[str, str]) -> None:
    """defaults.go applySystemDefaults; `known` is the handle as it was on entry (allPlugins)."""
    known = dict(handle)
    profiles = cfg.get("schedulingProfiles") or []
    if not profiles:                                         # ensureSchedulingLayer
        profiles = [{"name": "default", "plugins": [{"pluginRef": n} for n in known
                                                    if {"filter", "scorer", "picker"} & set(_role(known, n).split())]}]
    cfg["schedulingProfiles"] = profiles
    if len(profiles) == 1 and not any(_role(known, n) == "profile-handler" for n in known):
        _add_default(cfg, handle, "single-profile-handler")
    picker = next((n for n in known if _role(known, n) == "picker"), None)
    if picker is None:
        _add_default(cfg, handle, "max-score-picker")
        picker = "max-score-picker"
    for prof in profiles:
        refs = prof.setdefault("plugins", []) or []
        prof["plugins"] = refs
        for ref in refs:
            if _role(handle, ref.get("pluginRef")) == "scorer" and ref.get("weight") is None:
                ref["weight"] = 1.0                          # DefaultScorerWeight
        if not any(_role(handle, ref.get("pluginRef")) == "picker" for ref in refs):
            refs.append({"pluginRef": picker})
    for kind in ("fcfs-ordering-policy", "global-strict-fairness-policy", "static-usage-limit-policy"):
        if kind not in known:                                # ensureFlowControlLayer (flowcontrol/registry/config.go)
            _add_default(cfg, handle, kind)
    cfg["parser"] = cfg.get("parser") or {"pluginRef": "openai-parser"}   # ensureParser
    if cfg["parser"].get("pluginRef") not in known:
        _add_default(cfg, handle, "openai-parser")
    sd = cfg["saturationDetector"] = cfg.get("saturationDetector") or {}  # ensureSaturationDetector
    sd["pluginRef"] = sd.get("pluginRef") or "utilization-detector"
    if sd["pluginRef"] == "utilization-detector" and sd["pluginRef"] not in known:
        _add_default(cfg, handle, "utilization-detector")
    if "enableLegacyMetrics" not in cfg["featureGates"] and cfg.get("dataLayer") is None:   # ensureDataLayer
        for kind in ("metrics-data-source", "core-metrics-extractor"):
            if kind not in known:
                _add_default(cfg, handle, kind)
        cfg["dataLayer"] = {"sources": [{"pluginRef": "metrics-data-source",
                                         "extractors": [{"pluginRef": "core-metrics-extractor"}]}]}


def _validate(cfg: dict) -> None:
    """validation.go validateConfig: profiles named, unique, referring to defined plugins; the
    saturation detector referring to one."""
    defined = {p["name"] for p in cfg["plugins"]}
    seen: set[str] = set()
    for i, prof in enumerate(cfg["schedulingProfiles"]):
        if not prof.get("name"):
            raise ConfigError(f"scheduling profile validation failed: schedulingProfiles[{i}] is missing a name")
        if prof["name"] in seen:
            raise ConfigError(f"scheduling profile validation failed: schedulingProfiles[{i}] has duplicate name '{prof['name']}'")
        seen.add(prof["name"])
        for j, ref in enumerate(prof["plugins"]):
            if not ref.get("pluginRef"):
                raise ConfigError(f"scheduling profile validation failed: schedulingProfiles[{prof['name']}].plugins[{j}] "
                                  "is missing a 'pluginRef'")
            if ref["pluginRef"] not in defined:
                raise ConfigError(f"scheduling profile validation failed: schedulingProfiles[{prof['name']}] references "
                                  f"undefined plugin '{ref['pluginRef']}'")
    if cfg["saturationDetector"]["pluginRef"] not in defined:
        raise ConfigError("saturation detector validation failed: saturation detector references undefined plugin "
                          f"'{cfg['saturationDetector']['pluginRef']}'")


def _build(cfg: dict, handle: dict[str, str]) -> None:
    """configloader.go buildSchedulerConfig, buildDataLayerConfig, buildParserConfig and the detector."""
    handlers = [n for n in handle if _role(handle, n) == "profile-handler"]
    if len(handlers) > 1:
        raise ConfigError(f"scheduler config build failed: multiple profile handlers found ('{handlers[0]}', '{handlers[1]}')")
    if not handlers:
        raise ConfigError("scheduler config build failed: no profile handler configured")
    if handle[handlers[0]] == "single-profile-handler" and len(cfg["schedulingProfiles"]) > 1:
        raise ConfigError("scheduler config build failed: SingleProfileHandler cannot support multiple scheduling profiles")
    if "enableLegacyMetrics" not in cfg["featureGates"]:
        for src in (cfg.get("dataLayer") or {}).get("sources") or []:
            if _role(handle, src.get("pluginRef")) != "data-source":
                raise ConfigError(f"data layer config build failed: the plugin {src.get('pluginRef')} is not a fwkdl.DataSource")
            for ext in src.get("extractors") or []:
                if _role(handle, ext.get("pluginRef")) != "extractor":
                    raise ConfigError(f"data layer config build failed: the plugin {src.get('pluginRef')} is not a fwkdl.Extractor")
    if cfg["parser"].get("pluginRef") not in handle:
        raise ConfigError("parse config build failed: the configured parser is not loaded")
    if _role(handle, cfg["parser"]["pluginRef"]) != "parser":
        raise ConfigError("parse config build failed: the specified plugin is not a parser plugin in the config")
    if "saturation-detector" not in _role(handle, cfg["saturationDetector"]["pluginRef"]).split():
        raise ConfigError(f"plugin '{cfg['saturationDetector']['pluginRef']}' is not a fwkflowcontrol.SaturationDetector")
