"""The consumers' keys as the program receives them (secret config `consumerKeys`, a map of consumer name
to secret, set member by member with `pulumi config set --secret --path`), checked without ever showing
a value: every consumer has one, each is stored encrypted, usable in an Authorization header, and its
own (no two consumers share a secret, and none is the shared apiKey, which the ops Jobs and OpenWebUI
hold). A key left in config for a consumer that is gone is not read: removing the consumer revokes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Mapping

from config_model import StackConfig
from config_model.consumers import SECRET_KEY
from config_model.stack import secret_command
from stacks.loader import HIDDEN, NAMESPACE
from stacks.rules.problem import Problem

FULL_KEY = f"{NAMESPACE}:{SECRET_KEY}"


def set_command(name: str) -> str:
    return secret_command(f"{SECRET_KEY}.{name}", NAMESPACE)


def secrets_of(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """Consumer name -> secret from the runtime config (the CLI hands an object as JSON text), or None
    when the key is absent or no map."""
    text = values.get(FULL_KEY)
    if text is None:
        return None
    try:
        found = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def missing(cfg: StackConfig, values: Mapping[str, Any]) -> list[str]:
    """Consumers without a key, in stack-file order."""
    found = secrets_of(values) or {}
    return [c.name for c in cfg.consumers if c.name not in found]


def _plaintext_members(stack_text: str | None) -> set[str]:
    """Members of consumerKeys the stack file holds in plain text: the CLI marks the whole key secret
    when any member is (config/map.go SecureKeys), so only the file tells them apart."""
    if stack_text is None:
        return set()
    import yaml

    try:
        doc = yaml.safe_load(stack_text)
    except yaml.YAMLError:
        return set()
    config = doc.get("config") if isinstance(doc, dict) else None
    members = config.get(FULL_KEY) if isinstance(config, dict) else None
    if not isinstance(members, dict):
        return set()
    return {str(k) for k, v in members.items() if not (isinstance(v, dict) and set(v) == {"secure"})}


def _unusable(secret: Any) -> str | None:
    if not isinstance(secret, str) or not secret:
        return "must be a non-empty text"
    if secret != secret.strip():
        return ("must not start or end with whitespace: HTTP drops it around a header value, so the token sent "
                "would never match")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in secret):
        return "must not hold control characters (a line break cannot travel in an Authorization header)"
    return None


def problems(cfg: StackConfig, values: Mapping[str, Any], stack_text: Callable[[], str | None],
             require_secrets: bool) -> list[Problem]:
    """Every problem with the consumers' keys; values are never shown (Problem.value is a marker)."""
    if not cfg.consumers:
        return []
    found = secrets_of(values)
    if found is None:
        if FULL_KEY in values:
            return [Problem(SECRET_KEY, HIDDEN, "must be a map of consumer name to secret; set each with "
                            + set_command("<name>"))]
        return []   # required_secret_keys reports the key itself as missing
    out: list[Problem] = []
    plaintext = _plaintext_members(stack_text())
    digests: dict[bytes, str] = {}
    api_key = values.get(f"{NAMESPACE}:apiKey")
    shared = hashlib.sha256(api_key.encode()).digest() if isinstance(api_key, str) else None
    for i, c in enumerate(cfg.consumers):
        if any(c.name == other.name for other in cfg.consumers[:i]):
            continue   # a name taken twice is the rules' (stacks/rules/consumers.py); its key is checked once
        at = f"{SECRET_KEY}.{c.name}"
        if c.name not in found:
            if require_secrets:
                out.append(Problem(at, None, f"is required: consumers[{i}] ({c.name}) has no key; set it with "
                                   + set_command(c.name)))
            continue
        secret = found[c.name]
        if c.name in plaintext:
            out.append(Problem(at, "(plaintext)", "must be stored encrypted: " + set_command(c.name)))
        why = _unusable(secret)
        if why is not None:
            out.append(Problem(at, HIDDEN, why))
            continue
        digest = hashlib.sha256(secret.encode()).digest()
        if digest == shared:
            out.append(Problem(at, HIDDEN, "is the shared apiKey: the ops Jobs and OpenWebUI hold that key, "
                               "and a consumer holding it is not told apart from them; give the consumer its own "
                               "secret (" + set_command(c.name) + ")"))
        elif digest in digests:
            out.append(Problem(at, HIDDEN, f"is the same secret as {SECRET_KEY}.{digests[digest]}: each "
                               "consumer needs its own, or revoking one would revoke both; set a new one with "
                               + set_command(c.name)))
        digests.setdefault(digest, c.name)
    return out
