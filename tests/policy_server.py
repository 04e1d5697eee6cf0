"""The CrossGuard pack behind its real server, spoken to as the Pulumi engine speaks to it.

Nothing here stands in for pulumi_policy: the pack runs in its own process, started the way the
Python language host starts a policy pack, and every call is a real gRPC call to the
`_PolicyAnalyzerServicer` of pulumi_policy (the pinned version). What the engine does that cannot
run here (the CLI, the engine, the providers) is mirrored from its source, pulumi/pulumi v3.259.0
(the newest tag mirrored; our SDK pin is pulumi==3.272.0), file by file as cited below.

    with PackServer.start() as server:
        report = server.run(operation(rendered, server.fresh_stack("dev")))
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, engine_pb2_grpc, plugin_pb2

from render import stackfile
from render.runtime import ROOT_STACK_TYPE, Recorded, Rendered
from render.stackfile import PROJECT, StackFile

PROJECT_DIR = Path(__file__).resolve().parent.parent
POLICY_DIR = PROJECT_DIR / "policy"
ORGANIZATION = "organization"  # what pulumi.policy assumes when the diy backend names none
STARTUP_SECONDS = 60

# pulumi_policy/deserialize.py and sdk/go/common/resource/properties.go
SIG_KEY = "4dabf18193072939515e22adb298388d"
RESOURCE_REF_SIG = "5cf8f73096256a8f31e491e813e4eb8e"

LEVELS = {analyzer_pb2.ADVISORY: "advisory", analyzer_pb2.MANDATORY: "mandatory",
          analyzer_pb2.REMEDIATE: "remediate", analyzer_pb2.DISABLED: "disabled"}
LEVEL_ENUM = {name: value for value, name in LEVELS.items()}


class PackFailure(AssertionError):
    """What makes the engine fail the whole preview or update: the pack did not start, died, or a
    call failed ("failed to run policy", pkg/resource/deploy/analyze_snapshot.go analyzeResource)."""


# --- the engine's side ------------------------------------------------------------------------


class _Engine(engine_pb2_grpc.EngineServicer):
    """The engine address the host passes (`host.ServerAddr()`): a live Engine service that keeps
    what the pack logs, so a pack that talks to its engine finds one."""

    def __init__(self) -> None:
        self.logs: list[str] = []

    def Log(self, request, context):
        self.logs.append(request.message)
        return empty_pb2.Empty()


@dataclass
class Resource:
    """One resource as the engine holds it during an operation."""
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str  # URN of its provider resource, "" for none
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict   # wire form: secrets wrapped in the secret signature, unknowns as the sentinel
    outputs: dict
    options: dict  # render.runtime.Recorded.engine_options


def _retarget(urn: str, stack: str, old_stack: str) -> str:
    """Move a URN to another stack: urn:pulumi:<stack>::<project>::<type>::<name>. The root stack's
    name is <project>-<stack> (pkg/resource/stack.go in pulumi/pulumi names it so)."""
    if not urn:
        return urn
    head, rest = urn.split("::", 1)
    assert head == f"urn:pulumi:{old_stack}", urn
    project, qtype, name = rest.split("::", 2)
    if qtype == ROOT_STACK_TYPE and name == f"{project}-{old_stack}":
        name = f"{project}-{stack}"
    return f"urn:pulumi:{stack}::{project}::{qtype}::{name}"


def resources_of(rendered: Rendered, stack: Optional[str] = None) -> list[Resource]:
    """The root stack first, then every resource in registration order (the order the engine
    analyzes in), each a private deep copy; with `stack`, every URN moves to that stack."""
    assert rendered.root is not None, "render.runtime did not record the root stack"
    move = (lambda u: _retarget(u, stack, rendered.stack)) if stack else (lambda u: u)

    def one(r: Recorded) -> Resource:
        urn = move(r.engine_urn)
        # The engine names an analyzed resource by its URN (step_generator.go: Name: new.URN.Name()).
        return Resource(urn=urn, type=r.type, name=urn.split("::", 3)[3], custom=r.custom, parent=move(r.engine_parent),
                        provider=move(r.engine_provider), dependencies=[move(u) for u in r.dependencies],
                        property_dependencies={k: [move(u) for u in v] for k, v in r.property_dependencies.items()},
                        inputs=copy.deepcopy(r.wire_inputs), outputs=copy.deepcopy(r.outputs()),
                        options=copy.deepcopy(r.engine_options))

    return [one(rendered.root)] + [one(r) for r in rendered.registered]


def parse_policy_pack_config(text: str) -> dict[str, dict[str, Any]]:
    """`--policy-pack-config <file>` as the CLI reads it (pulumi/pulumi v3.259.0,
    pkg/resource/analyzer/config.go parsePolicyPackConfig): a policy name maps to an enforcement
    level or to an object with an optional enforcementLevel and properties; "environments" is not a
    policy; empty entries are dropped; anything else is refused."""
    if not text.strip():
        return {}
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("policy pack config must be a JSON object")
    doc.pop("environments", None)
    result = {}
    for name, value in doc.items():
        if isinstance(value, str):
            level, props = value, {}
        elif isinstance(value, dict):
            props = dict(value)
            level = props.pop("enforcementLevel", "")
            if not isinstance(level, str):
                raise ValueError(f"parsing enforcement level for {name!r}: {level!r} is not a valid enforcement level")
        else:
            raise ValueError(f"parsing {name!r}: {value!r} is not a valid value; must be a string or object")
        if level and level not in LEVEL_ENUM:
            raise ValueError(f"parsing enforcement level for {name!r}: {level!r} is not a valid enforcement level")
        if level or props:
            result[name] = {"enforcementLevel": level, "properties": props}
    return result


def reconcile_policy_pack_config(info: analyzer_pb2.AnalyzerInfo,
                                 given: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ReconcilePolicyPackConfig (same file): every policy at the level GetAnalyzerInfo reports, then
    the pack's initial config, then the file; "all" sets every policy's level."""
    result = {p.name: {"enforcementLevel": LEVELS[p.enforcementLevel], "properties": {}} for p in info.policies}
    initial = {name: {"enforcementLevel": LEVELS[c.enforcementLevel] if c.enforcementLevel else "",
                      "properties": json_format.MessageToDict(c.properties)} for name, c in info.initialConfig.items()}
    for layer in (initial, given):
        if layer.get("all", {}).get("enforcementLevel"):
            for entry in result.values():
                entry["enforcementLevel"] = layer["all"]["enforcementLevel"]
        for name, entry in layer.items():
            merged = result.setdefault(name, {"enforcementLevel": "", "properties": {}})
            if entry["enforcementLevel"]:
                merged["enforcementLevel"] = entry["enforcementLevel"]
            merged["properties"] = {**merged["properties"], **entry["properties"]}
    return result


