"""The AIBrix v0.7.0 gateway and the controllers as they behave (issue 10, items 1, 2, 6, 10, 12),
judged by the ports in tests/upstream_aibrix.py, upstream_rbg.py, upstream_kuberay.py and
upstream_pulumi_kubernetes.py against the rendered objects of every topology."""

from __future__ import annotations

import copy
import functools

import pytest
import upstream_aibrix as aibrix
import upstream_kuberay as kuberay
import upstream_pulumi_kubernetes as pk
import upstream_rbg as rbg
from conftest import STACKS, k8s_objects, render_stack
from test_pd import stack as pd_stack
from variants import render, sglang_stack

from config_model import ROUTING_STRATEGIES
from policy.workloads import containers, pod_templates


@functools.lru_cache(maxsize=None)
def variant(name: str):
    if name in STACKS:
        return render_stack(name)
    if name == "sglang-rbg":
        return render(sglang_stack())
    topology, orchestrator, replicas = name.split(":")
    budget = 64
    return render(pd_stack(topology, orchestrator, budget, replicas=int(replicas)))


VARIANTS = [*STACKS, "sglang-rbg", "combined:deployment:1", "combined:deployment:2", "combined:stormservice:2",
            "pd:rayclusterfleet:1", "hybrid:stormservice:1", "pd-same-pod:deployment:1"]


def engine_pods(rendered) -> dict[str, list[aibrix.Pod]]:
    """The pods each workload's controller creates, by AIBrix model name, as the plugin's cache
    lists them (labels and annotations of the pod templates; every pod ready)."""
    by_model: dict[str, list[aibrix.Pod]] = {}
    for obj in k8s_objects(rendered):
        if obj.get("kind") == "Job":
            continue
        for ref in pod_templates(obj["kind"], obj):
            meta = ref.template.get("metadata") or {}
            pod_labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
            for i in range(ref.replicas):
                pod = aibrix.Pod(f"{obj['metadata']['name']}-{i}", dict(pod_labels), dict(annotations))
                model = aibrix.model_of(pod)
                if model:
                    by_model.setdefault(model, []).append(pod)
    return by_model


def accepted_routes(rendered) -> dict[tuple[str, str], dict]:
    """Our HTTPRoutes, each as the Gateway would accept it."""
    return {(o["metadata"]["namespace"], o["metadata"]["name"]):
            {**o, "status": {"parents": [{"conditions": [{"type": "Accepted", "reason": "Accepted"},
                                                          {"type": "ResolvedRefs", "reason": "ResolvedRefs"}]}]}}
            for o in k8s_objects(rendered) if o.get("kind") == "HTTPRoute"}


def served_models(rendered) -> list[str]:
    return sorted({m["servedModelName"] for m in rendered.config_models}) if hasattr(rendered, "config_models") \
        else sorted(rendered.outputs["endpoints"])


def test_our_strategies_are_exactly_the_ones_v070_registers():
    assert set(ROUTING_STRATEGIES) == aibrix.REGISTERED_STRATEGIES


@pytest.mark.parametrize("name", VARIANTS)
def test_every_served_model_is_routed_by_an_explicit_strategy_never_the_503_branch(name):
    r = variant(name)
    pods, routes = engine_pods(r), accepted_routes(r)
    for model in served_models(r):
        # A client sending nothing but the body; ROUTING_ALGORITHM unset as the v0.7.0 manifests ship it.
        d = aibrix.handle_request_body(model, pods, {}, routes)
        assert (d.status, d.branch) == (200, "target-pod"), (name, model, d)
        # A client's own header still wins, and still routes.
        assert aibrix.handle_request_body(model, pods, {"Routing-Strategy": "random"}, routes).status == 200
        # Without the pods' strategy this model would get the 503 of the missing `<model>-router`.
        bare = {m: [aibrix.Pod(p.name, p.labels, {k: v for k, v in p.annotations.items() if k != aibrix.ANN_CONFIG})
                    for p in ps] for m, ps in pods.items()}
        assert aibrix.handle_request_body(model, bare, {}, routes).status == 503


