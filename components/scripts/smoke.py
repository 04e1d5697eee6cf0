"""Smoke test of one served model, in the order of field report 12.3; the first failure ends it
with exit status 1 and says what was wrong."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import RequestFailed, call  # noqa: E402

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def chat(endpoint: str, model: str, content: str, max_tokens: int, thinking: bool, rid: str, **extra) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": max_tokens, "chat_template_kwargs": {"thinking": thinking}, **extra}
    answer = call(f"{endpoint}/chat/completions", body, request_id=rid)
    choices = answer.get("choices") or []
    if not choices:
        raise RequestFailed(f"no choices in the answer: {json.dumps(answer)[:300]}")
    return choices[0].get("message") or {}


def checks(endpoint: str, model: str, prompt: str, expected: str, max_tokens: int, prefix: str):
    def models():
        ids = [m.get("id") for m in call(f"{endpoint}/models", request_id=f"{prefix}-models").get("data") or []]
        if model not in ids:
            raise RequestFailed(f"/v1/models lists {ids}, not {model!r}")
        return f"/v1/models lists {model}"

    def deterministic():
        text = (chat(endpoint, model, prompt, max_tokens, False, f"{prefix}-exact").get("content") or "").strip()
        if text != expected:
            raise RequestFailed(f"temperature 0, thinking off: expected {expected!r}, got {text!r}")
        return f"deterministic answer {text!r}"

    def reasoning():
        message = chat(endpoint, model, "What is 17 + 25? Answer with the number.", 512, True, f"{prefix}-reasoning")
        thought = message.get("reasoning_content") or message.get("reasoning")
        if not thought:
            raise RequestFailed("thinking on: no separate reasoning field (reasoning_content) in the message; "
                                f"check the reasoning parser. Message: {json.dumps(message)[:300]}")
        return "reasoning returned in its own field"

    def tool_call():
        message = chat(endpoint, model, "What is the weather in Paris? Use the tool.", 256, False,
                       f"{prefix}-tool", tools=[WEATHER_TOOL], tool_choice="auto")
        calls = message.get("tool_calls") or []
        if not calls or (calls[0].get("function") or {}).get("name") != "get_weather":
            raise RequestFailed(f"no structured get_weather tool call; check the tool-call parser. "
                                f"Message: {json.dumps(message)[:300]}")
        try:
            json.loads(calls[0]["function"].get("arguments") or "")
        except ValueError:
            raise RequestFailed(f"tool call arguments are not JSON: {calls[0]['function'].get('arguments')!r}") from None
        return "structured tool call get_weather"

    return [("models", models), ("deterministic", deterministic), ("reasoning", reasoning), ("tool-call", tool_call)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", required=True, help="OpenAI-compatible base URL ending in /v1")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--expected", required=True)
    p.add_argument("--max-tokens", type=int, default=32)
    a = p.parse_args(argv)
    prefix = f"smoke-{uuid.uuid4().hex[:8]}"
    for number, (name, check) in enumerate(checks(a.endpoint, a.model, a.prompt, a.expected, a.max_tokens, prefix), 1):
        try:
            print(f"smoke {number}/4 {name}: ok, {check()}")
        except RequestFailed as err:
            print(f"smoke {number}/4 {name}: FAILED: {err}", file=sys.stderr)
            return 1
    print(f"smoke test of {a.model} passed (request ids {prefix}-*)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
