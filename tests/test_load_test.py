"""The load test run for real (components/scripts/load_test.py, with a `vllm` on PATH that behaves like
`vllm bench serve`) through a fake AIBrix gateway in front of several fake engines, the way field
report 11.4 measured: rounds reach the P/D path the gateway picks, the engines see the gateway's
request ids (the round's prefix survives in the result files), and no round starts while any engine
is busy or cannot be read."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
import upstream_sglang as sglang
import upstream_vllm as vllm
from fake_openai import FakeEngine, FakeGateway, Pod, bench_executable

from components import ops_commands as ops
from config_model import LoadScenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "components" / "scripts"))
import load_test  # noqa: E402
from openai_client import IN_FLIGHT_GAUGES  # noqa: E402

HOST = "deepseek-v4-flash-engines.llm-serving-dev.svc.cluster.local"
MODEL = "DeepSeek-V4-Flash"
SHORT = LoadScenario(input_len=16, output_len=4, concurrency=2, num_prompts=6, num_warmups=2)
LONG = LoadScenario(input_len=600, output_len=4, concurrency=2, num_prompts=4, num_warmups=2)


@pytest.fixture
def cluster_dns(monkeypatch):
    """The headless Service's DNS name: one A record per engine pod (set by the test)."""
    records: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host == HOST:
            if not records:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0)) for ip in records]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return records


