"""A fake Pulumi engine on loopback, and the program launched against it as `pulumi preview`/`up` do.

Read from pulumi/pulumi at tag v3.259.0 (the newest tag mirrored here; the pinned SDK is
pulumi==3.272.0, whose Python side is what actually runs):
- Language host: sdk/python/cmd/pulumi-language-python/main.go (Run, constructArguments,
  constructConfig) starts `<venv>/bin/python <exec script> --monitor .. --engine .. --project ..
  --root_directory .. --stack .. --pwd .. --dry_run .. --parallel .. --organization .. .` with
  PULUMI_CONFIG (JSON object of strings) and PULUMI_CONFIG_SECRET_KEYS (JSON array) appended to the
  environment, after sdk/python/toolchain/toolchain.go ActivateVirtualEnv (PATH, VIRTUAL_ENV,
  no PYTHONHOME). PULUMI_PROJECT/PULUMI_STACK/PULUMI_DRY_RUN are set only for policy packs
  (RunPlugin), not for programs. --parallel is GOMAXPROCS*4 (pkg/cmd/pulumi/operations/up.go).
- Exec script: sdk/python/cmd/pulumi-language-python-exec, reproduced step for step in EXEC_SCRIPT.
- Engine: pkg/resource/deploy/source_eval.go (resmon), step_generator.go, step_executor.go,
  deployment.go, providers/registry.go; sdk/go/common/diag/errors.go for the messages.
- CLI config: tests/cli_config.py reads a stack file into those strings.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cli_config import go_json
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, resource_pb2, resource_pb2_grpc

# sdk/go/common/resource/sig/sig.go and sdk/go/common/resource/plugin/rpc.go (v3.259.0).
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
OUTPUT_VALUE_SIG = "d0e6a833031e9bbcd3f4e8bde6ca49a4"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
PROVIDER_PREFIX = "pulumi:providers:"
MOCK_ACCOUNT = "000000000000"

# sdk/go/common/diag/errors.go (v3.259.0): GetDuplicateResourceURNError (2001),
# GetDefaultProviderDenied (2015), GetUnknownProviderError (2007).
DUPLICATE_URN = "Duplicate resource URN '{urn}'; try giving it a unique name"
DEFAULT_PROVIDER_DENIED = "Default provider for '{pkg}' disabled. '{urn}' must use an explicit provider."
UNKNOWN_PROVIDER = "unknown provider '{ref}' for resource '{urn}'"
# source_eval.go RegisterResource: what a caller waiting on a step gets once the deployment bailed.
# pkg/resource/deploy/builtins.go: what the program reads its own last deployment with (stacks/transitions.py).
READ_STACK_RESOURCE_OUTPUTS = "pulumi:pulumi:readStackResourceOutputs"
MONITOR_SHUT_DOWN = "resource monitor shut down while waiting on step's done channel"


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG


def secret(value: Any) -> dict:
    return {SIG_KEY: SECRET_SIG, "value": value}


def contains_unknown(value: Any) -> bool:
    if value == UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


def downgrade_output_values(value: Any) -> Any:
    """source_eval.go downgradeOutputValues: an output value becomes its element, unknown when not
    known, wrapped as a secret when secret (non-remote resources only)."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == OUTPUT_VALUE_SIG:
            out = downgrade_output_values(value["value"]) if "value" in value else UNKNOWN
            return secret(out) if value.get("secret") else out
        return {k: downgrade_output_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [downgrade_output_values(v) for v in value]
    return value


def strip_secrets(value: Any) -> Any:
    """plugin.MarshalProperties with KeepSecrets false (a caller that does not accept secrets)."""
    if is_secret(value):
        return strip_secrets(value.get("value"))
    if isinstance(value, dict):
        return {k: strip_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


def parse_urn(urn: str) -> tuple[str, str]:
    """urn:pulumi:<stack>::<project>::<qualified type>::<name> -> (qualified type, name); the name
    may itself contain '::' (sdk/go/common/resource/urn/urn.go)."""
    _, _, qualified_type, name = urn.split("::", 3)
    return qualified_type, name


def short(urn: str) -> str:
    """`type::name` of a URN, the type without its parents' chain: how render.runtime names parents."""
    if not urn:
        return ""
    qualified_type, name = parse_urn(urn)
    return f"{qualified_type.split('$')[-1]}::{name}"


def new_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """deployment.go generateURN + sdk/go/common/resource/urn/urn.go New: the parent's qualified type
    chain joined with `$`, except that the root stack is no parent in the chain."""
    parent_type = parse_urn(parent)[0] if parent else ""
    qualified = type_ if parent_type in ("", ROOT_STACK_TYPE) else f"{parent_type}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def _stable(*parts: str, n: int = 8) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:n]


def _provider_region(provider_inputs: dict) -> str:
    region = provider_inputs.get("region", "us-east-1")
    return region if isinstance(region, str) else "us-east-1"


def provider_computed(type_: str, name: str, urn: str, inputs: dict, provider_inputs: dict) -> tuple[str, dict]:
    """What a provider's Create adds to the inputs it echoes: (id, computed outputs). In preview the
    engine passes Preview=true and providers return these as unknown with an empty id
    (step.go CreateStep.Apply); in up they are known. Only the outputs this program reads are listed,
    shaped like pulumi-aws / pulumi-kubernetes return them."""
    if type_.startswith("kubernetes:"):
        meta = inputs.get("metadata") if isinstance(inputs.get("metadata"), dict) else {}
        ident = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
        return ident or f"{name}-{_stable(urn)}", {"status": {}}
    region = _provider_region(provider_inputs)
    if type_ == "aws:s3/bucket:Bucket":
        bucket = inputs.get("bucket") or f"{name}-{_stable(urn)}"
        return bucket, {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}",
                        "bucketDomainName": f"{bucket}.s3.amazonaws.com", "region": region}
    if type_ == "aws:iam/user:User":
        user = inputs.get("name")
        return user, {"arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/{user}", "uniqueId": f"AIDA{_stable(urn, n=16).upper()}"}
    if type_ == "aws:iam/accessKey:AccessKey":
        # pulumi-aws marks `secret` secret (additionalSecretOutputs in the generated SDK).
        return f"AKIA{_stable(urn, n=16).upper()}", {"secret": f"provider-secret-{_stable(urn, 'secret', n=20)}",
                                                      "status": "Active"}
    if type_ == "aws:ecr/repository:Repository":
        repo = inputs.get("name")
        return repo, {"arn": f"arn:aws:ecr:{region}:{MOCK_ACCOUNT}:repository/{repo}", "registryId": MOCK_ACCOUNT,
                      "repositoryUrl": f"{MOCK_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{repo}"}
    return f"{name}-{_stable(urn)}", {}


@dataclass
class Registered:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str
    inputs: dict
    options: dict
    id: str = ""
    outputs: dict = field(default_factory=dict)          # what the engine returned to the program
    registered_outputs: dict | None = None               # what RegisterResourceOutputs sent (components, stack)


@dataclass
class LogEntry:
    severity: str
    message: str
    urn: str = ""


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    resources: list[Registered]
    logs: list[LogEntry]
    engine_errors: list[str]          # what the engine itself prints as `error:` (diag sink)
    invokes: list[str]

    @property
    def failed(self) -> bool:
        return self.exit_code != 0 or bool(self.engine_errors)

    @property
    def stack(self) -> Registered:
        return next(r for r in self.resources if r.type == ROOT_STACK_TYPE)


def _to_py(struct: struct_pb2.Struct) -> dict:
    return json_format.MessageToDict(struct)


def _to_struct(value: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


class Deployment(resource_pb2_grpc.ResourceMonitorServicer, engine_pb2_grpc.EngineServicer):
    """One deployment's resource monitor and engine host, as source_eval.go serves them per run."""

    def __init__(self, project: str, stack: str, dry_run: bool, config: dict[str, str],
                 secret_keys: list[str], organization: str = "organization"):
        self.project, self.stack, self.dry_run = project, stack, dry_run
        self.config, self.secret_keys, self.organization = config, secret_keys, organization
        denied = json.loads(config.get("pulumi:disable-default-providers", "[]") or "[]")
        self.denied_defaults = set(denied)
        self.lock = threading.Lock()
        self.resources: dict[str, Registered] = {}
        self.order: list[str] = []
        self.logs: list[LogEntry] = []
        self.engine_errors: list[str] = []
        self.invokes: list[str] = []
        self.cancelled = False
        self.root = ""

    # --- engine host (engine.proto Engine service) ---
    def Log(self, request, context):
        with self.lock:
            self.logs.append(LogEntry(engine_pb2.LogSeverity.Name(request.severity), request.message, request.urn))
        return empty_pb2.Empty()

    def GetRootResource(self, request, context):
        return engine_pb2.GetRootResourceResponse(urn=self.root)

    def SetRootResource(self, request, context):
        self.root = request.urn
        return engine_pb2.SetRootResourceResponse()

    # --- resource monitor ---
    def SupportsFeature(self, request, context):
        # source_eval.go supportsFeatureID: every legacy id it names is supported (no options disable
        # resource references or output values under `pulumi preview`/`up`).
        known = {"secrets", "resourceReferences", "outputValues", "aliasSpecs", "replacementTrigger", "deletedWith",
                 "replaceWith", "transforms", "invokeTransforms", "parameterization", "resourceHooks", "errorHooks",
                 "sendsOptionsToHooks"}
        return resource_pb2.SupportsFeatureResponse(hasSupport=request.id in known)

    def GetDeploymentInfo(self, request, context):
        # source_eval.go supportedMonitorFeatures, in its order.
        names = ["SECRETS", "RESOURCE_REFERENCES", "OUTPUT_VALUES", "ALIAS_SPECS", "REPLACEMENT_TRIGGER",
                 "DELETED_WITH", "REPLACE_WITH", "TRANSFORMS", "INVOKE_TRANSFORMS", "PARAMETERIZATION",
                 "RESOURCE_HOOKS", "ERROR_HOOKS", "SENDS_OPTIONS_TO_HOOKS", "BYTE_STRING", "INVOKE_DEPENDS_ON",
                 "INVOKE_PARENT"]
        return resource_pb2.DeploymentInfo(
            project=self.project, stack=self.stack, organization=self.organization, config=self.config,
            configSecretKeys=self.secret_keys, dryRun=self.dry_run, parallel=4 * (os.cpu_count() or 1),
            supportedFeatures=[resource_pb2.ResourceMonitorFeature.Value(f"RESOURCE_MONITOR_FEATURE_{n}")
                               for n in names])

    def SignalAndWaitForShutdown(self, request, context):
        return empty_pb2.Empty()

    def RegisterPackage(self, request, context):
        return resource_pb2.RegisterPackageResponse(ref=str(uuid.uuid4()))

    def _bail(self, message: str, context) -> None:
        """step_generator.go bailDiag: the diagnostic goes to the engine's error stream, the monitor
        shuts down, and the program's pending call ends UNAVAILABLE (source_eval.go RegisterResource)."""
        self.engine_errors.append(message)
        self.cancelled = True
        context.abort(grpc.StatusCode.UNAVAILABLE, MONITOR_SHUT_DOWN)

    def _check_live(self, context) -> None:
        if self.cancelled:
            context.abort(grpc.StatusCode.UNAVAILABLE, MONITOR_SHUT_DOWN)

    @staticmethod
    def _inherited_provider(request, parent: Registered | None) -> str:
        """source_eval.go inheritFromParent: a child without a provider takes its parent's when it is a
        local component or the parent's provider is of the child's package."""
        if request.provider or parent is None or not parent.options["goalProvider"]:
            return request.provider
        prov_type = parse_urn(parent.options["goalProvider"].rpartition("::")[0])[0].split("$")[-1]
        if not request.custom or prov_type == PROVIDER_PREFIX + request.type.split(":")[0]:
            return parent.options["goalProvider"]
        return ""

    @staticmethod
    def _resolve_provider(goal_provider: str, request, parent: Registered | None, pkg: str) -> str:
        """source_eval.go resolveProvider: the goal's provider, else the request's providers map, else
        the parent component's providers map."""
        if goal_provider:
            return goal_provider
        if pkg in request.providers:
            return request.providers[pkg]
        if parent is not None:
            return parent.options["providers"].get(pkg, "")
        return ""

    def _check_provider(self, ref: str, urn: str, pkg: str) -> str | None:
        """step_generator.go loadResourceProvider: a custom resource needs an explicit provider when
        defaults are disabled (Pulumi.yaml pulumi:disable-default-providers), and a registered one."""
        if not ref:
            if "*" in self.denied_defaults or pkg in self.denied_defaults:
                return DEFAULT_PROVIDER_DENIED.format(pkg=pkg, urn=urn)
            return f"fake engine: default provider for '{pkg}' is not modelled ({urn})"
        prov_urn, _, prov_id = ref.rpartition("::")
        known = self.resources.get(prov_urn)
        if known is None or known.id != prov_id:
            return UNKNOWN_PROVIDER.format(ref=ref, urn=urn)
        return None

    def RegisterResource(self, request, context):
        with self.lock:
            self._check_live(context)
            parent = self.resources.get(request.parent) if request.parent else None
            if request.parent and parent is None:
                # step_generator.go checkParent
                self._bail(f"could not find parent resource {request.parent}", context)
            urn = new_urn(self.stack, self.project, request.parent, request.type, request.name)
            if urn in self.resources:
                self._bail(DUPLICATE_URN.format(urn=urn), context)
            pkg = request.type.split(":")[0]
            is_provider = request.type.startswith(PROVIDER_PREFIX)
            goal_provider = self._inherited_provider(request, parent)
            provider = goal_provider if is_provider or not request.custom \
                else self._resolve_provider(goal_provider, request, parent, pkg)
            if request.custom and not is_provider:
                problem = self._check_provider(provider, urn, pkg)
                if problem:
                    self._bail(problem, context)
            inputs = downgrade_output_values(_to_py(request.object))
            timeouts = request.customTimeouts if request.HasField("customTimeouts") else None
            options = {
                # inheritFromParent: protect and retainOnDelete default to the parent's goal.
                "protect": request.protect if request.HasField("protect") else (parent.options["protect"] if parent else False),
                "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete")
                else (parent.options["retainOnDelete"] if parent else False),
                "deleteBeforeReplace": request.deleteBeforeReplace,
                "customTimeouts": {k: getattr(timeouts, k) for k in ("create", "update", "delete") if timeouts and getattr(timeouts, k)},
                "provider": provider,
                "goalProvider": goal_provider,
                "providers": dict(request.providers),
                "parent": request.parent,
                "dependencies": sorted(request.dependencies),
                "ignoreChanges": list(request.ignoreChanges),
                "additionalSecretOutputs": list(request.additionalSecretOutputs),
                "aliases": [json_format.MessageToDict(a) for a in request.aliases] + list(request.aliasURNs),
            }
            rec = Registered(urn=urn, type=request.type, name=request.name, custom=request.custom,
                             parent=request.parent, provider=provider, inputs=inputs, options=options)
            if request.type == ROOT_STACK_TYPE:
                self.root = urn
            if not request.custom:
                rec.outputs = {}  # source_eval.go: local components get no outputs back
            elif is_provider:
                # providers/registry.go Create: UnknownID in preview, a fresh UUID in up.
                rec.id = UNKNOWN if self.dry_run else str(uuid.uuid4())
                rec.outputs = {k: v for k, v in inputs.items() if k not in ("version", "pluginDownloadURL")}
            else:
                prov_inputs = self.resources[provider.rpartition("::")[0]].inputs
                ident, computed = provider_computed(request.type, request.name, urn, inputs, prov_inputs)
                outputs = dict(inputs)
                if self.dry_run:
                    outputs.update({k: UNKNOWN for k in computed if k not in inputs})
                    rec.id = ""
                else:
                    outputs.update(computed)
                    rec.id = ident
                # step_executor.go: additionalSecretOutputs, then outputs whose input was secret.
                for k in request.additionalSecretOutputs:
                    if k in outputs and not is_secret(outputs[k]):
                        outputs[k] = secret(outputs[k])
                for k, v in outputs.items():
                    if not is_secret(v) and is_secret(inputs.get(k)):
                        outputs[k] = secret(v)
                rec.outputs = outputs
            self.resources[urn] = rec
            self.order.append(urn)
        returned = rec.outputs
        if not request.supportsPartialValues:
            returned = {k: v for k, v in returned.items() if not contains_unknown(v)}
        if not request.acceptSecrets:
            returned = strip_secrets(returned)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=rec.id, object=_to_struct(returned),
                                                     result=resource_pb2.Result.SUCCESS)

    def RegisterResourceOutputs(self, request, context):
        with self.lock:
            self._check_live(context)
            rec = self.resources.get(request.urn)
            if rec is None:
                # step_executor.go executeRegisterResourceOutputs
                self._bail(f"cannot complete a resource '{request.urn}' whose registration isn't pending", context)
            rec.registered_outputs = _to_py(request.outputs)
        return empty_pb2.Empty()

    def ReadResource(self, request, context):
        with self.lock:
            self._check_live(context)
            urn = new_urn(self.stack, self.project, request.parent, request.type, request.name)
            if urn in self.resources:
                self._bail(DUPLICATE_URN.format(urn=urn), context)
            problem = self._check_provider(request.provider, urn, request.type.split(":")[0])
            if problem:
                self._bail(problem, context)
            props = _to_py(request.properties)
            self.resources[urn] = Registered(urn=urn, type=request.type, name=request.name, custom=True,
                                             parent=request.parent, provider=request.provider, inputs=props,
                                             options={"read": True, "protect": False, "retainOnDelete": False,
                                                      "goalProvider": request.provider, "providers": {}},
                                             id=request.id, outputs=props)
            self.order.append(urn)
        return resource_pb2.ReadResourceResponse(urn=urn, properties=_to_struct(props))

    def Invoke(self, request, context):
        with self.lock:
            self._check_live(context)
            self.invokes.append(request.tok)
        pkg = request.tok.split(":")[0]
        # default_providers.go shouldDenyRequest: "we always allow" package pulumi (the builtins), whatever
        # pulumi:disable-default-providers says.
        if not request.provider and pkg != "pulumi" and ("*" in self.denied_defaults or pkg in self.denied_defaults):
            # source_eval.go getProviderFromSource: GetDefaultProviderDenied("Invoke").
            context.abort(grpc.StatusCode.UNKNOWN, DEFAULT_PROVIDER_DENIED.format(pkg=pkg, urn=request.tok))
        if request.tok == READ_STACK_RESOURCE_OUTPUTS:
            # builtins.go readStackResourceOutputs: the stack's checkpoint, URN -> {type, outputs}. Every run
            # here is a new stack with no checkpoint. (The real engine also registers the default provider
            # pulumi:providers:pulumi::default for the invoke; resources here are the program's own.)
            args = json_format.MessageToDict(request.args)
            answer = struct_pb2.Struct()
            answer.update({"name": args.get("stackName", ""), "outputs": {}})
            return resource_pb2.ResourceInvokeResponse(**{"return": answer})
        # No provider runs here: an answer made up for a function would hide what the real one returns.
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"fake engine: invoke {request.tok} is not modelled")

    def Call(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"fake engine: call {request.tok} is not modelled")

    def result(self, exit_code: int | None, stdout: str, stderr: str) -> RunResult:
        with self.lock:
            return RunResult(exit_code=exit_code, stdout=stdout, stderr=stderr,
                             resources=[self.resources[u] for u in self.order], logs=list(self.logs),
                             engine_errors=list(self.engine_errors), invokes=list(self.invokes))


