"""Command lines of the day-2 Jobs, as pure functions that refuse what the field report warns about:
a Pod IP as endpoint (10), warm-ups below the concurrency (8.2), a smoke test without an expected
answer (12.3), a P/D probe that would not reach the P/D bucket (11.5)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from components.engines import SmokeSettings
from config_model import LoadScenario, Warmup, is_ip_host
from policy.engines import NAMES, vllm

SCRIPTS = "/opt/llm-serving"


class OpsConfigError(ValueError):
    """A Job that would measure or check the wrong thing."""


def checked_endpoint(endpoint: str) -> str:
    """An OpenAI-compatible base URL ending in /v1 whose host is a stable name."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OpsConfigError(f"endpoint {endpoint!r} is not an http(s) URL")
    if is_ip_host(endpoint):
        raise OpsConfigError(f"endpoint {endpoint!r} is an IP address; use the Service or gateway name, "
                             "a Pod IP changes on every re-creation (field report 10)")
    if not parts.path.rstrip("/").endswith("/v1"):
        raise OpsConfigError(f"endpoint {endpoint!r} must be the /v1 base URL")
    return endpoint.rstrip("/")


def gateway_endpoint(gateway_namespace: str, gateway_name: str, proxy_namespace: str) -> str:
    """The in-cluster /v1 URL of the Envoy proxy serving our Gateway, the way users reach models:
    Envoy Gateway v1.2.8 (what AIBrix v0.7.0 installs) names its Service
    envoy-<ns>-<name>-<sha256("<ns>/<name>")[:8]> (internal/utils/misc.go GetHashedName, at most 48
    characters before the hash), listening on the Gateway's port 80 (tests/upstream_envoy_gateway.py, tests/upstream_aibrix.py)."""
    ns_name = f"{gateway_namespace}/{gateway_name}"
    readable = ns_name.replace("/", "-")
    if len(readable) > 48:
        readable = readable[:48].rstrip("-")
    service = f"envoy-{readable}-{hashlib.sha256(ns_name.encode()).hexdigest()[:8]}"
    return f"http://{service}.{proxy_namespace}.svc.cluster.local/v1"


@dataclass(frozen=True)
class SmokeRoute:
    """What the smoke Job must see of the topology's route (components/scripts/route_evidence.py)."""
    route: str = "service"            # service | combined | pd | hybrid | same-pod
    prefill_pod_prefix: str = ""
    decode_pod_prefix: str = ""
    prefill_port: int = vllm.PORT
    decode_port: int = vllm.PORT
    probe_words: int = 512


# Warm-up request shape of each smoke check (components/scripts/warmup.py).
WARMUP_SHAPES = {"reasoning": "reasoning", "tool-call": "tool"}


def warmup_args(endpoint: str, served_model_name: str, warmup: Warmup, max_model_len: int | None, request_id_prefix: str,
                wait_seconds: int = 0, smoke: SmokeSettings | None = None) -> list[str]:
    """Every target concurrency x every common input length plus a near-maximum one (when the context
    is known), in chat and the model's reasoning and tool-call shapes (field report 8.2)."""
    lengths = set(warmup.input_tokens)
    if max_model_len is not None:
        lengths.add(int(max_model_len * warmup.near_max_input_fraction))
        if max(lengths) + warmup.output_tokens > max_model_len:
            raise OpsConfigError(f"warm-up input {max(lengths)} + output {warmup.output_tokens} tokens exceed maxModelLen {max_model_len}")
    checks = smoke.checks if smoke else tuple(WARMUP_SHAPES)
    return ["python3", f"{SCRIPTS}/warmup.py",
            "--endpoint", checked_endpoint(endpoint), "--model", served_model_name,
            "--concurrency", ",".join(str(c) for c in sorted(set(warmup.concurrency_levels))),
            "--input-tokens", ",".join(str(n) for n in sorted(lengths)),
            "--output-tokens", str(warmup.output_tokens),
            "--shapes", ",".join(["chat", *(WARMUP_SHAPES[c] for c in checks)]),
            "--reasoning-kwarg", (smoke.reasoning_kwarg or "") if smoke else "",
            "--request-id-prefix", request_id_prefix, "--wait-seconds", str(wait_seconds)]


