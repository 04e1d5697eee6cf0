"""Day 2 for real (issue 18): a dev stack deployed with the real CLI, then changed with `pulumi config
set` the way a platform engineer changes it, each change applied with one `pulumi up`; where it matters on
a pool whose GPUs are exactly the stack's budget (budget_pool: one tainted node of 8 GPUs), so a new GPU
workload that started beside the old one would stay Pending until its await timed out (the engine deletes the old
one only after every create, pulumi/pulumi pkg/resource/deploy/step_generator.go)."""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex

import stackfiles
from cluster import BUDGET_NODE, BUDGET_POOL
from harness import POLICY_LAUNCHER, Pulumi, kubectl, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
GPU = "nvidia.com/gpu"


def _init(pulumi: Pulumi, name: str) -> str:
    return stackfiles.init(pulumi, name)


def _gpu_pods_on(node: str) -> list[str]:
    pods = json.loads(kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}", "-o", "json").stdout)
    return [p["metadata"]["name"] for p in pods["items"] if p["status"].get("phase") not in ("Succeeded", "Failed")
            and any((c.get("resources", {}).get("limits") or {}).get(GPU) for c in p["spec"]["containers"])]


def budget_pool(pulumi: Pulumi, name: str) -> str:
    """The stack pinned to the cluster's budget pool: one node of 8 GPUs, the dev budget, tainted so that
    no other scenario's pods land there (e2e/cluster.py BUDGET_POOL; the other scenarios run beside this
    one). A new GPU workload that started beside the old one would stay Pending until its await timed out.
    Set with `pulumi config set --path`, as a user points a stack at a pool."""
    key, value = BUDGET_POOL
    for path, setting in ((f'gpuPool.nodeSelector["{key}"]', value),
                          ("gpuPool.tolerations[0].key", GPU), ("gpuPool.tolerations[0].operator", "Exists"),
                          ("gpuPool.tolerations[0].effect", "NoSchedule"),
                          ("gpuPool.tolerations[1].key", key), ("gpuPool.tolerations[1].operator", "Equal"),
                          ("gpuPool.tolerations[1].value", value), ("gpuPool.tolerations[1].effect", "NoSchedule")):
        pulumi.run("config", "set", "--path", f"llm-serving:{path}", setting, stack=name)
    busy = _gpu_pods_on(BUDGET_NODE)
    assert not busy, f"{BUDGET_NODE} is not free: {busy}"
    return BUDGET_NODE


def _objects(kind: str, namespace: str) -> dict[str, dict]:
    items = json.loads(kubectl("get", kind, "-n", namespace, "-o", "json").stdout)["items"]
    return {o["metadata"]["name"]: o for o in items if not o["metadata"].get("deletionTimestamp")}


def _engine_pods(namespace: str) -> list[dict]:
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=engine",
                              "-o", "json").stdout)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


@contextlib.contextmanager
def destroyed_after(pulumi: Pulumi, name: str):
    """The stack is destroyed after the scenario, failed or not: the HTTPRoutes live in the gateway's
    namespace and the static PVs in none, so a left-over stack would break the next run's creates."""
    try:
        yield
    finally:
        pulumi.run("destroy", "--yes", "--skip-preview", stack=name, timeout=900, check=False)