EXEC_SCRIPT = r"""
import argparse, asyncio, logging, os, runpy, sys, traceback
from concurrent.futures import ThreadPoolExecutor
import pulumi, pulumi.runtime


def get_abs_module_path(mod_path):
    path, ext = os.path.splitext(mod_path)
    if not ext:
        path = os.path.join(path, "__main__")
    return os.path.abspath(path)


def _get_user_stacktrace(user_program_abspath):
    tb = traceback.extract_tb(sys.exc_info()[2])
    for frame_index, frame in enumerate(tb):
        if get_abs_module_path(user_program_abspath) == get_abs_module_path(frame[0]):
            return traceback.format_exc(limit=-(len(tb) - frame_index))
    return traceback.format_exc()


ap = argparse.ArgumentParser()
for flag in ("project", "root_directory", "stack", "parallel", "dry_run", "pwd", "monitor", "engine",
             "tracing", "organization"):
    ap.add_argument("--" + flag)
ap.add_argument("PROGRAM")
ap.add_argument("ARGS", nargs="*")
args = ap.parse_args()
pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
settings = pulumi.runtime.Settings(monitor=args.monitor, engine=args.engine, project=args.project,
                                   stack=args.stack, parallel=int(args.parallel), dry_run=args.dry_run == "true",
                                   organization=args.organization, root_directory=args.root_directory)
pulumi.runtime.configure(settings)
sys.argv = [args.PROGRAM] + args.ARGS
if args.pwd is not None:
    os.chdir(args.pwd)
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
executor = ThreadPoolExecutor(max_workers=max(settings.parallel, 1) * 4)
loop.set_default_executor(executor)
logging.getLogger("asyncio").setLevel(logging.CRITICAL)
exit_code = 1
try:
    user_program_abspath = os.path.abspath(args.PROGRAM)
    loop.run_until_complete(pulumi.runtime.run_in_stack(lambda: runpy.run_path(args.PROGRAM, run_name="__main__")))
    exit_code = 0
except pulumi.RunError as e:
    pulumi.log.error(str(e))
except Exception:
    pulumi.log.error("Program failed with an unhandled exception:\n" + _get_user_stacktrace(user_program_abspath))
    exit_code = 32
finally:
    executor.shutdown(wait=True)
    loop.close()
    sys.stdout.flush()
    sys.stderr.flush()
sys.exit(exit_code)
"""

