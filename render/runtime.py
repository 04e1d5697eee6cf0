"""Run the Pulumi program under the mock runtime and record what it registers.

The recording monitor sees each RegisterResource request as the engine would: inputs with secrets
still wrapped (so they can be masked), and the resource options that plain mocks hide (protect,
retainOnDelete, customTimeouts, deleteBeforeReplace, dependencies). It also keeps what the engine
would hand a policy pack (tests/policy_server.py): the wire inputs, each resource's outputs, the
root stack, and URNs as the engine builds them; and it refuses duplicate URNs as the engine does.
`preview=True` runs the program as `pulumi preview` does for a new stack: provider-computed values
are unknown, so dependants' inputs carry the unknown sentinel wherever such a value flows in.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from config_model import required_secret_keys
from render.mocks import MockResources, PreviewMocks, previous_state
from render.stackfile import MASK, PROJECT, StackFile
from stacks import consumer_keys, loader
from stacks.rules import Problem

__all__ = ["MockResources", "Recorded", "Rendered", "previous_state", "record", "render"]

# How the Pulumi wire format marks a secret value.
SECRET_SIG = "4dabf18193072939515e22adb298388d"


def _mask_leaves(value: Any) -> Any:
    """A secret map keeps its keys (they are not secret, and the manifest stays well-formed)."""
    if isinstance(value, dict):
        return {k: _mask_leaves(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_leaves(v) for v in value]
    return MASK


def normalize(value: Any) -> Any:
    """Masks secrets and turns the wire format's floats back into integers where they are whole."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return _mask_leaves(value.get("value"))
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _short(urn: str) -> str:
    """`urn:...::type::name` -> `type::name` for readable references."""
    if not urn:
        return ""
    parts = urn.split("::")
    return f"{parts[-2].split('$')[-1]}::{parts[-1]}"


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass
class Recorded:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str
    inputs: dict
    options: dict
    # What the engine holds for the resource (never written to build/): URNs as the engine builds
    # them, the RegisterResource object on the wire (secrets wrapped, unknowns as the sentinel),
    # the outputs (custom: the provider's answer; component: what it passed to register_outputs;
    # root stack: the stack outputs) and the options as the engine passes them to analyzers.
    engine_urn: str = ""
    engine_parent: str = ""
    engine_provider: str = ""
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    wire_inputs: dict = field(default_factory=dict)
    wire_outputs: Any = None  # a protobuf Struct (converted on use: most renders never need it) or a dict
    engine_options: dict = field(default_factory=dict)

    def outputs(self) -> dict:
        if self.wire_outputs is None:
            return {}
        if isinstance(self.wire_outputs, dict):
            return self.wire_outputs
        return json_format.MessageToDict(self.wire_outputs)


class DuplicateURNError(loader.ConfigError):
    """The engine's refusal of a second resource with the same URN (pulumi/pulumi v3.259.0,
    pkg/resource/deploy/step_generator.go generateURN; message from sdk/go/common/diag/errors.go
    GetDuplicateResourceURNError; our SDK pin is 3.272.0)."""

    def __init__(self, stack_file: str, urns: list[str]):
        self.urns = urns
        super().__init__(stack_file, [_EngineRefusal("", urn, f"Duplicate resource URN '{urn}'; try giving it a unique name")
                                      for urn in urns])


class _EngineRefusal(Problem):
    """Not one config field: the line is the engine's own message (it names the URN)."""

    def render(self, stack_file: str) -> str:
        return f"{stack_file}: {self.allowed}"


