"""What each topology's smoke and load-test Jobs are told to prove, as rendered, and the same-pod
proxy container as rendered, started for real from its rendered command line."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import upstream_kuberay as kuberay
from conftest import k8s_objects
from fake_openai import FakeEngine
from netpol import allowed
from test_aibrix_routing import controller_owned
from test_network_monitoring import pods_of
from test_pd import rendered
from test_pd import stack as pd_stack
from variants import render, sglang_stack, variant_file

from components.scripts import SCRIPT_FILES, SCRIPTS_DIR

KEY = "sk-test"


def smoke_flags(r) -> dict[str, str]:
    job = next(o for o in k8s_objects(r) if o["kind"] == "Job" and o["metadata"]["name"].startswith("smoke-"))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return dict(zip(args[1::2], args[2::2]))


def test_pd_smoke_expects_a_pair_of_the_fleets_head_pods():
    f = smoke_flags(rendered("pd", "rayclusterfleet", 24))
    assert f["--route"] == "pd"
    assert (f["--prefill-pod-prefix"], f["--decode-pod-prefix"]) == ("deepseek-v4-flash-prefill-", "deepseek-v4-flash-decode-")
    assert f["--prefill-port"] == f["--decode-port"] == "8000"


def test_hybrid_smoke_probes_above_the_pd_bucket():
    r = rendered("hybrid", "stormservice", 32)
    f = smoke_flags(r)
    assert f["--route"] == "hybrid"
    assert int(f["--probe-words"]) > 2049   # pd.promptLenBucketMinLength default


def test_same_pod_smoke_reads_both_engines_of_the_pod_it_was_routed_to():
    f = smoke_flags(rendered("pd-same-pod", "deployment", 8))
    assert (f["--route"], f["--prefill-port"], f["--decode-port"]) == ("same-pod", "8100", "8200")


def test_without_a_gateway_smoke_uses_the_service_and_claims_no_route():
    f = smoke_flags(render(variant_file(gateway={"enabled": False})))
    assert f["--route"] == "service" and ".svc.cluster.local:8000/v1" in f["--endpoint"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



@contextlib.contextmanager
def running_proxy(proxy: dict, prefill_port: int, decode_port: int, env: dict[str, str],
                  timeout: float) -> Iterator[str]:
    """The rendered same-pod proxy container's command line, its ports moved to free ones on loopback,
    run here with `env` (what Kubernetes would give it); yields its base URL once it listens."""
    args, port = list(proxy["args"]), free_port()
    for flag, value in (("--port", port), ("--prefill-port", prefill_port), ("--decode-port", decode_port),
                        ("--host", "127.0.0.1")):
        args[args.index(flag) + 1] = str(value)
    proc = subprocess.Popen([sys.executable, str(SCRIPTS_DIR / Path(proxy["command"][1]).name), *args],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.stderr.read1().decode() if proc.poll() is not None
                                         else "proxy did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)

def test_the_rendered_same_pod_proxy_starts_and_serves_with_the_key():
    objs = k8s_objects(rendered("pd-same-pod", "deployment", 8))
    dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] != "open-webui")
    pod = dep["spec"]["template"]["spec"]
    proxy = next(c for c in pod["containers"] if c["name"] == "proxy")
    script = Path(proxy["command"][1])
    assert proxy["command"][0] == "python3" and script.name in SCRIPT_FILES
    assert {"name": "scripts", "mountPath": str(script.parent), "readOnly": True} in proxy["volumeMounts"]
    key_env = next(e for e in proxy["env"] if e["name"] == "OPENAI_API_KEY")
    assert key_env["valueFrom"]["secretKeyRef"]["key"] == "api-key"
    # The rendered command line, ports moved to free ones, run against engines that need the key.
    with FakeEngine(api_key=KEY, kv_role="kv_producer") as prefill, FakeEngine(api_key=KEY, kv_role="kv_consumer") as decode, \
            running_proxy(proxy, prefill.port, decode.port, {"OPENAI_API_KEY": KEY}, timeout=5) as base:
        req = urllib.request.Request(f"{base}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        body = urllib.request.urlopen(req, timeout=2).read().decode()
    assert "DeepSeek-V4-Flash" in body
    ports = {c["name"]: c["ports"][0]["containerPort"] for c in pod["containers"] if c.get("ports")}
    assert proxy["args"][proxy["args"].index("--prefill-port") + 1] == str(ports["prefill"])
    assert proxy["args"][proxy["args"].index("--decode-port") + 1] == str(ports["decode"])




# ---- the load test: through the gateway, every engine checked idle first (field report 11.4) ----

def with_load_test(sf):
    ops = json.loads(sf.config["llm-serving:operations"])
    sf.config["llm-serving:operations"] = json.dumps({**ops, "loadTest": {"enabled": True}})
    return sf


LOAD_TEST_VARIANTS = {
    "vllm-deployment": lambda: variant_file(), "vllm-stormservice": lambda: pd_stack("combined", "stormservice", 8),
    "sglang-rolebasedgroup": sglang_stack, "pd": lambda: pd_stack("pd", "rayclusterfleet", 24),
    "pd-same-pod": lambda: pd_stack("pd-same-pod", "deployment", 8), "hybrid": lambda: pd_stack("hybrid", "stormservice", 32)}


@functools.lru_cache(maxsize=None)
def load_test_render(name: str):
    return render(with_load_test(LOAD_TEST_VARIANTS[name]()))


@pytest.mark.parametrize("name", list(LOAD_TEST_VARIANTS))
def test_load_test_goes_through_the_gateway_after_every_engine_is_idle(name):
    r = load_test_render(name)
    objs = k8s_objects(r)
    job = next(o for o in objs if o["kind"] == "Job" and o["metadata"]["name"].startswith("loadtest-"))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    plan = json.loads(args[args.index("--plan") + 1])
    smoke = smoke_flags(r)
    # The same way in as smoke and warm-up: the gateway's Envoy Service, not the model's Service.
    assert plan["endpoint"] == smoke["--endpoint"] and "envoy-" in plan["endpoint"]
    assert all(flag_value(rnd["argv"], "--base-url") == plan["endpoint"].removesuffix("/v1") for rnd in plan["rounds"])
    ns = job["metadata"]["namespace"]
    (svc,) = [o for o in objs if o["kind"] == "Service" and plan["engines"]["host"] == f"{o['metadata']['name']}.{ns}.svc.cluster.local"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    selector = svc["spec"]["selector"]
    engine_pods = [p for p in pods_of(objs) if p.labels.get("app.kubernetes.io/component") == "engine"]
    assert engine_pods and all(all(p.labels.get(k) == v for k, v in selector.items()) for p in engine_pods)
    selected = [p for p in pods_of(objs) if all(p.labels.get(k) == v for k, v in selector.items())]
    assert selected == engine_pods   # no Job or OpenWebUI pod among the scraped
    # Each engine pod serves /metrics on every port the check scrapes, and our Job may reach it there.
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    loadtest_pod = next(p for p in pods_of([job]))
    for pod in engine_pods:
        engine_ports = {port for pname, port in pod.ports.items() if pname in ("engine", "prefill", "decode")}
        assert set(plan["engines"]["ports"]) <= engine_ports, (name, pod.ports)
        for port in plan["engines"]["ports"]:
            assert allowed(policies, loadtest_pod, pod, port), (name, port)
    assert plan["engines"]["engine"] == ("sglang" if name.startswith("sglang") else "vllm")
    # A name no controller derives for our workloads.
    owned = controller_owned(r)
    assert ("Service", ns, svc["metadata"]["name"]) not in owned and not kuberay.is_head_service_name(svc["metadata"]["name"])


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_same_pod_load_test_checks_both_engines_of_the_pod():
    plan_ports = json.loads(next(
        a for o in k8s_objects(load_test_render("pd-same-pod")) if o["kind"] == "Job" and o["metadata"]["name"].startswith("loadtest-")
        for a in o["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("{")))["engines"]["ports"]
    assert plan_ports == [8100, 8200]