# Outside the project, like the CLI's install directory: the script's directory is sys.path[0], so
# the program's own modules are importable only through runpy.run_path of the program directory.
_exec_dir = tempfile.mkdtemp(prefix="pulumi-language-python-")
atexit.register(shutil.rmtree, _exec_dir, ignore_errors=True)
EXEC_PATH = Path(_exec_dir) / "pulumi-language-python-exec"
EXEC_PATH.write_text(EXEC_SCRIPT)


def program_env(venv: Path, config: dict[str, str], secret_keys: list[str]) -> dict[str, str]:
    """toolchain.go ActivateVirtualEnv, then main.go Run appends PULUMI_CONFIG[_SECRET_KEYS]."""
    env = {k: v for k, v in os.environ.items()
           if k.upper() not in ("PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("PULUMI_CONFIG")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}" if env.get("PATH") else str(venv / "bin")
    env["VIRTUAL_ENV"] = str(venv)
    env["PULUMI_CONFIG"] = go_json(config)
    env["PULUMI_CONFIG_SECRET_KEYS"] = go_json(sorted(secret_keys))
    return env


def run_program(program_dir: Path, venv: Path, project: str, stack: str, config: dict[str, str],
                secret_keys: list[str], dry_run: bool, timeout: float = 120) -> RunResult:
    """Serve a fresh resource monitor (source_eval.go serves one per deployment) and run the program
    against it the way the language host does."""
    deployment = Deployment(project, stack, dry_run, config, secret_keys)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)])
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(deployment, server)
    engine_pb2_grpc.add_EngineServicer_to_server(deployment, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    address = f"127.0.0.1:{port}"
    argv = [str(venv / "bin" / "python"), str(EXEC_PATH),
            "--monitor", address, "--engine", address, "--project", project,
            "--root_directory", str(program_dir), "--stack", stack, "--pwd", str(program_dir),
            "--dry_run", "true" if dry_run else "false", "--parallel", str(4 * (os.cpu_count() or 1)),
            "--organization", deployment.organization, "."]
    try:
        proc = subprocess.run(argv, cwd=program_dir, env=program_env(venv, config, secret_keys),
                              capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, str(exc.stdout or ""), f"timed out after {timeout}s\n{exc.stderr or ''}"
    finally:
        server.stop(grace=None)
    return deployment.result(code, out, err)


if __name__ == "__main__":  # pragma: no cover - manual use: python tests/engine_host.py <dir> <stack>
    print(run_program(Path(sys.argv[1]), Path(sys.argv[1]) / ".venv", "llm-serving", sys.argv[2], {}, [], True))
