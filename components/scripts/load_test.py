"""Run `vllm bench serve` rounds one at a time, each only when nothing else is measuring: a lock on
the results volume keeps a second benchmark client out, and the engine must have no request in
flight before a round starts. A leftover client once doubled the concurrency of a whole table
(field report 11.4)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import api_key, wait_idle  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--plan", required=True, help="JSON plan built by components/ops_commands.load_test_plan")
    p.add_argument("--results", required=True, help="results volume")
    p.add_argument("--idle-timeout", type=float, default=300, help="seconds to wait for an idle engine")
    a = p.parse_args(argv)
    plan = json.loads(a.plan)
    metrics = plan["endpoint"].removesuffix("/v1") + "/metrics"
    lock = acquire(a.results)
    try:
        for rnd in plan["rounds"]:
            if not wait_idle(metrics, a.idle_timeout):
                print(f"round {rnd['name']}: the engine still has requests in flight after {a.idle_timeout:.0f}s; "
                      "another client is using it, so this round would not be clean", file=sys.stderr)
                return 1
            print(f"round {rnd['name']}: {' '.join(rnd['argv'])}", flush=True)
            # vllm bench reads the key from its environment only: hand it over in-process, never in the pod spec.
            env = dict(os.environ, OPENAI_API_KEY=api_key() or "")
            if subprocess.run(rnd["argv"], env=env).returncode != 0:
                print(f"round {rnd['name']} failed", file=sys.stderr)
                return 1
        print(f"{len(plan['rounds'])} rounds done; results under {a.results}")
        return 0
    finally:
        os.remove(lock)


if __name__ == "__main__":
    sys.exit(main())