def _engine_value(value: Any) -> Any:
    """Resource references reach an analyzer as their id, or their URN while the id is unknown
    (sdk/go/common/resource/plugin/rpc.go MarshalPropertyValue without KeepResources)."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == RESOURCE_REF_SIG:
            return value.get("id") or value["urn"]
        return {k: _engine_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_engine_value(v) for v in value]
    return value


def marshal(props: dict, skip_internal_keys: bool = True) -> struct_pb2.Struct:
    """MarshalProperties with KeepUnknowns and KeepSecrets, as analyzer_plugin.go Analyze and
    AnalyzeStack call it: unknowns stay the sentinel, secrets stay wrapped (the server unwraps
    them to plain values), top-level internal `__` keys are skipped."""
    out = struct_pb2.Struct()
    out.update({k: _engine_value(v) for k, v in props.items() if not (skip_internal_keys and k.startswith("__"))})
    return out


def _options(r: Resource) -> analyzer_pb2.AnalyzerResourceOptions:
    """marshalResourceOptions (analyzer_plugin.go): custom timeouts always present, in seconds."""
    o = r.options
    timeouts = o["customTimeouts"]
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=o["protect"], ignoreChanges=o["ignoreChanges"],
        deleteBeforeReplace=bool(o["deleteBeforeReplace"]), deleteBeforeReplaceDefined=o["deleteBeforeReplace"] is not None,
        additionalSecretOutputs=o["additionalSecretOutputs"], aliases=o["aliases"],
        customTimeouts=analyzer_pb2.AnalyzerResourceOptions.CustomTimeouts(
            create=timeouts.get("create", 0), update=timeouts.get("update", 0), delete=timeouts.get("delete", 0)),
        parent=r.parent)


def _provider(r: Resource, by_urn: dict[str, Resource]) -> Optional[analyzer_pb2.AnalyzerProviderResource]:
    """The provider resource with its inputs (step_generator.go analyzeAll / AnalyzeResources)."""
    if not r.provider:
        return None
    p = by_urn[r.provider]
    return analyzer_pb2.AnalyzerProviderResource(urn=p.urn, type=p.type, name=p.name, properties=marshal(p.inputs))


# --- one operation: `pulumi preview` or `pulumi up` ----------------------------------------------


@dataclass
class Operation:
    stack: str             # the stack segment of every URN in `resources`, unique per operation
    dry_run: bool
    config: dict[str, str]
    secret_keys: list[str]
    policy_config: dict[str, dict[str, Any]]
    resources: list[Resource]
    stack_order_seed: int = 0


@dataclass
class Diagnostic:
    phase: str   # "analyze" (one resource, before its change) or "stack" (AnalyzeStack)
    policy: str
    level: str
    message: str
    urn: str     # the analyzed resource for "analyze"; what the policy named, if anything, for "stack"


CANT_RUN = "can't run policy '"


@dataclass
class Report:
    levels: dict[str, str]               # policy -> enforcement level in effect
    diagnostics: list[Diagnostic] = field(default_factory=list)
    not_applicable: list[tuple[str, str]] = field(default_factory=list)

    def skipped(self) -> list[Diagnostic]:
        """Policies the server skipped because they touched an unknown value (pulumi_policy
        policy.py: UnknownValueError becomes an advisory "can't run policy ... during preview")."""
        return [d for d in self.diagnostics if d.message.startswith(CANT_RUN)]

    def violations(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.message.startswith(CANT_RUN)]

    def mandatory_violations(self) -> list[Diagnostic]:
        return [d for d in self.violations() if d.level == "mandatory"]

    def skipped_mandatory(self) -> list[Diagnostic]:
        return [d for d in self.skipped() if self.levels.get(d.policy) == "mandatory"]

    def of(self, policy: str) -> list[Diagnostic]:
        return [d for d in self.violations() if d.policy == policy]

    def messages(self, policy: str) -> list[str]:
        """The rule's own words: the server prefixes every violation with the policy description."""
        return [d.message.split("\n", 1)[1] if "\n" in d.message else d.message for d in self.of(policy)]


