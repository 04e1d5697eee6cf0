"""Issue 13, time to serving: the engine image pre-pull on the GPU pool and plan.md's time from
`pulumi up` to the first served token.

What cannot run here is read at a pinned version: the NVIDIA runtime's handling of
NVIDIA_VISIBLE_DEVICES (tests/upstream_nvidia_container_toolkit.py) and pulumi-kubernetes' DaemonSet
await (tests/upstream_pulumi_kubernetes.py). The benchmark at the end computes each model's figures
from the rendered objects alone and holds plan.md to them."""

from __future__ import annotations

import copy
import functools
import json

import pytest
import upstream_nvidia_container_toolkit as nvidia
import upstream_pulumi_kubernetes as pulumi_k8s
from conftest import STACKS, k8s_objects, render_stack
from netpol import Pod, allowed, egress_allowed, ingress_allowed
from test_config import problems, raw_config
from variants import render, variant_file

from components import time_to_serving as tts
from policy import resource_rules
from policy.workloads import pod_templates
from render import output

GPU = "nvidia.com/gpu"


def of_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def engine_templates(objs: list[dict]) -> list[tuple[dict, dict]]:
    """(workload, pod template) of every engine pod: the templates that request GPUs."""
    return [(o, ref.template) for o in objs for ref in pod_templates(o["kind"], o)
            if any(int((c.get("resources") or {}).get("limits", {}).get(GPU, 0)) for c in ref.template["spec"]["containers"])]


def placement(spec: dict) -> tuple[str, str]:
    return json.dumps(spec.get("nodeSelector"), sort_keys=True), json.dumps(spec.get("tolerations"), sort_keys=True)


@functools.lru_cache(maxsize=None)
def hybrid() -> list[dict]:
    """Two engine images on one stack: the hybrid topology's combined vLLM pods and Ray P/D fleets."""
    from test_pd import stack as pd_stack
    return k8s_objects(render(pd_stack("hybrid", "stormservice", 32)))


# ---- the pre-pull DaemonSets ----

@pytest.mark.parametrize("source", [*STACKS, "hybrid"])
def test_each_engine_image_is_held_on_the_gpu_pool_by_a_gpu_free_daemonset(source):
    objs = hybrid() if source == "hybrid" else k8s_objects(render_stack(source))
    engines = engine_templates(objs)
    engine_images = {c["image"] for _, t in engines for c in t["spec"]["containers"] if GPU in c["resources"]["limits"]}
    daemonsets = of_kind(objs, "DaemonSet")
    # The very reference the engine pods pull (mirror and digest included), one DaemonSet per image.
    held = [c["image"] for d in daemonsets for c in d["spec"]["template"]["spec"]["containers"]]
    assert sorted(held) == sorted(engine_images) and len(held) == (2 if source == "hybrid" else 1)
    for d in daemonsets:
        pod = d["spec"]["template"]["spec"]
        # On exactly the engine pods' nodes: the GPU pool's selector and tolerations.
        assert {placement(pod)} == {placement(t["spec"]) for _, t in engines}
        assert "affinity" not in pod and pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True and "initContainers" not in pod
        for c in pod["containers"]:
            res = c["resources"]
            assert GPU not in res["requests"] and GPU not in res["limits"] and res["requests"] == res["limits"]
            # Its logs' allowance of disk (policy/ephemeral_storage.py): idle on a read-only root.
            assert res["limits"] == {"cpu": "10m", "memory": "32Mi", "ephemeral-storage": "64Mi"}
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] and sc["runAsNonRoot"] and sc["capabilities"] == {"drop": ["ALL"]}
            # The image's ENTRYPOINT is the server: replaced by the interpreter the model gate already uses there.
            gate = next(g for _, t in engines for g in t["spec"]["initContainers"] if g["name"] == "model-gate")
            assert c["command"][0] == gate["command"][0] == "python3"
        assert d["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxUnavailable": "100%", "maxSurge": 0}}


def test_the_holder_command_replaces_the_entrypoint_with_what_both_images_have():
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import upstream_sglang
    import upstream_vllm

    from components.prepull import IDLE_COMMAND
    # A command is set, so no image's ENTRYPOINT (the vLLM server) ever starts; python3 is on PATH in both.
    assert IDLE_COMMAND[0] == "python3" and upstream_vllm.IMAGE_ENTRYPOINT[0] == "python3"
    assert {upstream_vllm.IMAGE_PYTHON, upstream_sglang.IMAGE_PYTHON} == {"/usr/bin/python3"}
    # The idle program itself runs (-S -B, stdlib only), catches SIGTERM and exits 0 on it, as the
    # kubelet stops it. Ready once the kernel lists SIGTERM among its caught signals (SigCgt bit 15).
    proc = subprocess.Popen([sys.executable, *IDLE_COMMAND[1:]])
    try:
        status = Path(f"/proc/{proc.pid}/status")

        def catches_sigterm() -> bool:
            caught = next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("SigCgt:"))
            return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))

        while proc.poll() is None and not catches_sigterm():
            time.sleep(0.01)
        assert proc.poll() is None, "the idle command exited by itself"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()


