"""The Gateway API Inference Extension's endpoint picker for real (issue 31): GIE v1.5.0's EPP, built from its Go
module, watches an InferencePool (inference.networking.k8s.io/v1) and its pods through the local API server,
scrapes each Ready pod's metrics at podIP:targetPort/metrics and answers a gateway's ext_proc exchange with the
endpoint it picked (header x-gateway-destination-endpoint and envoy.lb metadata), as Envoy would ask it.

Pods live on kwok nodes of this file's own whose spec.podCIDR is in 127.31.0.0/16 (e2e/epp.py), so their
addresses are loopback ones and tests/fake_openai.py's engine answers there with vLLM's or SGLang's gauges.
Needed on the cluster: the InferencePool CRD (../shared/crds/gateway-api-inference-extension, v1.6.0's, whose
only change from v1.5.0 is an optional endpointPickerRef) and nothing else: cmd/epp/runner asks discovery
whether InferenceObjective and InferenceModelRewrite (inference.networking.x-k8s.io/v1alpha2) are served and
runs their controllers only if so (pkg/epp/server/controller_config.go); cluster.py installs both anyway.

The stack (e2e/stackfiles.py inference-pool: the dev stack on gateway.routingLayer inferencePool, two replicas)
starts on the aibrix layer and is switched with one `pulumi up` (e2e/routing_switch.py watches the order), which
creates the pool, the picker's Deployment, ConfigMap, Service and Role, and the HTTPRoute, whose Accepted and
ResolvedRefs it waits for, before it deletes the AIBrix route and the policy admitting AIBrix's proxies; no
gateway implementing InferencePool runs here, so the test writes them as one would (stand_in_gateway). The picker then runs with the args, env and config its Deployment and
ConfigMap hold, as its ServiceAccount: every pick is podIP:port of a Ready pod of the pool; a pod whose engine
reports a long queue (vllm:num_requests_waiting) is never picked, and the picks follow the queue when it moves;
the same long prompt goes back to the pod that served it although that pod's queue is now the longest (the
prefix-cache scorer); with no Ready pod the EPP answers an immediate 503; it dials loopback addresses only.
SGLang (raw objects: the stacks run SGLang on orchestrators without a controller here): the chart's SGLang args
(legacy metric flags) are refused at start; with the chart's SGLang config (core-metrics-extractor defaultEngine
"sglang") it picks by sglang:num_queue_reqs, while the vLLM names on the same pages say the opposite (the vLLM
config, run as a control, follows those). eppconfig (the EPP's own loader) accepts the chart's and the stack's
configs and refuses a broken one.
"""

from __future__ import annotations

import ipaddress
import json
import random
import sys
import threading
import time
import uuid
from pathlib import Path

import cluster
import epp
import pytest
import routing_switch as switch
import stackfiles
from harness import POLICY_LAUNCHER, log

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))   # after e2e/: e2e's modules keep their names
from fake_openai import FakeEngine  # noqa: E402

PORT = 8000  # the raw pools' serving port: their targetPorts, where the EPP scrapes /metrics
POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
STAND_IN = "e2e.llm-serving.io/stand-in-gateway"   # the controllerName this file writes route status under
LONG_QUEUE = 40
get = cluster.get


