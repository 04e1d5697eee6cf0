"""What the render records for the engine's view (render/runtime.py): URNs as the engine builds
them, duplicates refused with the engine's message, preview unknowns on the RegisterResource wire,
each resource's outputs and the root stack. The build/ files do not change (snapshots pin them)."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
import pytest
from conftest import PROJECT_DIR, render_stack
from pulumi.runtime.rpc import UNKNOWN

from render import output, runtime, stackfile
from stacks.loader import ConfigError

SECRET = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}  # the wire's secret signature


class Outer(pulumi.ComponentResource):
    def __init__(self, name: str, inner_name: str, map_name: str):
        super().__init__("test:index:Outer", name)
        Inner(inner_name, map_name, self)
        self.register_outputs({"kept": "by the engine"})


class Inner(pulumi.ComponentResource):
    def __init__(self, name: str, map_name: str, parent: pulumi.Resource):
        super().__init__("test:index:Inner", name, opts=pulumi.ResourceOptions(parent=parent))
        k8s.core.v1.ConfigMap(map_name, metadata={"name": "m"}, opts=pulumi.ResourceOptions(parent=self))


def test_urns_are_the_engines():
    """pulumi/pulumi v3.259.0 pkg/resource/deploy/deployment.go generateURN: the parent's whole
    qualified type, none for children of the root stack (the mocks' URNs differ on both)."""
    rendered = runtime.record("dev", lambda: (Outer("outer", "inner", "map"), {})[1])
    by_name = {r.name: r for r in rendered.registered}
    assert by_name["outer"].engine_urn == "urn:pulumi:dev::llm-serving::test:index:Outer::outer"
    assert by_name["map"].engine_urn == \
        "urn:pulumi:dev::llm-serving::test:index:Outer$test:index:Inner$kubernetes:core/v1:ConfigMap::map"
    assert by_name["map"].engine_parent == by_name["inner"].engine_urn
    assert rendered.root.engine_urn == "urn:pulumi:dev::llm-serving::pulumi:pulumi:Stack::llm-serving-dev"
    assert by_name["outer"].outputs() == {"kept": "by the engine"}


def test_duplicate_urns_are_refused_with_the_engines_message():
    """sdk/go/common/diag/errors.go GetDuplicateResourceURNError, raised by step_generator.go generateURN."""
    with pytest.raises(runtime.DuplicateURNError) as refused:
        runtime.record("dev", lambda: (Outer("a", "same", "x"), Outer("b", "same", "y"), {})[2])
    urn = "urn:pulumi:dev::llm-serving::test:index:Outer$test:index:Inner::same"
    assert str(refused.value) == f"Pulumi.dev.yaml: Duplicate resource URN '{urn}'; try giving it a unique name"
    assert isinstance(refused.value, ConfigError) and len(refused.value.problems) == 1


def test_same_names_under_parents_of_different_types_are_not_duplicates():
    """The mocks would give both ConfigMaps the URN `...Inner$kubernetes:core/v1:ConfigMap::map`;
    the engine's differ by the grandparent's type, so the engine accepts them and so must we."""
    class Other(Outer):
        def __init__(self, name):
            pulumi.ComponentResource.__init__(self, "test:index:Other", name)
            Inner("inner-2", "map", self)
            self.register_outputs({})

    rendered = runtime.record("dev", lambda: (Outer("outer", "inner", "map"), Other("other"), {})[2])
    assert len({r.engine_urn for r in rendered.registered}) == len(rendered.registered)


def test_the_cli_refuses_duplicates_with_exit_2(tmp_path, monkeypatch, capsys):
    """`python -m render` (render/__main__.py catches ConfigError): one line naming the URN, no
    traceback, nothing written."""
    from render import __main__ as cli
    from stacks import program

    monkeypatch.setattr(program, "run", lambda: (Outer("a", "same", "x"), Outer("b", "same", "y"), {})[2])
    out = tmp_path / "out"
    assert cli.main(["--stack", "dev", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    urn = "urn:pulumi:dev::llm-serving::test:index:Outer$test:index:Inner::same"
    assert f"Pulumi.dev.yaml: Duplicate resource URN '{urn}'; try giving it a unique name" in err.splitlines()
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("stack", ("staging", "prod"))
def test_preview_unknowns_reach_the_registered_inputs(stack):
    """PreviewMocks answers a create as `pulumi preview` does; the SDK then sends rpc.UNKNOWN in
    every dependant's RegisterResource object: the bucket configuration waits for the bucket's id,
    the object-store Secret for the new access key (a secret, so wrapped), nothing else is unknown
    that the stack file states."""
    preview = runtime.render(stackfile.read(PROJECT_DIR, stack), preview=True)
    by_name = {r.name: r for r in preview.registered}
    assert by_name["model-store-versioning"].wire_inputs["bucket"] == UNKNOWN
    assert by_name["secrets-object-store"].wire_inputs["stringData"] == {**SECRET, "value": UNKNOWN}
    assert by_name["model-store"].outputs()["bucketName"] != UNKNOWN  # a name from the stack file stays known
    up = render_stack(stack)
    assert not any(UNKNOWN in json.dumps(r.wire_inputs) for r in up.registered)
    assert {r.engine_urn for r in preview.registered} == {r.engine_urn for r in up.registered}


@pytest.mark.parametrize("preview", (False, True))
@pytest.mark.parametrize("stack", ("dev", "staging", "prod"))
def test_stack_facts_are_registered_before_any_gpu_workload(stack, preview):
    """The registration order is the SDK's (asynchronous: it varies from run to run) and the engine
    analyzes in that order; the pack's blocking GPU budget needs the facts first."""
    from policy.stack_rules import workload_gpus

    rendered = runtime.render(stackfile.read(PROJECT_DIR, stack), preview=preview)
    order = [r.type for r in rendered.registered]
    facts = order.index("llm-serving:stack:Facts")
    gpu = [i for i, r in enumerate(rendered.registered) if r.custom and workload_gpus(r.type, r.inputs)]
    assert gpu and facts < min(gpu)


def test_outputs_are_what_the_engine_keeps():
    """Custom resources: the provider's answer; components: what they registered; the root stack:
    the stack outputs as the SDK sends them (None dropped). None of it reaches the build files."""
    rendered = render_stack("prod")
    facts = next(r for r in rendered.registered if r.type == "llm-serving:stack:Facts")
    assert facts.outputs()["gpuBudget"] == rendered.outputs["gpuBudget"]
    bucket = next(r for r in rendered.registered if r.type == "aws:s3/bucket:Bucket")
    assert bucket.outputs()["arn"].startswith("arn:aws:s3:::")
    assert set(rendered.root.outputs()) == {k for k, v in rendered.outputs.items() if v is not None}
    rows = json.loads(output.resources_json(rendered))
    assert "pulumi:pulumi:Stack" not in {row["type"] for row in rows}
    assert len(rows) == len(rendered.registered)
