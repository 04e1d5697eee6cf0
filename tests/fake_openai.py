"""Small servers on 127.0.0.1 that behave like the real ones, for running the day-2 scripts and the
same-pod proxy for real over HTTP: a vLLM engine (optionally with --api-key and a NixlConnector
side) and the AIBrix v0.7.0 gateway in front of engine pods. What they do and refuse is taken from
upstream_aibrix.py and upstream_vllm.py, which say where each behaviour was read."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from upstream_aibrix import NO_BACKENDS_HEADER, SHFS_PREFILL_PARAMS
from upstream_vllm import NIXL_FAILURE_COUNTERS, NIXL_TRANSFERS_HISTOGRAM
from upstream_vllm import UNAUTHORIZED as VLLM_UNAUTHORIZED


class _Server:
    def _start_server(self, handler, port: int = 0):
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
    or fails to (transfer_fails: counted as failed and recomputed, kv_load_failure_policy recompute)."""

    def __init__(self, model: str = "DeepSeek-V4-Flash", answer: str = "你好", reasoning: bool = True,
                 tool_calls: bool = True, fail_status: int | None = None, in_flight: float = 0,
                 api_key: str | None = None, kv_role: str | None = None, tp: int = 4,
                 transfer_fails: bool = False, port: int = 0):
        self.model, self.answer, self.reasoning, self.tool_calls = model, answer, reasoning, tool_calls
        self.fail_status, self.in_flight, self.api_key = fail_status, in_flight, api_key
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
                if engine.api_key and self.path.startswith("/v1") and \
                        self.headers.get("Authorization") != f"Bearer {engine.api_key}":
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

        self._start_server(Handler, port)

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
                 "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{labels}}} 0.0"]
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
        return f"127.0.0.1:{self.server.port}"


class FakeGateway(_Server):
    """The AIBrix v0.7.0 gateway as a client sees it: /v1/models from the metadata service, and the
    routing plugin's answers (pd pairs with SHFS injection, combined fallback for short prompts when
    bucketing, response headers, the no-backends refusals). routes=False: requests fall through to
    an HTTPRoute without the plugin routing them (no headers)."""

    def __init__(self, model: str, pods: list[Pod], strategy: str = "least-request", bucket_min_chars: int | None = None,
                 shfs: bool = True, not_ready_for: int = 0, routes: bool = True):
        self.model, self.pods, self.strategy, self.bucket_min_chars = model, pods, strategy, bucket_min_chars
        self.shfs, self.not_ready_for, self.routes = shfs, not_ready_for, routes
        self.requests: list[tuple[str, dict]] = []
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
        if self.strategy == "pd" and by_role["prefill"] and by_role["decode"] and not (
                self.bucket_min_chars and by_role["combined"] and len(prompt) < self.bucket_min_chars):
            prefill, decode = by_role["prefill"][0], by_role["decode"][0]
            pre = dict(body)
            if self.shfs:
                pre["kv_transfer_params"] = dict(SHFS_PREFILL_PARAMS)
            status, data = self._post(prefill, path, pre, headers)
            if status != 200:
                return 500, b'{"error":"prefill request failed"}', out
            params = json.loads(data).get("kv_transfer_params")
            if params:
                body = {**body, "kv_transfer_params": {**params, "remote_host": "127.0.0.1"}}
            out.update({"prefill-target-pod": prefill.name, "prefill-target-pod-ip": "127.0.0.1"})
            target = decode
        else:
            target = (by_role["combined"] or self.pods)[0]
        status, data = self._post(target, path, body, headers)
        if self.routes:
            out.update({"routing-strategy": self.strategy, "target-pod": target.name, "target-pod-ip": target.address})
        else:
            out = {}
        return status, data, out