def operation(rendered: Rendered, stack: str, dry_run: Optional[bool] = None,
              edit: Optional[Callable[[list[Resource]], list[Resource]]] = None,
              stack_file: Optional[StackFile] = None, policy_config: Optional[str] = None) -> Operation:
    """An operation over a rendered stack, moved to the unique stack segment `stack` (the pack keeps
    state per stack within its process); `edit` may change, drop or add resources (private copies).
    The config is the stack file's (Pulumi.<stack>.yaml unless given), the policy config
    `policy/config.<policy_config>.json`, as `--policy-pack-config` passes it; by default the stack's
    own, else its environment's (tools/stacks.py policy_config_name, as the PR workflow picks it)."""
    from tools import stacks

    resources = resources_of(rendered, stack)
    if edit is not None:
        resources = edit(resources)
    sf = stack_file or stackfile.read(PROJECT_DIR, rendered.stack)
    policy_file = POLICY_DIR / f"config.{policy_config or stacks.policy_config_name(PROJECT_DIR, rendered.stack)}.json"
    return Operation(stack=stack, dry_run=rendered.preview if dry_run is None else dry_run, config=dict(sf.config),
                     secret_keys=list(sf.secret_keys), policy_config=parse_policy_pack_config(policy_file.read_text()),
                     resources=resources, stack_order_seed=sum(map(ord, stack)))


# --- the pack process ---------------------------------------------------------------------------


def pack_command(engine_address: str, pack_dir: Path = POLICY_DIR) -> list[str]:
    """What the Python language host runs for a policy pack (pulumi/pulumi v3.259.0,
    sdk/python/cmd/pulumi-language-python/main.go RunPlugin, kind analyzer):
    `<venv python> -u -m pulumi.policy <engine address> <pack directory>`, the args being
    [host.ServerAddr()] (pkg/resource/plugin/analyzer_plugin.go NewPolicyAnalyzer)."""
    return [sys.executable, "-u", "-m", "pulumi.policy", engine_address, str(pack_dir)]


def pack_environment() -> dict[str, str]:
    """The host's environment with the virtualenv activated (sdk/python/toolchain/toolchain.go
    ActivateVirtualEnv: venv bin first on PATH, VIRTUAL_ENV set, PYTHONHOME dropped), plus what the
    policy proxy (sdk/policy_proxy.go, main.go RunPlugin) sets from ConfigureStack. One process
    serves every operation of a test session, so only the values common to all of them are set:
    organization and project. PULUMI_STACK, PULUMI_DRY_RUN and PULUMI_CONFIG differ per operation;
    the proxy also starts packs without them (a GetAnalyzerInfo before ConfigureStack), and the
    server then leaves the runtime settings alone (pulumi_policy policy.py _configure_runtime_settings).
    PYTHONPATH is dropped too: the pack must import from its own directory, as on a clean machine."""
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items()
           if k.upper() not in ("PYTHONHOME", "VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("PULUMI_")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PULUMI_ORGANIZATION"] = ORGANIZATION
    env["PULUMI_PROJECT"] = PROJECT
    return env


