"""The consumers (issue 21) in plan.md and changes.md: who holds a key, where from, at what limit, which
engines accept the tokens; and, between two renders, whose token an update adds, revokes or rotates.
Read off the outputs (`consumers`) and the objects (the consumer-keys Secret and the engines' pod
templates, which carry its content tag), never from the config, and never a key."""

from __future__ import annotations

from components.secrets import ANN_CONTENT_TAG, CONSUMER_KEYS_SECRET, secret_tag_annotation
from components.strategy_limits import LOCAL_RATE_LIMIT_FILTER
from policy.workloads import pod_templates
from render.manifest_facts import namespaces_in_words
from render.update_steps import SAME, Step

SECRET_OBJECT_SUFFIX = f"/{CONSUMER_KEYS_SECRET}"


def plan_section(outputs: dict, objects: list[dict]) -> list[str]:
    consumers = outputs.get("consumers") or {}
    if not consumers:
        return []
    engines, tag = [], None
    for obj in objects:
        if obj.get("kind") == "Secret" and (obj.get("metadata") or {}).get("name") == CONSUMER_KEYS_SECRET:
            tag = ((obj["metadata"].get("annotations") or {}).get(ANN_CONTENT_TAG))
        for ref in pod_templates(obj.get("kind", ""), obj):
            if secret_tag_annotation(CONSUMER_KEYS_SECRET) in ((ref.template.get("metadata") or {}).get("annotations") or {}):
                engines.append(f"{obj['kind']} {obj['metadata']['name']}")
    lines = ["", "## Consumers", "",
             "Each consumer sends `Authorization: Bearer <name>.<secret>` (docs/consumers.md); the engines below "
             "accept every consumer's token and the shared `apiKey`.", "",
             "| Consumer | Namespaces | Requests per minute | Token output |", "|---|---|---|---|"]
    lines += [f"| {name} | {namespaces_in_words(c.get('namespaceSelector') or {})} | {c.get('requestsPerMinute')} | "
              f"`{c.get('tokenOutput')}` (secret) |" for name, c in consumers.items()]
    lines += ["", f"Engines given every token by reference (Secret `{CONSUMER_KEYS_SECRET}`, content tag `{tag}`): "
              + (", ".join(engines) or "none")]
    return lines + gateway_limit_lines(objects)


def gateway_limit_lines(objects: list[dict]) -> list[str]:
    """Where the limits are enforced, read off the policies rendered (docs/gateway-and-network.md)."""
    routes = [o["metadata"]["name"] for o in objects if o.get("kind") == "BackendTrafficPolicy"
              and (o.get("spec") or {}).get("rateLimit")]
    patched = [(o["metadata"]["name"], (j.get("operation") or {}).get("value") or {})
               for o in objects if o.get("kind") == "EnvoyPatchPolicy"
               for j in (o.get("spec") or {}).get("jsonPatches") or []]
    lines = ["", "Gateway limits (requests per minute, per Envoy replica): on requests naming the model in a `model` "
             f"header, per model route and path prefix (BackendTrafficPolicies: {len(routes)}); "]
    if not patched:
        lines[-1] += "on the AIBrix plugin's strategy-routed requests, none (no gateway)."
        return lines
    buckets = [f"`{route.get('name')}` {route['typed_per_filter_config'][LOCAL_RATE_LIMIT_FILTER]['token_bucket']['max_tokens']} "
               f"(timeout {route['route']['timeout']})"
               for _, route in patched if LOCAL_RATE_LIMIT_FILTER in (route.get("typed_per_filter_config") or {})]
    lines[-1] += (f"on the AIBrix plugin's strategy-routed requests (every model here), the routes EnvoyPatchPolicy "
                  f"`{patched[0][0]}` adds before AIBrix's original_route: {', '.join(buckets)}"
                  + (" (the default route is gateway-wide: it also takes other stacks' strategy-routed requests)."
                     if any(r.get("name", "").endswith("/default") for _, r in patched) else "."))
    return lines


def change_lines(steps: list[Step], old_outputs: dict | None, new_outputs: dict | None, restarting: list[str]) -> list[str]:
    """What an update does to the consumers' tokens; [] when it touches none."""
    old = set(((old_outputs or {}).get("consumers") or {}))
    new = set(((new_outputs or {}).get("consumers") or {}))
    secret = next((s for s in steps if s.object.startswith("Secret ") and s.object.endswith(SECRET_OBJECT_SUFFIX)), None)
    touched = secret is not None and secret.action != SAME
    if old == new and not touched:
        return []
    engines = ", ".join(restarting) or "no engine restarts"
    out = []
    if new - old:
        out.append(f"- New: {', '.join(sorted(new - old))}. Each engine accepts their tokens once its pods have "
                   f"restarted in this update ({engines}).")
    if old - new:
        out.append(f"- Revoked: {', '.join(sorted(old - new))}. The tokens leave the Secret `{CONSUMER_KEYS_SECRET}` "
                   f"and every engine's argv; each engine refuses them once its pods have restarted in this update "
                   f"({engines}); the outputs `consumerToken/<name>` go.")
    if touched and old == new:
        out.append(f"- A key was rotated (the Secret `{CONSUMER_KEYS_SECRET}` changed, its consumers did not): each "
                   f"engine refuses the old token once its pods have restarted in this update ({engines}).")
    return ["## Consumers' tokens", "", *out, ""]