class PodEngine(FakeEngine):
    """tests/fake_openai.py's engine with the other gauges the EPP's core-metrics-extractor reads (GIE v1.5.0
    pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go defaultEngineConfigs): vLLM's
    vllm:kv_cache_usage_perc and vllm:cache_config_info (block_size, num_gpu_blocks labels), SGLang's
    sglang:token_usage. decoy: vLLM's queue gauge on an SGLang page, saying the opposite of SGLang's."""

    def __init__(self, *args, kv_usage: float = 0.0, decoy_waiting: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.kv_usage, self.decoy_waiting = kv_usage, decoy_waiting
        # The EPP drops a scrape it no longer waits for (its poll's deadline, its shutdown): no traceback for that.
        self.server.handle_error = lambda request, address: None

    def metrics(self) -> str:
        lines = [super().metrics().rstrip("\n")]
        if self.sglang:
            lines += ["# TYPE sglang:token_usage gauge", f'sglang:token_usage{{model_name="{self.model}"}} {self.kv_usage}']
            if self.decoy_waiting is not None:
                lines += ["# TYPE vllm:num_requests_waiting gauge",
                          f'vllm:num_requests_waiting{{engine="0",model_name="{self.model}"}} {self.decoy_waiting}']
        else:
            labels = f'engine="0",model_name="{self.model}"'
            lines += ["# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{labels}}} {self.kv_usage}",
                      "# TYPE vllm:cache_config_info gauge",
                      'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="4096"} 1.0']
        return "\n".join(lines) + "\n"

    def scrapes(self) -> int:
        with self.lock:
            return sum(1 for path, _, _ in self.requests if path == "/metrics")


def scraped(engines, times: int = 2, seconds: float = 10) -> None:
    """Until the EPP has read every engine's /metrics `times` more times (it polls every 50 ms)."""
    start = {e.host: e.scrapes() for e in engines}
    deadline = time.monotonic() + seconds * cluster.WAIT_SCALE
    while any(e.scrapes() < start[e.host] + times for e in engines):
        assert time.monotonic() < deadline, f"the EPP did not scrape {[e.host for e in engines]} within {seconds:g} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def lo(request):
    """This file's namespace and its kwok node whose pods get 127.31.<n>.x."""
    request.getfixturevalue("cluster")   # the control plane (conftest.py); the name is the module's here
    if missing := epp.missing():
        pytest.fail(f"missing in .e2e/bin: {', '.join(missing)}; build them with `bash e2e/build-tools.sh gie`",
                    pytrace=False)
    tag = uuid.uuid4().hex[:6]
    ns, node = f"e2e-epp-{tag}", f"epp-{tag}"
    cluster.kubectl("create", "namespace", ns)
    try:
        with epp.loopback_node(node, node, random.randrange(256), 0) as cidr:
            deadline = time.monotonic() + 20 * cluster.WAIT_SCALE  # the default ServiceAccount (admission needs it)
            while "default" not in cluster.kubectl("get", "serviceaccounts", "-n", ns, "-o", "name"):
                assert time.monotonic() < deadline, "namespace's default ServiceAccount not created"
                time.sleep(0.3)
            try:
                yield ns, node, cidr
            finally:   # while the node is there: kwok deletes its pods at once (pod-delete stage), not the pod GC later
                cluster.kubectl("delete", "pods", "--all", "-n", ns, f"--timeout={30 * cluster.WAIT_SCALE:g}s")
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false")


def make_pool(ns: str, node: str, name: str, replicas: int) -> str:
    """An InferencePool and its pods (Pods, no controller: the test flips their readiness itself). The selector."""
    labels = {"app": f"{name}-engine"}
    objs = [{"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
             "metadata": {"name": name, "namespace": ns},
             "spec": {"selector": {"matchLabels": labels}, "targetPorts": [{"number": PORT}],
                      "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}}}}]
    objs += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{i}", "namespace": ns, "labels": labels},
              "spec": {**epp.pinned(node), "containers": [{"name": "engine", "image": "registry.invalid/engine:1",
                                                          "ports": [{"name": "http", "containerPort": PORT}]}]}}
             for i in range(replicas)]
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return f"app={name}-engine"


def write_config(ns: str, name: str, text: str) -> Path:
    # Under the cluster's state directory: an EPP left behind has it in its args, so `cluster.py down` stops it
    # (cluster.ours; "epp" is in cluster.ON_DEMAND).
    path = cluster.STATE / f"epp-{ns}" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def picks(addr: str, model: str, n: int, prompt: str = "") -> list[str]:
    return [epp.endpoint(epp.pick(addr, model, prompt or f"{uuid.uuid4().hex} what is 17 + 25?")) for _ in range(n)]


def test_eppconfig_reads_the_chart_configs(lo):
    ns, _, _ = lo
    for server_type in ("vllm", "sglang"):
        path = write_config(ns, f"eppconfig-{server_type}", epp.chart_config(server_type))
        done = epp.eppconfig(path)
        assert done.returncode == 0, f"eppconfig {path}: {done.stderr}"
        loaded = json.loads(done.stdout)
        profile = loaded["schedulingProfiles"]
        assert [p["name"] for p in profile] == ["default"]
        weights = {p["pluginRef"]: p["weight"] for p in profile[0]["plugins"]}
        # The loader adds the picker the profile lacks (pkg/epp/config/loader/defaults.go ensureSchedulingLayer).
        assert weights == {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3,
                           "max-score-picker": None}, weights
        types = {p["type"] for p in loaded["plugins"]}
        # The prefix scorer's data producer, the data layer and the parser come from the loader's defaults.
        assert {"approx-prefix-cache-producer", "metrics-data-source", "core-metrics-extractor", "openai-parser"} <= types
    broken = write_config(ns, "eppconfig-broken", epp.chart_config().replace("- type: queue-scorer", "- type: queue-scorr"))
    done = epp.eppconfig(broken)
    assert done.returncode == 1 and "plugin type 'queue-scorr' is not registered" in done.stderr, done


def stand_in_gateway(gw_ns: str, stop: threading.Event, gate=None) -> None:
    """The Gateway's controller as far as `pulumi up` waits on it (the route's Accepted and ResolvedRefs, the
    stack's pulumi.com/waitFor): no gateway that implements InferencePool runs here. Accepted when the parent
    Gateway exists; ResolvedRefs when each backendRef's InferencePool exists and a ReferenceGrant in its
    namespace lets HTTPRoutes of the gateway namespace reach InferencePools (Gateway API's ReferenceGrant rule);
    else False with the reason a conformant implementation gives (BackendNotFound, RefNotPermitted). gate(route), if
    given, runs before the first status it writes for a route (e2e/routing_switch.py Switch.gate)."""
    def condition(kind: str, ok: bool, reason: str, generation: int) -> dict:
        return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": reason,
                "observedGeneration": generation, "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    while not stop.wait(0.5):
        for route in get("httproutes", "-n", gw_ns)["items"]:
            parent, gen = route["spec"]["parentRefs"][0], route["metadata"]["generation"]
            gateways = {g["metadata"]["name"] for g in get("gateways", "-n", gw_ns)["items"]}
            resolved = "ResolvedRefs"
            for ref in (r for rule in route["spec"]["rules"] for r in rule.get("backendRefs", [])):
                pools = {p["metadata"]["name"] for p in get("inferencepools", "-n", ref["namespace"])["items"]}
                grants = [g for g in get("referencegrants", "-n", ref["namespace"])["items"]
                          if {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": gw_ns}
                          in g["spec"]["from"] and any(t["group"] == ref["group"] and t["kind"] == ref["kind"]
                                                       and t.get("name", ref["name"]) == ref["name"] for t in g["spec"]["to"])]
                resolved = ("BackendNotFound" if ref["name"] not in pools else
                            "RefNotPermitted" if not grants else resolved) if resolved == "ResolvedRefs" else resolved
            status = {"parents": [{"parentRef": parent, "controllerName": STAND_IN, "conditions": [
                condition("Accepted", parent["name"] in gateways, "Accepted" if parent["name"] in gateways
                          else "NoMatchingParent", gen),
                condition("ResolvedRefs", resolved == "ResolvedRefs", resolved, gen)]}]}
            old = [c["reason"] for p in route.get("status", {}).get("parents", []) for c in p["conditions"]]
            if old != [c["reason"] for c in status["parents"][0]["conditions"]]:
                if gate is not None and not old:
                    gate(route)
                cluster.kubectl("patch", "httproute", route["metadata"]["name"], "-n", gw_ns, "--subresource=status",
                                "--type=merge", "-p", json.dumps({"status": status}))


@pytest.fixture
def gpu_pool(request):
    """Two 8-GPU kwok nodes of a pool of this test's own, whose pods get 127.31.x.x."""
    request.getfixturevalue("cluster")
    pool = f"epp-gpu-{uuid.uuid4().hex[:6]}"
    first = random.randrange(255)
    with epp.loopback_node(f"{pool}-0", pool, first, 1, gpu=True), \
            epp.loopback_node(f"{pool}-1", pool, first + 1, 2, gpu=True):
        yield pool


def pin(pulumi, stack: str, pool: str) -> None:
    """The stack's GPU pool set to the test's nodes with one `pulumi config set-all --path`, as a user points a
    stack at a pool (e2e/test_day2.py budget_pool sets them one by one)."""
    pairs = ((f'gpuPool.nodeSelector["{epp.POOL_KEY}"]', pool),
             ("gpuPool.tolerations[0].key", "nvidia.com/gpu"), ("gpuPool.tolerations[0].operator", "Exists"),
             ("gpuPool.tolerations[0].effect", "NoSchedule"), ("gpuPool.tolerations[1].key", epp.POOL_KEY),
             ("gpuPool.tolerations[1].operator", "Equal"), ("gpuPool.tolerations[1].value", pool),
             ("gpuPool.tolerations[1].effect", "NoSchedule"))
    pulumi.run("config", "set-all", "--path", *(a for path, value in pairs
                                                 for a in ("--plaintext", f"llm-serving:{path}={value}")), stack=stack)


def the_stacks_picker(ns: str, pool: dict) -> tuple[list[str], dict[str, str], Path]:
    """The args, env and config of the EPP Deployment the stack rendered for the pool (read back from the API
    server), the config written where the args now point; the env's downward-API values filled in."""
    name = pool["spec"]["endpointPickerRef"]["name"]
    deployment = get("deployment", name, "-n", ns)
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = list(container["args"])
    at = args.index("--config-file") + 1
    mount = next(m for m in container["volumeMounts"] if args[at].startswith(m["mountPath"].rstrip("/") + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    key = args[at][len(mount["mountPath"].rstrip("/")) + 1:]
    config = write_config(ns, "stack-" + key.removesuffix(".yaml"),
                          get("configmap", volume["configMap"]["name"], "-n", ns)["data"][key])
    args[at] = str(config)
    labels = deployment["spec"]["selector"]["matchLabels"]
    (pod,) = get("pods", "-n", ns, "-l", ",".join(f"{k}={v}" for k, v in labels.items()))["items"]
    fields = {"metadata.namespace": ns, "metadata.name": pod["metadata"]["name"]}
    env = {e["name"]: e.get("value") or fields[e["valueFrom"]["fieldRef"]["fieldPath"]] for e in container.get("env", [])}
    env["KUBECONFIG"] = str(epp.sa_kubeconfig(ns, spec["serviceAccountName"], config.parent / "sa.kubeconfig"))
    return args, env, config


def test_stack_pool_picks(pulumi, gpu_pool):
    """The stack's own InferencePool and picker objects, from `pulumi up` on the inferencePool layer; the stack
    started on the AIBrix layer and was switched with `pulumi config set-all` and one `pulumi up`
    (e2e/routing_switch.py: both routes exist until the new one is accepted, the engines untouched)."""
    name = "inference-pool"
    ns = stackfiles.init(pulumi, name)
    pin(pulumi, name, gpu_pool)
    # The same stack file on the AIBrix layer first, on the Gateway AIBrix installs (e2e/cluster.py has it).
    target = dict(stackfiles.INFERENCE_POOL_GATEWAY)
    switch.set_gateway(pulumi, name, switch.AIBRIX, remove=("implementation",))
    # A gateway namespace of this run's own (a deleted one takes a while to go).
    gw_ns = target["namespace"] = f"e2e-epp-gw-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": gw_ns}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": target["name"], "namespace": gw_ns},
         "spec": {"gatewayClassName": "e2e-stand-in", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                                                                      "allowedRoutes": {"namespaces": {"from": "All"}}}]}}]}))
    stop = threading.Event()
    watch: switch.Switch | None = None
    gateway: threading.Thread | None = None
    try:
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=600)
        log(f"{name}: up on the aibrix layer {up.seconds:.1f} s")
        (old_route,) = get("httproutes", "-n", switch.AIBRIX["namespace"], "-l", f"llm-serving.io/namespace={ns}")["items"]
        before = switch.engines(ns)
        assert len(before[0]) == 2 and before[1], before
        watch = switch.Switch(ns, gw_ns, old_route["metadata"]["name"], STAND_IN)
        gateway = threading.Thread(target=stand_in_gateway, args=(gw_ns, stop, watch.gate), daemon=True)
        gateway.start()
        up = watch.up(pulumi, name, target)
        log(f"{name}: the switch's up {up.seconds:.1f} s")
        watch.check(before)
        (pool,) = get("inferencepools", "-n", ns)["items"]
        selector = ",".join(f"{k}={v}" for k, v in pool["spec"]["selector"]["matchLabels"].items())
        port = pool["spec"]["targetPorts"][0]["number"]
        ips = epp.ready_pods(ns, selector, 2, epp.LOOPBACK_NET)
        assert set(ips) == set(before[0]), f"the pool's pods {sorted(ips)}, the engines before the switch {before[0]}"
        args, env, config = the_stacks_picker(ns, pool)
        done = epp.eppconfig(config)
        assert done.returncode == 0, f"eppconfig of the stack's ConfigMap: {done.stderr}"
        model = json.loads(pulumi.run("config", "get", "llm-serving:models", stack=name).output.split("\n", 1)[1])[0][
            "servedModelName"]
        engines = {n: PodEngine(model=model, host=ip, port=port) for n, ip in sorted(ips.items())}
        a, b = sorted(engines)
        at = {n: f"{ip}:{port}" for n, ip in ips.items()}
        with engines[a], engines[b], epp.Epp(f"{ns}-stack", args, env) as picker:
            log(f"{name}: the stack's picker SERVING after {picker.wait_serving():.1f} s, as its ServiceAccount")
            engines[a].waiting = LONG_QUEUE
            scraped(engines.values())
            first = epp.pick(picker.addr, model)
            log(f"{name}: EPP answer, {a} queued: {json.dumps(first)}")
            chosen = picks(picker.addr, model, 5) + [epp.endpoint(first)]
            assert set(chosen) == {at[b]}, f"picked {chosen}; {a} ({at[a]}) has {LONG_QUEUE} waiting\n{picker.tail()}"
            engines[a].waiting, engines[b].waiting = 0, LONG_QUEUE
            scraped(engines.values())
            assert set(picks(picker.addr, model, 5)) == {at[a]}, "the picks did not follow the queue"
            engines[b].waiting = 0
            prefix_affinity(picker, engines, at, model)
            peers = picker.peers()
            assert peers and all(ipaddress.ip_address(p).is_loopback for p in peers), f"the EPP dialled {peers}"
            no_ready_pod(picker, ns, sorted(ips), model, at)
    finally:
        stop.set()
        if gateway is not None:
            gateway.join(timeout=10)
        if watch is not None:
            watch.stop()
        pulumi.run("destroy", "--yes", "--skip-preview", stack=name, timeout=600, check=False)
        cluster.kubectl("delete", "namespace", gw_ns, "--wait=false")


