"""Cluster prerequisites from pinned release manifests: AIBrix (its dependency bundle carries the
KubeRay operator v1.2.1 and Envoy Gateway v1.2.8 it was tested with) and the RBG controller.
The versions match the CRDs the tests validate against (../shared/crds/SOURCES.md)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component
from config_model import Platform

# What AIBrix v0.7.0 bundles (config/dependency at that tag); for the exports.
AIBRIX_BUNDLED = {"kuberay": "v1.2.1", "envoyGateway": "v1.2.8", "gatewayApi": "v1.2.1"}


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
    }


def required_versions(platform: Platform) -> dict[str, str]:
    return {"aibrix": platform.aibrix_version, **AIBRIX_BUNDLED, "rbg": platform.rbg_version}


class ClusterPrerequisites(Component):
    def __init__(self, name: str, platform: Platform, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:platform:ClusterPrerequisites", name, opts)
        previous: list[pulumi.Resource] = []
        for key, url in manifest_urls(platform).items():
            # Dependencies (CRDs, operators) before the components that use them.
            previous = [k8s.yaml.v2.ConfigFile(f"{name}-{key}", file=url, opts=self.child_opts(depends_on=previous))]
        self.register_outputs({"versions": required_versions(platform)})
