"""The smoke and warm-up scripts through a gateway shaped like AIBrix v0.7.0's, and the same-pod
P/D proxy in front of engines shaped like vLLM's: run for real over HTTP, pass and fail cases.
Upstream behaviour is cited in upstream_aibrix.py and upstream_vllm.py."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import upstream_aibrix as aibrix
import upstream_vllm as vllm
from fake_openai import FakeEngine, FakeGateway, Pod, _Server
from prometheus_client.parser import text_string_to_metric_families

SCRIPTS = Path(__file__).resolve().parent.parent / "components" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import load_test  # noqa: E402
import openai_client  # noqa: E402
import pd_proxy  # noqa: E402
import route_evidence  # noqa: E402
import smoke  # noqa: E402
import warmup  # noqa: E402

MODEL = "DeepSeek-V4-Flash"
KEY = "sk-test"


@pytest.fixture(autouse=True)
def key_and_fast_polls(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY_FILE", raising=False)
    monkeypatch.setattr(openai_client, "POLL_SECONDS", 0.2)


def run_smoke(endpoint: str, *extra: str) -> int:
    return smoke.main(["--endpoint", f"{endpoint}/v1", "--model", MODEL, "--prompt", "只回答：你好",
                       "--expected", "你好", "--settle-seconds", "0.5", "--reasoning-kwarg", "thinking", *extra])


def test_scripts_use_the_upstream_names():
    assert (route_evidence.ROUTING_STRATEGY, route_evidence.TARGET_POD, route_evidence.TARGET_POD_IP) == \
        aibrix.GATEWAY_RESPONSE_HEADERS[:3]
    assert (route_evidence.PREFILL_POD, route_evidence.PREFILL_POD_IP) == aibrix.PD_RESPONSE_HEADERS
    assert route_evidence.TRANSFERS == f"{vllm.NIXL_TRANSFERS_HISTOGRAM}_count"
    assert route_evidence.FAILURES == tuple(f"{n}_total" for n in vllm.NIXL_FAILURE_COUNTERS)
    assert openai_client.NOT_YET_HEADER == aibrix.NO_BACKENDS_HEADER
    assert pd_proxy.PREFILL_ONLY == aibrix.SHFS_PREFILL_PARAMS


# ---- dual-fleet P/D and hybrid through the gateway ----

def pd_smoke(capsys, gateway_kwargs=None, decode_kwargs=None, with_combined=False):
    with FakeEngine(api_key=KEY, kv_role="kv_both") as prefill, \
            FakeEngine(api_key=KEY, kv_role="kv_both", **(decode_kwargs or {})) as decode, FakeEngine(api_key=KEY) as combined:
        pods = [Pod("ds-prefill-x7k2p-head-abcde", prefill, "prefill"), Pod("ds-decode-q9w8e-head-fghij", decode, "decode")]
        route = "pd"
        if with_combined:
            pods.append(Pod("ds-6d5f7c-xyz12", combined, "combined"))
            route = "hybrid"
        kwargs = {"strategy": "pd", **(gateway_kwargs or {})}
        with FakeGateway(MODEL, pods, **kwargs) as gw:
            code = run_smoke(gw.base, "--route", route, "--prefill-pod-prefix", "ds-prefill-",
                             "--decode-pod-prefix", "ds-decode-", "--prefill-port", str(prefill.port),
                             "--decode-port", str(decode.port), "--probe-words", "300")
        decode_bodies = [b for p, _, b in decode.requests if p == "/v1/chat/completions"]
    out = capsys.readouterr()
    return code, out.out + out.err, decode_bodies


def test_pd_smoke_passes_with_a_pair_transfers_and_no_failures(capsys):
    code, out, decode_bodies = pd_smoke(capsys)
    assert code == 0, out
    assert "smoke 5/5 route: ok, ds-prefill-x7k2p-head-abcde -> ds-decode-q9w8e-head-fghij: 4 NIXL transfers" in out
    assert all(b["kv_transfer_params"]["remote_host"] == "127.0.0.1" for b in decode_bodies)


@pytest.mark.parametrize("gateway_kwargs,decode_kwargs,message", [
    ({"shfs": False}, {}, "did not grow"),                                # nkv-connector-type nixl: no SHFS injection
    ({}, {"transfer_fails": True}, "KV transfer failures grew"),          # recomputed after a failed load
    ({"strategy": "least-request"}, {}, "did not pick a prefill/decode pair"),
    ({"routes": False}, {}, "no target-pod header"),                      # HTTPRoute fallback, plugin did not route
])
def test_pd_smoke_fails_without_each_piece_of_evidence(capsys, gateway_kwargs, decode_kwargs, message):
    code, out, _ = pd_smoke(capsys, gateway_kwargs, decode_kwargs)
    assert code == 1
    assert "smoke 5/5 route: FAILED" in out and message in out


def test_hybrid_smoke_needs_long_prompts_on_pd_and_short_ones_on_combined(capsys):
    code, out, _ = pd_smoke(capsys, {"bucket_min_chars": 1000}, with_combined=True)
    assert code == 0, out
    assert "short prompt to combined pod ds-6d5f7c-xyz12" in out
    code, out, _ = pd_smoke(capsys, {}, with_combined=True)   # bucketing off: everything goes P/D
    assert code == 1 and "prompt-length bucketing is off" in out


def test_combined_smoke_needs_the_gateway_to_route(capsys):
    with FakeEngine(api_key=KEY) as engine:
        with FakeGateway(MODEL, [Pod("ds-abc-1", engine)], strategy="prefix-cache") as gw:
            assert run_smoke(gw.base, "--route", "combined") == 0
        with FakeGateway(MODEL, [Pod("ds-abc-1", engine)], routes=False) as gw:
            assert run_smoke(gw.base, "--route", "combined") == 1
    assert "the gateway routed to ds-abc-1 by prefix-cache" in capsys.readouterr().out


# ---- waiting for the endpoint ----

def test_smoke_waits_while_the_gateway_has_no_ready_pod(capsys):
    with FakeEngine(api_key=KEY) as engine, FakeGateway(MODEL, [Pod("ds-abc-1", engine)], not_ready_for=3) as gw:
        assert run_smoke(gw.base, "--route", "combined", "--wait-seconds", "30") == 0
    with FakeEngine(api_key=KEY) as engine, FakeGateway(MODEL, [Pod("ds-abc-1", engine)], not_ready_for=3) as gw:
        assert run_smoke(gw.base, "--route", "combined") == 1
    assert "smoke 2/5 deterministic: FAILED:" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_smoke_and_warmup_wait_for_a_refused_connection_to_open():
    port = free_port()
    late = FakeEngine(port=port)
    threading.Timer(1.0, late.__enter__).start()
    try:
        assert run_smoke(f"http://127.0.0.1:{port}", "--wait-seconds", "20") == 0
    finally:
        late.__exit__()
    port = free_port()
    assert run_smoke(f"http://127.0.0.1:{port}") == 1           # no wait: the first refusal fails
    late = FakeEngine(port=port)
    threading.Timer(1.0, late.__enter__).start()
    try:
        assert warmup.main(["--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m", "--concurrency", "1",
                            "--input-tokens", "16", "--request-id-prefix", "w", "--wait-seconds", "20"]) == 0
    finally:
        late.__exit__()


def test_wrong_answers_are_not_waited_for(capsys):
    with FakeEngine(answer="Hello") as engine:
        started = time.monotonic()
        assert run_smoke(engine.base, "--wait-seconds", "60") == 1
    assert time.monotonic() - started < 10
    assert "expected '你好', got 'Hello'" in capsys.readouterr().err


# ---- same-pod 4P+4D behind our proxy ----

class Proxy(_Server):
    def __init__(self, prefill: FakeEngine, decode: FakeEngine, key: str | None = KEY):
        engines = pd_proxy.Engines(("127.0.0.1", prefill.port), ("127.0.0.1", decode.port), key, 30)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), pd_proxy.handler(engines))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)


def same_pod(**decode_kwargs):
    prefill = FakeEngine(api_key=KEY, kv_role="kv_producer")
    decode = FakeEngine(api_key=KEY, kv_role="kv_consumer", **decode_kwargs)
    return prefill, decode


def test_same_pod_passes_its_own_smoke_through_the_gateway_and_the_proxy(capsys):
    prefill, decode = same_pod()
    with prefill, decode, Proxy(prefill, decode) as proxy, \
            FakeGateway(MODEL, [Pod("ds-7f9c-abcde", proxy)], strategy="least-request") as gw:
        code = run_smoke(gw.base, "--route", "same-pod", "--prefill-port", str(prefill.port),
                         "--decode-port", str(decode.port), "--probe-words", "300")
        pre = [b for p, _, b in prefill.requests if p == "/v1/chat/completions"]
        keys = {h.get("Authorization") for p, h, _ in prefill.requests + decode.requests if p.startswith("/v1")}
    out = capsys.readouterr().out
    assert code == 0, out
    assert "smoke 3/5 reasoning: ok" in out and "smoke 4/5 tool-call: ok" in out
    assert "smoke 5/5 route: ok, pod ds-7f9c-abcde: 4 NIXL transfers" in out
    assert keys == {f"Bearer {KEY}"}
    assert all(b["max_tokens"] == 1 and b["kv_transfer_params"] == aibrix.SHFS_PREFILL_PARAMS for b in pre)


def test_same_pod_smoke_fails_when_the_decode_recomputes(capsys):
    prefill, decode = same_pod(transfer_fails=True)
    with prefill, decode, Proxy(prefill, decode) as proxy, FakeGateway(MODEL, [Pod("ds-7f9c-abcde", proxy)]) as gw:
        code = run_smoke(gw.base, "--route", "same-pod", "--prefill-port", str(prefill.port),
                         "--decode-port", str(decode.port))
    assert code == 1 and "KV transfer failures grew" in capsys.readouterr().err


def test_the_proxy_without_the_key_gets_401_from_the_engines(capsys):
    # What the image's proxy did: no key to engines that require one.
    prefill, decode = same_pod()
    with prefill, decode, Proxy(prefill, decode, key=None) as proxy:
        assert run_smoke(proxy.base) == 1
    assert "HTTP 401" in capsys.readouterr().err


def test_the_proxy_asks_clients_for_the_key_and_refuses_silent_recompute(monkeypatch):
    prefill, decode = same_pod()
    plain = FakeEngine(api_key=KEY)   # no KV connector: no kv_transfer_params from the prefill
    with prefill, decode, plain, Proxy(prefill, decode) as proxy, Proxy(plain, decode) as broken:
        monkeypatch.setenv("OPENAI_API_KEY", "wrong")
        with pytest.raises(openai_client.RequestFailed, match="HTTP 401"):
            openai_client.call(f"{proxy.base}/v1/models")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        with pytest.raises(openai_client.RequestFailed, match="HTTP 502.*no kv_transfer_params"):
            openai_client.call(f"{broken.base}/v1/completions", {"model": MODEL, "prompt": "hi"})
        assert not [p for p, _, _ in decode.requests if p == "/v1/completions"]
        with pytest.raises(openai_client.RequestFailed, match="HTTP 404"):
            openai_client.call(f"{proxy.base}/v1/embeddings", {"model": MODEL, "input": "x"})


def test_the_proxy_streams_completions_as_the_load_test_sends_them():
    prefill, decode = same_pod()
    with prefill, decode, Proxy(prefill, decode) as proxy:
        req = urllib.request.Request(f"{proxy.base}/v1/completions", json.dumps(
            {"model": MODEL, "prompt": "hi", "max_tokens": 16, "stream": True}).encode(),
            {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            lines = [line for line in resp.read().decode().splitlines() if line.startswith("data: ")]
        streamed = [b for p, _, b in decode.requests if p == "/v1/completions"]
    assert lines[-1] == "data: [DONE]" and "".join(
        json.loads(x[6:])["choices"][0]["delta"]["content"] for x in lines[:-1]) == "你好"
    assert streamed[0]["stream"] is True and streamed[0]["max_tokens"] == 16


def test_the_proxy_metrics_are_one_valid_exposition_of_both_engines():
    prefill, decode = same_pod()
    with prefill, decode, Proxy(prefill, decode) as proxy:
        text = urllib.request.urlopen(f"{proxy.base}/metrics", timeout=10).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    running = families["vllm:num_requests_running"].samples
    assert sorted(s.labels["pd_role"] for s in running) == ["decode", "prefill"]
    assert sum(1 for line in text.splitlines() if line.startswith("# TYPE vllm:num_requests_running ")) == 1


def test_same_pod_load_test_runs_through_the_proxy_once_both_engines_are_idle(tmp_path, monkeypatch, capsys):
    """The pod's proxy serves the rounds; the idle check reads each engine on its own port."""
    from fake_openai import bench_executable
    from test_operations import REPORT_C8

    from components import ops_commands as ops
    (tmp_path / "bin").mkdir()
    bench_executable(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for busy, expected in ((0, 0), (2, 1)):
        prefill, decode = same_pod(in_flight=busy)
        with prefill, decode, Proxy(prefill, decode) as proxy:
            engines = ops.Engines("127.0.0.1", (prefill.port, decode.port), "vllm")
            plan = ops.load_test_plan(f"http://localhost:{proxy.port}/v1", MODEL, "/models/x", "auto", [REPORT_C8],
                                      f"bench-{busy}", engines)
            assert load_test.main(["--plan", plan, "--results", str(tmp_path), "--idle-timeout", "0.2",
                                   "--idle-poll", "0.05"]) == expected
            if not busy:   # every prompt of the round went prefill -> decode
                assert decode.transfers == decode.tp * (1 + REPORT_C8.num_warmups + REPORT_C8.num_prompts)
    assert f"127.0.0.1:{decode.port}/metrics: 2 requests running or waiting" in capsys.readouterr().err
