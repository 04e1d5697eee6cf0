"""Hybrid: combined pods for every prompt plus a P/D roleset of one fixed prefill/decode pair for
long prompts (field report 11.5): the combined workload (components/combined.py) beside the two
RayClusterFleets of topology pd (components/disaggregated.py)."""

from __future__ import annotations

from components.topologies.base import PD_PROBE_WORDS
from components.topologies.pd import Pd
from config_model import ServedModel, derived
from policy.stack_rules import COMBINED_ROLE

# The routingConfig field that marks a pod as the fallback for every prompt length, a field name of the
# plugin's, not a topology (aibrix v0.7.0 pkg/plugins/gateway/algorithms/pd_disaggregation.go, json:"combined").
ROUTING_CONFIG_COMBINED = "combined"


class Hybrid(Pd):
    name = "hybrid"
    model_workload = True
    autoscale_refusal = ("topology hybrid keeps its P/D roleset at one fixed pair beside the combined pods; this "
                         "program autoscales combined models only")
    route = "hybrid"
    supported = frozenset({("vllm", "deployment"), ("vllm", "stormservice")})
    plan_note = ("Hybrid routing needs the AIBrix gateway plugin to run with AIBRIX_PROMPT_LENGTH_BUCKETING=true "
                 "(gatewayPlugin.container.envs in the AIBrix chart); this stack does not manage the gateway plugin.")
    smoke_proves = ("the P/D checks for a prompt past the P/D bucket's minimum length, and that a short prompt "
                    "lands on a combined pod.")

    def fleet_replicas(self, model: ServedModel) -> int:
        return 1

    def fleet_routing_config(self, model: ServedModel) -> dict | None:
        """The fleets take only prompts past the bucket's minimum length."""
        return {"promptLenBucketMinLength": model.pd.prompt_len_bucket_min_length}

    def combined_pod_labels(self, model: ServedModel) -> tuple[tuple[str, str], ...]:
        """The combined pods are the fallback for every prompt length: they need a roleset and a role
        name, or AIBrix skips them (11.5)."""
        return (("roleset-name", derived.combined_roleset(model.name)), ("role-name", COMBINED_ROLE))

    def combined_routing_config(self, model: ServedModel) -> dict | None:
        """`combined: true` marks them as the pods that take any prompt (11.5)."""
        return {ROUTING_CONFIG_COMBINED: True}

    def smoke_probe_words(self, model: ServedModel) -> int:
        """Longer than the P/D bucket's shortest prompt, in tokens and in the gateway tokenizer's count
        (one short word is one token and several characters)."""
        return max(PD_PROBE_WORDS, model.pd.prompt_len_bucket_min_length * 5 // 4)


TOPOLOGY = Hybrid()