def smoke_args(endpoint: str, served_model_name: str, smoke: SmokeSettings, max_tokens: int,
               route: SmokeRoute = SmokeRoute(), wait_seconds: int = 0, max_model_len: int | None = None) -> list[str]:
    """The checks of field report 12.3, in order: model list, exact deterministic answer, then the
    model's separate reasoning and structured tool call; then the route's evidence (11.3)."""
    if not smoke.expected_text.strip():
        raise OpsConfigError("the smoke test needs the exact expected answer (models[].smoke.expectedText)")
    if max_model_len is not None and route.probe_words + 64 > max_model_len:
        raise OpsConfigError(f"the P/D probe of {route.probe_words} words does not fit maxModelLen {max_model_len}")
    return ["python3", f"{SCRIPTS}/smoke.py",
            "--endpoint", checked_endpoint(endpoint), "--model", served_model_name,
            "--prompt", smoke.prompt, "--expected", smoke.expected_text, "--max-tokens", str(max_tokens),
            "--checks", ",".join(smoke.checks), "--reasoning-kwarg", smoke.reasoning_kwarg or "",
            "--wait-seconds", str(wait_seconds), "--route", route.route,
            "--prefill-pod-prefix", route.prefill_pod_prefix, "--decode-pod-prefix", route.decode_pod_prefix,
            "--prefill-port", str(route.prefill_port), "--decode-port", str(route.decode_port),
            "--probe-words", str(route.probe_words)]


@dataclass(frozen=True)
class Engines:
    """Every engine of a model, for the load test's idle check: a headless Service name resolving to
    each engine pod's IP (ready or not), the ports each pod serves /metrics on, and which engine's
    gauges count requests in flight (openai_client.IN_FLIGHT_GAUGES)."""
    host: str
    ports: tuple[int, ...]
    engine: str


def bench_round_args(endpoint: str, served_model_name: str, model_path: str, tokenizer_mode: str,
                     scenario: LoadScenario) -> list[str]:
    """One `vllm bench serve` round with the field report's fixed parameters (8.4, 11.4). The
    request-id prefix and result directory are load_test.py's: unique per run, known only then."""
    if scenario.num_warmups < scenario.concurrency:
        raise OpsConfigError(f"{scenario.num_warmups} warm-ups are below the concurrency {scenario.concurrency}; "
                             "the round would measure JIT (field report 8.2)")
    base = checked_endpoint(endpoint).removesuffix("/v1")
    return ["vllm", "bench", "serve",
            "--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions",
            "--model", model_path, "--served-model-name", served_model_name,
            "--tokenizer", model_path, "--tokenizer-mode", tokenizer_mode,
            "--dataset-name", "random",
            "--num-prompts", str(scenario.num_prompts), "--num-warmups", str(scenario.num_warmups),
            "--random-input-len", str(scenario.input_len), "--random-output-len", str(scenario.output_len),
            "--ignore-eos", "--temperature", "0", "--request-rate", scenario.request_rate,
            "--max-concurrency", str(scenario.concurrency),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
            "--save-result"]


def load_test_plan(endpoint: str, served_model_name: str, model_path: str, tokenizer_mode: str,
                   scenarios: list[LoadScenario], run_id: str, engines: Engines) -> str:
    """JSON plan for load_test.py: one named round per scenario against the endpoint users reach
    (the gateway: for P/D the gateway picks the pair, field report 11.4), and the engines whose
    gauges must read zero before each round."""
    if engines.engine not in NAMES or not engines.ports:
        raise OpsConfigError(f"no idle check for engine {engines.engine!r} on ports {engines.ports}")
    rounds = [{"name": f"{run_id}-r{i}-{sc.input_len}x{sc.output_len}-c{sc.concurrency}",
               "argv": bench_round_args(endpoint, served_model_name, model_path, tokenizer_mode, sc)}
              for i, sc in enumerate(scenarios)]
    return json.dumps({"endpoint": checked_endpoint(endpoint), "engines": {
        "host": engines.host, "ports": list(engines.ports), "engine": engines.engine}, "rounds": rounds},
        separators=(",", ":"))
