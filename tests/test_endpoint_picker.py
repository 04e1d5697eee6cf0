"""policy/endpoint_picker.py against the real thing: the GIE v1.5.0 module's chart, options and config loader
(through the ports in tests/upstream_gie.py, themselves tied to the module's text here), the pinned engines'
own metric definitions, and the InferencePool CRDs (v1.6.0 in ../shared/crds, v1.5.0 in the module)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
import upstream_gie as gie
import upstream_sglang
import upstream_vllm
import yaml
from conftest import IN_CI
from crd_schemas import crd_index, raw_crd_index, strict, validate_custom_resource
from engine_containers import engine_packages
from vllm_cli import venvs

import apivalidation
from apivalidation import cel_rules, module_crds
from policy import endpoint_picker as ep

ENGINES = ("vllm", "sglang")
CONFIG_PATH = f"{ep.CONFIG_MOUNT}/{ep.CONFIG_FILE}"


@functools.cache
def module() -> Path:
    root = module_crds.module_dir(*gie.MODULE)
    if not root.is_dir():
        hint = f"{root} is missing: `go mod download {'@'.join(gie.MODULE)}` (make does it)"
        pytest.fail(hint) if IN_CI else pytest.skip(hint)
    return root


@functools.cache
def text(path: str) -> str:
    return (module() / path).read_text(encoding="utf-8")


def chart_values() -> dict:
    return yaml.safe_load(text("config/charts/inferencepool/values.yaml"))


# ---- the pins and the chart's figures ----

def test_the_pinned_release_is_the_one_ported_and_the_chart_ships():
    assert ep.EPP_VERSION == gie.TAG == gie.MODULE[1]
    image = chart_values()["inferenceExtension"]["image"]
    assert ep.EPP_IMAGE == f"{image['registry']}/{image['repository']}" and image["tag"] == ep.EPP_VERSION
    assert ep.CONFIG_FILE == chart_values()["inferenceExtension"]["pluginsConfigFile"]
    assert chart_values()["inferenceExtension"]["failureMode"] == ep.FAILURE_MODE
    register = text("apix/config/v1alpha1/zz_generated.register.go")
    group = re.search(r'GroupName = "([^"]+)"', register)[1]
    version = re.search(r'Version: "([^"]+)"', register)[1]
    assert ep.CONFIG_API_VERSION == f"{group}/{version}" == gie.API_VERSION
    assert ep.CONFIG_KIND == gie.KIND and f"type {ep.CONFIG_KIND} struct" in text("apix/config/v1alpha1/endpointpickerconfig_types.go")


def test_ports_probes_and_lifecycle_are_the_charts():
    deployment = text("config/charts/epplib/templates/_deployment.yaml")
    options = text("pkg/epp/server/options.go")
    assert f"DefaultGrpcPort      = {ep.GRPC_PORT}" in options
    assert re.search(rf"GRPCHealthPort:\s+{ep.HEALTH_PORT},", options) and re.search(rf"MetricsPort:\s+{ep.METRICS_PORT},", options)
    for name, port in (("grpc", ep.GRPC_PORT), ("grpc-health", ep.HEALTH_PORT), ("metrics", ep.METRICS_PORT)):
        assert f"- name: {name}\n              containerPort: {port}" in deployment
    service = re.findall(r"- name: (\S+)\n\s+protocol: (\S+)\n\s+port: \{\{[^}]*\| default (\d+) \}\}",
                         text("config/charts/epplib/templates/_service.yaml"))
    service = [{"name": n, "protocol": p, "port": int(port)} for n, p, port in service]
    assert service == ep.SERVICE_PORTS
    one_replica = deployment.split("{{- else }}\n            grpc:")
    assert all(f"port: {ep.HEALTH_PORT}\n              service: {ep.HEALTH_SERVICE}" in part for part in one_replica[1:3])
    assert (f"initialDelaySeconds: {ep.LIVENESS_PROBE['initialDelaySeconds']}\n            periodSeconds: "
            f"{ep.LIVENESS_PROBE['periodSeconds']}\n          readinessProbe:") in deployment
    assert f"{{{{- end }}}}\n            periodSeconds: {ep.READINESS_PROBE['periodSeconds']}\n" in deployment
    assert f"type: {ep.STRATEGY['type']}" in deployment
    assert f"terminationGracePeriodSeconds: {ep.TERMINATION_GRACE_PERIOD_SECONDS}" in deployment
    assert f'- name: plugins-config-volume\n              mountPath: "{ep.CONFIG_MOUNT}"' in deployment
    for env in ep.ENV:
        assert f"- name: {env['name']}" in deployment and env["valueFrom"]["fieldRef"]["fieldPath"] in deployment
    values = chart_values()["inferenceExtension"]
    assert values["resources"] == ep.RESOURCES and values["replicas"] == ep.REPLICAS
    assert values["flags"] == {"v": ep.LOG_VERBOSITY}
    assert chart_values()["inferencePool"]["apiVersion"] == ep.POOL_API_VERSION


def _chart_roles() -> list[dict]:
    """The rules of every namespaced Role the chart renders for one replica (template lines dropped)."""
    rules = []
    for path in ("config/charts/epplib/templates/_rbac.yaml", "config/charts/inferencepool/templates/rbac.yaml"):
        for doc in text(path).split("---"):
            if "\nkind: Role\n" in "\n" + doc and "leader" not in doc:
                plain = "\n".join(line for line in doc.splitlines() if "{{" not in line)
                rules += yaml.safe_load(plain[plain.index("rules:"):])["rules"]
    return rules


def test_role_rules_are_the_charts_namespaced_roles():
    def key(rule):
        return tuple(sorted(rule["apiGroups"])), tuple(sorted(rule["resources"])), tuple(sorted(rule["verbs"]))
    assert sorted(map(key, ep.ROLE_RULES)) == sorted(map(key, _chart_roles()))
    assert all(set(r["verbs"]) == {"get", "list", "watch"} for r in ep.ROLE_RULES)


# ---- the command line ----

def _registered_flags() -> set[str]:
    found = set()
    for path in ("pkg/epp/server/options.go", "pkg/common/observability/logging/options.go"):
        found |= set(re.findall(r'fs\.\w+Var[P]?\(&opts\.[\w.]+, "([\w-]+)"', text(path)))
    return found


def test_the_ported_flag_set_is_the_eps():
    # controller-runtime v0.23.3 pkg/log/zap/zap.go BindFlags adds the zap-* flags (not in this module).
    assert set(gie.FLAGS) - {n for n in gie.FLAGS if n.startswith("zap-")} == _registered_flags()
    options = text("pkg/epp/server/options.go")
    for name in gie.REFUSED_WHEN_SET:
        assert f'"{name}",\n' in options.split("deprecatedMetricFlags := []string{")[1].split("}")[0]
    for field, value in (("SecureServing", "true"), ("MetricsEndpointAuth", "true"), ("EnablePprof", "true"),
                         ("Tracing", "true"), ("ModelServerMetricsScheme", '"http"')):
        assert re.search(rf"\n\s+{field}:\s+{value},", options), field


@pytest.mark.parametrize("engine", ENGINES)
def test_picker_args_parse_as_the_epps_flags(engine):
    values, problems = gie.parse_args(ep.picker_args(engine, "qwen", "serving", CONFIG_PATH))
    assert problems == []
    assert values["pool-name"] == "qwen" and values["pool-namespace"] == "serving" and values["pool-group"] == ep.POOL_GROUP
    assert values["config-file"] == CONFIG_PATH and values["zap-encoder"] == "json"
    # The choices the builder's docstring argues for, as the EPP reads them.
    assert values["secure-serving"] is True and values["metrics-endpoint-auth"] is False
    assert values["enable-pprof"] is False and values["tracing"] is False
    assert not set(values) & set(gie.REFUSED_WHEN_SET)


def test_the_flag_port_refuses_what_the_epp_refuses():
    good = ep.picker_args("vllm", "p", "ns", CONFIG_PATH)
    assert gie.parse_args(good + ["--no-such-flag"])[1] == ["unknown flag: --no-such-flag"]
    assert gie.parse_args(good + ["--tracing", "false"])[1][0].startswith("positional argument 'false'")
    assert "invalid argument" in gie.parse_args(good + ["--grpc-port", "x"])[1][0]
    assert "invalid argument" in gie.parse_args(good + ["--zap-encoder", "yaml"])[1][0]
    assert gie.parse_args(["--config-file", CONFIG_PATH]) == (
        {"config-file": CONFIG_PATH}, ["either pool-name or endpoint-selector must be set"])
    # The chart's SGLang arguments (epplib _deployment.yaml), which v1.5.0's Validate refuses at start.
    chart = re.findall(r'- (--[\w-]+-metric="sglang:\w+")', text("config/charts/epplib/templates/_deployment.yaml"))
    assert len(chart) == 4
    assert gie.parse_args(good + chart[:1])[1] == [
        'flag "total-queued-requests-metric" is deprecated and cannot be used; configure metrics via engineConfigs '
        "in EndpointPickerConfig instead"]


# ---- the EndpointPickerConfig ----

@pytest.mark.parametrize("engine", ENGINES)
def test_picker_config_loads_with_the_ported_loader(engine):
    config = ep.picker_config(engine)
    # As the ConfigMap holds it: YAML text, read back by the EPP.
    effective = gie.load_config(yaml.safe_load(yaml.safe_dump(config)))
    assert effective["schedulingProfiles"] == [{"name": "default", "plugins": [
        {"pluginRef": "queue-scorer", "weight": 2}, {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
        {"pluginRef": "prefix-cache-scorer", "weight": 3}, {"pluginRef": "max-score-picker"}]}]
    assert effective["dataLayer"] == {"sources": [{"pluginRef": "metrics-data-source",
                                                   "extractors": [{"pluginRef": "core-metrics-extractor"}]}]}
    assert effective["parser"] == {"pluginRef": "openai-parser"}
    assert effective["handle"]["approx-prefix-cache-producer"] == "approx-prefix-cache-producer"
    extractor = next(p for p in effective["plugins"] if p["type"] == "core-metrics-extractor")["parameters"]
    assert extractor["defaultEngine"] == engine
    assert extractor["engineConfigs"] == [ep.engine_config(engine)]


def test_picker_config_is_the_charts_default():
    """The plugin types, profile weights and metrics source of epplib _config.yaml with the latency
    predictor off; the extractor's parameters are ours (picker_config's docstring)."""
    template = text("config/charts/epplib/templates/_config.yaml").split("latencyPredictor.enabled")[0]
    chart_types = re.findall(r"^    - type: ([\w-]+)$", template, re.M)
    ours = ep.picker_config("vllm")
    assert [p["type"] for p in ours["plugins"]] == chart_types
    profile = text("config/charts/epplib/templates/_config.yaml").split("{{- else }}\n    - name: default")[1]
    weights = {ref: float(w) for ref, w in re.findall(r"pluginRef: ([\w-]+)\n\s+weight: (\d+)", profile)}
    assert {r["pluginRef"]: r["weight"] for r in ours["schedulingProfiles"][0]["plugins"]} == weights
    source = chart_values()["inferenceExtension"]["metricsDataSource"]
    assert ours["plugins"][3]["parameters"] == source


@pytest.mark.parametrize("broken, message", [
    (lambda c: c["plugins"].append({"type": "no-such-scorer"}), "plugin type 'no-such-scorer' is not registered"),
    (lambda c: c["schedulingProfiles"][0]["plugins"].append({"pluginRef": "lora-affinity-scorer"}),
     "references undefined plugin 'lora-affinity-scorer'"),
    (lambda c: c.update(featureGates=["noSuchGate"]), "feature gate 'noSuchGate' is unknown"),
    (lambda c: c["plugins"][0].update(weight=2), 'unknown field "plugins[0].weight"'),
    (lambda c: c["plugins"].append({"type": "queue-scorer"}), "duplicate plugin name 'queue-scorer'"),
    (lambda c: c["plugins"][4]["parameters"].update(defaultEngine="tgi"), "defaultEngine 'tgi' not found"),
    (lambda c: c["schedulingProfiles"].append({"name": "other", "plugins": []}), "no profile handler configured"),
    (lambda c: (c["schedulingProfiles"].append({"name": "other", "plugins": []}),
                c["plugins"].append({"type": "single-profile-handler"})), "SingleProfileHandler cannot support"),
    (lambda c: c.update(kind="EndpointPicker"), "no kind 'EndpointPicker' is registered"),
    (lambda c: c.update(parser={"pluginRef": "queue-scorer"}), "is not a parser plugin"),
])
def test_the_loader_port_refuses_what_the_loader_refuses(broken, message):
    config = ep.picker_config("sglang")
    broken(config)
    with pytest.raises(gie.ConfigError, match=re.escape(message)):
        gie.load_config(config)


def test_the_ported_plugin_registry_is_the_runners():
    runner = text("cmd/epp/runner/runner.go").split("func (r *Runner) registerInTreePlugins()")[1].split("\n}\n")[0]
    assert len(re.findall(r"fwkplugin\.Register\(", runner)) == len(gie.PLUGIN_TYPES)
    registered = set()
    for const in re.findall(r"fwkplugin\.Register\(([\w.]+),", runner):
        pkg, name = const.split(".")
        values = re.findall(rf'\b{name}\s*(?:string\s*)?=\s*"([\w-]+)"', _go_package_text(pkg))
        assert len(set(values)) == 1, const
        registered.add(values[0])
    assert registered == set(gie.PLUGIN_TYPES)


@functools.cache
def _go_package_text(alias: str) -> str:
    """Every non-test Go file of the package the runner imports under `alias` (its name or last element)."""
    imports = re.finditer(r'\n\t(\w+ )?"sigs\.k8s\.io/gateway-api-inference-extension/([\w/]+)"',
                          text("cmd/epp/runner/runner.go"))
    path = next(m[2] for m in imports if ((m[1] or "").strip() or m[2].rsplit("/", 1)[-1]) == alias)
    return "\n".join(p.read_text() for p in (module() / path).glob("*.go") if not p.name.endswith("_test.go"))


# ---- the engines' metric names ----

def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@pytest.mark.parametrize("release", upstream_vllm.RELEASES)
def test_vllm_metric_names_exist_in_the_pinned_release(release):
    site = next((venvs() / release).glob("lib/python*/site-packages"))
    names = ep.metric_names("vllm")
    assert set(names) == set(ep.UPSTREAM_METRICS["vllm"]), "vLLM defines every name GIE reads"
    assert set(names.values()) <= _string_constants(site / "vllm/v1/metrics/loggers.py")
    # cache_config_info's labels are CacheConfig's fields; the EPP reads block_size and num_gpu_blocks
    # (extractor.go CacheConfigBlockSizeInfoMetricName, CacheConfigNumGPUBlocksMetricName).
    fields = {n.target.id for n in ast.walk(ast.parse((site / "vllm/config/cache.py").read_text()))
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert {"block_size", "num_gpu_blocks"} <= fields


@pytest.mark.parametrize("release", upstream_sglang.RELEASES)
def test_sglang_metric_names_exist_in_the_pinned_release(release):
    root = engine_packages() / f"sglang=={release}" / "sglang"
    names = ep.metric_names("sglang")
    assert set(names.values()) <= _string_constants(root / "srt/observability/metrics_collector.py")
    absent = [ep.UPSTREAM_METRICS["sglang"][k] for k in ep.ABSENT["sglang"]]
    needles = [f'"{n}"'.encode() for n in absent]
    hits = [p for p in root.rglob("*.py") if any(n in p.read_bytes() for n in needles)]
    assert hits == [], f"{absent} is defined in {hits}: metric_names may return it (policy/endpoint_picker.py ABSENT)"


def test_engine_configs_name_the_upstream_fields():
    factories = text("pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go")
    for field in ep.ENGINE_CONFIG_FIELDS.values():
        assert f'`json:"{field}"`' in factories
    go_field = {"queued": "QueuedRequestsSpec", "running": "RunningRequestsSpec", "kv_cache_usage": "KVUsageSpec",
                "lora": "LoRASpec", "cache_info": "CacheInfoSpec"}
    for engine, names in ep.UPSTREAM_METRICS.items():
        entry = re.search(rf'Name:\s+"{engine}",(.*?)\n\t}},', factories, re.S)[1]
        spec = dict(re.findall(r'(\w+Spec|\w+LabelName):\s+"([^"]*)"', entry))
        assert {k: spec[g] for k, g in go_field.items() if spec.get(g)} == names, engine
        labels = {f"cache{k[5:]}": v for k, v in spec.items() if k.endswith("LabelName")}
        assert labels == ep.CACHE_INFO_LABELS.get(engine, {}), engine
    registry = text("pkg/epp/framework/plugins/datalayer/extractor/metrics/mapping_registry.go")
    assert f'DefaultEngineTypeLabelKey = "{ep.ENGINE_TYPE_LABEL}"' in registry
    with pytest.raises(ValueError, match="no metrics for engine 'tgi'"):
        ep.metric_names("tgi")


# ---- the InferencePool ----

def pool() -> dict:
    return {"apiVersion": ep.POOL_API_VERSION, "kind": ep.POOL_KIND, "metadata": {"name": "qwen", "namespace": "serving"},
            "spec": ep.pool_spec({"app.kubernetes.io/name": "qwen"}, 8000, "qwen-epp")}


@functools.cache
def v1_5_0_pool_schema() -> dict:
    index = cel_rules.load_crds(module() / "config/crd/bases", frozenset({ep.POOL_KIND}))
    return index[(ep.POOL_API_VERSION, ep.POOL_KIND)]


def test_the_pool_is_valid_against_the_crds_and_the_api_server_rules():
    obj = pool()
    assert validate_custom_resource(obj, crd_index()) == []                     # v1.6.0, strict schema
    assert cel_rules.check(obj, raw_crd_index()) == []                           # its CEL rules
    assert apivalidation.validate([obj], raw_crd_index()) == []                  # as the render checks it
    schema = strict(v1_5_0_pool_schema())
    assert validate_custom_resource(obj, {(ep.POOL_API_VERSION, ep.POOL_KIND): schema}) == []
    without_picker = pool()
    del without_picker["spec"]["endpointPickerRef"]
    assert validate_custom_resource(without_picker, {(ep.POOL_API_VERSION, ep.POOL_KIND): schema}) == [
        "spec: 'endpointPickerRef' is a required property"]


def test_the_render_validates_rendered_pools_like_every_custom_resource():
    """The render loads the CRDs of the kinds it rendered (render/__main__.py: apivalidation.crd_index with
    custom_kinds); an InferencePool is found by its CRD file's head and its CEL rules run."""
    broken = pool()
    broken["spec"]["targetPorts"] *= 2
    index = apivalidation.crd_index(str(apivalidation.crds_dir()), apivalidation.custom_kinds([broken]))
    assert (ep.POOL_API_VERSION, ep.POOL_KIND) in index
    assert [p.rule for p in apivalidation.validate([broken], index)] == [
        "port number must be unique (CRD x-kubernetes-validations)"]
