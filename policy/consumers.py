"""The token a consumer (stack file `consumers[]`) presents, as one pure function pair: the engines
accept it, the consumer receives it, and the gateway's per-consumer rate limit selects a consumer's
requests by its public prefix alone, so no Kubernetes object ever holds a key.

A consumer name is a DNS label (no '.'), so `<name>.` is never a prefix of another consumer's prefix:
each token belongs to exactly one consumer by its first '.'-ended part. Standard library only (the
pack and the gateway rules import it).
"""

from __future__ import annotations


def key_prefix(consumer_name: str) -> str:
    """The public start of every token of this consumer: `<name>.`."""
    return f"{consumer_name}."


def consumer_token(consumer_name: str, secret: str) -> str:
    """What the consumer sends as `Authorization: Bearer <token>`: its prefix, then its secret."""
    return key_prefix(consumer_name) + secret
