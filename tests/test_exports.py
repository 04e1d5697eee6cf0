"""The outputs contract: docs/exports.md lists exactly what every stack exports, and the example
consumer reads it through a mocked StackReference."""

from __future__ import annotations

import json
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


def documented_model_fields() -> set[str]:
    return set(re.findall(r"^\| `models\.<name>\.([A-Za-z]+)` \|", DOC, flags=re.M))


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_exports_exactly_the_documented_keys(stack):
    outputs = render_stack(stack).outputs
    assert set(outputs) == documented_keys()
    assert outputs["models"] and all(set(e) == documented_model_fields() for e in outputs["models"].values())


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
    """The engine's StackReference: the serving stack's outputs and which of them are secret (the
    names the SDK reads as secretOutputNames, pulumi/stack_reference.py)."""

    def __init__(self, outputs: dict, secret: set[str]):
        super().__init__()
        self.outputs, self.secret = outputs, secret

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.name, "outputs": self.outputs, "secretOutputNames": sorted(self.secret)}
        return super().new_resource(args)


def read_with(outputs: dict, secret: set[str] = frozenset({"apiKey"}), model: str | None = None, program=None,
              config: dict | None = None):
    from pulumi.runtime import settings

    from render import runtime
    mocks = WithServingStack(outputs, set(secret))
    original = runtime.MockResources
    runtime.MockResources = lambda region="us-east-1", previous=None: mocks  # the recorder builds its mocks by this name
    try:
        return record("consumer", program or (lambda: consumer.client_settings("acme/llm-serving/prod", model)),
                      config=config)
    finally:
        runtime.MockResources = original
        settings.ROOT.set(None)


def _serving(stack: str, key: str = "sk-serving-test") -> dict:
    # The rendered outputs, with a key in place of the render's masked stand-in.
    return dict(render_stack(stack).outputs, apiKey=key)


def test_consumer_reads_the_contract_of_a_rendered_stack():
    def program():
        settings = consumer.client_settings("acme/llm-serving/prod")
        # Unwrapped here only, to see that the value is the serving stack's key.
        return {**settings, "revealedForTest": pulumi.Output.unsecret(settings["apiKey"])}

    r = read_with(_serving("prod"), program=program)
    # The key is still secret in the consumer's program, and so in its state: the render masks it.
    assert r.outputs == {"openaiBaseUrl": "http://llm.prod.example.internal/v1", "model": "DeepSeek-V4-Flash",
                         "apiKey": "[secret]", "gpuTotal": 16, "revealedForTest": "sk-serving-test"}
    assert r.secret_outputs == {"apiKey"}


@pytest.mark.parametrize("stack", STACKS)
def test_consumer_reads_every_model_of_every_stack(stack):
    outputs = _serving(stack)
    for name, entry in outputs["models"].items():
        got = read_with(outputs, model=name).outputs
        assert got["model"] == entry["servedModelName"]
        assert got["openaiBaseUrl"] == (entry["externalUrl"] or entry["url"])


def test_consumer_falls_back_to_the_in_cluster_url():
    outputs = _serving("prod")
    outputs["models"] = {k: dict(v, externalUrl="") for k, v in outputs["models"].items()}
    (entry,) = outputs["models"].values()
    assert read_with(outputs).outputs["openaiBaseUrl"] == entry["url"]


def test_consumer_asks_which_model_when_the_stack_serves_several():
    outputs = _serving("staging")
    assert len(outputs["models"]) > 1
    with pytest.raises(Exception, match="set `model` to one of them"):
        read_with(outputs)
    with pytest.raises(Exception, match="has no model 'nope'"):
        read_with(outputs, model="nope")


@pytest.mark.parametrize("version", [1, 2, 4, "3"])
def test_consumer_refuses_a_contract_version_it_does_not_know(version):
    outputs = dict(_serving("prod"), contractVersion=version)
    with pytest.raises(Exception, match=f"contract {version!r} is not the supported {CONTRACT_VERSION}"):
        read_with(outputs)
    assert pulumi  # the consumer is a plain Pulumi program


def test_consumer_program_puts_the_key_only_in_a_secret():
    """examples/consumer/__main__.py: the settings as stack outputs (the key secret) and, with
    appNamespace, as a Secret in the application's namespace whose data is secret on the wire."""
    import runpy
    main = PROJECT_DIR / "examples" / "consumer" / "__main__.py"
    # The program's module globals hold what it exported: `settings`, recorded here as stack outputs.
    r = read_with(_serving("prod", "sk-main-test"), program=lambda: runpy.run_path(str(main))["settings"],
                  config={"llm-serving:servingStack": "acme/llm-serving/prod", "llm-serving:appNamespace": "team-a"})
    (secret,) = [x for x in r.resources if x.type == "kubernetes:core/v1:Secret"]
    assert secret.inputs["metadata"] == {"name": "llm-serving-client", "namespace": "team-a"}
    assert set(secret.inputs["stringData"]) == {"OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"}
    assert "sk-main-test" not in json.dumps(secret.inputs)
    assert r.secret_outputs == {"apiKey"} and "sk-main-test" not in json.dumps(r.outputs)