def prefix_affinity(picker: epp.Epp, engines: dict, at: dict, model: str) -> None:
    """The same long prompt twice: the pod that served it is picked again (prefix-cache scorer, weight 3) even
    though its queue is now the longest (queue-scorer, weight 2: 0 for it, 1 for the others), which alone
    would send the prompt elsewhere."""
    pod_at = {v: k for k, v in at.items()}
    for _ in range(3):
        scraped(engines.values())
        prompt = f"{uuid.uuid4().hex} " + " ".join(random.choice(("kv", "cache", "prefix", "route", "pool"))
                                                  for _ in range(600))
        served = picks(picker.addr, model, 1, prompt)[0]
        engines[pod_at[served]].waiting = 5
        scraped(engines.values())
        assert picks(picker.addr, model, 1)[0] != served, \
            "the queue alone does not steer away from the pod: the prefix check below would prove nothing"
        again = picks(picker.addr, model, 1, prompt)[0]
        assert again == served, f"the same prompt went to {served}, then to {again}\n{picker.tail()}"
        engines[pod_at[served]].waiting = 0


def no_ready_pod(picker: epp.Epp, ns: str, pods: list[str], model: str, at: dict) -> None:
    """Readiness failing on every pod: the EPP picks none (an immediate 503); one pod Ready again: it alone."""
    for name in pods:
        epp.set_ready(ns, name, False)
    deadline = time.monotonic() + 10 * cluster.WAIT_SCALE
    while "immediateResponse" not in (answer := epp.pick(picker.addr, model)):
        assert time.monotonic() < deadline, f"still picking {epp.endpoint(answer)} with no Ready pod"
        time.sleep(0.2)
    log(f"EPP answer, no Ready pod: {json.dumps(answer)}")
    assert answer["immediateResponse"]["status"] == 503 and "headers" not in answer, answer
    epp.set_ready(ns, pods[-1], True)
    deadline = time.monotonic() + 10 * cluster.WAIT_SCALE
    while "immediateResponse" in (answer := epp.pick(picker.addr, model)):
        assert time.monotonic() < deadline, f"no pick with {pods[-1]} Ready again: {answer}"
        time.sleep(0.2)
    assert picks(picker.addr, model, 3) == [at[pods[-1]]] * 3


