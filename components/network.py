"""NetworkPolicies: engines take traffic only from the gateway namespace and this stack's own pods
(the same-pod proxy, smoke and benchmark Jobs); the NIXL side channel and KV transfer are open
only between the prefill and decode pods of one roleset. Everything else is denied ingress."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.base import PART_OF, Component, metadata


@dataclass(frozen=True)
class NetworkArgs:
    namespace: str
    gateway_namespace: str
    engine_ports: list[int]
    rolesets: list[str] = field(default_factory=list)


def policies(args: NetworkArgs) -> dict[str, dict]:
    """Name -> NetworkPolicy spec, pure so the rules can be read and tested without Pulumi."""
    specs: dict[str, dict] = {
        "llm-serving-default-deny-ingress": {"podSelector": {}, "policyTypes": ["Ingress"]},
        "llm-serving-engine-ingress": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/component": "engine",
                                            "app.kubernetes.io/part-of": PART_OF}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": args.gateway_namespace}}},
                         {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}],
                "ports": [{"protocol": "TCP", "port": p} for p in sorted(set(args.engine_ports))],
            }],
        },
    }
    for roleset in sorted(set(args.rolesets)):
        # NIXL's side channel and UCX's data path between the two sides of one roleset only.
        selector = {"matchLabels": {"roleset-name": roleset}}
        specs[f"llm-serving-pd-{roleset}"[:63]] = {
            "podSelector": selector, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": selector}]}]}
    return specs


class NetworkPolicies(Component):
    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:network:NetworkPolicies", name, opts)
        for policy_name, spec in policies(args).items():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy_name}", metadata=metadata(policy_name, args.namespace, "network-policy"),
                spec=spec, opts=self.child_opts())
        self.register_outputs({})
