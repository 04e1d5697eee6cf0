"""Faults of the object store, injected for real on loopback in front of tests/s3_server.py (issue 30,
scenario 5): the sync Job's real `aws` CLI meets them as it would meet a throttling or flaky store.

moto 5.2.5's server offers no per-request fault hooks (its /moto-api/ endpoints reset, seed, record and
replay state: moto/moto_api/_internal/urls.py), so faults come from a second HTTP proxy on loopback.
The CLI's HTTP_PROXY points here; each request is passed on, as a proxy request, to the COS-like front
door (which refuses path-style and finds the bucket in the host name) unless a fault is armed for it:
- slowdown: 503 with S3's own SlowDown error body, nothing passed on (Amazon S3 API Reference, "Error
  responses": SlowDown, "Please reduce your request rate.", 503 Service Unavailable);
- reset: the response head with the object's full Content-Length, half the body, then a TCP reset
  (SO_LINGER 0 and close): the client sees "connection reset by peer" in the middle of the object;
- cut: the same head and half body, then an orderly close: fewer bytes than Content-Length promised;
- truncate: a response that looks whole but holds half the object (a short Content-Length), as a
  broken proxy or gateway between the Job and the store may return; only a digest can tell.
Each fault hits a chosen object (the last part of the key) a given number of times, then requests
pass. Every request is logged (method, key, outcome), so a test can prove what was and was not
downloaded, and that nothing but GET and HEAD ever reached the bucket. Stdlib only; every socket
wait is bounded; stop() after the test.
"""

from __future__ import annotations

import http.client
import socket
import struct
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from s3_server import HOP_BY_HOP

KINDS = ("slowdown", "reset", "cut", "truncate")
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message>"
             b"<RequestId>FAULT0000000001</RequestId><HostId>s3-faults</HostId></Error>")
UPSTREAM_TIMEOUT = 30   # seconds: a request the front door does not answer fails the test, never hangs it
CHUNK = 64 * 1024


@dataclass
class Fault:
    kind: str
    name: str      # the object's name under the prefix (its key's last part)
    left: int      # requests it still hits


@dataclass(frozen=True)
class Request:
    method: str
    key: str       # object key ("" for a bucket request such as ListObjectsV2)
    outcome: str   # a fault's kind, or the status the front door answered


class FaultProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream_url: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        up = urlsplit(upstream_url)
        self.upstream = (up.hostname, up.port)
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def inject(self, kind: str, name: str, count: int) -> None:
        """The next `count` GETs of the object named `name` meet `kind`, then they pass; name "" hits
        the bucket's listings (ListObjectsV2) instead."""
        assert kind in KINDS and count > 0, (kind, count)
        with self.lock:
            self.faults.append(Fault(kind, name, count))

    def clear(self) -> None:
        with self.lock:
            self.faults, self.requests = [], []

    def log(self) -> list[Request]:
        with self.lock:
            return list(self.requests)

    def gets(self, name: str) -> list[str]:
        """The outcome of every GET of the object named `name`, in order."""
        return [r.outcome for r in self.log() if r.method == "GET" and r.key.rsplit("/", 1)[-1] == name]

    def requested(self) -> set[str]:
        """Names of the objects GET asked for, whatever the answer."""
        return {r.key.rsplit("/", 1)[-1] for r in self.log() if r.method == "GET" and r.key}

    def downloaded(self) -> set[str]:
        """Names of the objects whose GET was answered 200."""
        return {r.key.rsplit("/", 1)[-1] for r in self.log() if r.method == "GET" and r.key and r.outcome == "200"}

    def take(self, key: str) -> str | None:
        """The fault armed for this object GET or listing (key ""), if any (counted as used)."""
        name = key.rsplit("/", 1)[-1]
        with self.lock:
            for fault in self.faults:
                if fault.left > 0 and fault.name == name:
                    fault.left -= 1
                    return fault.kind
        return None

    def record(self, method: str, key: str, outcome: str) -> None:
        with self.lock:
            self.requests.append(Request(method, key, outcome))

    def handle_error(self, request, client_address) -> None:
        """Quiet about a client that vanished (a killed pod resets its idle connections); loud otherwise."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = UPSTREAM_TIMEOUT   # a client that stalls mid-request frees its thread

    def log_message(self, *args):  # quiet: the tests read the request log
        pass

    def _handle(self) -> None:
        srv: FaultProxy = self.server
        target = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        # Virtual-hosted: the bucket is in the host name, the path is the key.
        key = unquote(target.path.lstrip("/"))
        is_listing = self.command == "GET" and "list-type" in target.query
        is_object_get = self.command == "GET" and not is_listing and bool(key)
        kind = srv.take(key) if is_object_get or is_listing else None
        if kind == "slowdown":
            srv.record(self.command, key, kind)
            try:
                self._answer(503, "Slow Down", {"Content-Type": "application/xml"}, SLOW_DOWN)
            except OSError:
                self.close_connection = True
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        conn = http.client.HTTPConnection(*srv.upstream, timeout=UPSTREAM_TIMEOUT)
        try:
            # A proxy request (absolute URI) to the front door, which is itself the store's proxy.
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            if kind is not None and resp.status != 200:
                kind = None
            size = int(resp.getheader("Content-Length") or 0)
            send = size if kind is None else size // 2
            out = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"}
            self.send_response(resp.status, resp.reason)
            for k, v in out.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(send if kind in (None, "truncate") else size))
            self.end_headers()
            # Streamed as it comes: a download the front door holds back is half on disk (s3_server.hold).
            sent = 0
            while self.command != "HEAD" and sent < send:
                chunk = resp.read(min(CHUNK, send - sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            # The client went away mid-transfer (its pod was killed), or the front door did: no answer.
            srv.record(self.command, key, "broken")
            self.close_connection = True
            return
        finally:
            conn.close()
        srv.record(self.command, key, str(resp.status) if kind is None else kind)
        if kind in ("reset", "cut"):
            self.close_connection = True
            if kind == "reset":
                # Close with SO_LINGER 0: the kernel sends RST instead of FIN (socket(7)). The reader
                # holds the socket open too (makefile), so it goes first, or close() would not close it.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, status: int, reason: str, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status, reason)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):   # the connection was reset on purpose
            pass
