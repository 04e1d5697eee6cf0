"""Issue 29 through the render CLI: each GROUP_PAIRS stack (DeepSeek-R1 on two nodes of 8 x H20,
tests/multinode_stacks.py) renders, exit 0, and its objects hold what docs/topologies.md says a group is; the
bad input the issue lists is refused, exit 2, no traceback, nothing written, with the stack-file field named
(tests/test_model_matrix.py refused(), on the R1 stack instead of dev's)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from conftest import k8s_objects
from multinode_pods import group_pods, rendered
from multinode_stacks import GROUP_PAIRS, RDMA_NETWORK, r1_config, r1_stack
from variants import render, stack_project

from components.group import GROUP_ADDRESS_ENV, IPC_LOCK
from components.orchestrators import ORCHESTRATORS
from components.orchestrators.base import GROUP_ROLE
from render.__main__ import main as render_main
from stacks.rules.passthrough import GROUP_HOW

# The renders of tests/multinode_pods.py are kept per process: one worker renders them once.
pytestmark = pytest.mark.xdist_group("multinode")


def _render(tmp_path, capsys, cfg: dict) -> tuple[int, str, object]:
    text = yaml.safe_dump({"config": {f"llm-serving:{k}": v for k, v in cfg.items()}}, sort_keys=False)
    project = stack_project(tmp_path / "project", "r1", text)
    out = tmp_path / "out"
    code = render_main(["--stack", "r1", "--project-dir", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, err, out


def refused(tmp_path, capsys, cfg: dict) -> list[str]:
    code, err, out = _render(tmp_path, capsys, cfg)
    assert code == 2 and not out.exists(), err
    return [ln for ln in err.splitlines() if ln.startswith("Pulumi.r1.yaml")]


def line(lines: list[str], field: str) -> str:
    found = [ln for ln in lines if re.match(rf"^Pulumi\.r1\.yaml(:\d+)?: llm-serving:{re.escape(field)} = ", ln)]
    assert len(found) == 1, (field, lines)
    return found[0]


# ---- what renders ----

@pytest.mark.parametrize("orchestrator, engine", GROUP_PAIRS)
def test_each_pair_renders_through_the_cli(tmp_path, capsys, orchestrator, engine):
    code, err, out = _render(tmp_path, capsys, r1_config(orchestrator, engine, network=RDMA_NETWORK))
    assert code == 0 and (out / "plan.md").exists(), err


@pytest.mark.parametrize("orchestrator, engine", GROUP_PAIRS)
def test_a_group_is_what_the_design_says(orchestrator, engine):
    o = ORCHESTRATORS[orchestrator]
    pods = [p for p in group_pods() if (p.orchestrator, p.engine, p.tp, p.pp) == (orchestrator, engine, 8, 2)]
    assert [p.rank for p in pods] == [0, 1]
    objs = k8s_objects(rendered(orchestrator, engine, 8, 2))
    (route,) = [x for x in objs if x["kind"] == "Service" and x["metadata"]["name"] == "deepseek-r1-api"]
    # The route's Service selects leaders only: by the label only the controller's rank-0 pods carry.
    assert o.leader_selector(None).items() <= route["spec"]["selector"].items()
    for p in pods:
        leader = p.rank == 0
        # Group role label, except on a StormService's one template for every rank.
        assert p.labels.get(GROUP_ROLE) == (None if orchestrator == "stormservice" else "leader" if leader else "worker")
        assert ("model.aibrix.ai/name" in p.labels) == (leader or orchestrator == "stormservice"), p.where
        # Network: NCCL/Gloo from gpuPool.network, the leader's address, RDMA and IPC_LOCK.
        assert {k: p.env[k] for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA")} == {
            "NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": RDMA_NETWORK["ibHca"]}
        assert p.env[GROUP_ADDRESS_ENV].startswith(p.leader_address)
        resources = p.container["resources"]
        assert resources["limits"][RDMA_NETWORK["rdma"]["resourceName"]] == "1"
        assert IPC_LOCK in p.container["securityContext"]["capabilities"]["add"]
        # One topology domain per group, and the gang's scheduler.
        (term,) = p.spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == RDMA_NETWORK["topologyKey"] and term["matchLabelKeys"] == [o.group_label]
        assert p.spec["schedulerName"] == ("volcano" if orchestrator == "leaderworkerset" else "scheduler-plugins-scheduler")


def test_without_rdma_there_is_no_rdma_device_nor_ipc_lock():
    r = render(r1_stack("leaderworkerset", "vllm"))
    (lws,) = [x for x in k8s_objects(r) if x["kind"] == "LeaderWorkerSet"]
    for t in ("leaderTemplate", "workerTemplate"):
        (c,) = lws["spec"]["leaderWorkerTemplate"][t]["spec"]["containers"]
        assert IPC_LOCK not in (c["securityContext"]["capabilities"].get("add") or [])
        assert set(c["resources"]["limits"]) == {"cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"}
        assert "affinity" not in lws["spec"]["leaderWorkerTemplate"][t]["spec"]


# ---- bad input ----

def test_parallel_sizes_that_are_no_whole_number_of_nodes(tmp_path, capsys):
    lines = refused(tmp_path, capsys, r1_config(tp=12, pp=1))
    assert "no whole number of nodes" in line(lines, "models[0].vllm.tensorParallelSize") and "12 GPUs" in "\n".join(lines)


def test_more_nodes_than_the_pool(tmp_path, capsys):
    cfg = r1_config()
    cfg["gpuPool"]["nodeCount"] = 1
    assert "the 2 nodes one replica of models[0]" in line(refused(tmp_path, capsys, cfg), "gpuPool.nodeCount")


@pytest.mark.parametrize("orchestrator, engine, says", [
    ("deployment", "vllm", "use leaderworkerset"), ("stormservice", "vllm", "use leaderworkerset"),
    ("rolebasedgroup", "vllm", "use leaderworkerset")])
def test_a_multi_node_shape_on_an_orchestrator_that_cannot_run_it(tmp_path, capsys, orchestrator, engine, says):
    cfg = r1_config("leaderworkerset", engine)
    cfg["models"][0]["orchestrator"] = orchestrator
    cfg["gpuPool"]["gangScheduling"] = {"scheduler": "none"}
    msg = line(refused(tmp_path, capsys, cfg), "models[0].orchestrator")
    assert "cannot run deepseek-r1 across nodes" in msg and says in msg


@pytest.mark.parametrize("topology", ["pd", "hybrid", "pd-same-pod"])
def test_p_d_across_nodes(tmp_path, capsys, topology):
    cfg = r1_config()
    cfg["models"][0]["topology"] = topology
    assert "must be 'combined' for a model spanning nodes" in line(refused(tmp_path, capsys, cfg), "models[0].topology")


VLLM_EXTRA = ["--nnodes", "2", "--node-rank", "0", "-n", "2", "-r", "0", "--master-addr", "x", "--master-port", "1",
              "--headless", "--pipeline-parallel-size", "2", "-pp", "2"]
SGLANG_EXTRA = ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "x:1", "--nccl-init-addr", "x:1"]


@pytest.mark.parametrize("engine, extra", [("vllm", VLLM_EXTRA), ("sglang", SGLANG_EXTRA)])
def test_multi_node_flags_in_extra_args(tmp_path, capsys, engine, extra):
    cfg = r1_config("leaderworkerset", engine)
    cfg["models"][0][engine]["extraArgs"] = extra
    lines = refused(tmp_path, capsys, cfg)
    for i, arg in enumerate(extra):
        if not arg.startswith("-"):
            continue
        msg = line(lines, f"models[0].{engine}.extraArgs[{i}]")
        pipeline = arg in ("--pipeline-parallel-size", "-pp")
        assert (f"models[0].{engine}.pipelineParallelSize" in msg) if pipeline else (GROUP_HOW in msg), msg


@pytest.mark.parametrize("name", ["NCCL_SOCKET_IFNAME", "VLLM_HOST_IP", GROUP_ADDRESS_ENV])
def test_network_and_address_variables_in_env(tmp_path, capsys, name):
    cfg = r1_config()
    cfg["models"][0]["env"] = {name: "x"}
    assert "is set by the program" in line(refused(tmp_path, capsys, cfg), f"models[0].env.{name}")


def test_a_gang_scheduler_is_required_and_must_be_the_orchestrators(tmp_path, capsys):
    cfg = r1_config()
    cfg["gpuPool"].pop("gangScheduling")
    assert "is required" in line(refused(tmp_path, capsys, cfg), "gpuPool.gangScheduling.scheduler")
    cfg = r1_config("stormservice", "sglang")
    cfg["gpuPool"]["gangScheduling"] = {"scheduler": "volcano"}
    msg = line(refused(tmp_path / "ss", capsys, cfg), "gpuPool.gangScheduling.scheduler")
    assert "is not one stormservice creates pod groups for" in msg and "coscheduling" in msg


def test_ib_hca_without_rdma(tmp_path, capsys):
    net = {k: v for k, v in RDMA_NETWORK.items() if k != "rdma"}
    assert "needs gpuPool.network.rdma" in line(refused(tmp_path, capsys, r1_config(network=net)), "gpuPool.network.ibHca")


def test_a_stormservice_name_too_long_for_its_podsets(tmp_path, capsys):
    cfg = r1_config("stormservice", "sglang", name="deepseek-r1-distilled0")
    assert len("deepseek-r1-distilled0") == 22
    assert "at most 21 characters" in line(refused(tmp_path, capsys, cfg), "models[0].name")


def test_a_leaderworkerset_for_a_model_that_fits_one_node(tmp_path, capsys):
    cfg = r1_config(pp=1, sizeGiB=300)
    found = refused(tmp_path, capsys, cfg)
    lines = [ln for ln in found if "runs models that span nodes" in ln]
    assert len(lines) == 1 and "llm-serving:models[0].orchestrator = 'leaderworkerset'" in lines[0], lines
    assert "8 GPUs" in lines[0] and "deployment" in lines[0]
    # One line on the field: the pair rule leaves a group-only orchestrator to the multi-node rule.
    assert len([ln for ln in found if "models[0].orchestrator =" in ln]) == 1, found


@pytest.mark.parametrize("version, refused_", [("1.29", True), ("1.30", True), ("1.31", False), ("1.33", False)])
def test_a_topology_domain_needs_match_label_keys(tmp_path, capsys, version, refused_):
    """KEP-3633 MatchLabelKeysInPodAffinity: alpha in 1.29, beta and on by default in 1.31, GA in 1.33."""
    cfg = r1_config(network=RDMA_NETWORK)
    cfg["cluster"] = {**cfg.get("cluster", {}), "kubernetesVersion": version}
    if refused_:
        assert "needs Kubernetes 1.31 or later" in line(refused(tmp_path, capsys, cfg), "gpuPool.network.topologyKey")
    else:
        assert _render(tmp_path, capsys, cfg)[0] == 0
    # Without a topology key nothing asks for the field, on any version.
    cfg["gpuPool"]["network"] = {k: v for k, v in RDMA_NETWORK.items() if k != "topologyKey"}
    assert _render(tmp_path, capsys, cfg)[0] == 0


def test_autoscaling_a_model_spanning_nodes(tmp_path, capsys):
    cfg = copy.deepcopy(r1_config(autoscaling={"enabled": True, "maxReplicas": 2}))
    assert "must be false for a model spanning nodes" in line(refused(tmp_path, capsys, cfg), "models[0].autoscaling.enabled")


@pytest.mark.parametrize("orchestrator, engine", GROUP_PAIRS)
def test_the_group_pods_controller_is_the_one_that_creates_them(orchestrator, engine):
    """The owner on a group pod (the disruption budget's form depends on it): the leader and worker
    StatefulSets of an LWS, RBG's RoleInstance, and for a StormService the PodSet, not the RoleSet that
    single-pod roles' pods have (aibrix v0.7.0 podset_controller.go createPodFromTemplate sets the PodSet as
    controller; tests/upstream_aibrix.py)."""
    from test_config import SECRETS

    from components.operations import pod_controllers
    from stacks import loader
    m = loader.validate(r1_config(orchestrator, engine), "dev", SECRETS).models[0]
    assert pod_controllers(m) == {{"leaderworkerset": "StatefulSet", "stormservice": "PodSet",
                                   "rolebasedgroup": "RoleInstance"}[orchestrator]}
