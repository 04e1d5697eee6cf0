"""Runs the real Pulumi CLI on this program: `python e2e/pulumi_client.py <pulumi arguments...>`.

Run from a project directory (the e2e's copy of the repository). Commands that run the program
(preview, up, refresh with --run-program, destroy with --run-program) get a language runtime to run it
in; every other command is passed to the CLI as it is.

Why not the CLI's own Python language host: `pulumi-language-python` is a Go module of its own
(github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3, no tags, pseudo-versions only) and
the module proxy here serves none of its versions (README, "What is real in the e2e"). The CLI can
instead connect to a language runtime that is already running (`--client`, pulumi v3.276.0
pkg/cmd/pulumi/operations/io.go: the project's runtime becomes "client"): the Python SDK's own
LanguageServer (pulumi/automation/_server.py), the one the Automation API serves inline programs with.
It runs __main__.py unchanged, in this process, with the config, secrets, stack and dry-run flag the
engine sends. The engine, the providers, the policy pack, the state and every step the CLI takes are the
real ones; what is not exercised is the host's own work: choosing the virtualenv's interpreter and
listing its packages for plugins (GetRequiredPackages answers nothing; plugins load on first use).
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
from concurrent import futures
from pathlib import Path

# Commands whose first word runs the program, and the flag that makes the others run it.
PROGRAM_COMMANDS = {"preview", "up", "update"}
RUN_PROGRAM_COMMANDS = {"refresh", "destroy"}


def runs_program(args: list[str]) -> bool:
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return False
    if words[0] in PROGRAM_COMMANDS:
        return True
    return words[0] in RUN_PROGRAM_COMMANDS and any(a in ("--run-program", "--run-program=true") for a in args)


def _program(project_dir: Path):
    def run() -> None:
        # As `python __main__.py` would: the project directory first on sys.path, __name__ "__main__".
        if str(project_dir) not in sys.path:
            sys.path.insert(0, str(project_dir))
        if os.environ.get("E2E_BREAK"):
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            import breakers
            breakers.install(os.environ["E2E_BREAK"])
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
    return run


def run_cli(cmd: list[str]) -> int:
    """The CLI as a child that gets the signals this process gets: SIGINT and SIGTERM are forwarded, where
    subprocess.call would kill the child on KeyboardInterrupt. So a test that interrupts `pulumi up` (issue
    30) reaches the CLI as Ctrl-C at a terminal does (the first one cancels gracefully, pulumi v3.276.0
    pkg/cmd/pulumi/operations), and this process, which serves the program to it, waits until it has
    finished."""
    # The handlers go in before the child starts: a signal in between would otherwise end this process
    # (KeyboardInterrupt) and orphan the CLI. One that arrives before the child exists is passed on at start.
    children: list[subprocess.Popen] = []
    early: list[int] = []

    def forward(signum: int, _frame) -> None:
        if children:
            children[0].send_signal(signum)
        else:
            early.append(signum)
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(cmd)
        children.append(child)
        for signum in early:
            child.send_signal(signum)
        code = child.wait()   # PEP 475: the wait resumes after each forwarded signal
        # A CLI killed by a signal exits as a shell reports it (128 + the signal: 137 for SIGKILL), not as
        # sys.exit(-9) would (247).
        return 128 - code if code < 0 else code
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: list[str]) -> int:
    pulumi = os.environ.get("PULUMI_CLI", "pulumi")
    if not runs_program(argv):
        return run_cli([pulumi, *argv])

    import grpc
    from pulumi.automation._server import LanguageServer
    from pulumi.runtime.proto import language_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)])
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(_program(Path.cwd())), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return run_cli([pulumi, *argv, f"--client=127.0.0.1:{port}"])
    finally:
        server.stop(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