def test_a_pool_without_a_selector_still_pulls_on_gpu_nodes_only():
    """Exactly the nodes the CPU Jobs' off-GPU affinity excludes, never every node of the cluster."""
    from components.pod_template import off_gpu_affinity
    from components.prepull import prepull_pod_spec
    from config_model import GpuPool
    pool = GpuPool(node_selector={})
    pod = prepull_pod_spec("r@sha256:" + "0" * 64, pool)
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (off,) = off_gpu_affinity(pool)["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [(e["key"], e["operator"]) for e in term["matchExpressions"]] == [
        (e["key"], "Exists") for e in off["matchExpressions"] if e["operator"] == "DoesNotExist"]
    assert pod["nodeSelector"] == {}


def test_the_switch_turns_it_off_and_the_plan_says_so():
    cfg_ops = {"imagePrePull": {"enabled": False}}
    rendered = render(variant_file(operations=cfg_ops))
    assert of_kind(k8s_objects(rendered), "DaemonSet") == []
    row = plan_rows(output.plan_md(rendered))["DeepSeek-V4-Flash"]
    assert row["This stack"] == "no pre-pull"


def test_the_holder_sees_no_gpu_although_the_engine_image_asks_for_all():
    """The NVIDIA runtime reads the container's env over the image's; CUDA images set all."""
    image_env = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_REQUIRE_CUDA": "cuda>=12.9"}
    ds = of_kind(k8s_objects(render_stack("dev")), "DaemonSet")[0]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    env = {**image_env, **{e["name"]: e["value"] for e in container["env"]}}
    assert not nvidia.gets_gpus(env)
    assert nvidia.gets_gpus(image_env)                                 # without it: every GPU of the node
    assert nvidia.gets_gpus({"CUDA_VERSION": "12.9"}, legacy_image=True)  # unset on a legacy image: all
    assert not nvidia.gets_gpus({"NVIDIA_VISIBLE_DEVICES": "none"})       # none: no GPU either
    assert resource_rules.daemonsets_hold_no_gpus("kubernetes:apps/v1:DaemonSet", ds) == []