def test_sglang_pool_picks_by_sglang_metrics(lo):
    ns, node, cidr = lo
    model = "sgl-model"
    ips = epp.ready_pods(ns, make_pool(ns, node, "sgl", 2), 2, cidr)
    at = {name: f"{ip}:{PORT}" for name, ip in ips.items()}
    config = write_config(ns, "sgl", epp.chart_config("sglang"))

    # The chart's SGLang args carry the legacy metric flags, which the v1.5.0 EPP refuses at start
    # (pkg/epp/server/options.go Validate: "configure metrics via engineConfigs in EndpointPickerConfig").
    legacy = epp.chart_args("sgl", ns, config, "sglang")
    assert '--total-queued-requests-metric="sglang:num_queue_reqs"' in legacy, legacy
    with epp.Epp(f"{ns}-sgl-legacy", legacy) as refused:
        assert refused.exited() == 1, refused.tail()
        print("EPP with the chart's SGLang flags:", refused.tail(1))
        assert 'flag \\"total-queued-requests-metric\\" is deprecated and cannot be used' in refused.tail(), refused.tail()

    # sgl-0: SGLang's queue long, vLLM's gauge of the same page empty; sgl-1 the other way round.
    engines = {"sgl-0": PodEngine(model=model, host=ips["sgl-0"], port=PORT, sglang=True, waiting=LONG_QUEUE,
                                  decoy_waiting=0),
               "sgl-1": PodEngine(model=model, host=ips["sgl-1"], port=PORT, sglang=True, waiting=0,
                                  decoy_waiting=LONG_QUEUE)}
    with engines["sgl-0"], engines["sgl-1"]:
        args = [a for a in legacy if not a.startswith("--") or "-metric=" not in a]
        with epp.Epp(f"{ns}-sgl", args) as picker:
            picker.wait_serving()
            scraped(engines.values())
            chosen = picks(picker.addr, model, 6)
            assert set(chosen) == {at["sgl-1"]}, f"picked {chosen}; sgl-0 has sglang:num_queue_reqs {LONG_QUEUE}"
        # Control: the vLLM config on the same pods reads vllm:num_requests_waiting and so picks the other one.
        control = write_config(ns, "sgl-as-vllm", epp.chart_config("vllm"))
        with epp.Epp(f"{ns}-sgl-control", epp.chart_args("sgl", ns, control, "vllm")) as picker:
            picker.wait_serving()
            scraped(engines.values())
            chosen = picks(picker.addr, model, 6)
            assert set(chosen) == {at["sgl-0"]}, f"vLLM names read on SGLang pages, picked {chosen}"
