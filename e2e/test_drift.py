"""Drift for real (issue 30, scenario 2): hand edits of a running dev-like stack, found by `pulumi preview
--refresh` and undone by `pulumi up --refresh`, with the real CLI v3.276.0 and provider v4.25.0.

The stack serves two models on a pool of three 8-GPU kwok nodes of its own: deepseek-v4-flash, whose replicas
the program owns (1), and dsv4-auto, autoscaled (1-2 pods: its Deployment ignores spec.replicas,
components/autoscaling.py IGNORE_REPLICAS), plus one consumer (its keys Secret).

What a refresh reads back (pulumi-kubernetes provider/pkg/provider/provider.go Read): the live object, pruned to
the paths the program set (pruneLiveState), so a field the program sets that someone changed is drift, a label
someone added is not, a deleted object is gone from the state and created again; a path in ignoreChanges
(spec.replicas of an autoscaled engine) is dropped from the diff (provider Diff), and on the next apply it is
left out when another manager owns it (provider/pkg/await/await.go handleSSAIgnoreFields).

1. Without conflicts, one refresh: the owned engine scaled to 0 and its args edited (`kubectl scale`, `kubectl
   patch`: its Deployment carries pulumi.com/patchForce, components/autoscaling.py PATCH_FORCE), Open WebUI
   scaled to 0 (no patchForce; `kubectl scale` leaves spec.replicas to no manager, see below), its HTTPRoute,
   the engines' NetworkPolicy, the consumer-keys Secret and its PodDisruptionBudget deleted, and the autoscaler
   scaling dsv4-auto to 2 (AIBrix's PodAutoscaler controller does not run here, e2e/controllers.py: its write is
   made as v0.7.0 makes it, a plain update of the workload, pkg/controller/podautoscaler/workload_scale.go
   SetDesiredReplicas, under the manager name its binary presents). `pulumi preview --refresh --json
   --expect-no-changes` names each drifted object and exits 7; `pulumi up --refresh` restores each;
   dsv4-auto keeps the autoscaler's 2.
2. With conflicts: dsv4-auto's args (`kubectl patch`, manager kubectl-patch) and a Service's label (`kubectl
   label --overwrite`, kubectl-label) edited; neither object carries patchForce. A real apply takes those fields
   over before it applies: fixCSAFieldManagers hands the provider every Update entry whose manager starts with
   "kubectl" (fluxcd/pkg/ssa v0.46.0 patch.go PatchReplaceFieldsManagers matches by prefix, so kubectl-patch,
   kubectl-edit and kubectl-label too). A preview does neither (fixCSAFieldManagers returns at once in preview,
   and patchForce forces a preview only for the annotation, the variable, or the provider's own client-side
   manager), so its server-side dry run conflicts: `pulumi preview --refresh` fails naming the manager, and so
   does `pulumi up --refresh`, which previews first. `PULUMI_K8S_ENABLE_PATCH_FORCE=true pulumi up --refresh`
   (await.go patchForce reads it) previews and restores both; the autoscaler's replicas still stand
   (handleSSAIgnoreFields drops them before the forced apply). The Python SDK records the variable as the
   provider's enablePatchForce, so a plain `pulumi up` after it updates the provider alone.
Each ends with `pulumi preview --expect-no-changes`.
"""

from __future__ import annotations

import json
import time

import cluster
import cluster_faults as faults
import pytest
import yaml
from harness import POLICY_LAUNCHER, Pulumi, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
NAME = "drift"
POOL = "drift"
BASE = 244  # node addresses 192.0.2.245-247: clear of cluster.py's, the other tests' and test_nodes' (230-241)
OWNED, AUTO = "deepseek-v4-flash", "dsv4-auto"
# The field manager AIBrix's controller writes under: the apiserver takes it from the client's user agent, whose
# first word client-go makes the binary's name (rest.DefaultKubernetesUserAgent); e2e/controllers.py runs it as this.
AUTOSCALER = "aibrix-controller-manager"
kubectl, get = cluster.kubectl, cluster.get


@pytest.fixture
def pool():
    yield
    faults.delete_nodes(f"{faults.POOL_KEY}={POOL}")


def _config() -> dict:
    dev = yaml.safe_load((cluster.ROOT / "Pulumi.dev.yaml").read_text())["config"]["llm-serving:models"][0]
    auto = {k: v for k, v in dev.items() if k != "rollout"}
    auto.update(name=AUTO, servedModelName="DeepSeek-V4-Flash-Auto",
                autoscaling={"enabled": True, "minReplicas": 1, "maxReplicas": 2})
    return {"gpuBudget": 24, "gpuPool": faults.gpu_pool(POOL, node_count=3), "models": [dev, auto],
            "consumers": [{"name": "search", "namespace": "e2e-drift-team", "requestsPerMinute": 600}]}


