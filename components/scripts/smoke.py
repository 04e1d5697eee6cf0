"""Smoke test of one served model, the way users reach it (through the gateway when the stack has
one), in the order of field report 12.3, then the route evidence of its topology (11.3,
route_evidence.py). Until --wait-seconds have passed, answers that only mean "not serving yet"
(refused connection, 502-504, the gateway's "no pods for this model") are retried: a rollout's
Ready can come before the endpoint serves. The first real failure ends it with exit status 1 and
says what was wrong."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import RequestFailed, call  # noqa: E402
from route_evidence import ROUTES, Expect, prove  # noqa: E402

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


CHECKS = ("reasoning", "tool-call")


def template_kwargs(reasoning_kwarg: str, reasoning: bool) -> dict:
    """chat_template_kwargs switching the model's reasoning (its profile's key, e.g. DeepSeek's
    `thinking`); nothing for a model without one."""
    return {"chat_template_kwargs": {reasoning_kwarg: reasoning}} if reasoning_kwarg else {}


def chat(endpoint: str, model: str, content: str, max_tokens: int, reasoning: bool, rid: str,
         wait_until: float | None = None, reasoning_kwarg: str = "", **extra) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": max_tokens, **template_kwargs(reasoning_kwarg, reasoning), **extra}
    answer = call(f"{endpoint}/chat/completions", body, request_id=rid, wait_until=wait_until)
    choices = answer.get("choices") or []
    if not choices:
        raise RequestFailed(f"no choices in the answer: {json.dumps(answer)[:300]}")
    return choices[0].get("message") or {}


def checks(endpoint: str, model: str, prompt: str, expected: str, max_tokens: int, prefix: str,
           expect: Expect, wait_until: float | None = None, wanted: tuple[str, ...] = CHECKS):
    def models():
        answer = call(f"{endpoint}/models", request_id=f"{prefix}-models", wait_until=wait_until)
        ids = [m.get("id") for m in answer.get("data") or []]
        if model not in ids:
            raise RequestFailed(f"/v1/models lists {ids}, not {model!r}")
        return f"/v1/models lists {model}"

    def deterministic():
        # Still waiting: the model list can come from AIBrix's metadata service before an engine serves.
        message = chat(endpoint, model, prompt, max_tokens, False, f"{prefix}-exact", wait_until, expect.reasoning_kwarg)
        text = (message.get("content") or "").strip()
        if text != expected:
            raise RequestFailed(f"temperature 0, reasoning off: expected {expected!r}, got {text!r}")
        return f"deterministic answer {text!r}"

    def reasoning():
        message = chat(endpoint, model, "What is 17 + 25? Answer with the number.", 512, True, f"{prefix}-reasoning",
                       reasoning_kwarg=expect.reasoning_kwarg)
        thought = message.get("reasoning_content") or message.get("reasoning")
        if not thought:
            raise RequestFailed("reasoning on: no separate reasoning field (reasoning_content) in the message; "
                                f"check the reasoning parser. Message: {json.dumps(message)[:300]}")
        return "reasoning returned in its own field"

    def tool_call():
        message = chat(endpoint, model, "What is the weather in Paris? Use the tool.", 256, False,
                       f"{prefix}-tool", reasoning_kwarg=expect.reasoning_kwarg, tools=[WEATHER_TOOL], tool_choice="auto")
        calls = message.get("tool_calls") or []
        if not calls or (calls[0].get("function") or {}).get("name") != "get_weather":
            raise RequestFailed(f"no structured get_weather tool call; check the tool-call parser. "
                                f"Message: {json.dumps(message)[:300]}")
        try:
            json.loads(calls[0]["function"].get("arguments") or "")
        except ValueError:
            raise RequestFailed(f"tool call arguments are not JSON: {calls[0]['function'].get('arguments')!r}") from None
        return "structured tool call get_weather"

    def route():
        return prove(endpoint, model, expect)

    optional = [(name, check) for name, check in (("reasoning", reasoning), ("tool-call", tool_call)) if name in wanted]
    return [("models", models), ("deterministic", deterministic), *optional, ("route", route)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", required=True, help="OpenAI-compatible base URL ending in /v1")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--expected", required=True)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--checks", default=",".join(CHECKS), help="comma-separated, of: " + ", ".join(CHECKS))
    p.add_argument("--reasoning-kwarg", default="", help="chat_template_kwargs key switching reasoning; empty sends none")
    p.add_argument("--wait-seconds", type=float, default=0, help="how long the endpoint may take to start serving")
    p.add_argument("--route", choices=ROUTES, default="service", help="the route the topology promises")
    p.add_argument("--prefill-pod-prefix", default="")
    p.add_argument("--decode-pod-prefix", default="")
    p.add_argument("--prefill-port", type=int, default=8000, help="prefill /metrics port on its pod")
    p.add_argument("--decode-port", type=int, default=8000, help="decode /metrics port on its pod")
    p.add_argument("--probe-words", type=int, default=512, help="prompt length of the P/D probes")
    p.add_argument("--settle-seconds", type=float, default=15, help="how long transfer counters may take to show")
    a = p.parse_args(argv)
    expect = Expect(route=a.route, prefill_pod_prefix=a.prefill_pod_prefix, decode_pod_prefix=a.decode_pod_prefix,
                    prefill_port=a.prefill_port, decode_port=a.decode_port, probe_words=a.probe_words,
                    settle_seconds=a.settle_seconds, reasoning_kwarg=a.reasoning_kwarg)
    wanted = tuple(c for c in a.checks.split(",") if c)
    if set(wanted) - set(CHECKS):
        p.error(f"--checks: unknown {sorted(set(wanted) - set(CHECKS))}")
    prefix = f"smoke-{uuid.uuid4().hex[:8]}"
    wait_until = time.monotonic() + a.wait_seconds
    steps = checks(a.endpoint, a.model, a.prompt, a.expected, a.max_tokens, prefix, expect, wait_until, wanted)
    for number, (name, check) in enumerate(steps, 1):
        try:
            print(f"smoke {number}/{len(steps)} {name}: ok, {check()}", flush=True)
        except RequestFailed as err:
            print(f"smoke {number}/{len(steps)} {name}: FAILED: {err}", file=sys.stderr)
            return 1
    print(f"smoke test of {a.model} passed (request ids {prefix}-*)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
