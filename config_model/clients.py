"""Other teams' pods that call the models: the namespaces the NetworkPolicies admit to the path the
exported endpoint names (components/network.py; docs/gateway-and-network.md says which path that is
and what a policy in this namespace can and cannot do for it).

A namespace is named, or selected by its labels with a Kubernetes label selector. The selector's
shape is the API's (k8s.io/apimachinery pkg/apis/meta/v1 types.go LabelSelector); what the API
server refuses in it (ValidateLabelSelectorRequirement: values with In/NotIn only, an operator it
knows) is refused here under the stack-file field, with the rules that relate several fields
(duplicates, an empty selector) in stacks/rules/network.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from config_model.names import LabelKey, LabelValue
from config_model.types import DnsLabel, Model

# k8s.io/apimachinery pkg/apis/meta/v1 types.go LabelSelectorOperator.
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# Every namespace carries it, set by the API server and immutable (Kubernetes 1.22+,
# k8s.io/api core/v1 well_known_labels.go LabelMetadataName): a named namespace is selected by it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class SelectorRequirement(Model):
    key: LabelKey = Field(..., description="The namespace label the requirement tests.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        ..., description="In or NotIn (with values), Exists or DoesNotExist (without).")
    values: list[LabelValue] = Field(default_factory=list, description="Label values for In and NotIn.")


class NamespaceSelector(Model):
    """A Kubernetes label selector over namespace labels; every part must hold (AND)."""

    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Labels a namespace must carry.")
    match_expressions: list[SelectorRequirement] = Field(
        default_factory=list, description="Requirements a namespace's labels must meet.")

    def as_selector(self) -> dict:
        """The selector as a NetworkPolicy peer's namespaceSelector takes it (empty parts left out)."""
        out: dict = {}
        if self.match_labels:
            out["matchLabels"] = dict(sorted(self.match_labels.items()))
        if self.match_expressions:
            out["matchExpressions"] = [{"key": e.key, "operator": e.operator, **({"values": list(e.values)} if e.values else {})}
                                       for e in self.match_expressions]
        return out


class Clients(Model):
    """Namespaces whose pods call the models at the exported in-cluster URL."""

    namespaces: list[DnsLabel] = Field(default_factory=list, description="Namespaces admitted by name.")
    namespace_selectors: list[NamespaceSelector] = Field(
        default_factory=list, description="Namespaces admitted by their labels: each entry a label selector "
        "(matchLabels, matchExpressions); a namespace matching any entry is admitted.")

    def namespace_selectors_of_all(self) -> list[dict]:
        """Every admitted namespace set as a namespaceSelector: names first, in order, then the selectors."""
        return ([{"matchLabels": {NAMESPACE_NAME_LABEL: ns}} for ns in self.namespaces]
                + [s.as_selector() for s in self.namespace_selectors])

    @property
    def declared(self) -> bool:
        return bool(self.namespaces or self.namespace_selectors)
