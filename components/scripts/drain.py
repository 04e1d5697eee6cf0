"""preStop hook of engine containers: give endpoints time to drop the pod, then wait until the
engine has no request running or queued (or the timeout), so a rollout does not cut answers."""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import wait_idle  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--settle", type=float, default=10)
    p.add_argument("--timeout", type=float, required=True)
    a = p.parse_args(argv)
    time.sleep(a.settle)
    idle = wait_idle(f"http://127.0.0.1:{a.port}/metrics", a.timeout)
    print("drained" if idle else f"still busy after {a.timeout:.0f}s; stopping anyway", flush=True)
    return 0  # never block termination on the hook itself


if __name__ == "__main__":
    sys.exit(main())
