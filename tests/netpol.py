"""A small evaluator of networking.k8s.io/v1 NetworkPolicy ingress semantics, as the API reference
defines them (k8s.io/api networking/v1 types.go, kubernetes/website concepts/services-networking/
network-policies.md), for the subset any policy here could use. Whatever it does not model (ipBlock,
a selector operator it does not know) raises instead of allowing.

- A pod is isolated for ingress when a policy of its namespace selects it (podSelector, {} = all)
  and lists Ingress in policyTypes (absent: Ingress). An isolated pod takes a connection only if
  some selecting policy has an ingress rule allowing it; a non-isolated pod takes every one.
- A rule allows a connection when its `from` is absent/empty or one peer matches, and its `ports` is
  absent/empty or one port matches. A peer with only podSelector selects pods in the policy's own
  namespace; only namespaceSelector, every pod of the selected namespaces; both, the pods matching
  podSelector in those namespaces.
- A port matches on protocol (default TCP) and port: a number is the destination port (up to
  endPort if given); a name is a container port of that name on the destination pod.
- Every namespace carries the immutable label kubernetes.io/metadata.name = its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)   # container port name -> number (TCP)
    # Labels of the pod's namespace beside kubernetes.io/metadata.name, which every namespace carries.
    namespace_labels: dict[str, str] = field(default_factory=dict)


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


def _peer_matches(peer: dict, policy_ns: str, src: Pod) -> bool:
    if "ipBlock" in peer:
        raise NotImplementedError("ipBlock")
    ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
    if ns_sel is None and pod_sel is None:
        raise ValueError(f"empty peer {peer}")   # the API server refuses it
    ns_ok = src.namespace == policy_ns if ns_sel is None else selects(
        ns_sel, {**src.namespace_labels, "kubernetes.io/metadata.name": src.namespace})
    return ns_ok and (pod_sel is None or selects(pod_sel, src.labels))


def _port_matches(rule_port: dict, dst: Pod, port: int, protocol: str) -> bool:
    if rule_port.get("protocol", "TCP") != protocol:
        return False
    p = rule_port.get("port")
    if p is None:
        return True
    if isinstance(p, int):
        return p <= port <= rule_port.get("endPort", p)
    return dst.ports.get(p) == port


def _policy_types(spec: dict) -> list[str]:
    return spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])


def allowed(policies: list[dict], src: Pod, dst: Pod, port: int, protocol: str = "TCP") -> bool:
    """Would `dst` accept a connection from `src` on `port`? `policies` are NetworkPolicy objects."""
    selecting = [p for p in policies if p["metadata"]["namespace"] == dst.namespace
                 and "Ingress" in _policy_types(p["spec"]) and selects(p["spec"].get("podSelector"), dst.labels)]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get("ingress") or []:
            peers, ports = rule.get("from") or [], rule.get("ports") or []
            if peers and not any(_peer_matches(peer, p["metadata"]["namespace"], src) for peer in peers):
                continue
            if ports and not any(_port_matches(rp, dst, port, protocol) for rp in ports):
                continue
            return True
    return False
