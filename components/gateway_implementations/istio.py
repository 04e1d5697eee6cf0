"""Istio 1.30.1, the release with GIE v1.5.0's conformance report (success; GIE conformance module
reports/v1.5.0/gateway/istio). Read at istio/istio tag 1.30.1 and GIE v1.5.0.

Prerequisite: istiod with ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true (pilot/pkg/features/experimental.go,
default false).

Proxies: the Deployment istiod makes for a Gateway (manifests/charts/istio-control/istio-discovery/
files/kube-gateway.yaml) is in the Gateway's namespace (`namespace: {{.Namespace}}`) and its pods carry
`gateway.networking.k8s.io/gateway-name: {{.Name}}`, the Gateway's name as is.

The picker: istiod sends ext_proc to the picker Service's ordinary outbound cluster (pilot/pkg/networking/
core/route/route.go), plaintext unless a DestinationRule says TLS, while the picker serves TLS with a
self-signed certificate. So, as GIE v1.5.0's own chart does for Istio (config/charts/inferencepool/
templates/istio.yaml: host `<picker>.<namespace>.svc.cluster.local`, `trafficPolicy.tls: {mode: SIMPLE,
insecureSkipVerify: true}`), one DestinationRule per picker Service. networking.istio.io/v1 rather than
the chart's v1beta1: both are served by Istio 1.30.1's CRD, v1 is its storage version (istio.io/api at
the pseudo-version 1.30.1's go.mod pins, kubernetes/customresourcedefinitions.gen.yaml; the render checks
the object against that CRD, apivalidation/module_crds.py).

Timeouts: the HTTPRoute's rules[].timeouts (pilot/pkg/config/kube/gateway/conversion.go). Per-consumer
limits: refused, see REFUSES_CONSUMER_LIMITS.
"""

from __future__ import annotations

from components.gateway_implementations.base import GATEWAY_NAME_LABEL, ExtraObject, Implementation, PoolRoute
from config_model import derived

NAME = "istio"
DESTINATION_RULE_API_VERSION = "networking.istio.io/v1"
DESTINATION_RULE = "DestinationRule"
# ClientTLSSettings (istio.io/api networking/v1alpha3/destination_rule.proto): TLS to the picker without
# verifying its self-signed certificate, as the GIE v1.5.0 chart sets it.
PICKER_TLS = {"mode": "SIMPLE", "insecureSkipVerify": True}
REFUSES_CONSUMER_LIMITS = (
    "Istio 1.30.1 has no rate-limit policy kind for Gateway API routes: a per-client limit is raw Envoy "
    "configuration in an EnvoyFilter (networking.istio.io/v1alpha3), which this program does not write")


def proxy_labels(gateway_namespace: str, gateway_name: str) -> dict[str, str]:
    return {GATEWAY_NAME_LABEL: gateway_name}


def destination_rule_name(picker_service: str) -> str:
    return derived.bounded(f"{picker_service}-tls")


def picker_host(picker_service: str, namespace: str) -> str:
    return f"{picker_service}.{namespace}.svc.cluster.local"


def objects(p: PoolRoute) -> list[ExtraObject]:
    """The picker's DestinationRule, beside its Service (a DestinationRule applies to its host from any
    namespace of the mesh; in the Service's own namespace it is the one its owner controls)."""
    return [ExtraObject(
        resource="istio-picker-tls", api_version=DESTINATION_RULE_API_VERSION, kind=DESTINATION_RULE,
        name=destination_rule_name(p.picker_service), namespace=p.namespace,
        spec={"host": picker_host(p.picker_service, p.namespace), "trafficPolicy": {"tls": dict(PICKER_TLS)}},
        after="picker")]


IMPLEMENTATION = Implementation(
    name=NAME, title="Istio", release="1.30.1", proxies_in_gateway_namespace=True, proxy_labels=proxy_labels,
    # kube-gateway.yaml puts the name in the label as is: a longer name than a label value takes (63)
    # would fail the Deployment, never be shortened.
    labelled_name_limit=63, refuses_consumer_limits=REFUSES_CONSUMER_LIMITS, objects=objects)
