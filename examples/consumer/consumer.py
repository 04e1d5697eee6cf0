"""Read the llm-serving outputs contract from another stack, refusing a contract version this code
was not written for. Run it with `pulumi up` in this directory after
`pulumi config set servingStack <org>/llm-serving/<stack>`."""

from __future__ import annotations

import pulumi

SUPPORTED_CONTRACT = 1


def _checked(version: object) -> int:
    # Numbers cross the Pulumi wire as floats: 1.0 is contract 1.
    number = int(version) if isinstance(version, (int, float)) and float(version).is_integer() else version
    if number != SUPPORTED_CONTRACT:
        raise ValueError(f"llm-serving outputs contract {number!r} is not the supported {SUPPORTED_CONTRACT}; "
                         "read docs/exports.md of that version before upgrading this consumer")
    return SUPPORTED_CONTRACT


def client_settings(serving_stack: str) -> dict[str, pulumi.Output]:
    """What an application needs to call the model: base URL (external when there is one), model name."""
    ref = pulumi.StackReference(serving_stack)
    version = ref.require_output("contractVersion").apply(_checked)
    external = ref.get_output("externalEndpoint")
    internal = ref.require_output("endpoint")
    base_url = pulumi.Output.all(version, external, internal).apply(lambda v: v[1] or v[2])
    return {"openaiBaseUrl": base_url, "model": ref.require_output("servedModelName"),
            "gpuTotal": ref.require_output("gpuTotal")}
