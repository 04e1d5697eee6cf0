"""The day-2 switch of a running stack from the AIBrix routing layer to the inferencePool one (issue 31,
docs/gateway-and-network.md "Switching a running stack"), watched from outside while `pulumi up` runs.

What must hold: one `pulumi up`; the engines untouched (their pod templates do not depend on the layer:
config_model/operations.py Gateway.longest_request_seconds); the new route, pool, picker and the NetworkPolicy
admitting the new Gateway (`llm-serving-engine-ingress-inference-pool`) created and the route awaited (the
provider's pulumi.com/waitFor, components/routing_layers/inference_pool.py) while the old route, its
BackendTrafficPolicy, the old ReferenceGrant and `llm-serving-engine-ingress` still exist; those deleted only
after every create (Pulumi deletes removed resources last: pulumi/pulumi v3.276.0 pkg/resource/deploy
deployment_executor.go performPostSteps).

`Timeline` polls the API server (plain GETs, 0.2 s apart) and the up's own log, and keeps the first time of
each event. The test's Gateway stand-in asks `Switch.gate` before it writes a new route's status: the gate
checks that the old route and policy are still there, answers first as a Gateway that cannot route to an
InferencePool does (ResolvedRefs False, InvalidKind) for HOLD seconds, during which the up must keep waiting
and delete nothing (an up that did not wait for the route would have deleted the old objects by then), and
only then lets the stand-in accept it.

Not run here: the update failing on that refusal. The provider's await of pulumi.com/waitFor has no failure
state (a jsonpath expression matches or it keeps waiting: pkg/await/condition/jsonpath.go) and gives up after
ten minutes unless the resource says otherwise (pkg/await/await.go Creation: `timeout := 10 * time.Minute`,
pkg/metadata/overrides.go TimeoutDuration: customTimeouts or pulumi.com/timeoutSeconds), which the stack does not set; a
ten-minute wait does not fit make e2e, and the product is not changed for the test.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import cluster
from harness import POLICY_LAUNCHER, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
# The AIBrix gateway the e2e cluster has as AIBrix v0.7.0's install leaves it (e2e/cluster.py), and the
# stack file's defaults (config_model/operations.py Gateway).
AIBRIX = {"routingLayer": "aibrix", "namespace": "aibrix-system", "name": "aibrix-eg"}
HOLD = 3.0   # seconds the stand-in keeps the new route unaccepted
# The names docs/gateway-and-network.md gives each layer's objects in the stack's namespace.
OLD_GRANT, NEW_GRANT = "llm-serving-gateway-access", "llm-serving-gateway-pool-access"
OLD_POLICY, NEW_POLICY = "llm-serving-engine-ingress", "llm-serving-engine-ingress-inference-pool"
GW_API = "/apis/gateway.networking.k8s.io"
WAITING_ON_REFS = "CLI: still waiting, ResolvedRefs False"
# What the CLI prints of the steps (pulumi v3.276.0's non-interactive display), for the timeline; the provider's
# await says "Waiting for <path>=True (found "False")" (pulumi-kubernetes provider/v4 v4.0.0-20260115033456-f47bc2d6f199,
# the e2e's provider: pkg/await/condition/jsonpath.go Satisfied, pkg/jsonpath/jsonpath.go Matches).
CLI_EVENTS = (("CLI: new route creating", re.compile(r"HTTPRoute \S+-pool-route creating")),
              ("CLI: waiting for the route's status", re.compile(r"HTTPRoute \S+-pool-route .*selected nothing")),
              (WAITING_ON_REFS,
               re.compile(r'HTTPRoute \S+-pool-route creating .*ResolvedRefs.*\(found "False"\)')),
              ("CLI: new route created", re.compile(r"HTTPRoute \S+-pool-route created")),
              ("CLI: old route deleted", re.compile(r"HTTPRoute \S+-api-route deleted")),
              ("CLI: old engine-ingress policy deleted", re.compile(rf"NetworkPolicy network-{OLD_POLICY} deleted")))


def set_gateway(pulumi, stack: str, gateway: dict[str, str], remove: tuple[str, ...] = ()) -> None:
    """The stack's gateway block with one `pulumi config set-all --path` (and `rm-all --path`), as a user switches."""
    if remove:
        pulumi.run("config", "rm-all", "--path", *(f"llm-serving:gateway.{k}" for k in remove), stack=stack)
    pairs = [a for k, v in gateway.items() for a in ("--plaintext", f"llm-serving:gateway.{k}={v}")]
    pulumi.run("config", "set-all", "--path", *pairs, stack=stack)


