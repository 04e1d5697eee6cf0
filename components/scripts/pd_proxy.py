"""Same-pod 4P+4D proxy (field report 9): the pod's one entry point in front of a prefill and a
decode vLLM engine on loopback. It replaces the image's examples/.../disagg_proxy_multiturn.py
(vLLM v0.26.0, run in 9.2), which could not pass this topology's own smoke and load test: it sends
no API key to engines that require one (401 on every request), serves only POST
/v1/completions, POST /v1/chat/completions and GET /health (smoke's /v1/models and the load test's
/metrics get 404), and its non-streaming answers keep only the text, dropping reasoning and tool
calls (9.5). Standard library only, shipped in the scripts ConfigMap.

- The engines keep their --api-key (they listen on the pod IP for scraping); this proxy asks
  clients for the same key, or for a consumer's token (each --client-key-env names a variable that
  holds one, issue 21), and passes the shared key on, so nothing here serves without a key.
- Completions: the prefill runs with max_tokens 1 and kv_transfer_params {do_remote_decode: true}
  (vLLM's NixlConnector protocol, the same fields AIBrix v0.7.0's SHFS agent sends), then the
  decode gets the client's own request plus the prefill's kv_transfer_params and its answer goes
  back unchanged, streamed or not. No kv_transfer_params from the prefill is an error, never a
  silent recompute on the decode (11.3).
- GET /v1/models from the decode; GET /health is healthy when both engines are; GET /metrics is
  both engines' metrics, each sample labelled pd_role="prefill"|"decode".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_client import api_key  # noqa: E402

COMPLETIONS = ("/v1/chat/completions", "/v1/completions")
PREFILL_ONLY = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                "remote_block_ids": None, "remote_host": None, "remote_port": None}


def with_label(line: str, role: str) -> str:
    name, brace, rest = line.partition("{")
    if brace:
        return f'{name}{{pd_role="{role}"{"" if rest.startswith("}") else ","}{rest}'
    name, _, value = line.partition(" ")
    return f'{name}{{pd_role="{role}"}} {value}'


def merge_metrics(parts: list[tuple[str, str]]) -> str:
    """One exposition from several engines': every family once, its HELP/TYPE first, then the
    samples of every engine with its role as a label."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for role, text in parts:
        family = ""
        for line in text.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                family = line.split()[2]
                kept = headers.setdefault(family, [])
                samples.setdefault(family, [])
                if not any(h.startswith(line[:7]) for h in kept):
                    kept.append(line)
            elif line and not line.startswith("#"):
                name = line.split("{", 1)[0].split(" ", 1)[0]
                key = family if family and name.startswith(family) else name
                headers.setdefault(key, [])
                samples.setdefault(key, []).append(with_label(line, role))
    return "".join(line + "\n" for name in headers for line in headers[name] + samples[name])


