"""agentgateway v1.0.0, the release with its GIE conformance report against InferencePool v1 (GIE v1.4.0,
success; GIE conformance module reports/v1.4.0/gateway/agentgateway). Read at agentgateway/agentgateway
tag v1.0.0 (its controller is in the same repository, controller/).

Proxies: the controller renders its chart per Gateway and puts every namespaced object it renders in the
Gateway's namespace (controller/pkg/deployer/deployer.go SetNamespaceAndOwnerWithGVK: `owner.GetNamespace()`).
The pods carry `gateway.networking.k8s.io/gateway-name: <safe name>` (controller/pkg/kgateway/helm/
agentgateway/templates/deployment.yaml with _helpers.tpl kgateway.gateway.selectorLabels), where the safe
name is the Gateway's name up to 63 characters and a truncated, hashed one past that
(`kgateway.gateway.safeLabelValue`; deployer/agentgateway_parameters.go safeLabelValue). gateway.name is a
DNS label (at most 63), so the label is always the name itself.

The picker: the controller gives the picker's Service a backend TLS policy with verification INSECURE_ALL
by itself (controller/pkg/agentgateway/plugins/inference_plugin.go): nothing to add.

Timeouts: the HTTPRoute's rules[].timeouts (controller/pkg/agentgateway/translator/builtin_helpers.go).
Per-consumer limits: refused, see REFUSES_CONSUMER_LIMITS.
"""

from __future__ import annotations

from components.gateway_implementations.base import GATEWAY_NAME_LABEL, Implementation

NAME = "agentgateway"
# _helpers.tpl kgateway.gateway.safeLabelValue: `if gt (len $name) 63` -> truncated and hashed.
MAX_LABELLED_GATEWAY_NAME = 63
REFUSES_CONSUMER_LIMITS = (
    "agentgateway v1.0.0's AgentgatewayPolicy has a local limit with no per-client key and keys a limit per "
    "client only in a global limit that needs an external rate-limit service (controller/api/v1alpha1/"
    "agentgateway/agentgateway_policy_types.go RateLimits), which this program does not deploy")


def proxy_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    return {GATEWAY_NAME_LABEL: gateway_name}


IMPLEMENTATION = Implementation(
    name=NAME, title="agentgateway", release="v1.0.0", proxies_in_gateway_namespace=True, proxy_labels=proxy_labels,
    labelled_name_limit=MAX_LABELLED_GATEWAY_NAME, refuses_consumer_limits=REFUSES_CONSUMER_LIMITS)