def test_identity_changes_apply_in_one_up_within_the_budget(pulumi: Pulumi):
    name = "day2-identity"
    namespace = _init(pulumi, name)
    node = budget_pool(pulumi, name)
    with destroyed_after(pulumi, name):
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: first up {up.seconds:.1f} s on {node}")
        assert set(_objects("deployments", namespace)) >= {"deepseek-v4-flash"}

        # Rename: a new Deployment under a new name. It takes the old one's place, delete first.
        pulumi.run("config", "set", "--path", "llm-serving:models[0].name", "dsv4", stack=name)
        preview = pulumi.run("preview", *POLICY, stack=name)
        assert "is deleted before" in preview.output, preview
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: rename up {up.seconds:.1f} s")
        deployments = _objects("deployments", namespace)
        assert "dsv4" in deployments and "deepseek-v4-flash" not in deployments, sorted(deployments)
        pods = _engine_pods(namespace)
        assert [p["spec"].get("nodeName") for p in pods] == [node], [p["metadata"]["name"] for p in pods]
        assert all(p["status"].get("phase") == "Running" for p in pods)

        # Orchestrator switch under the same name: the StormService takes the Deployment's place.
        pulumi.run("config", "set", "--path", "llm-serving:models[0].orchestrator", "stormservice", stack=name)
        pulumi.run("config", "rm", "--path", "llm-serving:models[0].rollout", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: orchestrator up {up.seconds:.1f} s")
        assert "dsv4" not in _objects("deployments", namespace)
        assert "dsv4" in _objects("stormservices.orchestration.aibrix.ai", namespace)
        pods = _engine_pods(namespace)
        assert pods and all(p["spec"].get("nodeName") == node for p in pods)

        # Namespace switch: every namespaced object is replaced; the GPU workload goes first.
        moved = f"{namespace}-moved"
        pulumi.run("config", "set", "llm-serving:namespace", moved, stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: namespace up {up.seconds:.1f} s")
        assert "dsv4" in _objects("stormservices.orchestration.aibrix.ai", moved)
        pods = _engine_pods(moved)
        assert pods and all(p["spec"].get("nodeName") == node for p in pods)
        assert not _engine_pods(namespace)

        again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=name, check=False)
        assert again.returncode == 0, again


def test_pd_to_combined_without_room_is_refused_in_preview_and_the_named_commands_work(pulumi: Pulumi):
    """Two fleets dropped, one Deployment added: the Deployment can take one fleet's place, the other
    would hold its GPUs until the update ends. The preview refuses before anything is registered and
    names the commands; running exactly those applies the change."""
    name = "day2-pd"
    namespace = _init(pulumi, name)
    with destroyed_after(pulumi, name):
        _pd_to_combined(pulumi, name, namespace)


def _pd_to_combined(pulumi: Pulumi, name: str, namespace: str) -> None:
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
    assert {"deepseek-v4-flash-prefill", "deepseek-v4-flash-decode"} <= set(
        _objects("rayclusterfleets.orchestration.aibrix.ai", namespace))
    for path, value in (("models[0].topology", "combined"), ("models[0].orchestrator", "deployment"),
                        ("models[0].rollout.strategy", "Recreate"), ("gpuBudget", "8")):
        pulumi.run("config", "set", "--path", f"llm-serving:{path}", value, stack=name)
    refused = pulumi.run("preview", *POLICY, stack=name, check=False)
    assert refused.returncode != 0, refused
    assert "llm-serving:models: this update starts 8 GPUs" in refused.output, refused
    command = refused.output.split("Free them first (the model stops serving): `", 1)[1].split("`", 1)[0]
    words = shlex.split(command)
    assert words[:3] == ["pulumi", "destroy", "--target-dependents"], words
    pulumi.run(*words[1:], "--yes", "--skip-preview", stack=name, timeout=900)
    up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
    log(f"{name}: combined up after the named destroy {up.seconds:.1f} s")
    assert not _objects("rayclusterfleets.orchestration.aibrix.ai", namespace)
    assert "deepseek-v4-flash" in _objects("deployments", namespace)


def _uids(pods: list[dict]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


def _jobs(namespace: str) -> set[str]:
    return set(_objects("jobs", namespace))


def _model_volumes(namespace: str) -> list[dict]:
    pvs = json.loads(kubectl("get", "pv", "-l", "app.kubernetes.io/component=model-volume", "-o", "json").stdout)
    return [p for p in pvs["items"] if (p["spec"].get("claimRef") or {}).get("namespace") == namespace]


def test_volume_changes_apply_in_one_up(pulumi: Pulumi):
    """modelVolume.capacityGiB grows (the claims of static PVs are never resized: the API server's
    PersistentVolumeClaimResize admission refuses it for a class that does not allow expansion), then
    the CephFS path moves (a PV's volume source is immutable and pv-protection holds a bound PV: the new
    volume and claim come first, the pods move, the old ones go at the end)."""
    name = "day2-volume"
    namespace = _init(pulumi, name)
    with destroyed_after(pulumi, name):
        pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        pulumi.run("config", "set", "--path", "llm-serving:modelVolume.capacityGiB", "800", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: capacity up {up.seconds:.1f} s")
        pvs = _model_volumes(namespace)
        ours = pvs
        assert ours and all(p["spec"]["capacity"]["storage"] == "800Gi" for p in ours), \
            [(p["metadata"]["name"], p["spec"]["capacity"]) for p in ours]

        before = {p["metadata"]["name"] for p in ours}
        pulumi.run("config", "set", "--path", "llm-serving:modelVolume.cephfs.path", "/volumes/llm/models-b", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: storage source up {up.seconds:.1f} s")
        now = [p for p in _model_volumes(namespace) if not p["metadata"].get("deletionTimestamp")]
        assert {p["spec"]["csi"]["volumeAttributes"]["rootPath"] for p in now} == {"/volumes/llm/models-b"}
        assert not before & {p["metadata"]["name"] for p in now}
        claims = {v.get("persistentVolumeClaim", {}).get("claimName") for p in _engine_pods(namespace)
                  for v in p["spec"].get("volumes", [])} - {None}
        assert claims and claims <= {(p["spec"]["claimRef"]["name"]) for p in now}, claims


def test_autoscaling_off_after_someone_scaled_the_deployment(pulumi: Pulumi):
    """With autoscaling on, the Deployment's replicas belong to whoever scales it (the autoscaler, or
    here `kubectl scale`, another field manager); switching autoscaling off must take them back in one
    `pulumi up`, not end in a server-side apply conflict."""
    name = "day2-autoscaling"
    namespace = _init(pulumi, name)
    with destroyed_after(pulumi, name):
        for path, value in (("models[0].autoscaling.enabled", "true"), ("models[0].autoscaling.minReplicas", "1"),
                            ("models[0].autoscaling.maxReplicas", "2"), ("gpuBudget", "16")):
            pulumi.run("config", "set", "--path", f"llm-serving:{path}", value, stack=name)
        pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        kubectl("-n", namespace, "scale", "deployment/deepseek-v4-flash", "--replicas=2")
        pulumi.run("config", "set", "--path", "llm-serving:models[0].autoscaling.enabled", "false", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: autoscaling off up {up.seconds:.1f} s")
        deployment = _objects("deployments", namespace)["deepseek-v4-flash"]
        assert deployment["spec"]["replicas"] == 1


def test_scaling_out_keeps_the_serving_pod_and_rotations_roll_and_reverify(pulumi: Pulumi):
    """Scale 1 -> 2 adds a pod and leaves the serving one alone (no cold start to scale out); rotating
    apiKey rolls every engine pod (they read the key at start) and re-runs smoke and warm-up; a change
    that reaches only the pod template (the gateway's request timeout sets the drain) does the same."""
    name = "day2-rollouts"
    namespace = _init(pulumi, name)
    with destroyed_after(pulumi, name):
        pulumi.run("config", "set", "--path", "llm-serving:gpuBudget", "16", stack=name)
        pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        serving = _uids(_engine_pods(namespace))
        jobs = _jobs(namespace)

        pulumi.run("config", "set", "--path", "llm-serving:models[0].replicas", "2", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: scale-out up {up.seconds:.1f} s")
        pods = _engine_pods(namespace)
        assert len(pods) == 2 and serving <= _uids(pods), "scaling out recreated the serving pod"

        serving, jobs = _uids(pods), _jobs(namespace)
        pulumi.set_secret("llm-serving:apiKey", secrets.token_hex(16), stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: apiKey rotation up {up.seconds:.1f} s")
        assert not serving & _uids(_engine_pods(namespace)), "a pod kept the old key"
        assert {j for j in _jobs(namespace) - jobs if "smoke" in j}, "no smoke ran after the rotation"

        serving, jobs = _uids(_engine_pods(namespace)), _jobs(namespace)
        pulumi.run("config", "set", "--path", "llm-serving:gateway.requestTimeoutSeconds", "150", stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: pod-template-only up {up.seconds:.1f} s")
        assert not serving & _uids(_engine_pods(namespace)), "the drain timeout did not reach the engine pods"
        assert {j for j in _jobs(namespace) - jobs if "smoke" in j}, "the engines rolled without a smoke"


def test_combined_to_same_pod_updates_the_deployment_in_place(pulumi: Pulumi):
    """combined -> pd-same-pod: another component registers the same Deployment (another URN). Without the
    alias to the object's old URN the create would meet the existing object and the end of the update
    would delete it."""
    name = "day2-same-pod"
    namespace = _init(pulumi, name)
    node = budget_pool(pulumi, name)
    with destroyed_after(pulumi, name):
        pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        for path, value in (("models[0].topology", "pd-same-pod"), ("models[0].vllm.tensorParallelSize", "4")):
            pulumi.run("config", "set", "--path", f"llm-serving:{path}", value, stack=name)
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=900)
        log(f"{name}: same-pod up {up.seconds:.1f} s")
        deployment = _objects("deployments", namespace)["deepseek-v4-flash"]
        names = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
        assert {"prefill", "decode"} <= set(names), names
        pods = _engine_pods(namespace)
        assert pods and all(p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running" for p in pods)
        again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=name, check=False)
        assert again.returncode == 0, again