def _steps(result) -> dict[tuple[str, str], dict]:
    """(type, logical name) -> program step of `preview --json`."""
    return {(urn.split("::")[-2].split("$")[-1], urn.split("::")[-1]): s for urn, s in faults.preview_steps(result).items()}


def _args(namespace: str, name: str) -> list[str]:
    return get("deployment", name, "-n", namespace)["spec"]["template"]["spec"]["containers"][0]["args"]


def _edit_max_num_seqs(namespace: str, name: str, value: str) -> None:
    args = _args(namespace, name)
    i = args.index("--max-num-seqs") + 1
    kubectl("patch", "deployment", name, "-n", namespace, "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": f"/spec/template/spec/containers/0/args/{i}", "value": value}]))


def test_drift_is_found_and_restored(pulumi: Pulumi, pool):
    started = time.monotonic()
    for i in range(3):
        faults.add_gpu_node(POOL, i, BASE)
    namespace = faults.init_stack(pulumi, NAME, _config(), consumer_keys=("search",))
    try:
        up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=NAME, timeout=600)
        log(f"{NAME}: first up {up.seconds:.1f} s")
        rendered = {n: _args(namespace, n) for n in (OWNED, AUTO)}
        route = f"{OWNED}-api-{namespace}"
        _without_conflicts(pulumi, namespace, route, rendered)
        _with_conflicts(pulumi, namespace, rendered)
        log(f"{NAME}: the whole scenario {time.monotonic() - started:.0f} s")
    finally:
        pulumi.run("destroy", "--yes", "--skip-preview", stack=NAME, timeout=600, check=False)


def _without_conflicts(pulumi: Pulumi, namespace: str, route: str, rendered: dict) -> None:
    kubectl("scale", f"deployment/{OWNED}", "-n", namespace, "--replicas=0")
    # Open WebUI carries no patchForce: through the scale subresource the API server takes spec.replicas from
    # its owner and gives it to no one (k8s.io/apimachinery v0.37.2 pkg/util/managedfields/scalehandler.go
    # ToParent "steals" the path; the managers logged below), so the apply that restores it meets no conflict.
    kubectl("scale", "deployment/open-webui", "-n", namespace, "--replicas=0")
    _edit_max_num_seqs(namespace, OWNED, "8")
    kubectl("delete", "httproute", route, "-n", "aibrix-system")
    kubectl("delete", "networkpolicy", "llm-serving-engine-ingress", "-n", namespace)
    kubectl("delete", "secret", "llm-serving-consumer-keys", "-n", namespace)
    kubectl("delete", "pdb", OWNED, "-n", namespace)
    kubectl("patch", "deployment", AUTO, "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}',
            f"--field-manager={AUTOSCALER}")
    log(f"{NAME}: managers of {OWNED}: {faults.managers('deployment', OWNED, namespace)}; of open-webui: "
        f"{faults.managers('deployment', 'open-webui', namespace)}")
    faults.wait_until(f"{AUTO} at the autoscaler's 2 pods", lambda: (get("deployment", AUTO, "-n", namespace)
                                                                    ["status"].get("readyReplicas") == 2), 30)

    found = pulumi.run("preview", "--refresh", "--json", "--expect-no-changes", *POLICY, stack=NAME, check=False)
    assert found.returncode == 7, found
    steps = _steps(found)
    log(f"{NAME}: preview --refresh: {sorted((k[1], s['op'], tuple(s.get('diffReasons') or ())) for k, s in steps.items())}")
    deployment = steps[("kubernetes:apps/v1:Deployment", f"{OWNED}-deployment")]
    assert deployment["op"] == "update", deployment
    seqs = f"spec.template.spec.containers[0].args[{rendered[OWNED].index('--max-num-seqs') + 1}]"
    assert {"spec.replicas", seqs} <= set(_paths(deployment)), deployment
    for key in (("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", f"routes-{OWNED}-api-route"),
                ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "network-llm-serving-engine-ingress"),
                ("kubernetes:core/v1:Secret", "secrets-consumer-keys"),
                ("kubernetes:policy/v1:PodDisruptionBudget", f"ops-{OWNED}-pdb")):
        assert steps.get(key, {}).get("op") == "create", (key, steps.get(key))
    webui = steps[("kubernetes:apps/v1:Deployment", "open-webui-deployment")]
    assert webui["op"] == "update" and "spec.replicas" in _paths(webui), webui
    assert not [k for k in steps if k[1].startswith(AUTO)], "the autoscaler's replicas were reported as drift"
    assert len(steps) == 6, sorted(steps)

    t0 = time.monotonic()
    up = pulumi.run("up", "--yes", "--skip-preview", "--refresh", *POLICY, stack=NAME, timeout=600)
    log(f"{NAME}: up --refresh restored in {up.seconds:.1f} s ({time.monotonic() - t0:.0f} s)")
    owned = get("deployment", OWNED, "-n", namespace)
    assert owned["spec"]["replicas"] == 1 and owned["status"].get("readyReplicas") == 1, owned["status"]
    assert get("deployment", "open-webui", "-n", namespace)["spec"]["replicas"] == 1
    assert _args(namespace, OWNED) == rendered[OWNED]
    for kind, name, ns in (("httproute", route, "aibrix-system"), ("networkpolicy", "llm-serving-engine-ingress", namespace),
                           ("secret", "llm-serving-consumer-keys", namespace), ("pdb", OWNED, namespace)):
        get(kind, name, "-n", ns)
    assert get("deployment", AUTO, "-n", namespace)["spec"]["replicas"] == 2
    again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=NAME, check=False)
    assert again.returncode == 0, again