@pytest.mark.parametrize("name", ["combined:deployment:1", "combined:deployment:2", "pd:rayclusterfleet:1",
                                  "hybrid:stormservice:1"])
def test_the_default_strategy_follows_the_topology_not_the_replicas(name):
    """Not the replica count: the strategy is a pod-template annotation (issue 18 case 2)."""
    topology, _, replicas = name.split(":")
    r = variant(name)
    (model,) = served_models(r)
    d = aibrix.handle_request_body(model, engine_pods(r), {}, accepted_routes(r))
    want = "pd" if topology in ("pd", "hybrid") else "prefix-cache"
    assert d.strategy == want


@pytest.mark.parametrize("name", VARIANTS)
def test_the_plugin_reads_metrics_where_the_engine_serves_them(name):
    """Metric port default 8000 (pkg/cache/utils.go): SGLang serves on 30000, the same-pod proxy
    serves no /metrics (its engines do)."""
    for obj in k8s_objects(variant(name)):
        for ref in pod_templates(obj["kind"], obj):
            meta = ref.template.get("metadata") or {}
            pod = aibrix.Pod("p", meta.get("labels") or {}, meta.get("annotations") or {})
            if aibrix.model_of(pod) is None:
                continue
            engine_ports = {p["containerPort"] for g, c in containers(ref.template) if g == "containers"
                            and c["name"] in ("engine", "prefill", "decode") for p in c.get("ports", [])}
            assert aibrix.metric_port(pod) in engine_ports, (name, obj["metadata"]["name"])


def controller_owned(rendered) -> set[tuple[str, str, str]]:
    """Every (kind, namespace, name) a controller creates for our workloads, by its own naming."""
    out = set(aibrix.INSTALLED)
    for obj in k8s_objects(rendered):
        meta = obj["metadata"]
        kind, ns, name = obj["kind"], meta.get("namespace", ""), meta["name"]
        out |= aibrix.controller_names(kind, name, ns, [], meta.get("labels") or {})
        if kind == "RoleBasedGroup":
            out |= {("Service", ns, s) for role in obj["spec"]["roles"] for s in rbg.role_service_names(name, role["name"])}
    return out


@pytest.mark.parametrize("name", VARIANTS)
def test_no_object_of_ours_takes_a_name_a_controller_derives(name):
    r = variant(name)
    owned = controller_owned(r)
    ours = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in k8s_objects(r)}
    assert not ours & owned, name
    assert not [n for k, _, n in ours if k == "Service" and kuberay.is_head_service_name(n)]


def test_the_old_service_name_collides_with_the_stormservice_headless_service():
    """The check above can fail: a Service named after the model is the StormService's own."""
    r = variant("combined:stormservice:2")
    ss = next(o for o in k8s_objects(r) if o["kind"] == "StormService")
    ns = ss["metadata"]["namespace"]
    assert ("Service", ns, ss["metadata"]["name"]) in controller_owned(r)
    svc = next(o for o in k8s_objects(r) if o["kind"] == "Service" and "model.aibrix.ai/name" in o["metadata"]["labels"])
    assert svc["metadata"]["name"] != ss["metadata"]["name"]


def test_a_pooled_stormservice_updates_its_one_roleset_in_place():
    for name in ("combined:stormservice:2", "hybrid:stormservice:1"):
        ss = next(o for o in k8s_objects(variant(name)) if o["kind"] == "StormService")
        assert ss["spec"]["replicas"] == 1
        assert ss["spec"]["updateStrategy"]["type"] == "InPlaceUpdate"


def _fleet(name: str) -> dict:
    return next(o for o in k8s_objects(variant(name)) if o["kind"] == "RayClusterFleet")


