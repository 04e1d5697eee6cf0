"""A small evaluator of networking.k8s.io/v1 NetworkPolicy semantics, ingress and egress, as the API
defines them: k8s.io/api v0.37.2 (Kubernetes v1.37) networking/v1 types.go, the comments of
NetworkPolicySpec, NetworkPolicyIngressRule, NetworkPolicyEgressRule, NetworkPolicyPort, IPBlock and
NetworkPolicyPeer; k8s.io/kubernetes v1.37.2 pkg/apis/networking/v1/defaults.go (policyTypes and
protocol defaults); kubernetes/website concepts/services-networking/network-policies.md. Whatever it
does not model (a selector operator it does not know, a peer the API server refuses) raises instead of
allowing.

- policyTypes: as given; when absent, Ingress, plus Egress when the policy has a non-empty egress list
  (defaults.go SetDefaults_NetworkPolicy: `len(obj.Spec.Egress) != 0`). An empty or absent `egress` in
  a policy whose policyTypes lists Egress allows nothing: the policy only isolates.
- A pod is isolated for a direction when a policy of its namespace selects it (podSelector, {} = all)
  and lists that direction. An isolated pod sends (takes) a connection only if some selecting policy
  has a rule of that direction allowing it; a non-isolated pod sends (takes) every one. A connection
  between two pods needs both: the sender's egress and the receiver's ingress (`allowed`).
- A rule allows a connection when its `to`/`from` is absent/empty or one peer matches, and its `ports`
  is absent/empty or one port matches.
- A peer: podSelector alone selects pods in the policy's own namespace; namespaceSelector alone, every
  pod of the selected namespaces; both in one peer, the pods matching podSelector in those namespaces
  (AND); as two peers of one list, either (OR). ipBlock stands alone (the API server refuses it beside
  another selector: ValidateNetworkPolicyPeer) and matches an address inside `cidr` and inside none of
  `except`.
- Which addresses an ipBlock sees is left to the implementation for pod IPs (network-policies.md: ipBlock
  ranges are meant for cluster-external IPs, and whether a rewritten address is subject to them depends
  on the network plugin and Service implementation). This model
  takes the broad reading: a destination or source that has an IP (an `Address`, or a `Pod` given one)
  is matched by an ipBlock containing it, so "cannot reach" holds on CNIs that match pod IPs too (Calico)
  and on those that do not; a Pod without an IP is matched by pod/namespace selectors only.
- A port matches on protocol (default TCP) and port: a number is the destination port (up to endPort,
  inclusive, if given); a name is a container port of that name on the destination pod (an Address
  has none, so a named port never matches it); no port, every port of that protocol. Policies see the
  connection after a Service's translation: destination pod and container port.
- Every namespace carries the immutable label kubernetes.io/metadata.name = its name.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)   # container port name -> number (TCP)
    # Labels of the pod's namespace beside kubernetes.io/metadata.name, which every namespace carries.
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ip: str | None = None                                  # given: ipBlock peers may match it


@dataclass(frozen=True)
class Address:
    """A destination outside the cluster's pods (an object store, a registry, the metadata service)."""
    ip: str


def selects(selector: dict | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise NotImplementedError(f"selector fields {unknown}")
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": lambda: labels.get(key) in values, "NotIn": lambda: labels.get(key) not in values,
              "Exists": lambda: key in labels, "DoesNotExist": lambda: key not in labels}.get(op)
        if ok is None:
            raise NotImplementedError(f"operator {op}")
        if not ok():
            return False
    return True


def _in_block(block: dict, ip: str | None) -> bool:
    if ip is None:
        return False
    addr = ipaddress.ip_address(ip)
    cidr = ipaddress.ip_network(block["cidr"])
    excepts = [ipaddress.ip_network(e) for e in block.get("except") or []]
    for e in excepts:
        if e.version != cidr.version or not e.subnet_of(cidr) or e.prefixlen <= cidr.prefixlen:
            raise ValueError(f"except {e} is not a strict subset of {cidr}")   # ValidateIPBlock refuses it
    return addr.version == cidr.version and addr in cidr and not any(addr.version == e.version and addr in e for e in excepts)


def _peer_matches(peer: dict, policy_ns: str, other: Pod | Address) -> bool:
    ns_sel, pod_sel, block = peer.get("namespaceSelector"), peer.get("podSelector"), peer.get("ipBlock")
    if block is not None:
        if ns_sel is not None or pod_sel is not None:
            raise ValueError(f"ipBlock beside another selector {peer}")   # the API server refuses it
        return _in_block(block, other.ip)
    if ns_sel is None and pod_sel is None:
        raise ValueError(f"empty peer {peer}")   # the API server refuses it
    if isinstance(other, Address):
        return False
    ns_ok = other.namespace == policy_ns if ns_sel is None else selects(
        ns_sel, {**other.namespace_labels, "kubernetes.io/metadata.name": other.namespace})
    return ns_ok and (pod_sel is None or selects(pod_sel, other.labels))


def _port_matches(rule_port: dict, dst: Pod | Address, port: int, protocol: str) -> bool:
    if rule_port.get("protocol", "TCP") != protocol:
        return False
    p = rule_port.get("port")
    if p is None:
        return True
    if isinstance(p, int):
        return p <= port <= rule_port.get("endPort", p)
    if "endPort" in rule_port:
        raise ValueError(f"endPort with a named port {rule_port}")   # the API server refuses it
    return isinstance(dst, Pod) and dst.ports.get(p) == port


def policy_types(spec: dict) -> list[str]:
    return spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])


def _direction_allowed(policies: list[dict], subject: Pod, direction: str, peer: Pod | Address, dst: Pod | Address,
                       port: int, protocol: str) -> bool:
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [p for p in policies if p["metadata"]["namespace"] == subject.namespace
                 and direction in policy_types(p["spec"]) and selects(p["spec"].get("podSelector"), subject.labels)]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get(rules_key) or []:
            peers, ports = rule.get(peers_key) or [], rule.get("ports") or []
            if peers and not any(_peer_matches(x, p["metadata"]["namespace"], peer) for x in peers):
                continue
            if ports and not any(_port_matches(rp, dst, port, protocol) for rp in ports):
                continue
            return True
    return False


def ingress_allowed(policies: list[dict], src: Pod | Address, dst: Pod, port: int, protocol: str = "TCP") -> bool:
    """Would `dst` accept a connection from `src` on `port`?"""
    return _direction_allowed(policies, dst, "Ingress", src, dst, port, protocol)


def egress_allowed(policies: list[dict], src: Pod, dst: Pod | Address, port: int, protocol: str = "TCP") -> bool:
    """May `src` open a connection to `dst` on `port`?"""
    return _direction_allowed(policies, src, "Egress", dst, dst, port, protocol)


def allowed(policies: list[dict], src: Pod | Address, dst: Pod | Address, port: int, protocol: str = "TCP") -> bool:
    """Does a connection from `src` to `dst` on `port` get through: the sender's egress (a pod's) and the
    receiver's ingress (a pod's)? `policies` are NetworkPolicy objects."""
    out = not isinstance(src, Pod) or egress_allowed(policies, src, dst, port, protocol)
    return out and (not isinstance(dst, Pod) or ingress_allowed(policies, src, dst, port, protocol))
