"""Read the llm-serving outputs contract from another stack, refusing a contract version this code
was not written for. Run it with `pulumi up` in this directory after
`pulumi config set servingStack <org>/llm-serving/<stack>` (see README.md)."""

from __future__ import annotations

import pulumi

SUPPORTED_CONTRACT = 3


def _checked(version: object) -> int:
    # Numbers cross the Pulumi wire as floats: 2.0 is contract 2.
    number = int(version) if isinstance(version, (int, float)) and float(version).is_integer() else version
    if number != SUPPORTED_CONTRACT:
        raise ValueError(f"llm-serving outputs contract {number!r} is not the supported {SUPPORTED_CONTRACT}; "
                         "read docs/exports.md of that version before upgrading this consumer")
    return SUPPORTED_CONTRACT


def _entry(models: dict, wanted: str | None) -> dict:
    """The `models` entry of the model this consumer calls: the one named, or the only one."""
    if wanted is not None:
        if wanted not in models:
            raise ValueError(f"the serving stack has no model {wanted!r}; it serves {sorted(models)}")
        return models[wanted]
    if len(models) != 1:
        raise ValueError(f"the serving stack serves {sorted(models)}; set `model` to one of them")
    return next(iter(models.values()))


def _token(consumers: dict, consumer: str, token: object) -> object:
    """This consumer's token, read from the output its `consumers` entry names (docs/exports.md)."""
    if consumer not in consumers:
        raise ValueError(f"the serving stack declares no consumer {consumer!r}; it declares {sorted(consumers)}")
    if token is None:
        raise ValueError(f"the serving stack exports no {consumers[consumer]['tokenOutput']!r}")
    return token


def client_settings(serving_stack: str, model: str | None = None, consumer: str | None = None) -> dict[str, pulumi.Output]:
    """What an application needs to call one model: base URL (external when there is one, else the
    in-cluster URL the serving stack's NetworkPolicies admit its clients to), model name, API key.
    `model` is the serving stack's `models[].name`; unset, the stack must serve exactly one. `consumer`
    (the serving stack's `consumers[].name`) makes the key that consumer's own token, which the
    gateway rate-limits as that consumer; unset, the shared `apiKey`."""
    ref = pulumi.StackReference(serving_stack)
    # Every other output waits for the version check, so a contract this code does not know fails
    # the update before anything is read from it.
    version = ref.require_output("contractVersion").apply(_checked)
    entry = pulumi.Output.all(version, ref.require_output("models")).apply(lambda v: _entry(v[1], model))
    # The serving stack exports it secret; the reference keeps it secret (secretOutputNames), and
    # so does every Output derived from it here.
    if consumer is None:
        api_key = pulumi.Output.all(version, ref.require_output("apiKey")).apply(lambda v: v[1])
    else:
        # `consumers.<name>.tokenOutput` is `consumerToken/<name>` (contract 3); the entry is checked first.
        api_key = pulumi.Output.all(version, ref.require_output("consumers"), ref.get_output(f"consumerToken/{consumer}")
                                    ).apply(lambda v: _token(v[1], consumer, v[2]))
    return {"openaiBaseUrl": entry.apply(lambda e: e["externalUrl"] or e["url"]),
            "model": entry.apply(lambda e: e["servedModelName"]),
            "apiKey": api_key,
            "gpuTotal": pulumi.Output.all(version, ref.require_output("gpuTotal")).apply(lambda v: v[1])}