def _go_duration_seconds(text: str) -> float:
    """time.ParseDuration, which the engine applies to customTimeouts (pulumi/pulumi v3.259.0,
    pkg/resource/deploy/source_eval.go generateTimeoutInSeconds); it refuses anything else."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    match = re.fullmatch(r"([-+]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+|0)", text)
    if not match:
        raise ValueError(f"unable to parse customTimeout Value {text}")
    total = sum(float(n) * units[u] for n, u in re.findall(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)", match[2]))
    return -total if match[1] == "-" else total


def _urn_parts(urn: str) -> list[str]:
    """urn:pulumi:<stack>::<project>::<qualified type>::<name>; the name may itself contain '::'."""
    return urn.split("::", 3)


def _alias(alias, engine_urns: dict[str, str]) -> dict:
    """One alias_pb2.Alias as a plain record: {"urn"} or its spec's set fields, the parent as the
    engine's URN. The engine collapses a spec to a URN itself (step_generator.go collapseAliasToUrn)."""
    if alias.WhichOneof("alias") == "urn":
        return {"urn": alias.urn}
    spec = alias.spec
    out = {k: getattr(spec, k) for k in ("name", "type", "stack", "project") if getattr(spec, k)}
    if spec.WhichOneof("parent") == "parentUrn" and spec.parentUrn:
        out["parentUrn"] = engine_urns.get(spec.parentUrn, spec.parentUrn)
    elif spec.WhichOneof("parent") == "noParent" and spec.noParent:
        out["noParent"] = True
    return out


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.recorded: list[Recorded] = []
        self.root: Recorded | None = None
        self.by_urn: dict[str, Recorded] = {}
        self._engine_urns: dict[str, str] = {}
        self._seen: set[str] = set()
        self.duplicates: list[str] = []

    def _engine_urn(self, mock_parent: str, type_: str, name: str) -> str:
        """The URN as the engine builds it (pulumi/pulumi v3.259.0, pkg/resource/deploy/deployment.go
        generateURN): the parent's whole qualified type, none for the root stack. The mocks keep only
        the parent's last type and do prefix the root stack's, so their URNs are not the engine's."""
        parent = self._engine_urns.get(mock_parent, "")
        parent_type = _urn_parts(parent)[2] if parent else ""
        qualified = type_ if parent_type in ("", ROOT_STACK_TYPE) else f"{parent_type}${type_}"
        return "urn:pulumi:" + "::".join([settings.get_stack(), settings.get_project(), qualified, name])

    def _claim(self, mock_urn: str, engine_urn: str) -> None:
        # The engine refuses the second registration of a URN in one deployment (step_generator.go
        # generateURN, for reads as well as registrations).
        if engine_urn in self._seen and engine_urn not in self.duplicates:
            self.duplicates.append(engine_urn)
        self._seen.add(engine_urn)
        self._engine_urns[mock_urn] = engine_urn

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self._claim(response.urn, self._engine_urn(request.parent, request.type, request.name))
        return response

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        engine_urn = self._engine_urn(request.parent, request.type, request.name)
        self._claim(response.urn, engine_urn)
        wire = json_format.MessageToDict(request.object)
        timeouts = request.customTimeouts if request.HasField("customTimeouts") else None
        engine_options = {
            "protect": request.protect if request.HasField("protect") else False,
            "ignoreChanges": list(request.ignoreChanges),
            "replaceOnChanges": list(request.replaceOnChanges),
            # pkg/resource/deploy/source_eval.go: deleteBeforeReplace counts only when the SDK defines it.
            "deleteBeforeReplace": request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
            "additionalSecretOutputs": list(request.additionalSecretOutputs),
            # The SDK sends alias specs (request.aliases) to a monitor that supports them, as this one does.
            "aliases": list(request.aliasURNs) + [a.urn for a in request.aliases if a.urn],
            "customTimeouts": {k: _go_duration_seconds(getattr(timeouts, k)) for k in ("create", "update", "delete")
                               if timeouts is not None and getattr(timeouts, k)},
        }
        provider_mock = request.provider.rsplit("::", 1)[0] if request.provider else ""
        recorded = Recorded(
            urn=response.urn, type=request.type, name=request.name, custom=bool(request.custom),
            parent=_short(request.parent), provider=_short(provider_mock), inputs={}, options={},
            engine_urn=engine_urn, engine_parent=self._engine_urns.get(request.parent, ""),
            engine_provider=self._engine_urns.get(provider_mock, ""),
            dependencies=[self._engine_urns.get(u, u) for u in request.dependencies],
            property_dependencies={k: [self._engine_urns.get(u, u) for u in v.urns]
                                   for k, v in request.propertyDependencies.items()},
            wire_inputs=wire, wire_outputs=response.object if request.custom else None, engine_options=engine_options)
        self.by_urn[response.urn] = recorded
        if request.type == ROOT_STACK_TYPE:
            self.root = recorded
            return response
        recorded.options = {
            "protect": engine_options["protect"],
            "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else False,
            "deleteBeforeReplace": request.deleteBeforeReplace,
            "customTimeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete")
                               if timeouts is not None and getattr(timeouts, k)},
            "dependsOn": sorted(_short(u) for u in request.dependencies),
            # What the offline update planner (render/changes.py) needs of the engine's goal state
            # (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go): whether the program set
            # deleteBeforeReplace at all (source_eval.go: only a defined value overrides the
            # provider), the ignoreChanges and replaceOnChanges property paths, and the aliases as
            # the SDK sends them (alias specs: the mock monitor supports the aliasSpecs feature).
            "deleteBeforeReplaceDefined": bool(request.deleteBeforeReplaceDefined),
            "ignoreChanges": list(request.ignoreChanges),
            "replaceOnChanges": list(request.replaceOnChanges),
            "aliases": [_alias(a, self._engine_urns) for a in request.aliases] + [{"urn": u} for u in request.aliasURNs],
        }
        recorded.inputs = normalize(wire)
        self.recorded.append(recorded)
        return response

    def RegisterResourceOutputs(self, request):
        # A component's outputs in the engine are exactly what it registered (pulumi/pulumi v3.259.0,
        # pkg/resource/deploy/step_executor.go executeRegisterResourceOutputs).
        recorded = self.by_urn.get(request.urn)
        if recorded is not None:
            recorded.wire_outputs = request.outputs
        return super().RegisterResourceOutputs(request)


