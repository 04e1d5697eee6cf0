"""kube-score's exceptions on the NetworkPolicies of components/network.py (which only carries them): a policy
whose pods kube-score cannot see scores CRITICAL networkpolicy-targets-pod (score/networkpolicy/
networkpolicy.go: no pod of a parsed workload in its namespace matches its podSelector). Worked out from which
models' engine pods each policy selects and what owns them (components/orchestrators engine_pod_kinds), so a
policy over a Deployment's pods never carries one, and e2e/test_kube_score.py checks each still fires."""

from __future__ import annotations

from components.network import (
    NetworkArgs,
    client_policy_name,
    engine_ingress_name,
    group_policy_name,
    leaders_policy_name,
    policies,
)
from components.orchestrators import FLEET_KIND, engine_pod_kinds
from components.scanner_exceptions import scanner_exceptions, unscanned_pods
from components.topologies import roleset_name, topology_of
from config_model import ServedModel, derived

CHECK = "networkpolicy-targets-pod"


def policy_exceptions(args: NetworkArgs, models: list[ServedModel],
                      client_models: dict[str, str]) -> dict[str, dict[str, str]]:
    """Policy name -> its annotations, for the policies that select only pods kube-score does not read.
    client_models: each ClientTarget's Service name -> the model whose engine pods it selects."""
    kinds = {m.name: engine_pod_kinds(m) for m in models}
    grouped = {g.model for g in args.groups}
    selected: dict[str, set[str]] = {
        engine_ingress_name(args, "llm-serving-engine-ingress"): {n for n in kinds if n not in grouped},
        "llm-serving-autoscaler-metrics": set(args.autoscaled_models),
        **{engine_ingress_name(args, leaders_policy_name(g)): {g} for g in grouped},
        **{group_policy_name(g): {g} for g in grouped},
        **{client_policy_name(t.service_name): {client_models[t.service_name]} for t in args.client_targets},
    }
    # Only the fleets' pods carry their roleset's label (a hybrid model's combined pods have a roleset of their own).
    fleets = {derived.pd_policy_name(roleset_name(m)): {FLEET_KIND} for m in models if topology_of(m).fleets}
    out = {}
    for name in policies(args):
        if name in fleets:
            reasons = unscanned_pods(CHECK, fleets[name])
        elif name not in selected:
            continue
        elif not selected[name]:
            # Every model spans nodes: the engine ingress selects no pod at all, in the cluster too, and the
            # leaders take the same ingress from their own policies.
            reasons = {CHECK: "it selects no pod while every model spans nodes: their leaders take this "
                              "ingress from llm-serving-leaders-<model>"}
        else:
            reasons = unscanned_pods(CHECK, {k for n in selected[name] for k in kinds.get(n, ())})
        if reasons:
            out[name] = scanner_exceptions(reasons)
    return out

