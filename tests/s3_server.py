"""A local S3-compatible store that behaves like COS for the sync Job's real `aws` CLI.

moto's server (pinned in requirements-s3.txt, its own virtualenv) keeps the objects; in front of it
a small HTTP proxy on loopback plays the store's front door:
- it refuses path-style requests with PathStyleDomainForbidden, as COS does (field report 3.2, 11.1):
  only `<bucket>.<endpoint host>` is served, so a sync that is not virtual-hosted fails for real;
- it is reached as the CLI's HTTP proxy (HTTP_PROXY), which is how `<bucket>.<endpoint host>` gets
  to loopback with no DNS: this machine resolves neither `*.localhost` nor any public name offline,
  and the rendered endpoint host is kept as is (only its scheme becomes http, no TLS here);
- it can slow every response down or die (close every connection unanswered), to interrupt a sync,
  or hold back half of one object until told, so a download cannot finish before the test looks;
- it can cap the bandwidth of object payloads, so a benchmark's download is network-bound as a real
  one is, instead of competing with the hashing for this machine's CPUs;
- with a TLS context (serve_tls) it also answers HTTPS: the CLI, given HTTPS_PROXY, asks for a tunnel
  to `<bucket>.<endpoint host>:443` (CONNECT), and the front door ends TLS itself with the server
  certificate of that context, as a store behind a private CA does (tests/test_sync_tls.py).
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

PROJECT_DIR = Path(__file__).resolve().parent.parent
S3_VENV = Path(os.environ.get("S3_VENV", PROJECT_DIR / ".venv-s3"))
AWS = S3_VENV / "bin" / "aws"
MOTO_SERVER = S3_VENV / "bin" / "moto_server"
# Headers a proxy must not pass on (RFC 9110 7.6.1).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade"}

PATH_STYLE_FORBIDDEN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PathStyleDomainForbidden</Code>'
                        b"<Message>The path style domain is forbidden, please use virtual-hosted style"
                        b"</Message></Error>")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CosFrontDoor(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend_port: int):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.backend_port = backend_port
        self.endpoint_host = ""      # requests must name <bucket>.<endpoint_host>
        self.delay_seconds = 0.0     # added before each object GET is answered
        self.dead = False            # close every connection without an answer
        self.gets = 0                # object GETs answered since the last reset
        self.link_bytes_per_s = 0.0  # object payloads share a link of this bandwidth (0: unlimited)
        self.link_free_at = 0.0
        self.hold_key = ""           # an object GET for this key waits until release()
        self.held = threading.Event()      # set once that GET arrived
        self.released = threading.Event()
        self.refused_path_style = 0
        self.tls: ssl.SSLContext | None = None   # serve_tls: CONNECT tunnels end in TLS here
        self.tls_failures: list[str] = []         # handshakes that failed (the client refused the certificate)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reset(self, endpoint_host: str) -> None:
        with self.lock:
            self.endpoint_host, self.delay_seconds, self.dead = endpoint_host, 0.0, False
            self.link_bytes_per_s = self.link_free_at = 0.0
            self.gets = self.refused_path_style = 0
            self.release()
            self.hold_key = ""

    def hold(self, key: str) -> None:
        """Send only half of `key` until release(): a download that cannot finish yet."""
        self.held.clear()
        self.released.clear()
        self.hold_key = key

    def release(self) -> None:
        self.released.set()

    def serve_tls(self, cert_file: str, key_file: str) -> None:
        """Answer CONNECT with a TLS server of this certificate; None again with stop_tls()."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.tls, self.tls_failures = context, []

    def stop_tls(self) -> None:
        self.tls = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the tests assert on outcomes
        pass

    def _proxy(self) -> None:
        srv: CosFrontDoor = self.server
        if srv.dead:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        target = urlsplit(self.path)
        host = (target.hostname or self.headers.get("Host", "").split(":")[0]).lower()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if not host.endswith("." + srv.endpoint_host):
            # The bucket is not in the host name: path-style (or the wrong endpoint). COS says so.
            with srv.lock:
                srv.refused_path_style += 1
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(PATH_STYLE_FORBIDDEN)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(PATH_STYLE_FORBIDDEN)
            return
        path = target.path + (f"?{target.query}" if target.query else "")
        is_object_get = self.command == "GET" and "list-type" not in target.query and target.path.count("/") > 1
        if is_object_get and srv.delay_seconds:
            time.sleep(srv.delay_seconds)
        if srv.dead:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = host   # moto finds the bucket in the host name, as a virtual-hosted store does
        conn = http.client.HTTPConnection("127.0.0.1", srv.backend_port, timeout=60)
        try:
            conn.request(self.command, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        if is_object_get and srv.link_bytes_per_s:
            # A network-bound download (field report 3.2: 437 MiB/s, far below what the CPUs hash):
            # each payload takes its turn on one link of the given bandwidth.
            with srv.lock:
                start = max(time.monotonic(), srv.link_free_at)
                srv.link_free_at = start + len(payload) / srv.link_bytes_per_s
                done_at = srv.link_free_at
            time.sleep(max(0.0, done_at - time.monotonic()))
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if is_object_get and srv.hold_key and target.path.endswith("/" + srv.hold_key):
            # Half the body now, the rest once released: the client has begun writing the object.
            self.wfile.write(payload[:len(payload) // 2])
            self.wfile.flush()
            srv.held.set()
            srv.released.wait(120)   # bounded: a test that fails never leaves the server hanging
            payload = payload[len(payload) // 2:]
        if self.command != "HEAD":
            self.wfile.write(payload)
        if is_object_get and resp.status == 200:
            with srv.lock:
                srv.gets += 1

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _proxy

    def do_CONNECT(self) -> None:
        """An HTTPS request through the proxy: the tunnel ends here, in TLS with the front door's
        certificate, and the requests inside it are handled as any other (their Host names the bucket)."""
        srv: CosFrontDoor = self.server
        if srv.tls is None:
            self.send_error(405, "this front door serves no TLS")
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        self.connection.settimeout(30)   # bounded: a stuck client never holds a thread for long
        try:
            tunnel = srv.tls.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError) as err:
            with srv.lock:
                srv.tls_failures.append(f"{type(err).__name__}: {err}")
            self.close_connection = True
            return
        try:
            _Handler(tunnel, self.client_address, srv)
        finally:
            self.close_connection = True
            try:
                tunnel.close()
            except OSError:
                pass


class LocalS3:
    """moto's server on loopback plus the COS-like front door; one per test session."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.log = open(workdir / "moto.log", "wb")
        self.proc = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start: {(workdir / 'moto.log').read_text()}")
                time.sleep(0.1)
        self.front = CosFrontDoor(self.port)
        threading.Thread(target=self.front.serve_forever, daemon=True).start()
        creds = workdir / "admin-credentials"
        creds.write_text("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
        # Setting up the bucket talks to moto directly (path-style on loopback): only the Job's
        # requests go through the COS-like front door.
        self.admin_env = {"PATH": f"{AWS.parent}:/usr/bin:/bin", "AWS_SHARED_CREDENTIALS_FILE": str(creds),
                          "AWS_CONFIG_FILE": str(workdir / "admin-config"), "AWS_DEFAULT_REGION": "us-east-1",
                          "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(workdir)}

    def admin(self, *args: str) -> None:
        subprocess.run([str(AWS), "--endpoint-url", f"http://127.0.0.1:{self.port}", *args],
                       env=self.admin_env, check=True, capture_output=True, text=True)

    def stop(self) -> None:
        self.front.shutdown()
        self.front.server_close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            # moto's SIGTERM handler is sys.exit(0) in the main thread (moto/server.py): under load its
            # werkzeug threads have outlived 10 s; the state is a throwaway, so kill it.
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()