@dataclass
class Rendered:
    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any]
    secret_outputs: set[str]
    missing_secrets: list[str] = field(default_factory=list)
    # The engine's view: registration order (the order the engine analyzes in), the root stack
    # (its outputs are the stack outputs on the wire), and whether this was a preview.
    registered: list[Recorded] = field(default_factory=list)
    root: Recorded | None = None
    preview: bool = False
    # The validated stack config (render() sets it): what plan.md says the stack file left to defaults,
    # and what the objects do not say, e.g. whether a model's profile was declared or chosen by name.
    config: Any = None


def _start(stack: str, config: dict[str, str], secret_keys: list[str], aws_region: str = "us-east-1",
           preview: bool = False, previous: dict[str, dict] | None = None) -> RecordingMonitor:
    settings.ROOT.set(None)  # a fresh root stack per run, so several renders share a process
    pulumi.runtime.set_all_config(config, secret_keys)
    mocks = MockResources(aws_region, previous)
    monitor = RecordingMonitor(PreviewMocks(mocks) if preview else mocks)
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor)
    return monitor


@contextlib.contextmanager
def _without_cycle_collection():
    """The render is a short batch run over the SDK's many long-lived objects; every full cycle
    collection re-scans them, which made render time per resource grow with stack size (measured
    with tools/bench.py: 2.4 ms at 55 resources, 3.6 ms at 335; 2.5 ms with collection paused).
    Memory use is unchanged at these sizes; collection resumes when the render ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _without_source_positions():
    """The SDK walks the Python stack of every resource it registers, for the engine's source-position
    diagnostics (pulumi/runtime/resource.py register_resource and read_resource: _get_stack_trace, a
    traceback.extract_stack and a file URI per frame). The recording monitor reads neither the request's
    stackTrace nor its sourcePosition, and the walk was a sixth of a render's time (42 renders of the
    tests' stacks: 7.3 s of CPU with it, 6.0 s without). The empty trace is what the SDK sends when it
    finds no user frame. Only under this mock runtime: `pulumi up` runs the program without it."""
    original = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = original


def record(stack: str, program: Callable[[], dict[str, pulumi.Input]],
           config: dict[str, str] | None = None, secret_keys: list[str] | None = None,
           aws_region: str = "us-east-1", preview: bool = False, previous: dict[str, dict] | None = None) -> Rendered:
    """Run `program` under the mock runtime; return what it registered and its resolved outputs.
    Raises DuplicateURNError (a loader.ConfigError) where the engine would refuse the program."""
    monitor = _start(stack, config or {}, secret_keys or [], aws_region, preview, previous)
    resolved: dict[str, Any] = {}
    secret_outputs: set[str] = set()
    stack_outputs: dict[str, Any] = {}

    async def collect(outputs: dict[str, pulumi.Input]) -> None:
        for key, value in outputs.items():
            out = pulumi.Output.from_input(value)
            resolved[key] = await out.future()
            if await out.is_secret():
                secret_outputs.add(key)
        # The root stack's outputs as the SDK registers the exports: None dropped, unknown as the
        # sentinel, secrets wrapped (pulumi/runtime/rpc.py serialize_properties).
        stack_outputs.update(json_format.MessageToDict(await rpc.serialize_properties(outputs, {})))

    with _without_cycle_collection(), _without_source_positions():
        _sync_await(run_pulumi_func(lambda: _sync_await(asyncio.ensure_future(collect(program() or {})))))
    if monitor.duplicates:
        raise DuplicateURNError(loader.stack_file_name(stack), monitor.duplicates)
    if monitor.root is not None:
        monitor.root.wire_outputs = stack_outputs
    return Rendered(stack=stack, resources=sorted(monitor.recorded, key=lambda r: r.urn),
                    # A secret output is masked like a secret input: no rendered view holds its value.
                    outputs={k: _mask_leaves(v) if k in secret_outputs else normalize(v) for k, v in resolved.items()},
                    secret_outputs=secret_outputs,
                    registered=list(monitor.recorded), root=monitor.root, preview=preview)


def render(stack_file: StackFile, preview: bool = False, previous: dict[str, dict] | None = None) -> Rendered:
    """Validate, then run the program. Raises loader.ConfigError before anything is registered.
    `preview=True` records what `pulumi preview` of a new stack registers (see PreviewMocks);
    `previous` is the stack's last deployment (previous_state of an earlier render), {} for a new one."""
    from stacks import program

    config, secret_keys = dict(stack_file.config), list(stack_file.secret_keys)
    _start(stack_file.stack, config, secret_keys, preview=preview)
    cfg = loader.from_pulumi(require_secrets=False, stack_path=stack_file.path)
    # Secrets the stack file does not hold yet are masked stand-ins here and listed in the plan;
    # `pulumi up` refuses to run without them.
    missing = [k for k in required_secret_keys(cfg) if f"{loader.NAMESPACE}:{k}" not in config]
    for key in missing:
        config[f"{loader.NAMESPACE}:{key}"] = MASK
        secret_keys.append(f"{loader.NAMESPACE}:{key}")
    if absent := consumer_keys.missing(cfg, config):
        # A stand-in per consumer, each its own (stacks/consumer_keys.py refuses two consumers one secret).
        config[consumer_keys.FULL_KEY] = json.dumps({**(consumer_keys.secrets_of(config) or {}),
                                                     **{n: f"[secret of {n}]" for n in absent}})
        # One entry per consumer, each with its own `--path` command, also when the whole map is absent
        # (plan.md's Secrets and --strict name every consumer, not `consumerKeys.<name>`).
        missing = [k for k in missing if k != consumer_keys.SECRET_KEY]
        missing += [f"{consumer_keys.SECRET_KEY}.{n}" for n in absent]
    rendered = record(stack_file.stack, program.run, config, secret_keys, cfg.object_store.region, preview, previous)
    rendered.missing_secrets = missing
    rendered.config = cfg
    return rendered
