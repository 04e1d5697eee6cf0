"""Envoy Gateway behaviour the NetworkPolicies depend on, at the version AIBrix v0.7.0 installs:
v1.2.8 (aibrix config/dependency/envoy-gateway/kustomization.yaml at v0.7.0 pulls
github.com/envoyproxy/gateway/releases/download/v1.2.8/install.yaml). Re-check when AIBrix bumps it.
Read with `git -C <mirror of envoyproxy/gateway> show v1.2.8:<path>`. Re-check on a bump: `git -C
<mirror> diff v1.2.8 <new tag> --` each path below.

The proxy Service of a Gateway is envoy-<ns>-<name>-<sha256("<ns>/<name>")[:8]>, the readable part cut
to 48 characters (internal/infrastructure/kubernetes/proxy/resource.go ExpectedResourceHashedName ->
internal/utils/misc.go GetHashedName(name, 48)); components/ops_commands.py gateway_endpoint computes it
and tests/test_operations.py checks it against the name AIBrix's own scripts use."""

from __future__ import annotations

TAG = "v1.2.8"

# Compared with the Envoy Gateway AIBrix's bundle brings (components/platform.py AIBRIX_BUNDLED) by
# tests/test_upstream_releases.py.
PORTED_FROM = {
    "repo": "envoyproxy/gateway", "release": TAG, "component": "envoy-gateway",
    "files": ("internal/infrastructure/kubernetes/proxy/resource.go", "internal/utils/misc.go",
              "internal/envoygateway/config/config.go",
              "internal/infrastructure/kubernetes/proxy/resource_provider.go",
              "internal/infrastructure/kubernetes/infra.go", "api/v1alpha1/envoygateway_types.go",
              "internal/gatewayapi/helpers.go", "internal/gatewayapi/translator.go"),
}

# internal/envoygateway/config/config.go: DefaultNamespace = "envoy-gateway-system", overridable by
# ENVOY_GATEWAY_NAMESPACE, which install.yaml sets from the controller pod's own namespace.
CONTROLLER_NAMESPACE = "envoy-gateway-system"

# internal/infrastructure/kubernetes/proxy/resource_provider.go: NewResourceRender(ns, ...) renders
# every proxy Deployment into the controller's namespace (infra.go passes cfg.Namespace). The
# GatewayNamespace deploy mode (proxies beside their Gateway) exists only from v1.3.0
# (api/v1alpha1/envoygateway_types.go KubernetesDeployModeTypeGatewayNamespace), and AIBrix's
# EnvoyGateway config (config/dependency/envoy-gateway/envoy_gateway_patch.yaml) sets no deploy mode.
PROXIES_RUN_IN_GATEWAY_NAMESPACE = False


def proxy_pod_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    """Labels of a Gateway's proxy pods: internal/infrastructure/kubernetes/proxy/resource.go
    EnvoyAppLabel (app.kubernetes.io/name=envoy, component=proxy, managed-by=envoy-gateway) plus
    internal/gatewayapi/helpers.go OwnerLabels (translator.go OwningGatewayNamespaceLabel,
    OwningGatewayNameLabel)."""
    return {
        "app.kubernetes.io/name": "envoy",
        "app.kubernetes.io/component": "proxy",
        "app.kubernetes.io/managed-by": "envoy-gateway",
        "gateway.envoyproxy.io/owning-gateway-namespace": gateway_namespace,
        "gateway.envoyproxy.io/owning-gateway-name": gateway_name,
    }