@pytest.fixture
def bench(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bench_executable(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    results = tmp_path / "results"
    results.mkdir()
    return results


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run(gateway: FakeGateway, results: Path, scenarios, ports: tuple[int, ...], engine="vllm", timeout=10.0) -> int:
    plan = ops.load_test_plan(f"http://localhost:{gateway.port}/v1", MODEL, "/models/DeepSeek-V4-Flash-0731",
                              "deepseek_v4", scenarios, "bench-t", ops.Engines(HOST, ports, engine))
    return load_test.main(["--plan", plan, "--results", str(results), "--idle-timeout", str(timeout),
                           "--idle-poll", "0.05"])


def results_of(results: Path) -> dict[str, dict]:
    """Round name -> its result JSON, from <results>/<round>/<run>/*.json."""
    return {f.parent.parent.name: json.loads(f.read_text()) for f in results.glob("*/*/*.json")}


def test_pd_rounds_reach_the_gateways_pair_and_keep_their_prefix_in_the_results(cluster_dns, bench):
    port = free_port("127.0.0.2")
    with FakeEngine(kv_role="kv_producer", host="127.0.0.2", port=port) as prefill, \
            FakeEngine(kv_role="kv_consumer", host="127.0.0.3", port=port) as decode, \
            FakeGateway(MODEL, [Pod("p-prefill-0", prefill, "prefill"), Pod("p-decode-0", decode, "decode")],
                        strategy="pd") as gateway:
        cluster_dns[:] = ["127.0.0.2", "127.0.0.3"]
        assert run(gateway, bench, [SHORT, LONG], (port,)) == 0
        sent = (1 + 2 + 6) + (1 + 2 + 4)                  # ready check, warm-ups, prompts per round
        assert gateway.routed == [("p-prefill-0", "p-decode-0")] * sent
        assert decode.transfers == prefill.tp * sent
        seen = [h.get("X-Request-Id") for eng in (prefill, decode) for p, h, _ in eng.requests if p == "/v1/completions"]
    # The engines get the gateway's ids, the same on both halves of a request; never the round's.
    assert len(seen) == 2 * sent and len(set(seen)) == sent and not any(i.startswith("bench-t") for i in seen)
    rounds = results_of(bench)
    assert not (bench / load_test.LOCK).exists()
    assert set(rounds) == {"bench-t-r0-16x4-c2", "bench-t-r1-600x4-c2"}
    for name, result in rounds.items():
        assert result["request_id_prefix"].startswith(f"{name}-") and result["failed"] == 0


def test_a_rerun_of_the_same_plan_gets_new_prefixes(cluster_dns, bench):
    with FakeEngine(host="127.0.0.2") as engine, FakeGateway(MODEL, [Pod("c-0", engine)]) as gateway:
        cluster_dns[:] = ["127.0.0.2"]
        assert run(gateway, bench, [SHORT], (engine.port,)) == 0
        # Same second, same plan: the run's random part alone keeps the prefixes apart.
        assert run(gateway, bench, [SHORT], (engine.port,)) == 0
    prefixes = {json.loads(f.read_text())["request_id_prefix"] for f in bench.glob("*/*/*.json")}
    assert len(prefixes) == 2 and len(list(bench.glob("bench-t-r0-16x4-c2/*"))) == 2


def test_hybrid_rounds_go_where_the_gateway_buckets_them(cluster_dns, bench):
    port = free_port("127.0.0.2")
    with FakeEngine(kv_role="kv_producer", host="127.0.0.2", port=port) as prefill, \
            FakeEngine(kv_role="kv_consumer", host="127.0.0.3", port=port) as decode, \
            FakeEngine(host="127.0.0.4", port=port) as combined, \
            FakeGateway(MODEL, [Pod("h-prefill-0", prefill, "prefill"), Pod("h-decode-0", decode, "decode"),
                                Pod("h-0", combined, "combined")], strategy="pd", bucket_min_chars=2000) as gateway:
        cluster_dns[:] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert run(gateway, bench, [SHORT, LONG], (port,)) == 0
    # 16 words stay under the P/D bucket (combined pod), 600 words (~3600 characters) reach the pair.
    assert gateway.routed == [(None, "h-0")] * 9 + [("h-prefill-0", "h-decode-0")] * 7


def test_no_round_starts_while_any_engine_is_busy_or_unreadable(cluster_dns, bench, capsys):
    port = free_port("127.0.0.2")
    with FakeEngine(host="127.0.0.2", port=port) as idle, \
            FakeEngine(host="127.0.0.3", port=port, in_flight=2, waiting=1) as busy, \
            FakeEngine(host="127.0.0.4", port=port, metrics_status=500) as unreadable, \
            FakeGateway(MODEL, [Pod("c-0", idle), Pod("c-1", busy), Pod("c-2", unreadable)]) as gateway:
        cluster_dns[:] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        posts_while_busy = []

        def settle():
            for step in ("running", "waiting", "scrape"):
                time.sleep(0.15)
                posts_while_busy.append(sum(len(e.requests) - sum(p == "/metrics" for p, _, _ in e.requests)
                                            for e in (idle, busy, unreadable)))
                if step == "running":
                    busy.in_flight = 0
                elif step == "waiting":
                    busy.waiting = 0
                else:
                    unreadable.metrics_status = 200

        mover = threading.Thread(target=settle)
        mover.start()
        code = run(gateway, bench, [SHORT], (port,))
        mover.join()
    assert code == 0 and posts_while_busy == [0, 0, 0] and len(gateway.routed) == 9
    out = capsys.readouterr().out
    assert f"http://127.0.0.3:{port}/metrics: 3 requests running or waiting" in out
    assert f"http://127.0.0.3:{port}/metrics: 1 requests running or waiting" in out
    assert f"http://127.0.0.4:{port}/metrics failed: HTTP Error 500" in out


@pytest.mark.parametrize("case,reason", [
    ("no-pods", f"{HOST} does not resolve"),
    ("nothing-listening", "failed:"),
    ("no-gauges", "exports no vllm:num_requests_running, vllm:num_requests_waiting"),
    ("same-pod-decode-busy", "1 requests running or waiting"),
    ("sglang-queue", "1 requests running or waiting"),
    ("vllm-gauges-on-sglang", "exports no sglang:num_running_reqs"),
])
def test_engines_that_are_not_idle_keep_the_round_from_starting(cluster_dns, bench, capsys, case, reason):
    ip = "127.0.0.2"
    with FakeEngine(host=ip, gauges=case != "no-gauges", sglang=case == "sglang-queue",
                    waiting=1 if case == "sglang-queue" else 0) as prefill, \
            FakeEngine(host=ip, in_flight=1 if case == "same-pod-decode-busy" else 0) as decode, \
            FakeGateway(MODEL, [Pod("s-0", prefill)]) as gateway:
        cluster_dns[:] = [] if case == "no-pods" else [ip]
        ports = (prefill.port, decode.port) if case == "same-pod-decode-busy" else (
            (free_port(ip),) if case == "nothing-listening" else (prefill.port,))
        engine = "sglang" if case in ("sglang-queue", "vllm-gauges-on-sglang") else "vllm"
        code = run(gateway, bench, [SHORT], ports, engine=engine, timeout=0.1)
    assert code == 1 and gateway.routed == [] and not list(bench.glob("*/*"))
    assert "engines not idle" in (err := capsys.readouterr().err) and reason in err


def test_an_idle_sglang_engine_lets_the_round_start(cluster_dns, bench):
    with FakeEngine(host="127.0.0.2", sglang=True) as engine, FakeGateway(MODEL, [Pod("g-0", engine)]) as gateway:
        cluster_dns[:] = ["127.0.0.2"]
        assert run(gateway, bench, [SHORT], (engine.port,), engine="sglang") == 0
    assert len(gateway.routed) == 9


def test_the_idle_gauges_are_the_engines_own():
    for engine, metrics in (("vllm", vllm.METRICS), ("sglang", sglang.METRICS)):
        for gauge in IN_FLIGHT_GAUGES[engine]:
            assert metrics[gauge][0] == "gauge", gauge
