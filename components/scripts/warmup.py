"""Warm an engine for real traffic: every target concurrency x every input length (common and
near-maximum) x chat, reasoning and tool-call shapes. JIT fired under the first real load after
"startup complete" and drove p95 TTFT to 33 s (field report 8.2). Request ids carry a prefix of
their own so load-test statistics can exclude them. A first request waits up to --wait-seconds for
the endpoint to serve (openai_client: refused connections, 502-504 and the gateway's "no pods yet"
are retried), since Ready can come before it does; after it, any failed request fails the Job."""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import RequestFailed, call  # noqa: E402
from smoke import WEATHER_TOOL, template_kwargs  # noqa: E402


def prompt_of(tokens: int) -> str:
    """About `tokens` tokens of text (one short word is about one token)."""
    return " ".join(["hello"] * max(1, tokens - 8)) + "\nReply with one word."


def body(model: str, shape: str, tokens: int, output: int, reasoning_kwarg: str = "") -> dict:
    b = {"model": model, "messages": [{"role": "user", "content": prompt_of(tokens)}], "max_tokens": output,
         "temperature": 0, **template_kwargs(reasoning_kwarg, shape == "reasoning")}
    if shape == "tool":
        b.update(tools=[WEATHER_TOOL], tool_choice="auto")
    return b


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", required=True, help="comma-separated levels")
    p.add_argument("--input-tokens", required=True, help="comma-separated lengths")
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--shapes", default="chat,reasoning,tool")
    p.add_argument("--reasoning-kwarg", default="", help="chat_template_kwargs key switching reasoning; empty sends none")
    p.add_argument("--request-id-prefix", required=True)
    p.add_argument("--wait-seconds", type=float, default=0, help="how long the endpoint may take to start serving")
    a = p.parse_args(argv)
    url = f"{a.endpoint}/chat/completions"
    rid = f"{a.request_id_prefix}-ready"
    try:
        call(url, body(a.model, "chat", 8, 1, a.reasoning_kwarg), rid, wait_until=time.monotonic() + a.wait_seconds)
    except RequestFailed as err:
        print(f"warm-up request {rid} failed: {err}", file=sys.stderr)
        return 1
    total = 1
    for level in [int(x) for x in a.concurrency.split(",")]:
        for tokens in [int(x) for x in a.input_tokens.split(",")]:
            for shape in a.shapes.split(","):
                started = time.monotonic()
                ids = [f"{a.request_id_prefix}-c{level}-{tokens}-{shape}-{i}" for i in range(level)]
                with ThreadPoolExecutor(max_workers=level) as pool:
                    futures = {rid: pool.submit(call, url, body(a.model, shape, tokens, a.output_tokens, a.reasoning_kwarg), rid) for rid in ids}
                for rid, future in futures.items():
                    try:
                        answer = future.result()
                    except RequestFailed as err:
                        print(f"warm-up request {rid} failed: {err}", file=sys.stderr)
                        return 1
                    if not answer.get("choices"):
                        print(f"warm-up request {rid} returned no choices", file=sys.stderr)
                        return 1
                total += level
                print(f"warm-up c={level} input~{tokens} {shape}: {level} ok in {time.monotonic() - started:.1f}s")
    print(f"warm-up done: {total} requests, ids prefixed {a.request_id_prefix}-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