def test_the_policy_refuses_a_daemonset_that_could_take_gpus():
    ds = of_kind(k8s_objects(render_stack("dev")), "DaemonSet")[0]
    gpu = copy.deepcopy(ds)
    gpu["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "1"
    assert any("no budget bounds" in m for m in resource_rules.daemonsets_hold_no_gpus("kubernetes:apps/v1:DaemonSet", gpu))
    visible = copy.deepcopy(ds)
    visible["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert resource_rules.daemonsets_hold_no_gpus("kubernetes:apps/v1:DaemonSet", visible)
    # The sync Job's refusal of GPU nodes is unchanged: a CPU Job may still not tolerate the GPU taint.
    job = copy.deepcopy(next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "Job"))
    job["spec"]["template"]["spec"]["tolerations"] = [{"key": GPU, "operator": "Exists"}]
    assert resource_rules.model_sync_stays_off_gpus("kubernetes:batch/v1:Job", job)


@pytest.mark.parametrize("stack", STACKS)
def test_pulumi_up_neither_waits_for_it_nor_makes_the_engines_wait(stack):
    rendered = render_stack(stack)
    for r in rendered.resources:
        kind = r.inputs.get("kind") if r.type.startswith("kubernetes:") else None
        deps = r.options.get("dependsOn") or []
        if kind == "DaemonSet":
            # pulumi-kubernetes v4.32.0 awaits a DaemonSet until every GPU node pulled ~14 GB and is
            # ready; one NotReady or full GPU node would fail `pulumi up` for an optimisation.
            assert pulumi_k8s.awaited("apps/v1", "DaemonSet", {})
            assert not pulumi_k8s.awaited(r.inputs["apiVersion"], kind, r.inputs["metadata"]["annotations"])
            assert not [d for d in deps if ":batch/v1:Job::sync-" in d], "the pre-pull must start beside the sync"
            # ... but after a registry mirror holds the image (staging), or it would pull a missing one.
            copies = [x.name for x in rendered.resources if x.name == "images-copy"]
            assert [d.rsplit("::", 1)[1] for d in deps if ":batch/v1:Job::" in d] == copies
        if kind == "Deployment" and r.inputs["metadata"]["name"] != "open-webui":
            assert pulumi_k8s.awaited(r.inputs["apiVersion"], kind, r.inputs["metadata"].get("annotations") or {})
            assert not [d for d in deps if "DaemonSet" in d], "no engine waits for the pre-pull"
            assert [d for d in deps if ":batch/v1:Job::sync-" in d]


def test_network_policies_isolate_the_holder_and_do_not_admit_it_to_the_engines():
    objs = k8s_objects(render_stack("dev"))
    policies = of_kind(objs, "NetworkPolicy")
    ds = of_kind(objs, "DaemonSet")[0]
    ns = ds["metadata"]["namespace"]
    holder = Pod(ns, ds["spec"]["template"]["metadata"]["labels"])
    engine_obj, engine_t = engine_templates(objs)[0]
    engine = Pod(ns, engine_t["metadata"]["labels"], {"engine": 8000})
    smoke = Pod(ns, {"app.kubernetes.io/part-of": "llm-serving"})
    assert not allowed(policies, engine, holder, 8000) and not allowed(policies, smoke, holder, 1)
    assert ingress_allowed(policies, smoke, engine, 8000)       # the engine takes this stack's pods ...
    assert not ingress_allowed(policies, holder, engine, 8000)  # ... but the idle holder is not one of them
    assert not egress_allowed(policies, holder, engine, 8000)   # nor may it send anything
    assert not egress_allowed(policies, holder, Pod("kube-system", {"k8s-app": "kube-dns"}), 53, "UDP")


def test_the_node_fit_counts_the_pre_pull_pods_the_rendered_daemonsets_put_on_each_gpu_node():
    """Hybrid runs two engine images, so two DaemonSets each put a pod on every GPU node: the config rules'
    node fit counts them as the rendered DaemonSets state them (one 8-GPU, 512 GiB engine pod per node)."""
    from test_pd import stack as pd_stack

    from components.prepull import MEMORY_MIB
    from policy.manifests import quantity_gib
    from stacks import loader
    limits = [quantity_gib(c["resources"]["limits"]["memory"]) for d in of_kind(hybrid(), "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]]
    assert limits == [MEMORY_MIB / 1024] * 2
    sf = pd_stack("hybrid", "stormservice", 32)
    raw = {k.removeprefix("llm-serving:"): loader.decode(k.removeprefix("llm-serving:"), v)
           for k, v in sf.config.items() if k.startswith("llm-serving:") and k not in sf.secret_keys}
    raw["gpuPool"] = {"gpuType": "H20", "nodeMemoryGiB": 512, "memoryRequestGiB": 320, "memoryLimitGiB": 512}
    (line,) = problems(raw)
    assert line.endswith("memory limits sum to 512 GiB (deepseek-v4-flash 512 GiB: gpuPool.memoryLimitGiB 512 per pod; "
                         "the Memory /dev/shm emptyDir is charged within these limits) and 2 pre-pull DaemonSet pods "
                         "(operations.imagePrePull) with 32Mi each, more than gpuPool.nodeMemoryGiB 512"), line
    raw["gpuPool"]["nodeMemoryGiB"] = 513
    loader.validate(raw, "dev", {k: True for k in loader.SECRET_KEYS})


# ---- config ----

def test_models_sharing_a_directory_agree_on_its_size_and_the_switch_is_typed():
    raw = raw_config("staging")
    del raw["models"][1]["dsparkOf"]
    raw["models"][1]["sizeGiB"] = 80.5
    assert problems(raw, stack="staging") == [
        "Pulumi.staging.yaml: llm-serving:models[1].sizeGiB = 80.5: must equal models[0].sizeGiB 155.43: "
        "both models use directory 'DeepSeek-V4-Flash-0731'"]
    raw = raw_config()
    raw.setdefault("operations", {})["imagePrePull"] = {"enabled": "yes"}
    assert [line for line in problems(raw) if "llm-serving:operations.imagePrePull.enabled" in line]


# ---- the arithmetic ----

def test_the_sync_rate_reproduces_the_measured_download():
    """Field report 3.2: 155.43 GiB in about 364 s."""
    assert abs(tts.sync_seconds(155.43) - 364) < 1


def test_pre_pull_takes_the_pull_off_the_gpu_wait_unless_it_outlasts_the_sync():
    off = tts.time_to_serving(155.43, "sglang", 8, pre_pulled=False, profile="deepseek-v4")
    on = tts.time_to_serving(155.43, "sglang", 8, pre_pulled=True, profile="deepseek-v4")
    assert off.first_token_seconds - on.first_token_seconds == pytest.approx(tts.IMAGE_PULL_SECONDS)
    assert off.gpu_minutes - on.gpu_minutes == pytest.approx(8 * tts.IMAGE_PULL_SECONDS / 60)
    # SGLang's measured 23 min held one pull: the engine pod that pulls itself is back at 23 min after the sync.
    assert off.gpu_wait_seconds == 23 * 60
    small = tts.time_to_serving(1, "vllm", 8, pre_pulled=True, profile="deepseek-v4")    # a sync shorter than the pull
    assert small.gpu_wait_seconds == pytest.approx(tts.IMAGE_PULL_SECONDS - tts.sync_seconds(1) + 12 * 60)
    two = tts.time_to_serving(155.43, "vllm", 8, pre_pulled=True, images_per_node=3, profile="deepseek-v4")   # 381 s of serial pulls
    assert two.gpu_wait_seconds == pytest.approx(3 * tts.IMAGE_PULL_SECONDS - tts.sync_seconds(155.43) + 12 * 60)
    # A generic model's cold start is not measured: only what is known (sync, pull), marked as a lower bound.
    unknown = tts.time_to_serving(136, "vllm", 4, pre_pulled=False, profile="generic")
    assert not unknown.measured and unknown.cold_start_seconds == 0
    assert unknown.gpu_wait_seconds == tts.IMAGE_PULL_SECONDS and two.measured


# ---- the benchmark: computed from the rendered objects, stated by plan.md ----

def plan_rows(plan: str) -> dict[str, dict[str, str]]:
    lines = plan.split("## Time to first token after `pulumi up`", 1)[1].split("\n## ", 1)[0].splitlines()
    table = [line for line in lines if line.startswith("|")]
    header = [h.strip() for h in table[0].strip("|").split("|")]
    rows = [dict(zip(header, (v.strip() for v in line.strip("|").split("|")))) for line in table[2:]]
    return {r["Served model"]: r for r in rows}


def pods_of(workload: dict, template: dict) -> int:
    """Steady pods of a template, read the way each committed stack's kind states them: a Deployment's
    replicas; a StormService's role sets x the role's replicas (AIBrix v0.7.0 orchestration CRD)."""
    spec = workload["spec"]
    if workload["kind"] == "Deployment":
        return spec["replicas"]
    assert workload["kind"] == "StormService"
    role = next(r for r in spec["template"]["spec"]["roles"] if r["template"] is template)
    return spec["replicas"] * role["replicas"]


def expected_rows(objs: list[dict]) -> dict[str, dict[str, str]]:
    """Per served model from the manifests alone: Deployment replicas x GPU limits, the engine from the
    container command, the model size from the annotation of the sync Job whose DEST the model gate
    checks, pre-pulled when a GPU-free DaemonSet on the same nodes runs the engine's image."""
    sizes = {e["value"]: (float(j["metadata"]["annotations"]["llm-serving.io/model-size-gib"]),
                          j["metadata"]["annotations"]["llm-serving.io/model-profile"])
             for j in of_kind(objs, "Job") for group in ("initContainers", "containers")
             for c in j["spec"]["template"]["spec"].get(group, []) for e in c.get("env", []) if e["name"] == "DEST"}
    held = {(c["image"], placement(d["spec"]["template"]["spec"])) for d in of_kind(objs, "DaemonSet")
            for c in d["spec"]["template"]["spec"]["containers"]}
    out = {}
    for workload, t in engine_templates(objs):
        c = next(c for c in t["spec"]["containers"] if c["name"] == "engine")
        gate = next(g for g in t["spec"]["initContainers"] if g["name"] == "model-gate")
        size, profile = sizes[gate["args"][gate["args"].index("--model-dir") + 1]]
        gpus = pods_of(workload, t) * int(c["resources"]["limits"][GPU])
        engine = c["command"][0]
        pre = (c["image"], placement(t["spec"])) in held
        off = tts.time_to_serving(size, engine, gpus, pre_pulled=False, profile=profile)
        on = tts.time_to_serving(size, engine, gpus, pre_pulled=True, images_per_node=len(held), profile=profile)
        out[t["metadata"]["labels"]["model.aibrix.ai/name"]] = {
            "Engine": engine, "GPUs": str(gpus), "Model GiB": format(size, "g"),
            "First token, no pre-pull": tts.minutes(off.first_token_seconds),
            "First token, pre-pull": tts.minutes(on.first_token_seconds),
            "GPU-minutes, no pre-pull": f"{off.gpu_minutes:.0f}", "GPU-minutes, pre-pull": f"{on.gpu_minutes:.0f}",
            "This stack": "pre-pull" if pre else "no pre-pull"}
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_plan_states_the_time_to_first_token_the_rendered_objects_give(stack):
    rendered = render_stack(stack)
    expected = expected_rows(k8s_objects(rendered))
    stated = plan_rows(output.plan_md(rendered))
    assert set(stated) == set(expected) and expected
    for model, row in expected.items():
        assert {k: stated[model][k] for k in row} == row, model
        # The gain is the pull, on every committed stack: the sync (6.1 min) outlasts it.
        assert float(stated[model]["First token, no pre-pull"].split()[0]) > float(stated[model]["First token, pre-pull"].split()[0])
