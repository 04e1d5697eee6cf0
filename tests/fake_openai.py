"""A small OpenAI-compatible server on 127.0.0.1 for testing the day-2 scripts for real over HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeEngine:
    def __init__(self, model: str = "DeepSeek-V4-Flash", answer: str = "你好", reasoning: bool = True,
                 tool_calls: bool = True, fail_status: int | None = None, in_flight: float = 0):
        self.model, self.answer, self.reasoning, self.tool_calls = model, answer, reasoning, tool_calls
        self.fail_status, self.in_flight = fail_status, in_flight
        self.requests: list[tuple[str, dict, dict]] = []   # (path, headers, body)
        self.lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, payload, content_type="application/json"):
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with engine.lock:
                    engine.requests.append((self.path, dict(self.headers), {}))
                if self.path == "/v1/models":
                    return self._send(200, {"data": [{"id": engine.model}]})
                if self.path == "/metrics":
                    return self._send(200, f"# HELP x\nvllm:num_requests_running{{model_name=\"m\"}} {engine.in_flight}\n"
                                           "vllm:num_requests_waiting{model_name=\"m\"} 0.0\n", "text/plain")
                self._send(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with engine.lock:
                    engine.requests.append((self.path, dict(self.headers), body))
                if engine.fail_status:
                    return self._send(engine.fail_status, {"error": "boom"})
                message: dict = {"role": "assistant", "content": engine.answer}
                if (body.get("chat_template_kwargs") or {}).get("thinking") and engine.reasoning:
                    message["reasoning_content"] = "17 plus 25 is 42."
                if body.get("tools") and engine.tool_calls:
                    message["tool_calls"] = [{"id": "c1", "type": "function", "function": {
                        "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]
                self._send(200, {"choices": [{"index": 0, "message": message}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
