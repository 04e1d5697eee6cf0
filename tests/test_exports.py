"""The outputs contract: docs/exports.md lists exactly what every stack exports, and the example
consumer reads it through a mocked StackReference."""

from __future__ import annotations

import re
import sys

import pulumi
import pytest
from conftest import PROJECT_DIR, STACKS, render_stack

from render.runtime import MockResources, record
from stacks.program import CONTRACT_VERSION

DOC = (PROJECT_DIR / "docs" / "exports.md").read_text(encoding="utf-8")
sys.path.insert(0, str(PROJECT_DIR / "examples" / "consumer"))

import consumer  # noqa: E402


def documented_keys() -> set[str]:
    return set(re.findall(r"^\| `([A-Za-z]+)` \|", DOC, flags=re.M))


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_exports_exactly_the_documented_keys(stack):
    assert set(render_stack(stack).outputs) == documented_keys()


def _nulls(value, path="") -> list[str]:
    if value is None:
        return [path or "(root)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("stack", STACKS)
def test_no_output_is_null_since_the_sdk_would_drop_it(stack):
    """pulumi/runtime/rpc.py serialize_properties treats a property that serializes to None as absent
    (SDK 3.272.0): a null output never reaches the stack, so the contract's keys would vanish."""
    assert _nulls(render_stack(stack).outputs) == []


def test_the_document_states_the_exported_version():
    assert f"Contract version: **{CONTRACT_VERSION}**" in DOC
    assert render_stack("dev").outputs["contractVersion"] == CONTRACT_VERSION


class WithServingStack(MockResources):
    def __init__(self, outputs: dict):
        super().__init__()
        self.outputs = outputs

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.name, "outputs": self.outputs}
        return super().new_resource(args)


def read_with(outputs: dict):
    from pulumi.runtime import settings

    from render import runtime
    mocks = WithServingStack(outputs)
    original = runtime.MockResources
    runtime.MockResources = lambda region="us-east-1", previous=None: mocks  # the recorder builds its mocks by this name
    try:
        return record("consumer", lambda: consumer.client_settings("acme/llm-serving/prod"))
    finally:
        runtime.MockResources = original
        settings.ROOT.set(None)


def test_consumer_reads_the_contract_of_a_rendered_stack():
    outputs = render_stack("prod").outputs
    got = read_with(outputs).outputs
    assert got == {"openaiBaseUrl": "http://llm.prod.example.internal/v1", "model": "DeepSeek-V4-Flash", "gpuTotal": 16}


def test_consumer_falls_back_to_the_in_cluster_endpoint():
    outputs = dict(render_stack("prod").outputs, externalEndpoint="")
    assert read_with(outputs).outputs["openaiBaseUrl"] == outputs["endpoint"]


def test_consumer_refuses_an_unknown_contract_version():
    outputs = dict(render_stack("prod").outputs, contractVersion=2)
    with pytest.raises(Exception, match="contract 2 is not the supported 1"):
        read_with(outputs)
    assert pulumi  # the consumer is a plain Pulumi program
