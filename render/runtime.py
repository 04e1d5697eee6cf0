"""Run the Pulumi program under the mock runtime and record what it registers.

The recording monitor sees each RegisterResource request as the engine would: inputs with secrets
still wrapped (so they can be masked), and the resource options that plain mocks hide (protect,
retainOnDelete, customTimeouts, deleteBeforeReplace, dependencies).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any, Callable

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from render.stackfile import MASK, PROJECT, StackFile
from stacks import loader
from stacks.config import required_secret_keys

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


MOCK_ACCOUNT = "000000000000"


class MockResources(pulumi.runtime.Mocks):
    """Gives each resource a stable id and the outputs the program reads, shaped like the real ones
    (a mock AWS account id makes them recognisable in the render)."""

    def __init__(self, aws_region: str = "us-east-1"):
        self.aws_region = aws_region

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        if args.typ == "aws:ecr/repository:Repository":
            state["repositoryUrl"] = f"{MOCK_ACCOUNT}.dkr.ecr.{self.aws_region}.amazonaws.com/{state['name']}"
            return state["name"], state
        if args.typ == "aws:iam/accessKey:AccessKey":
            state["secret"] = "mock-secret-access-key"
            return "AKIAMOCKACCESSKEYID0", state
        if args.typ == "aws:s3/bucket:Bucket":
            state["arn"] = f"arn:aws:s3:::{state.get('bucket', args.name)}"
            return state.get("bucket", args.name), state
        meta = state.get("metadata") or {}
        if "name" in meta:
            return "/".join(p for p in (meta.get("namespace"), meta["name"]) if p), state
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.recorded: list[Recorded] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            timeouts = request.customTimeouts if request.HasField("customTimeouts") else None
            options = {
                "protect": request.protect if request.HasField("protect") else False,
                "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else False,
                "deleteBeforeReplace": request.deleteBeforeReplace,
                "customTimeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete")
                                   if timeouts is not None and getattr(timeouts, k)},
                "dependsOn": sorted(_short(u) for u in request.dependencies),
            }
            self.recorded.append(Recorded(
                urn=response.urn, type=request.type, name=request.name, custom=bool(request.custom),
                parent=_short(request.parent), provider=_short(request.provider.rsplit("::", 1)[0]) if request.provider else "",
                inputs=normalize(json_format.MessageToDict(request.object)), options=options))
        return response


@dataclass
class Rendered:
    stack: str
    resources: list[Recorded]
    outputs: dict[str, Any]
    secret_outputs: set[str]
    missing_secrets: list[str] = field(default_factory=list)


def _start(stack: str, config: dict[str, str], secret_keys: list[str], aws_region: str = "us-east-1") -> RecordingMonitor:
    settings.ROOT.set(None)  # a fresh root stack per run, so several renders share a process
    pulumi.runtime.set_all_config(config, secret_keys)
    monitor = RecordingMonitor(MockResources(aws_region))
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
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


def record(stack: str, program: Callable[[], dict[str, pulumi.Input]],
           config: dict[str, str] | None = None, secret_keys: list[str] | None = None,
           aws_region: str = "us-east-1") -> Rendered:
    """Run `program` under the mock runtime; return what it registered and its resolved outputs."""
    monitor = _start(stack, config or {}, secret_keys or [], aws_region)
    resolved: dict[str, Any] = {}
    secret_outputs: set[str] = set()

    async def collect(outputs: dict[str, pulumi.Input]) -> None:
        for key, value in outputs.items():
            out = pulumi.Output.from_input(value)
            resolved[key] = await out.future()
            if await out.is_secret():
                secret_outputs.add(key)

    with _without_cycle_collection():
        _sync_await(run_pulumi_func(lambda: _sync_await(asyncio.ensure_future(collect(program() or {})))))
    return Rendered(stack=stack, resources=sorted(monitor.recorded, key=lambda r: r.urn),
                    outputs={k: normalize(v) for k, v in resolved.items()}, secret_outputs=secret_outputs)


def render(stack_file: StackFile) -> Rendered:
    """Validate, then run the program. Raises loader.ConfigError before anything is registered."""
    from stacks import program

    config, secret_keys = dict(stack_file.config), list(stack_file.secret_keys)
    _start(stack_file.stack, config, secret_keys)
    cfg = loader.from_pulumi(require_secrets=False)
    # Secrets the stack file does not hold yet are masked stand-ins here and listed in the plan;
    # `pulumi up` refuses to run without them.
    missing = [k for k in required_secret_keys(cfg) if f"{loader.NAMESPACE}:{k}" not in config]
    for key in missing:
        config[f"{loader.NAMESPACE}:{key}"] = MASK
        secret_keys.append(f"{loader.NAMESPACE}:{key}")
    rendered = record(stack_file.stack, program.run, config, secret_keys, cfg.object_store.region)
    rendered.missing_secrets = missing
    return rendered