def _fleet_status(generation: int, observed: int, reason: str, ready: int | None) -> dict:
    status = {"observedGeneration": observed, "conditions": [{"type": "Progressing", "status": "True", "reason": reason}]}
    if ready:
        status["readyReplicas"] = ready   # omitempty (api/orchestration/v1alpha1/rayclusterfleet_types.go)
    return {"metadata": {"generation": generation}, "status": status}


def test_pulumi_waits_for_the_fleets_new_revision_not_the_old_ones_ready_clusters():
    fleet = _fleet("pd:rayclusterfleet:1")
    wait = fleet["metadata"]["annotations"]["pulumi.com/waitFor"]
    assert fleet["spec"]["progressDeadlineSeconds"] > 0   # without it no Progressing condition at all
    # Update in flight: the old cluster is ready, the new replica set was just created.
    assert not pk.ready(wait, _fleet_status(2, 2, "NewReplicaSetCreated", 1))
    assert not pk.ready(wait, _fleet_status(2, 2, "ReplicaSetUpdated", 1))
    # Before the controller saw the new spec, the old "complete" is not believed.
    assert not pk.ready(wait, _fleet_status(2, 1, "NewReplicaSetAvailable", 1))
    assert pk.ready(wait, _fleet_status(2, 2, "NewReplicaSetAvailable", 1))
    # The old expression returned on the old revision's clusters, and never for 0 replicas.
    old = "jsonpath={.status.readyReplicas}=1"
    assert pk.ready(old, _fleet_status(2, 2, "ReplicaSetUpdated", 1))
    assert not pk.ready("jsonpath={.status.readyReplicas}=0", _fleet_status(1, 1, "NewReplicaSetAvailable", 0))


def test_a_fleet_of_zero_replicas_completes():
    r = render(pd_stack("pd", "rayclusterfleet", 64, replicas=0))
    fleet = next(o for o in k8s_objects(r) if o["kind"] == "RayClusterFleet")
    assert fleet["spec"]["replicas"] == 0
    assert pk.ready(fleet["metadata"]["annotations"]["pulumi.com/waitFor"], _fleet_status(1, 1, "NewReplicaSetAvailable", 0))


def test_a_stormservice_is_ready_when_its_roleset_is_updated_and_ready():
    ss = next(o for o in k8s_objects(variant("combined:stormservice:2")) if o["kind"] == "StormService")
    wait = ss["metadata"]["annotations"]["pulumi.com/waitFor"]

    def status(ready: str, updated_ready: int) -> dict:
        s = {"observedGeneration": 3, "conditions": [{"type": "Ready", "status": ready}]}
        if updated_ready:
            s["updatedReadyReplicas"] = updated_ready
        return {"metadata": {"generation": 3}, "status": s}

    assert pk.ready(wait, status("True", 1))
    assert not pk.ready(wait, status("True", 0))
    assert not pk.ready(wait, status("False", 1))


@pytest.mark.parametrize("name", VARIANTS)
def test_services_wait_as_long_as_their_pods_cold_start(name):
    r = variant(name)
    for res in r.resources:
        if res.type == "kubernetes:core/v1:Service" and "model.aibrix.ai/name" in res.inputs["metadata"]["labels"]:
            timeouts = res.options["customTimeouts"]
            assert timeouts, (name, res.name)
            for key in ("create", "update"):
                assert pk_seconds(timeouts[key]) > pk.DEFAULT_SERVICE_TIMEOUT_SECONDS, (name, res.name, key)


def pk_seconds(text: str) -> float:
    from render.runtime import _go_duration_seconds
    return _go_duration_seconds(text)


def test_rbg_role_services_are_ported_from_the_controller():
    assert rbg.role_service_names("m", "server") == {"m-server", "s-m-server"}
    assert kuberay.head_service_name("x" * 60).endswith("-head-svc")
    assert copy.deepcopy(aibrix.httproute_name("DeepSeek-V4-Flash")) == "DeepSeek-V4-Flash-router"