class Engines:
    def __init__(self, prefill: tuple[str, int], decode: tuple[str, int], key: str | None, timeout: float,
                 client_keys: tuple[str, ...] = ()):
        self.prefill, self.decode, self.key, self.timeout = prefill, decode, key, timeout
        # What a client may present: the shared key and every consumer's token (vLLM's middleware
        # compares `Authorization` with "Bearer <key>" for each of its --api-key values).
        self.accepted = frozenset(f"Bearer {k}" for k in (key, *client_keys) if k)

    def open(self, side: tuple[str, int], method: str, path: str, body: dict | None = None,
             request_id: str | None = None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(*side, timeout=self.timeout)
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        if request_id:
            headers["X-Request-Id"] = request_id
        conn.request(method, path, None if body is None else json.dumps(body).encode(), headers)
        return conn, conn.getresponse()

    def fetch(self, side: tuple[str, int], method: str, path: str, body: dict | None = None,
              request_id: str | None = None) -> tuple[int, str, bytes]:
        conn, resp = self.open(side, method, path, body, request_id)
        try:
            return resp.status, resp.getheader("Content-Type", "application/json"), resp.read()
        finally:
            conn.close()


def handler(engines: Engines):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("pd-proxy %s\n" % (fmt % args))

        def _send(self, status: int, payload, content_type: str = "application/json"):
            data = payload if isinstance(payload, bytes) else (
                payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            # vLLM's own answer to a missing or wrong key (its --api-key middleware).
            if engines.accepted and self.headers.get("Authorization") not in engines.accepted:
                self._send(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self):
            try:
                if self.path == "/health":
                    ok = all(engines.fetch(side, "GET", "/health")[0] == 200
                             for side in (engines.prefill, engines.decode))
                    return self._send(200 if ok else 503, {"status": "ok" if ok else "engine not healthy"})
                if self.path == "/metrics":
                    parts = []
                    for role, side in (("prefill", engines.prefill), ("decode", engines.decode)):
                        status, _, data = engines.fetch(side, "GET", "/metrics")
                        if status != 200:
                            return self._send(502, {"error": f"{role} /metrics answered {status}"})
                        parts.append((role, data.decode()))
                    return self._send(200, merge_metrics(parts), "text/plain; version=0.0.4; charset=utf-8")
                if self.path.split("?", 1)[0] == "/v1/models":
                    if self._authorized():
                        status, ctype, data = engines.fetch(engines.decode, "GET", "/v1/models")
                        self._send(status, data, ctype)
                    return None
            except OSError as err:
                return self._send(502, {"error": f"engine unreachable: {err}"})
            return self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if path not in COMPLETIONS:
                return self._send(404, {"detail": "Not Found"})
            if not self._authorized():
                return None
            try:
                request = json.loads(raw)
            except ValueError:
                return self._send(400, {"error": "the body is not JSON"})
            rid = self.headers.get("X-Request-Id") or f"pd-{uuid.uuid4().hex}"
            try:
                return self._disaggregated(path, request, rid)
            except OSError as err:
                return self._send(502, {"error": f"engine unreachable: {err}"})

        def _disaggregated(self, path: str, request: dict, rid: str):
            prefill = {k: v for k, v in request.items() if k not in ("max_completion_tokens", "min_tokens", "stream_options")}
            prefill.update(stream=False, max_tokens=1, kv_transfer_params=dict(PREFILL_ONLY))
            status, ctype, data = engines.fetch(engines.prefill, "POST", path, prefill, rid)
            if status != 200:
                return self._send(status, data, ctype)
            params = json.loads(data).get("kv_transfer_params")
            if not params:
                return self._send(502, {"error": "the prefill returned no kv_transfer_params; the decode would "
                                                 "recompute the prompt, which is not P/D (field report 11.3)"})
            params["remote_host"] = engines.prefill[0]
            conn, resp = engines.open(engines.decode, "POST", path, {**request, "kv_transfer_params": params}, rid)
            try:
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type", "application/json"))
                length = resp.getheader("Content-Length")
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                # Streamed answers are relayed as they come (the body ends when the connection closes).
                while chunk := resp.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            finally:
                conn.close()
            return None

    return Handler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--prefill-host", default="127.0.0.1")
    p.add_argument("--prefill-port", type=int, required=True)
    p.add_argument("--decode-host", default="127.0.0.1")
    p.add_argument("--decode-port", type=int, required=True)
    p.add_argument("--timeout", type=float, default=600, help="seconds an engine may take to answer")
    p.add_argument("--client-key-env", action="append", default=[], metavar="VAR",
                   help="a variable holding one more key clients may present (a consumer's token); repeatable")
    a = p.parse_args(argv)
    missing = [v for v in a.client_key_env if not os.environ.get(v)]
    if missing:
        p.error(f"--client-key-env: {', '.join(missing)} not set")
    engines = Engines((a.prefill_host, a.prefill_port), (a.decode_host, a.decode_port), api_key(), a.timeout,
                      tuple(os.environ[v] for v in a.client_key_env))
    server = ThreadingHTTPServer((a.host, a.port), handler(engines))
    server.daemon_threads = True
    print(f"pd-proxy on {a.host}:{a.port}: prefill {a.prefill_host}:{a.prefill_port}, "
          f"decode {a.decode_host}:{a.decode_port}, key {'required' if engines.key else 'not set'}, {len(a.client_key_env)} consumer tokens", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
