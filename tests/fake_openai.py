"""Small servers on 127.x addresses that behave like the real ones, for running the day-2 scripts and
the same-pod proxy for real over HTTP: a vLLM engine (optionally with --api-key and a NixlConnector
side) and the AIBrix v0.7.0 gateway in front of engine pods; and the load test's client, `vllm bench
serve`. What they do and refuse is taken from
upstream_aibrix.py and upstream_vllm.py, which say where each behaviour was read."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import stat
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from upstream_aibrix import (
    NO_BACKENDS_HEADER,
    PREFILL_BODY_DROPPED,
    PREFILL_BODY_OVERRIDES,
    SHFS_PREFILL_PARAMS,
    engine_request_id,
)
from upstream_vllm import (
    BENCH_METADATA_FLAG,
    BENCH_REQUEST_ID_HEADER,
    BENCH_STREAMS,
    GUARDED_PREFIX,
    NIXL_FAILURE_COUNTERS,
    NIXL_TRANSFERS_HISTOGRAM,
)
from upstream_vllm import UNAUTHORIZED as VLLM_UNAUTHORIZED


def vllm_authorized(tokens: list[str], method: str, path: str, authorization: str | None, release: str) -> bool:
    """vLLM's AuthenticationMiddleware (v0.26.0 vllm/entrypoints/serve/utils/server_utils.py, v0.33.0
    vllm/entrypoints/serve/middleware/authenticate.py), as written there: OPTIONS and paths outside
    GUARDED_PREFIX pass; else the header splits at its first space, the scheme must be `bearer` in any
    case, and the rest must equal one of the tokens (compared as SHA-256 digests, compare_digest)."""
    if method == "OPTIONS" or not path.startswith(GUARDED_PREFIX[release]):
        return True
    if not authorization:
        return False
    scheme, _, param = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    digest = hashlib.sha256(param.encode("utf-8")).digest()
    match = False
    for token in tokens:
        match |= secrets.compare_digest(digest, hashlib.sha256(token.encode("utf-8")).digest())
    return match


class _Server:
    def _start_server(self, handler, port: int = 0, host: str = "127.0.0.1"):
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def host(self) -> str:
        return self.server.server_address[0]

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _send(handler: BaseHTTPRequestHandler, status: int, payload, content_type="application/json",
          headers: dict[str, str] | None = None):
    data = payload if isinstance(payload, bytes) else (
        payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(data)


class FakeEngine(_Server):
    """vLLM's OpenAI server. kv_role set: a NixlConnector engine that answers a prefill-only request
    with kv_transfer_params and, given a prefill's params, reads the KV (one transfer per TP rank)
    or fails to (transfer_fails: counted as failed and recomputed, kv_load_failure_policy recompute).
    in_flight / waiting: its scheduler gauges; metrics_status: what /metrics answers (not 200: a
    failed scrape); gauges=False: a /metrics page without them; sglang: SGLang's gauges instead. host: any 127.x address, so several
    engines can share a port the way pods behind one headless Service do."""

    def __init__(self, model: str = "DeepSeek-V4-Flash", answer: str = "你好", reasoning: bool = True,
                 tool_calls: bool = True, fail_status: int | None = None, in_flight: float = 0,
                 api_key: str | list[str] | None = None, kv_role: str | None = None, tp: int = 4,
                 transfer_fails: bool = False, port: int = 0, host: str = "127.0.0.1", waiting: float = 0,
                 metrics_status: int = 200, gauges: bool = True, sglang: bool = False, release: str = "0.33.0"):
        self.model, self.answer, self.reasoning, self.tool_calls = model, answer, reasoning, tool_calls
        self.fail_status, self.in_flight, self.api_key = fail_status, in_flight, api_key
        # --api-key's list (several keys, issue 21) or one key; empties dropped, as vLLM does.
        self.tokens = [k for k in ([api_key] if isinstance(api_key, str) else api_key or []) if k]
        self.release = release
        self.waiting, self.metrics_status, self.gauges, self.sglang = waiting, metrics_status, gauges, sglang
        self.kv_role, self.tp, self.transfer_fails = kv_role, tp, transfer_fails
        self.engine_id = uuid.uuid4().hex
        self.transfers = 0
        self.failed = 0
        self.requests: list[tuple[str, dict, dict]] = []   # (path, headers, body)
        self.lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _refused(self) -> bool:
                if engine.tokens and not vllm_authorized(engine.tokens, self.command, self.path,
                                                         self.headers.get("Authorization"), engine.release):
                    _send(self, *VLLM_UNAUTHORIZED)
                    return True
                return False

            def do_GET(self):
                with engine.lock:
                    engine.requests.append((self.path, dict(self.headers), {}))
                if self._refused():
                    return None
                if self.path == "/v1/models":
                    return _send(self, 200, {"object": "list", "data": [{"id": engine.model, "object": "model"}]})
                if self.path == "/health":
                    return _send(self, 200, b"", "text/plain")
                if self.path == "/metrics":
                    if engine.metrics_status != 200:
                        return _send(self, engine.metrics_status, b"", "text/plain")
                    return _send(self, 200, engine.metrics(), "text/plain; version=0.0.4; charset=utf-8")
                return _send(self, 404, {"detail": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with engine.lock:
                    engine.requests.append((self.path, dict(self.headers), body))
                if self._refused():
                    return None
                if self.path not in ("/v1/chat/completions", "/v1/completions"):
                    return _send(self, 404, {"detail": "Not Found"})
                if engine.fail_status:
                    return _send(self, engine.fail_status, {"error": "boom"})
                answer = engine.complete(self.path, body)
                if not body.get("stream"):
                    return _send(self, 200, answer)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                text = answer["choices"][0].get("text") or answer["choices"][0]["message"].get("content") or ""
                for piece in (text[:1], text[1:]):
                    chunk = {"id": answer["id"], "choices": [{"index": 0, "delta": {"content": piece}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self._start_server(Handler, port, host)

    def complete(self, path: str, body: dict) -> dict:
        params = body.get("kv_transfer_params") or {}
        out: dict = {"id": f"cmpl-{uuid.uuid4().hex}"}
        if self.kv_role and params.get("do_remote_decode"):
            out["kv_transfer_params"] = {"do_remote_prefill": True, "do_remote_decode": False,
                                         "remote_block_ids": [[1, 2]], "remote_engine_id": self.engine_id,
                                         "remote_host": "0.0.0.0", "remote_port": 5600, "tp_size": self.tp}
        elif self.kv_role and params.get("do_remote_prefill") and params.get("remote_block_ids"):
            with self.lock:
                if self.transfer_fails:
                    self.failed += self.tp
                else:
                    self.transfers += self.tp
        if path == "/v1/completions":
            out["choices"] = [{"index": 0, "text": self.answer}]
            return out
        message: dict = {"role": "assistant", "content": self.answer}
        if (body.get("chat_template_kwargs") or {}).get("thinking") and self.reasoning:
            message["reasoning_content"] = "17 plus 25 is 42."
        if body.get("tools") and self.tool_calls:
            message["tool_calls"] = [{"id": "c1", "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]
        out["choices"] = [{"index": 0, "message": message}]
        return out

    def metrics(self) -> str:
        labels = f'engine="0",model_name="{self.model}"'
        lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                 "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} {self.in_flight}",
                 "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                 "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{labels}}} {self.waiting}"]
        if self.sglang:   # SchedulerMetricsCollector's gauges (upstream_sglang.py), no vLLM ones
            # With their TYPE lines, as prometheus_client writes every family: an untyped sample is no gauge to
            # a Prometheus parser (GIE v1.5.0's EPP reads it as 0: extractor/metrics/spec.go extractValue).
            lines = ["# TYPE sglang:num_running_reqs gauge",
                     f'sglang:num_running_reqs{{model_name="{self.model}"}} {self.in_flight}',
                     "# TYPE sglang:num_queue_reqs gauge",
                     f'sglang:num_queue_reqs{{model_name="{self.model}"}} {self.waiting}']
        if not self.gauges:
            lines = ["# HELP process_cpu_seconds Total user and system CPU time.", "# TYPE process_cpu_seconds counter",
                     "process_cpu_seconds_total 1.0"]
        if self.kv_role:   # registered only with a KV connector (NixlPromMetrics)
            h = NIXL_TRANSFERS_HISTOGRAM
            lines += [f"# HELP {h} Histogram of transfer duration for NIXL KV Cache transfers.", f"# TYPE {h} histogram",
                      f'{h}_bucket{{{labels},le="0.005"}} {float(self.transfers)}',
                      f'{h}_bucket{{{labels},le="+Inf"}} {float(self.transfers)}',
                      f"{h}_count{{{labels}}} {float(self.transfers)}", f"{h}_sum{{{labels}}} {self.transfers * 0.0003}"]
            for name in NIXL_FAILURE_COUNTERS:
                value = float(self.failed) if name.endswith("failed_transfers") else 0.0
                lines += [f"# HELP {name}_total x", f"# TYPE {name}_total counter", f"{name}_total{{{labels}}} {value}",
                          f"{name}_created{{{labels}}} 1.7e9"]
        return "\n".join(lines) + "\n"


@dataclass
class Pod:
    name: str
    server: _Server             # what answers on the pod's port
    role: str = "combined"      # prefill | decode | combined (AIBrix role-name)

    @property
    def address(self) -> str:   # target-pod-ip: "ip:port" (TargetAddress)
        return f"{self.server.host}:{self.server.port}"


class FakeGateway(_Server):
    """The AIBrix v0.7.0 gateway as a client sees it: /v1/models from the metadata service, and the
    routing plugin's answers (pd pairs with SHFS injection, combined fallback for short prompts when
    bucketing, response headers, the no-backends refusals). A routed request reaches its pods with the
    gateway's own X-Request-Id, never the client's. routes=False: requests fall through to an
    HTTPRoute without the plugin routing them (no headers, the client's own headers)."""

    def __init__(self, model: str, pods: list[Pod], strategy: str = "least-request", bucket_min_chars: int | None = None,
                 shfs: bool = True, not_ready_for: int = 0, routes: bool = True):
        self.model, self.pods, self.strategy, self.bucket_min_chars = model, pods, strategy, bucket_min_chars
        self.shfs, self.not_ready_for, self.routes = shfs, not_ready_for, routes
        self.requests: list[tuple[str, dict]] = []
        self.routed: list[tuple[str | None, str]] = []   # (prefill pod or None, target pod) per request
        self.lock = threading.Lock()
        gw = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v1/models":   # aibrix-metadata-service, no routing plugin
                    return _send(self, 200, {"object": "list", "data": [{"id": gw.model, "object": "model",
                                                                          "owned_by": "aibrix"}]})
                return _send(self, 404, b"", "text/plain")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with gw.lock:
                    gw.requests.append((self.path, body))
                    not_ready = gw.not_ready_for > 0
                    gw.not_ready_for -= 1
                if body.get("model") != gw.model:
                    return _send(self, 400, {"error": "model does not exist"}, headers={NO_BACKENDS_HEADER: body.get("model", "")})
                if not_ready:
                    return _send(self, 503, {"error": "error on getting pods"}, headers={NO_BACKENDS_HEADER: "true"})
                forward = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "x-request-id")}
                if gw.routes:
                    forward = {k: v for k, v in forward.items() if k.lower() == "authorization"}
                    forward["X-Request-Id"] = engine_request_id(dict(self.headers), str(uuid.uuid4()))
                status, data, headers = gw.route(self.path, body, forward)
                _send(self, status, data, headers=headers)

        self._start_server(Handler)

    def _post(self, pod: Pod, path: str, body: dict, headers: dict) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://{pod.address}{path}", json.dumps(body).encode(),
                                     {**headers, "Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def route(self, path: str, body: dict, headers: dict) -> tuple[int, bytes, dict]:
        by_role = {r: [p for p in self.pods if p.role == r] for r in ("prefill", "decode", "combined")}
        out = {"x-went-into-req-headers": "true", "request-id": str(uuid.uuid4())}
        prompt = json.dumps(body.get("messages") or body.get("prompt"))
        picked = None
        if self.strategy == "pd" and by_role["prefill"] and by_role["decode"] and not (
                self.bucket_min_chars and by_role["combined"] and len(prompt) < self.bucket_min_chars):
            prefill, decode = by_role["prefill"][0], by_role["decode"][0]
            pre = {k: v for k, v in body.items() if k not in PREFILL_BODY_DROPPED} | PREFILL_BODY_OVERRIDES
            if self.shfs:
                pre["kv_transfer_params"] = dict(SHFS_PREFILL_PARAMS)
            status, data = self._post(prefill, path, pre, headers)
            if status != 200:
                return 500, b'{"error":"prefill request failed"}', out
            params = json.loads(data).get("kv_transfer_params")
            if params:
                body = {**body, "kv_transfer_params": {**params, "remote_host": "127.0.0.1"}}
            out.update({"prefill-target-pod": prefill.name, "prefill-target-pod-ip": "127.0.0.1"})
            target, picked = decode, prefill
        else:
            target = (by_role["combined"] or self.pods)[0]
        status, data = self._post(target, path, body, headers)
        with self.lock:
            self.routed.append((picked.name if picked else None, target.name))
        if self.routes:
            out.update({"routing-strategy": self.strategy, "target-pod": target.name, "target-pod-ip": target.address})
        else:
            out = {}
        return status, data, out


# ---- the load test's client ----

def bench_serve(argv: list[str]) -> int:
    """`vllm bench serve` as the load test uses it (upstream_vllm.py BENCH_*): it refuses options it
    does not know, makes one ready-check request and --num-warmups requests without an id, then
    --num-prompts streamed completions at most --max-concurrency at a time, request i carrying
    `x-request-id: <prefix><i>`, and with --save-result writes the result JSON, the --metadata pairs
    in it, into --result-dir (created)."""
    if argv[:2] != ["bench", "serve"]:
        return 2
    p = argparse.ArgumentParser(prog="vllm bench serve", allow_abbrev=False)
    for flag in ("--backend", "--base-url", "--endpoint", "--model", "--served-model-name", "--tokenizer",
                 "--tokenizer-mode", "--dataset-name", "--temperature", "--request-rate", "--percentile-metrics",
                 "--metric-percentiles", "--result-dir"):
        p.add_argument(flag)
    for flag in ("--num-prompts", "--num-warmups", "--random-input-len", "--random-output-len", "--max-concurrency"):
        p.add_argument(flag, type=int)
    p.add_argument("--request-id-prefix", default=f"bench-{uuid.uuid4().hex[:8]}-")
    p.add_argument(BENCH_METADATA_FLAG, nargs="*", default=[])
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--save-result", action="store_true")
    a = p.parse_args(argv[2:])
    url = a.base_url + a.endpoint
    key = os.environ.get("OPENAI_API_KEY")
    body = {"model": a.served_model_name or a.model, "prompt": " ".join(["hello"] * a.random_input_len),
            "max_tokens": a.random_output_len, "stream": BENCH_STREAMS, "stream_options": {"include_usage": True},
            "ignore_eos": a.ignore_eos, "temperature": float(a.temperature or 0)}

    def one(request_id: str | None) -> bool:
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {}),
                   **({BENCH_REQUEST_ID_HEADER: request_id} if request_id else {})}
        req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                resp.read()
                return resp.status == 200
        except OSError:
            return False

    if not one(None):
        print("Initial test run failed", flush=True)
        return 1
    with ThreadPoolExecutor(max_workers=a.max_concurrency) as pool:
        list(pool.map(one, [None] * a.num_warmups))
        ok = list(pool.map(one, [f"{a.request_id_prefix}{i}" for i in range(a.num_prompts)]))
    if a.save_result:
        result = {"date": time.strftime("%Y%m%d-%H%M%S"), "backend": a.backend, "num_prompts": a.num_prompts,
                  **dict(m.split("=", 1) for m in getattr(a, BENCH_METADATA_FLAG[2:])),
                  "completed": sum(ok), "failed": len(ok) - sum(ok), "max_concurrency": a.max_concurrency}
        os.makedirs(a.result_dir or ".", exist_ok=True)
        name = f"openai-{a.request_rate}qps-concurrency{a.max_concurrency}-{a.model.rsplit('/', 1)[-1]}-{result['date']}.json"
        with open(os.path.join(a.result_dir or ".", name), "w", encoding="utf-8") as f:
            json.dump(result, f)
    return 0


def bench_executable(bin_dir) -> None:
    """A `vllm` on PATH that runs bench_serve with this interpreter."""
    tool = bin_dir / "vllm"
    tool.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\n"
                    "from fake_openai import bench_serve\nsys.exit(bench_serve(sys.argv[1:]))\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
