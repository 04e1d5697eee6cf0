"""Minimal OpenAI-compatible HTTP client and metrics reader, standard library only: the day-2 Jobs
and the preStop drain run it in plain python images."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

# Engine gauges of requests in flight: vLLM and SGLang spell them differently.
IN_FLIGHT_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting",
                     "sglang:num_running_reqs", "sglang:num_queue_reqs")


class RequestFailed(RuntimeError):
    pass


def api_key() -> str | None:
    """The API key from the mounted Secret file (OPENAI_API_KEY_FILE), else from OPENAI_API_KEY."""
    path = os.environ.get("OPENAI_API_KEY_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return os.environ.get("OPENAI_API_KEY")


def _headers(request_id: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    key = api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if request_id:
        headers["X-Request-Id"] = request_id
    return headers


def call(url: str, body: dict | None = None, request_id: str | None = None, timeout: float = 600) -> dict:
    """GET (no body) or POST JSON; the decoded JSON answer, or RequestFailed saying what went wrong."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=_headers(request_id), method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:300]
        raise RequestFailed(f"{url} answered HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError, ValueError) as err:
        raise RequestFailed(f"{url} failed: {err}") from None


def in_flight(metrics_url: str, timeout: float = 10) -> float:
    """Requests running or queued on the engine behind metrics_url, from its Prometheus text."""
    with urllib.request.urlopen(metrics_url, timeout=timeout) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(IN_FLIGHT_METRICS):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return total


def wait_idle(metrics_url: str, timeout: float, poll: float = 2.0) -> bool:
    """True once the engine has nothing in flight, False if that did not happen within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if in_flight(metrics_url) == 0:
                return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