class PackServer:
    def __init__(self, process: subprocess.Popen, stderr, engine_server: grpc.Server, engine: _Engine, port: int):
        self.process, self._stderr, self._engine_server, self.engine = process, stderr, engine_server, engine
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)
        self._stacks: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def start(cls, pack_dir: Path = POLICY_DIR) -> "PackServer":
        engine = _Engine()
        engine_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        engine_pb2_grpc.add_EngineServicer_to_server(engine, engine_server)
        engine_port = engine_server.add_insecure_port("127.0.0.1:0")
        engine_server.start()
        stderr = tempfile.TemporaryFile()
        # The pack directory is the working directory, so it is first on sys.path (main.go RunPlugin:
        # "python policy packs used to always run with the working directory set to the policy pack
        # directory").
        process = subprocess.Popen(pack_command(f"127.0.0.1:{engine_port}", pack_dir), cwd=pack_dir, env=pack_environment(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
        port = _read_port(process, stderr)
        server = cls(process, stderr, engine_server, engine, port)
        try:
            grpc.channel_ready_future(server.channel).result(timeout=STARTUP_SECONDS)
        except grpc.FutureTimeoutError:
            server.close()
            raise PackFailure(f"policy pack printed port {port} but does not answer:\n{server.stderr()}") from None
        return server

    def __enter__(self) -> "PackServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.channel.close()
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._engine_server.stop(None)
        if self.process.stdout:
            self.process.stdout.close()

    def fresh_stack(self, base: str) -> str:
        """A stack segment no operation of this process has used: the pack keeps per-stack state
        for the length of its process, which in real use is one operation."""
        with self._lock:
            n = len(self._stacks)
            name = f"{base}-op{n}"
            self._stacks.add(name)
            return name

    def _call(self, what: str, method, request):
        try:
            return method(request, timeout=120)
        except grpc.RpcError as err:
            died = "" if self.alive() else f" (the pack process exited with {self.process.returncode})"
            raise PackFailure(f"failed to run policy: {what}: {err.code().name}: {err.details()}{died}\n"
                              f"pack stderr:\n{self.stderr()[-4000:]}") from None

    def info(self) -> analyzer_pb2.AnalyzerInfo:
        return self._call("GetAnalyzerInfo", self.stub.GetAnalyzerInfo, empty_pb2.Empty())

    def plugin_info(self) -> plugin_pb2.PluginInfo:
        return self._call("GetPluginInfo", self.stub.GetPluginInfo, empty_pb2.Empty())

    def run(self, op: Operation) -> Report:
        """One operation in the engine's order: ConfigureStack (forwarded by the host's policy proxy,
        sdk/policy_proxy.go Attach), GetAnalyzerInfo and Configure with the reconciled config
        (pkg/engine/update.go LoadLocalPolicyPackAnalyzers), then for each resource as it is
        registered Remediate and Analyze on its inputs (step_generator.go), and AnalyzeStack once on
        every resource's outputs (step_generator.go AnalyzeResources; the engine ranges over a map,
        so the order is shuffled here, deterministically)."""
        for r in op.resources:
            assert r.urn.startswith(f"urn:pulumi:{op.stack}::"), (op.stack, r.urn)
        self._call("ConfigureStack", self.stub.ConfigureStack, analyzer_pb2.AnalyzerStackConfigureRequest(
            stack=op.stack, project=PROJECT, organization=ORGANIZATION, dry_run=op.dry_run, config=op.config,
            config_secret_keys=op.secret_keys, tags=_stack_tags()))
        info = self.info()
        config = reconcile_policy_pack_config(info, op.policy_config)
        self._call("Configure", self.stub.Configure, analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={
            name: analyzer_pb2.PolicyConfig(enforcementLevel=LEVEL_ENUM[c["enforcementLevel"]],
                                            properties=marshal(c["properties"], skip_internal_keys=False))
            for name, c in config.items()}))
        report = Report(levels={name: c["enforcementLevel"] for name, c in config.items()})
        by_urn = {r.urn: r for r in op.resources}
        for r in op.resources:
            request = analyzer_pb2.AnalyzeRequest(urn=r.urn, type=r.type, name=r.name, options=_options(r),
                                                  properties=marshal(r.inputs, skip_internal_keys=False),
                                                  provider=_provider(r, by_urn))
            remediated = self._call(f"Remediate {r.urn}", self.stub.Remediate, request)
            for remediation in remediated.remediations:
                if not remediation.diagnostic:
                    r.inputs = json_format.MessageToDict(remediation.properties)  # the engine uses them from here on
            request.properties.CopyFrom(marshal(r.inputs))
            response = self._call(f"Analyze {r.urn}", self.stub.Analyze, request)
            _collect(report, "analyze", response, r.urn)
        stack_resources = list(op.resources)
        random.Random(op.stack_order_seed).shuffle(stack_resources)
        response = self._call("AnalyzeStack", self.stub.AnalyzeStack, analyzer_pb2.AnalyzeStackRequest(resources=[
            analyzer_pb2.AnalyzerResource(
                urn=r.urn, type=r.type, name=r.name, properties=marshal(r.outputs), options=_options(r),
                provider=_provider(r, by_urn), parent=r.parent, dependencies=r.dependencies,
                propertyDependencies={k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v)
                                      for k, v in r.property_dependencies.items() if v})
            for r in stack_resources]))
        _collect(report, "stack", response, "")
        return report


