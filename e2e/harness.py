"""The real Pulumi CLI on a local file backend, run against the local control plane (e2e/cluster.py).

Everything lives under .e2e/: the CLI's home (plugins), the state backend, a copy of the project per run
(`pulumi config set --secret` writes into Pulumi.<stack>.yaml, which must not touch the repository's
stack files), and a log of every CLI call with its output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / ".e2e"
BIN = E2E / "bin"
KUBECONFIG = Path(os.environ.get("E2E_KUBECONFIG", E2E / "kubeconfig")).resolve()
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
KUBERNETES_PLUGIN = "kubernetes"
# What the CLI side needs; e2e/cluster.py up names the control plane's own missing binaries.
BINARIES = ("pulumi", "pulumi-resource-kubernetes")
# The repository's files a project copy needs: the program, its stack files and the policy pack.
PROJECT_IGNORE = shutil.ignore_patterns(".git", ".venv*", ".e2e", "build", "__pycache__", ".pytest_cache",
                                        ".hypothesis", "tests", "e2e", "docs", "venv")
# `--policy-pack policy` as the README has it needs the language host; this starts the same pack.
POLICY_LAUNCHER = "policy/run-policy-pack"
PASSPHRASE = "e2e-local-passphrase"


def sdk_plugin_version(package: str) -> str:
    """The version the Python SDK registers its resources with: the engine loads the plugin under it."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    return json.loads((Path(spec.origin).parent / "pulumi-plugin.json").read_text())["version"]


def worker_suffix() -> str:
    """'' alone, '-gw0', '-gw1' under pytest-xdist: what keeps the workers' directories apart."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"-{worker}" if worker else ""


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if not os.access(BIN / b, os.X_OK)]


@dataclass
class Result:
    args: list[str]
    returncode: int
    output: str
    seconds: float

    def __str__(self) -> str:
        tail = "\n".join(self.output.splitlines()[-60:])
        return f"pulumi {' '.join(self.args)} -> exit {self.returncode} in {self.seconds:.1f} s\n{tail}"


class Pulumi:
    """One project copy, one backend, one CLI home; `run` is `pulumi <args>` in the project copy."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.home = workdir / "pulumi-home"
        self.state = workdir / "state"
        self.project = workdir / "project"
        self.logs = workdir / "logs"
        self.calls = 0

    def prepare(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        for d in (self.home, self.state, self.logs):
            d.mkdir(parents=True)
        shutil.copytree(ROOT, self.project, ignore=PROJECT_IGNORE)
        # PulumiPolicy.yaml names virtualenv `venv`: the program's virtualenv has the pack's pins.
        (self.project / "policy" / "venv").symlink_to(VENV)
        shutil.copy2(ROOT / "e2e" / "shims" / "run-policy-pack", self.project / POLICY_LAUNCHER)
        self.run("login", f"file://{self.state}")
        version = sdk_plugin_version("pulumi_kubernetes")
        self.run("plugin", "install", "resource", KUBERNETES_PLUGIN, version,
                 "--file", str(BIN / "pulumi-resource-kubernetes"))

    def set_secret(self, key: str, value: str, stack: str, cwd: Path | None = None) -> Result:
        # From standard input, as `pulumi config set --secret KEY` reads it: never on a command line.
        return self.run("config", "set", "--secret", key, stack=stack, stdin=value, cwd=cwd)

    def outputs(self, stack: str, cwd: Path | None = None) -> dict:
        # The first line of the log is the command itself.
        text = self.run("stack", "output", "--json", stack=stack, cwd=cwd).output.split("\n", 1)[1]
        return json.loads(text)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PULUMI_HOME=str(self.home),
            PULUMI_BACKEND_URL=f"file://{self.state}",
            PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
            PULUMI_SKIP_UPDATE_CHECK="true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
            # Only the plugins of PULUMI_HOME and beside the CLI: nothing the machine has on PATH.
            PULUMI_IGNORE_AMBIENT_PLUGINS="true",
            PULUMI_CLI=str(BIN / "pulumi"),
            KUBECONFIG=str(KUBECONFIG),
            PATH=os.pathsep.join([str(BIN), str(VENV / "bin"), env.get("PATH", "")]),
        )
        env.pop("PULUMI_ACCESS_TOKEN", None)
        return env

    def run(self, *args: str, stack: str | None = None, check: bool = True, timeout: float = 900,
            env: dict[str, str] | None = None, stdin: str | None = None, cwd: Path | None = None) -> Result:
        argv = [*args, "--non-interactive"]
        if stack:
            argv += ["--stack", stack]
        self.calls += 1
        words = [a for a in args[:2] if a.replace("-", "").isalnum()]
        log = self.logs / f"{self.calls:03d}-{'-'.join(words) or 'pulumi'}.log"
        start = time.monotonic()
        with log.open("w") as out:
            out.write(f"$ pulumi {' '.join(argv)}\n")
            out.flush()
            proc = subprocess.run([str(PYTHON), str(ROOT / "e2e" / "pulumi_client.py"), *argv],
                                  cwd=cwd or self.project, env={**self.env(), **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout, text=True,
                                  **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}))
        result = Result(list(argv), proc.returncode, log.read_text(), time.monotonic() - start)
        if check and proc.returncode != 0:
            raise AssertionError(f"{result}\n(log: {log})")
        return result


def kubectl(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(KUBECONFIG), *args],
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
    return proc


def log(message: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
