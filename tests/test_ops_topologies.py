"""What each topology's smoke Job is told to prove, as rendered, and the same-pod proxy container
as rendered, started for real from its rendered command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import k8s_objects
from fake_openai import FakeEngine
from test_pd import rendered
from variants import render, variant_file

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
    with FakeEngine(api_key=KEY, kv_role="kv_producer") as prefill, FakeEngine(api_key=KEY, kv_role="kv_consumer") as decode:
        args, port = list(proxy["args"]), free_port()
        for flag, value in (("--port", port), ("--prefill-port", prefill.port), ("--decode-port", decode.port),
                            ("--host", "127.0.0.1")):
            args[args.index(flag) + 1] = str(value)
        proc = subprocess.Popen([sys.executable, str(SCRIPTS_DIR / script.name), *args],
                                env={**os.environ, "OPENAI_API_KEY": KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
            for _ in range(50):
                try:
                    body = urllib.request.urlopen(req, timeout=2).read().decode()
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                raise AssertionError(proc.stderr.read1().decode() if proc.poll() is not None else "proxy did not start")
        finally:
            proc.terminate()
            proc.wait(timeout=5)
    assert "DeepSeek-V4-Flash" in body
    ports = {c["name"]: c["ports"][0]["containerPort"] for c in pod["containers"] if c.get("ports")}
    assert proxy["args"][proxy["args"].index("--prefill-port") + 1] == str(ports["prefill"])
    assert proxy["args"][proxy["args"].index("--decode-port") + 1] == str(ports["decode"])