def _with_conflicts(pulumi: Pulumi, namespace: str, rendered: dict) -> None:
    _edit_max_num_seqs(namespace, AUTO, "8")
    service = f"{OWNED}-api"
    kubectl("label", "service", service, "-n", namespace, "--overwrite", "app.kubernetes.io/part-of=someone-else")
    log(f"{NAME}: managers of {AUTO}: {faults.managers('deployment', AUTO, namespace)}; of service {service}: "
        f"{faults.managers('service', service, namespace)}")

    # The preview's server-side dry run is not forced and takes no field over (fixCSAFieldManagers returns at
    # once in preview): the apply conflicts with the hand edit's manager and the preview fails.
    refused = pulumi.run("preview", "--refresh", *POLICY, stack=NAME, check=False)
    assert refused.returncode != 0, refused
    text = " ".join(refused.output.split())
    assert "Server-Side Apply field conflict detected" in text, refused
    assert 'conflict with "kubectl-label"' in text or 'conflict with "kubectl-patch"' in text, refused
    log(f"{NAME}: preview --refresh refused:\n{_conflict_lines(refused.output)}")
    # `pulumi up` previews first: the same failure, nothing changed.
    up = pulumi.run("up", "--yes", "--refresh", *POLICY, stack=NAME, check=False, timeout=600)
    assert up.returncode != 0 and "Server-Side Apply field conflict detected" in " ".join(up.output.split()), up
    assert _args(namespace, AUTO) != rendered[AUTO]

    t0 = time.monotonic()
    forced = pulumi.run("up", "--yes", "--refresh", *POLICY, stack=NAME, timeout=600,
                        env={"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"})
    log(f"{NAME}: PULUMI_K8S_ENABLE_PATCH_FORCE=true up --refresh {forced.seconds:.1f} s ({time.monotonic() - t0:.0f} s)")
    assert _args(namespace, AUTO) == rendered[AUTO]
    labels = get("service", service, "-n", namespace)["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "llm-serving", labels
    auto = get("deployment", AUTO, "-n", namespace)
    assert auto["spec"]["replicas"] == 2, "the forced apply took the autoscaler's replicas"
    left = set(faults.managers("deployment", AUTO, namespace)) | set(faults.managers("service", service, namespace))
    assert not left & {"kubectl-patch", "kubectl-label"}, left
    # The SDK also turns the variable into the provider's enablePatchForce input (pulumi_kubernetes provider.py:
    # get_env_bool), so the state's provider carries it: one more `pulumi up` without it updates the provider alone.
    settle = pulumi.run("up", "--yes", *POLICY, stack=NAME, timeout=600)
    assert "enablePatchForce" in settle.output and "1 updated" in settle.output, settle
    log(f"{NAME}: up without the variable {settle.seconds:.1f} s (the provider's enablePatchForce only)")
    again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=NAME, check=False)
    assert again.returncode == 0, again


def _paths(step: dict) -> list[str]:
    return list((step.get("detailedDiff") or {}).keys()) + list(step.get("diffReasons") or [])


def _conflict_lines(output: str) -> str:
    return "\n".join(line.strip() for line in output.splitlines() if "conflict" in line.lower())[:3000]
