"""consumers: names once each, namespace selectors the API server takes, and engines that can accept a
key per consumer (each engine module's MULTI_KEY_REFUSED says why one cannot). The keys' values are
checked where the program has them (stacks/consumer_keys.py)."""

from __future__ import annotations

from typing import Iterator

from components.gateway_policies import MAX_LOCAL_RULES, MAX_REQUESTS
from config_model import StackConfig
from policy.engines import engine_named
from stacks.rules.network import selector
from stacks.rules.problem import Problem

AT = "consumers"


def consumers(cfg: StackConfig) -> Iterator[Problem]:
    seen: dict[str, int] = {}
    for i, c in enumerate(cfg.consumers):
        if c.name in seen:
            yield Problem(f"{AT}[{i}].name", c.name, f"is taken by consumers[{seen[c.name]}]: each consumer has one "
                          "name, its key's config path and its token's prefix")
        seen.setdefault(c.name, i)
        if c.namespace_selector is not None:
            yield from selector(f"{AT}[{i}].namespaceSelector", c.namespace_selector)
        if c.requests_per_minute > MAX_REQUESTS:
            yield Problem(f"{AT}[{i}].requestsPerMinute", c.requests_per_minute, f"is more than {MAX_REQUESTS}: "
                          "Envoy Gateway v1.2.8 keeps a local limit in a uint32 token bucket "
                          "(components/gateway_policies.py)")
    default = cfg.gateway.default_requests_per_minute
    if len(cfg.consumers) + (default is not None) > MAX_LOCAL_RULES:
        yield Problem(AT, f"{len(cfg.consumers)} consumers", f"are more than a route's local rate limit can tell "
                      f"apart: Envoy Gateway v1.2.8 takes at most {MAX_LOCAL_RULES} rules, one per consumer"
                      f"{' plus the default (gateway.defaultRequestsPerMinute)' if default is not None else ''} "
                      "(components/gateway_policies.py)")
    if not cfg.consumers:
        return
    for i, m in enumerate(cfg.models):
        engine = engine_named(m.engine)
        if engine.MULTI_KEY_REFUSED is not None:
            yield Problem(f"models[{i}].engine", m.engine, f"cannot serve the stack's consumers: {engine.DISPLAY_NAME} "
                          f"{engine.MULTI_KEY_REFUSED}")
            continue
        for name in sorted(set(engine.MULTI_KEY_ENV) & set(m.env)):
            yield Problem(f"models[{i}].env.{name}", m.env[name], f"is set by the program while the stack has "
                          f"consumers: {engine.DISPLAY_NAME} is given the keys in its argv and would log them "
                          f"below {engine.MULTI_KEY_ENV[name]} (policy/engines/{engine.NAME}.py MULTI_KEY_ENV)")