def _stack_tags() -> dict[str, str]:
    """The tags the CLI gives a stack from Pulumi.yaml (pkg/backend/stack.go GetEnvironmentTagsForCurrentStack)."""
    import yaml
    project = yaml.safe_load((PROJECT_DIR / "Pulumi.yaml").read_text())
    tags = {"pulumi:project": project["name"], "pulumi:runtime": project["runtime"]["name"]}
    if project.get("description"):
        tags["pulumi:description"] = project["description"]
    return tags


def _collect(report: Report, phase: str, response: analyzer_pb2.AnalyzeResponse, urn: str) -> None:
    for d in response.diagnostics:
        report.diagnostics.append(Diagnostic(phase=phase, policy=d.policyName, level=LEVELS[d.enforcementLevel],
                                             message=d.message, urn=d.urn or urn))
    report.not_applicable += [(n.policy_name, n.reason) for n in response.not_applicable]


def _read_port(process: subprocess.Popen, stderr) -> int:
    """The first stdout line is the port (pulumi_policy policy.py PolicyPack; the host reads it the
    same way, sdk/policy_proxy.go Attach). Later output is drained so the pack never blocks on it."""
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(STARTUP_SECONDS)
    text = line[0].decode(errors="replace").strip() if line else ""
    if not text.isdigit():
        if process.poll() is None:
            process.kill()
        process.wait()
        stderr.seek(0)
        raise PackFailure(f"policy pack did not start (exit {process.returncode}, stdout {text!r}):\n"
                          f"{stderr.read().decode(errors='replace')}")
    threading.Thread(target=lambda: [None for _ in iter(process.stdout.readline, b"")], daemon=True).start()
    return int(text)


def plain(value: Any) -> Any:
    """The wire form with secrets unwrapped, as the server hands it to a policy (deserialize.py)."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == "1b47061264138c4ac30d75fd1eb44270":
            return plain(value["value"])
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def where(items: Iterable[Resource], **match) -> list[Resource]:
    return [r for r in items if all(getattr(r, k) == v for k, v in match.items())]


__all__ = ["PackServer", "PackFailure", "Operation", "Report", "Diagnostic", "Resource", "operation", "resources_of",
           "parse_policy_pack_config", "reconcile_policy_pack_config", "marshal", "plain", "where"]


def serving() -> Iterator[PackServer]:
    """A pack process for a fixture's scope; it must outlive every operation sent to it, and one that died
    fails the test that owned it with its stderr."""
    import pytest
    s = PackServer.start()
    yield s
    alive, stderr = s.alive(), s.stderr()
    s.close()
    if not alive:
        pytest.fail(f"the policy pack process died during its scope:\n{stderr}")


# A change to the resources of one operation before the pack sees them.
Edit = Callable[[list[Resource]], list[Resource]]


def kind(name: str, change: Callable[[dict], None], *, outputs: bool = False, k8s_name: str | None = None) -> Edit:
    """Change the plain view of each Kubernetes object of kind `name` (and its outputs with `outputs`)."""
    def edit(resources: list[Resource]) -> list[Resource]:
        for r in resources:
            props = plain(r.inputs)
            if props.get("kind") == name and (k8s_name is None or props["metadata"]["name"] == k8s_name):
                change(props)
                r.inputs = props
                if outputs:
                    out = plain(r.outputs)
                    change(out)
                    r.outputs = out
        return resources
    return edit
