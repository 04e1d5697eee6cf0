"""e2e/pulumi_client.py hands the signals it gets to the CLI (issue 30: `pulumi up` interrupted for real):
a stand-in CLI that reports SIGINT and SIGTERM and exits with a code of its own shows each signal arrives,
twice in a row, and that the wrapper waits for the CLI and exits with its code instead of killing it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

CLIENT = Path(__file__).resolve().parent / "pulumi_client.py"
STAND_IN = textwrap.dedent("""\
    import signal, sys, time
    seen, told = [], 0
    # The handler only notes the signal: printing from it could land inside the main flow's print
    # (a reentrant write to stdout is a RuntimeError), so the loop reports what it noted.
    def note(signum, _frame):
        seen.append(signum)
    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)
    print("ready", flush=True)
    deadline = time.monotonic() + 20
    while told < 2 and time.monotonic() < deadline:
        while told < len(seen):
            print("got", signal.Signals(seen[told]).name, flush=True)
            told += 1
        time.sleep(0.05)
    time.sleep(0.3)   # still running after the signals: the wrapper must wait
    sys.exit(40 + len(seen))
""")


def test_signals_reach_the_cli_and_the_wrapper_waits_for_it(tmp_path):
    cli = tmp_path / "pulumi"
    cli.write_text(f"#!{sys.executable}\n{STAND_IN}")
    cli.chmod(0o755)
    proc = subprocess.Popen([sys.executable, str(CLIENT), "stack", "ls"], env={"PULUMI_CLI": str(cli)},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc.send_signal(sig)
        assert proc.stdout.readline().strip() == f"got {sig.name}"
        time.sleep(0.1)
    assert proc.wait(timeout=30) == 42


def test_a_cli_killed_by_a_signal_exits_as_a_shell_reports_it(tmp_path):
    # 128 + 9, as `pulumi up` killed by a CI runner's timeout shows in a shell; not sys.exit(-9)'s 247.
    cli = tmp_path / "pulumi"
    cli.write_text(f"#!{sys.executable}\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    cli.chmod(0o755)
    proc = subprocess.run([sys.executable, str(CLIENT), "stack", "ls"], env={"PULUMI_CLI": str(cli)}, timeout=30)
    assert proc.returncode == 128 + signal.SIGKILL
