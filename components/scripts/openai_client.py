"""Minimal OpenAI-compatible HTTP client and metrics reader, standard library only: the day-2 Jobs,
the same-pod P/D proxy and the preStop drain run it in plain python images."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

# Engine gauges of requests in flight (running plus queued): vLLM and SGLang spell them differently.
IN_FLIGHT_GAUGES = {"vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting"),
                    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs")}
IN_FLIGHT_METRICS = tuple(g for gauges in IN_FLIGHT_GAUGES.values() for g in gauges)
# Answers that mean "not serving yet" while a rollout settles, never "serving wrongly": connection
# refused or reset, Envoy without a healthy upstream (502/503/504), and the AIBrix v0.7.0 gateway's
# 400 for a model it has no pods for yet (pkg/plugins/gateway/gateway_req_body.go,
# validateModelAvailability sets x-error-no-model-backends; 503 when none is ready).
NOT_YET_STATUSES = (502, 503, 504)
NOT_YET_HEADER = "x-error-no-model-backends"
POLL_SECONDS = 5.0


class RequestFailed(RuntimeError):
    def __init__(self, message: str, not_yet: bool = False):
        super().__init__(message)
        self.not_yet = not_yet


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


def request(url: str, body: dict | None = None, request_id: str | None = None, timeout: float = 600,
            wait_until: float | None = None) -> tuple[dict, dict[str, str]]:
    """GET (no body) or POST JSON: the decoded JSON answer and the response headers (lower-case
    names), or RequestFailed saying what went wrong. Until the monotonic time wait_until, answers
    that only mean "not serving yet" are retried instead of failing."""
    while True:
        try:
            return _request_once(url, body, request_id, timeout)
        except RequestFailed as err:
            if not err.not_yet or wait_until is None or time.monotonic() + POLL_SECONDS > wait_until:
                raise
            print(f"waiting for {url}: {err}", flush=True)
            time.sleep(POLL_SECONDS)


def _request_once(url: str, body: dict | None, request_id: str | None, timeout: float) -> tuple[dict, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=_headers(request_id), method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode()), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:300]
        not_yet = err.code in NOT_YET_STATUSES or (err.code == 400 and err.headers.get(NOT_YET_HEADER) is not None)
        raise RequestFailed(f"{url} answered HTTP {err.code}: {detail}", not_yet) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
        raise RequestFailed(f"{url} failed: {err}", not_yet=True) from None
    except ValueError as err:
        raise RequestFailed(f"{url} failed: {err}") from None


def call(url: str, body: dict | None = None, request_id: str | None = None, timeout: float = 600,
         wait_until: float | None = None) -> dict:
    """GET (no body) or POST JSON; the decoded JSON answer, or RequestFailed saying what went wrong."""
    return request(url, body, request_id, timeout, wait_until)[0]


def metric_sums(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each named series summed over its label sets, from Prometheus text (absent names: 0)."""
    sums = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            try:
                sums[name] += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return sums


def scrape(metrics_url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(metrics_url, timeout=timeout) as resp:
        return resp.read().decode()


def in_flight(metrics_url: str, timeout: float = 10) -> float:
    """Requests running or queued on the engine behind metrics_url, from its Prometheus text."""
    text = scrape(metrics_url, timeout)
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
