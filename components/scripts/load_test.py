"""Run `vllm bench serve` rounds one at a time, each only when nothing else is measuring: a lock on
the results volume keeps a second benchmark client out, and every engine of the model must answer
its /metrics with nothing running or waiting before a round starts. A leftover client once doubled
the concurrency of a whole table (field report 11.4).

Rounds go through the gateway, which replaces the client's x-request-id with its own (AIBrix
v0.7.0), so the round's request-id prefix, unique per run, is kept where it survives: in the result
JSON (`--metadata`) and the result directory's name."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import IN_FLIGHT_GAUGES, api_key, metric_sums, scrape  # noqa: E402

LOCK = ".benchmark.lock"


def acquire(results: str) -> str:
    path = os.path.join(results, LOCK)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        with open(path, encoding="utf-8") as f:
            holder = f.read().strip()
        raise SystemExit(f"another benchmark client holds {path} ({holder}); "
                         "remove the lock only after checking that no client is still running") from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    return path


def busy(engines: dict, timeout: float = 10) -> str | None:
    """None when every engine pod behind the headless name answered /metrics on every port with its
    in-flight gauges present and summing to zero; else why not. Unresolvable, unreachable or
    gauge-less counts as busy: an engine that cannot be read may be serving someone."""
    gauges = IN_FLIGHT_GAUGES[engines["engine"]]
    try:
        ips = sorted({a[4][0] for a in socket.getaddrinfo(engines["host"], None, type=socket.SOCK_STREAM)})
    except OSError as err:
        return f"{engines['host']} does not resolve ({err})"
    for ip in ips:
        for port in engines["ports"]:
            url = f"http://{f'[{ip}]' if ':' in ip else ip}:{port}/metrics"
            try:
                text = scrape(url, timeout)
            except (OSError, ValueError) as err:
                return f"{url} failed: {err}"
            exported = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line[:1] not in ("", "#")}
            if missing := [g for g in gauges if g not in exported]:
                return f"{url} exports no {', '.join(missing)}"
            if total := sum(metric_sums(text, gauges).values()):
                return f"{url}: {total:g} requests running or waiting"
    return None


def wait_idle(engines: dict, timeout: float, poll: float) -> str | None:
    """None once every engine is idle; the last reason if that did not happen within timeout."""
    deadline = time.monotonic() + timeout
    while (reason := busy(engines)) is not None and time.monotonic() < deadline:
        print(f"waiting for idle engines: {reason}", flush=True)
        time.sleep(poll)
    return reason


def round_argv(argv: list[str], results: str, name: str, run: str) -> list[str]:
    """The plan's command plus this run's request-id prefix, recorded in the result JSON, and its own
    result directory (vllm bench creates it)."""
    prefix = f"{name}-{run}-"
    return [*argv, "--request-id-prefix", prefix, "--metadata", f"request_id_prefix={prefix}",
            "--result-dir", os.path.join(results, name, run)]


def stop(signum, _frame) -> None:
    """SIGTERM (the Job deleted by the next rollout, or its activeDeadlineSeconds) ends the run through
    the `finally` that removes the lock. This script is the container's PID 1, for which the kernel
    drops a signal without a handler: the kubelet then kills it after the grace period, the lock
    stays on the claim, and every later load test refuses to start."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, stop)
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--plan", required=True, help="JSON plan built by components/ops_commands.load_test_plan")
    p.add_argument("--results", required=True, help="results volume")
    p.add_argument("--idle-timeout", type=float, default=300, help="seconds to wait for idle engines")
    p.add_argument("--idle-poll", type=float, default=2, help="seconds between idle checks")
    a = p.parse_args(argv)
    plan = json.loads(a.plan)
    # A re-run of the same Job (same plan) must not reuse a prefix: the run part is new every time.
    run = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"
    # SIGTERM is held back from the lock's creation until the `try` that removes it: delivered in
    # between, it would end the run with the lock left on the claim (measured under load).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        lock = acquire(a.results)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)   # a held lock: nothing of ours to remove
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for rnd in plan["rounds"]:
            if (reason := wait_idle(plan["engines"], a.idle_timeout, a.idle_poll)) is not None:
                print(f"round {rnd['name']}: engines not idle after {a.idle_timeout:.0f}s ({reason}); "
                      "another client may be using them, so this round would not be clean", file=sys.stderr)
                return 1
            command = round_argv(rnd["argv"], a.results, rnd["name"], run)
            print(f"round {rnd['name']}: {' '.join(command)}", flush=True)
            # vllm bench reads the key from its environment only: hand it over in-process, never in the pod spec.
            env = dict(os.environ, OPENAI_API_KEY=api_key() or "")
            if subprocess.run(command, env=env).returncode != 0:
                print(f"round {rnd['name']} failed", file=sys.stderr)
                return 1
        print(f"{len(plan['rounds'])} rounds done; results under {a.results}/<round>/{run}")
        return 0
    finally:
        os.remove(lock)


if __name__ == "__main__":
    sys.exit(main())
