"""Cluster prerequisites from pinned release manifests: AIBrix (its dependency bundle carries the
KubeRay operator v1.2.1 and Envoy Gateway v1.2.8 it was tested with), the RBG controller and the
LeaderWorkerSet controller. The versions match the CRDs the tests validate against
(../shared/crds/SOURCES.md)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.base import AIBRIX_ORCHESTRATION_API, Component
from components.orchestrators import ORCHESTRATORS
from config_model import Platform, ServedModel
from policy.endpoint_picker import EPP_VERSION

# The key of the Gateway API Inference Extension in the prerequisites export and the install.
INFERENCE_EXTENSION = "gatewayApiInferenceExtension"

# What AIBrix v0.7.0 bundles (config/dependency at that tag); for the exports.
AIBRIX_BUNDLED = {"kuberay": "v1.2.1", "envoyGateway": "v1.2.8", "gatewayApi": "v1.2.1"}


# Releases a stack needs only when one of its models' workloads is of their API group: a LeaderWorkerSet
# (issue 29). AIBrix and RBG are listed by every stack.
ON_DEMAND = {"leaderworkerset.x-k8s.io": "lws"}


def inference_extension_url(version: str = EPP_VERSION) -> str:
    """The CRDs of the Gateway API Inference Extension at the endpoint picker's release, as its guide applies
    them (kubernetes-sigs/gateway-api-inference-extension v1.5.0 site-src/guides/index.md: `kubectl apply -f
    https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/$VERSION/manifests.yaml`;
    the Makefile builds it from config/crd: InferencePool v1 and the x-k8s.io kinds the picker also watches)."""
    return f"https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/{version}/manifests.yaml"


def manifest_urls(platform: Platform) -> dict[str, str]:
    """In apply order. Since v0.7.0 the AIBrix CRDs (StormService, RayClusterFleet, RoleSet, ...) are
    their own release asset, left out of the core bundle so that uninstalling the operator keeps
    the custom resources (aibrix v0.7.0 .github/workflows/release-build.yaml: `kustomize build
    config/crd > aibrix-core-crds-<tag>.yaml`; config/default/kustomization.yaml; README: dependency,
    then core-crds, then core). All three are applied server-side: Pulumi's provider applies
    server-side by default, as upstream's `kubectl apply --server-side`."""
    aibrix = f"https://github.com/vllm-project/aibrix/releases/download/{platform.aibrix_version}"
    return {
        "aibrix-dependency": f"{aibrix}/aibrix-dependency-{platform.aibrix_version}.yaml",
        "aibrix-core-crds": f"{aibrix}/aibrix-core-crds-{platform.aibrix_version}.yaml",
        "aibrix-core": f"{aibrix}/aibrix-core-{platform.aibrix_version}.yaml",
        "rbg": f"https://raw.githubusercontent.com/sgl-project/rbg/{platform.rbg_version}/deploy/kubectl/manifests.yaml",
        "lws": lws_manifest_url(platform.lws_version),
    }


def lws_manifest_url(version: str) -> str:
    """The release asset upstream's installation page applies (kubernetes-sigs/lws v0.10.0
    site/content/en/docs/installation/_index.md: `kubectl apply --server-side -f
    https://github.com/kubernetes-sigs/lws/releases/download/$VERSION/manifests.yaml`; the Makefile's
    `artifacts` target builds it from config/default). That build leaves gang scheduling off: its controller
    configuration (config/manager/controller_manager_config.yaml) has no gangSchedulingManagement and
    config/default/kustomization.yaml leaves the Volcano RBAC component commented out, so a cluster whose
    LeaderWorkerSets are gang-scheduled by Volcano installs the controller with the chart's
    gangSchedulingManagement.schedulerProvider=volcano instead (charts/lws/values.yaml; README)."""
    return f"https://github.com/kubernetes-sigs/lws/releases/download/{version}/manifests.yaml"


def needed_on_demand(models: list[ServedModel]) -> set[str]:
    """The ON_DEMAND releases the models' workloads need."""
    # A P/D fleet (rayclusterfleet) is no model workload (components/orchestrators/): AIBrix's own.
    groups = {ORCHESTRATORS[m.orchestrator].api_version.rpartition("/")[0] for m in models
              if m.orchestrator in ORCHESTRATORS}
    return {key for group, key in ON_DEMAND.items() if group in groups}


def needs_aibrix(models: list[ServedModel] | tuple) -> bool:
    """Beside its gateway (the aibrix routing layer), AIBrix runs a model's StormService or RayClusterFleets and
    its PodAutoscaler: a stack on the inferencePool layer with none of them does not need it installed."""
    return any(m.autoscaling.enabled or m.orchestrator not in ORCHESTRATORS
               or ORCHESTRATORS[m.orchestrator].api_version.startswith(AIBRIX_ORCHESTRATION_API.split('/')[0])
               for m in models)


def required_versions(platform: Platform, models: list[ServedModel] | tuple = (),
                      inference_pool: bool = False) -> dict[str, str]:
    """What the stack is built for: AIBrix with what it bundles and RBG always; LeaderWorkerSet where a model
    runs on one, or where this stack installs it; the Inference Extension's CRDs with the inferencePool layer, and
    then AIBrix only where a model needs it (needs_aibrix)."""
    out = {"aibrix": platform.aibrix_version, **AIBRIX_BUNDLED} if not inference_pool or needs_aibrix(models) else {}
    out["rbg"] = platform.rbg_version
    if platform.install or "lws" in needed_on_demand(list(models)):
        out["lws"] = platform.lws_version
    if inference_pool:
        out[INFERENCE_EXTENSION] = EPP_VERSION
    return out


class ClusterPrerequisites(Component):
    def __init__(self, name: str, platform: Platform, opts: pulumi.ResourceOptions | None = None,
                 inference_pool: bool = False):
        super().__init__("llm-serving:platform:ClusterPrerequisites", name, opts)
        previous: list[pulumi.Resource] = []
        urls = manifest_urls(platform)
        if inference_pool:
            urls[INFERENCE_EXTENSION] = inference_extension_url()
        for key, url in urls.items():
            # Dependencies (CRDs, operators) before the components that use them.
            previous = [k8s.yaml.v2.ConfigFile(f"{name}-{key}", file=url, opts=self.child_opts(depends_on=previous))]
        self.register_outputs({"versions": required_versions(platform, inference_pool=inference_pool)})