def engines(ns: str) -> tuple[dict[str, str], dict[str, int]]:
    """The engine pods (name -> uid) and each engine Deployment's generation."""
    pods = cluster.get("pods", "-n", ns, "-l", "app.kubernetes.io/component=engine")["items"]
    deployments = cluster.get("deployments", "-n", ns, "-l", "app.kubernetes.io/component=engine")["items"]
    return ({p["metadata"]["name"]: p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")},
            {d["metadata"]["name"]: d["metadata"]["generation"] for d in deployments})


class Timeline:
    """Seconds since the switch began of the first time each event was seen."""

    def __init__(self) -> None:
        self.t0, self.events, self.lock = time.monotonic(), {}, threading.Lock()

    def mark(self, event: str) -> None:
        with self.lock:
            self.events.setdefault(event, time.monotonic() - self.t0)

    def at(self, event: str) -> float:
        assert event in self.events, f"never seen: {event}\n{self}"
        return self.events[event]

    def __str__(self) -> str:
        return "\n".join(f"  +{t:6.2f} s  {e}" for e, t in sorted(self.events.items(), key=lambda kv: kv[1]))


class Switch:
    """The objects of the switch, by API path, watched until stop()."""

    def __init__(self, ns: str, gw_ns: str, old_route: str, controller: str):
        self.ns, self.gw_ns, self.controller = ns, gw_ns, controller
        self.api = cluster.Api(cluster.recorded_ports()["apiserver"], cluster.admin_token())
        self.old = {"old route": f"{GW_API}/v1/namespaces/{AIBRIX['namespace']}/httproutes/{old_route}",
                    "old BackendTrafficPolicy": f"/apis/gateway.envoyproxy.io/v1alpha1/namespaces/{AIBRIX['namespace']}"
                                                f"/backendtrafficpolicies/{old_route}",
                    "old ReferenceGrant": f"{GW_API}/v1beta1/namespaces/{ns}/referencegrants/{OLD_GRANT}",
                    "old engine-ingress policy": f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{OLD_POLICY}"}
        self.new = {"new ReferenceGrant": f"{GW_API}/v1beta1/namespaces/{ns}/referencegrants/{NEW_GRANT}",
                    "new engine-ingress policy": f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{NEW_POLICY}"}
        self.timeline = Timeline()
        self.log: Path | None = None          # the up's log, once it runs
        self.up_running = threading.Event()
        self.seen_before_refusal: dict[str, bool] = {}
        self.seen_at_accept: dict[str, bool] = {}
        self.error: BaseException | None = None   # the watcher's, raised in the test's thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def present(self, path: str) -> bool:
        status, data = cluster.http(self.api.base + path, self.api.ctx, self.api.token)
        assert status in (200, 404), f"GET {path}: HTTP {status} {data[:200]!r}"
        return status == 200

    def new_routes(self) -> list[dict]:
        return self.api.get(f"{GW_API}/v1/namespaces/{self.gw_ns}/httproutes?labelSelector="
                            f"llm-serving.io/namespace%3D{self.ns}")["items"]

    def pools(self) -> list[dict]:
        return self.api.get(f"/apis/inference.networking.k8s.io/v1/namespaces/{self.ns}/inferencepools")["items"]

    def _watch(self) -> None:
        try:
            self._poll()
        except BaseException as e:  # noqa: BLE001 - raised by up()
            self.error = e

    def _poll(self) -> None:
        was = {k: self.present(p) for k, p in {**self.old, **self.new}.items()}
        assert all(was[k] for k in self.old) and not any(was[k] for k in self.new), f"before the switch: {was}"
        offset = 0
        while not self._stop.wait(0.2):
            for key, path in {**self.old, **self.new}.items():
                if (now := self.present(path)) != was[key]:
                    self.timeline.mark(f"{key} {'created' if now else 'deleted'}")
                    was[key] = now
            if routes := self.new_routes():
                self.timeline.mark("new route created")
                conditions = {c["type"]: c["status"] for p in routes[0].get("status", {}).get("parents", [])
                              for c in p["conditions"]}
                if conditions.get("Accepted") == "True" and conditions.get("ResolvedRefs") == "True":
                    self.timeline.mark("new route Accepted and ResolvedRefs")
            if self.pools():
                self.timeline.mark("InferencePool created")
            if self.log is not None and self.log.exists():
                text = self.log.read_text(errors="replace")
                for event, pattern in CLI_EVENTS:
                    if pattern.search(text, offset):
                        self.timeline.mark(event)
                offset = max(0, len(text) - 4096)   # a step's line may be split across two reads

    def gate(self, route: dict) -> None:
        """The stand-in's step before it writes a new route's status. First it answers as a Gateway that cannot
        route to an InferencePool does (Accepted, ResolvedRefs False InvalidKind: Gateway API's reason for a
        backendRef kind it does not support) and holds that HOLD seconds, until the CLI shows the up still
        waiting on ResolvedRefs; then it records whether the old route, its traffic policy, the old grant and
        the old engine-ingress policy are still there and the up still running (Switch.check requires all of
        it) and lets the stand-in accept the route."""
        self.timeline.mark("stand-in sees the new route")
        self.seen_before_refusal = {key: self.present(path) for key, path in self.old.items()}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [{"type": kind, "status": status, "reason": reason, "message": message,
                       "observedGeneration": route["metadata"]["generation"], "lastTransitionTime": now}
                      for kind, status, reason, message in (
                          ("Accepted", "True", "Accepted", "Accepted"),
                          ("ResolvedRefs", "False", "InvalidKind", "backendRef kind InferencePool is not supported"))]
        status = {"parents": [{"parentRef": route["spec"]["parentRefs"][0], "controllerName": self.controller,
                               "conditions": conditions}]}
        self.timeline.mark("stand-in writes Accepted True, ResolvedRefs False (InvalidKind)")
        cluster.kubectl("patch", "httproute", route["metadata"]["name"], "-n", self.gw_ns, "--subresource=status",
                        "--type=merge", "-p", json.dumps({"status": status}))
        refused = time.monotonic()
        deadline = refused + 15 * cluster.WAIT_SCALE   # the CLI's line; an up that did not wait has exited
        while WAITING_ON_REFS not in self.timeline.events and self.up_running.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
        while self.up_running.is_set() and time.monotonic() < refused + HOLD:
            time.sleep(0.1)
        self.seen_at_accept = {**{key: self.present(path) for key, path in self.old.items()},
                               "pulumi up running": self.up_running.is_set(),
                               "the CLI waiting on ResolvedRefs False": WAITING_ON_REFS in self.timeline.events}
        self.timeline.mark("stand-in writes Accepted, ResolvedRefs True")

    def up(self, pulumi, stack: str, gateway: dict[str, str]):
        """`pulumi config set-all` to the new layer, then `pulumi up` (in a thread, so the stand-in answers
        while it waits), watched from start to end."""
        set_gateway(pulumi, stack, gateway)
        self.timeline = Timeline()
        self._thread.start()
        done: dict = {}

        def run() -> None:
            try:
                done["up"] = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=stack, timeout=300)
            except BaseException as e:   # noqa: BLE001 - re-raised in the test's thread
                done["error"] = e
            finally:
                self.up_running.clear()
                self.timeline.mark("pulumi up exits")
        calls = pulumi.calls
        self.up_running.set()
        self.timeline.mark("pulumi up starts")
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10   # the up's log (harness.Pulumi.run names it by its call number)
        while self.log is None and time.monotonic() < deadline:
            self.log = next(iter(pulumi.logs.glob(f"{calls + 1:03d}-up*.log")), None)
            time.sleep(0.05)
        thread.join(timeout=320)
        assert not thread.is_alive(), "pulumi up still running after 320 s"
        time.sleep(0.5)   # one more round of the watcher after the exit
        self.stop()
        log(f"the switch, seconds after `pulumi up` started:\n{self.timeline}")
        if "error" in done:
            raise done["error"]
        if self.error is not None:
            raise self.error
        return done["up"]

    def check(self, before: tuple[dict, dict]) -> None:
        """What the switch's timeline and the cluster after it must show (docs/gateway-and-network.md)."""
        t, seen = self.timeline, self.seen_at_accept
        assert self.seen_before_refusal == {key: True for key in self.old}, \
            f"when the stand-in saw the new route: {self.seen_before_refusal}\n{t}"
        assert seen, f"the up ended while the stand-in held the new route unaccepted: it did not wait for it\n{t}"
        assert seen == {**{key: True for key in self.old}, "pulumi up running": True,
                        "the CLI waiting on ResolvedRefs False": True}, f"when the stand-in accepted the new route: {seen}\n{t}"
        accepted = t.at("stand-in writes Accepted, ResolvedRefs True")
        # The up waited for the route (pulumi.com/waitFor), and deleted the old objects only after it was accepted.
        assert t.at("new route created") < accepted < t.at("pulumi up exits"), t
        for old in ("old route", "old BackendTrafficPolicy", "old ReferenceGrant", "old engine-ingress policy"):
            assert accepted < t.at(f"{old} deleted"), t
        # The new Gateway was admitted to the engines before the old one lost its policy.
        assert t.at("new engine-ingress policy created") < t.at("old engine-ingress policy deleted"), t
        assert t.at("CLI: new route created") >= accepted, t   # the CLI's own view: created only once accepted
        for key, path in {**self.old, **self.new}.items():
            assert self.present(path) == key.startswith("new"), f"after the switch, {key} ({path})"
        assert self.new_routes() and self.pools(), "no route or pool of the new layer after the switch"
        after = engines(self.ns)
        assert after == before, f"the engines changed: pods and generations {before} before, {after} after"

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
