"""Consumers: the teams that call the models, each with its own key, its namespace and its rate limit
(issue 21). A consumer's namespace is admitted by the NetworkPolicies exactly as a networkPolicy.clients
namespace is (config_model/clients.py holds the namespace forms; components/network.py the policies).

Its key is secret config, never a field here: `pulumi config set --secret --path
'llm-serving:consumerKeys.<name>' <secret>` (config_model/stack.py SECRET_KEYS; stacks/consumer_keys.py
checks the values). The token the consumer presents is policy/consumers.py consumer_token: the public
prefix `<name>.` and the secret, so the gateway can tell consumers apart without holding any key.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from config_model.clients import NAMESPACE_NAME_LABEL, NamespaceSelector
from config_model.types import DnsLabel, Model

SECRET_KEY = "consumerKeys"

# Envoy Gateway v1.2.8 (the release AIBrix v0.7.0 installs) counts requests only: a RateLimitRule is
# clientSelectors plus limit {requests, unit}, with no cost to charge a response's tokens
# (envoyproxy/gateway v1.2.8 api/v1alpha1/ratelimit_types.go RateLimitRule, RateLimitValue; `cost`
# arrives in v1.3.0). Nothing else on the path counts tokens per client.
TOKENS_REFUSED = ("is not offered: the gateway the stack runs, Envoy Gateway v1.2.8 (installed by AIBrix v0.7.0), "
                  "limits requests only; its RateLimitRule has clientSelectors and limit {requests, unit} and no "
                  "cost that could count a response's tokens (envoyproxy/gateway v1.2.8 "
                  "api/v1alpha1/ratelimit_types.go; cost arrives in v1.3.0). Use requestsPerMinute")


class Consumer(Model):
    """One consuming team: its name (the start of its token), where its pods run, its request limit."""

    name: DnsLabel = Field(..., description="The consumer's name: its key's config path (consumerKeys.<name>), the "
                           "public prefix of its token (`<name>.`), and the key of its outputs.")
    namespace: DnsLabel | None = Field(None, description="The namespace its pods call from, admitted by the "
                                       "NetworkPolicies to the path the exported URL names. Give this or "
                                       "namespaceSelector.")
    namespace_selector: NamespaceSelector | None = Field(
        None, description="Its namespaces by their labels (matchLabels, matchExpressions), instead of namespace.")
    requests_per_minute: int = Field(..., strict=True, gt=0, description="Requests per minute the gateway lets "
                                     "this consumer's key make, per Envoy replica: per model route on requests naming the "
                                     "model in a `model` header, and in one bucket for the strategy-routed requests (every "
                                     "model here) (docs/gateway-and-network.md). On gateway.routingLayer inferencePool "
                                     "only gateway.implementation envoyAiGateway carries it (per model route); the "
                                     "others refuse it, saying why.")
    tokens_per_minute: int | None = Field(None, description="Not offered: the pinned gateway counts requests only "
                                          "(the message says where).")

    @field_validator("tokens_per_minute")
    @classmethod
    def _no_token_limits(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError(TOKENS_REFUSED)
        return value

    @model_validator(mode="after")
    def _one_namespace_form(self) -> "Consumer":
        if (self.namespace is None) == (self.namespace_selector is None):
            raise ValueError("must give exactly one of namespace (a name) or namespaceSelector (labels)")
        return self

    def namespace_selector_of(self) -> dict:
        """The consumer's namespaces as a NetworkPolicy peer's namespaceSelector."""
        if self.namespace is not None:
            return {"matchLabels": {NAMESPACE_NAME_LABEL: self.namespace}}
        assert self.namespace_selector is not None
        return self.namespace_selector.as_selector()


def key_env_name(consumer_name: str) -> str:
    """The engine container variable its token reaches the engine through (secretKeyRef, then `$(VAR)` in
    the argv): a DNS label upper-cased with '-' as '_', which keeps two names apart (neither holds '_')."""
    return "LLM_SERVING_CONSUMER_KEY_" + consumer_name.upper().replace("-", "_")
