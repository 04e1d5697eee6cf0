"""Issue 29: the group workloads against the pinned controllers. Each GROUP_PAIRS stack's LeaderWorkerSet,
StormService (podGroupSize, schedulingStrategy; and the PodSet the RoleSet controller makes of its role) and
RoleBasedGroup (leaderWorkerPattern, leaderTemplatePatch, gang annotations) validates against the CRDs in
../shared/crds, schema and CEL; what components/orchestrators/ and policy/workloads.py take from the controllers
is what tests/upstream_lws.py, upstream_aibrix.py and upstream_rbg.py pinned, and each pinned line is in the
file at the tag where the workplace's mirror of the repository is present."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import upstream_aibrix
import upstream_lws
import upstream_rbg
from crd_schemas import crd_index, raw_crd_index, validate_custom_resource
from multinode_pods import SHAPES, group_pods, workload
from multinode_stacks import GANG, GROUP_PAIRS

from apivalidation import cel_rules
from components.orchestrators import leaderworkerset as lws
from components.orchestrators import rolebasedgroup as rbg
from components.orchestrators import stormservice as ss
from components.orchestrators.leaderworkerset import ORCHESTRATOR as LWS
from components.orchestrators.rolebasedgroup import ORCHESTRATOR as RBG
from components.orchestrators.stormservice import ORCHESTRATOR as SS
from policy import workloads
from stacks.rules.multinode import STORMSERVICE_GROUP_NAME_MAX

# The renders of tests/multinode_pods.py are kept per process: one worker renders them once.
pytestmark = pytest.mark.xdist_group("multinode")
MIRRORS = Path("/work/.mirror")
CASES = [(o, e, tp, pp) for o, e in GROUP_PAIRS for tp, pp in SHAPES]


def errors(obj: dict) -> list[str]:
    found = validate_custom_resource(obj, crd_index())
    rules = cel_rules.check(obj, raw_crd_index())
    assert rules is not None, f"no CRD for {obj['kind']}"
    return found + [f"{f}: {m}" for f, _, m in rules]


def podset_of(obj: dict) -> dict:
    """The PodSet the RoleSet controller makes of the role (pkg/controller/roleset/podset_rollsyncer.go
    createPodSetForRole): its podGroupSize, template, stateful and schedulingStrategy."""
    (role,) = obj["spec"]["template"]["spec"]["roles"]
    spec = {"podGroupSize": role["podGroupSize"], "template": role["template"], "stateful": role["stateful"]}
    if "schedulingStrategy" in role:
        spec["schedulingStrategy"] = role["schedulingStrategy"]
    return {"apiVersion": obj["apiVersion"], "kind": "PodSet", "spec": spec,
            "metadata": {"name": upstream_aibrix.podset_name(f"{obj['metadata']['name']}-roleset-x7k2p", role["name"],
                                                             "5d8f7c9b6", 0), "namespace": obj["metadata"]["namespace"]}}


@pytest.mark.parametrize("orchestrator, engine, tp, pp", CASES)
def test_the_group_workload_is_valid_against_its_crd(orchestrator, engine, tp, pp):
    obj = workload(orchestrator, engine, tp, pp)
    assert errors(obj) == []
    if orchestrator == "stormservice":
        (role,) = obj["spec"]["template"]["spec"]["roles"]
        low, high = upstream_aibrix.ROLE_POD_GROUP_SIZE
        assert low < role["podGroupSize"] <= high
        podset = podset_of(obj)
        assert errors(podset) == []
        low, high = upstream_aibrix.PODSET_POD_GROUP_SIZE
        assert low <= podset["spec"]["podGroupSize"] <= high


def test_the_crds_refuse_what_the_controllers_would():
    """The validation above has teeth: a size past the CRDs' bounds, a restart policy not in the enum, a
    leaderWorkerPattern with both a template and a templateRef (CEL)."""
    lws_obj = copy.deepcopy(workload("leaderworkerset", "vllm", 8, 2))
    lws_obj["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateWholeSet"
    assert any("restartPolicy" in e for e in errors(lws_obj))
    podset = podset_of(workload("stormservice", "sglang", 8, 2))
    podset["spec"]["podGroupSize"] = 1
    assert any("podGroupSize" in e for e in errors(podset))
    ss_obj = copy.deepcopy(workload("stormservice", "sglang", 8, 2))
    ss_obj["spec"]["template"]["spec"]["roles"][0]["podGroupSize"] = 101
    assert any("podGroupSize" in e for e in errors(ss_obj))
    rbg_obj = copy.deepcopy(workload("rolebasedgroup", "sglang", 8, 2))
    rbg_obj["spec"]["roles"][0]["leaderWorkerPattern"]["templateRef"] = {"name": "x"}
    assert any("mutually exclusive" in e for e in errors(rbg_obj))


# ---- the controllers' facts, as the program uses them ----

def test_the_injected_variables_are_the_controllers():
    assert workloads.LWS_GROUP_ENV == upstream_lws.INJECTED_ENV
    assert workloads.STORMSERVICE_GROUP_ENV == upstream_aibrix.PODSET_ENV + upstream_aibrix.ROLESET_ENV
    assert set(workloads.RBG_GROUP_ENV) == set(upstream_rbg.BASE_ENV + upstream_rbg.LWP_ENV)
    who = {o.name: o.group_identity(None, "ns") for o in (LWS, RBG)}
    assert who["leaderworkerset"].rank_env == upstream_lws.WORKER_INDEX_ENV
    assert who["leaderworkerset"].leader_address == f"$({upstream_lws.LEADER_ADDRESS_ENV})"
    assert who["rolebasedgroup"].rank_env == "RBG_LWP_WORKER_INDEX"
    assert who["rolebasedgroup"].leader_address == "$(RBG_LWP_LEADER_ADDRESS)"


def test_the_leader_address_each_rank_reaches_is_the_controllers_form():
    forms = {"leaderworkerset": "deepseek-r1-0.deepseek-r1.llm-serving-dev",
             "stormservice": "deepseek-r1-roleset-x7k2p-server-5d8f7c9b6-0-0.deepseek-r1.llm-serving-dev",
             "rolebasedgroup": "deepseek-r1-server-0-0.s-deepseek-r1-server.llm-serving-dev"}
    for p in group_pods():
        assert p.leader_address == forms[p.orchestrator], p.where
        # The StormService's pod names stay within 62 characters, or Shorten would rewrite the leader's name.
        assert len(p.leader_address.split(".")[0]) <= 62


def test_labels_restart_and_gang_are_the_controllers():
    assert (lws.WORKER_INDEX_LABEL, lws.GROUP_KEY_LABEL) == (upstream_lws.WORKER_INDEX_LABEL, upstream_lws.GROUP_KEY_LABEL)
    assert LWS.group_label == upstream_lws.GROUP_KEY_LABEL and LWS.leader_selector(None) == {
        upstream_lws.WORKER_INDEX_LABEL: "0"}
    assert lws.RECREATE_GROUP == upstream_lws.DEFAULT_RESTART_POLICY and lws.RECREATE_GROUP in upstream_lws.GROUP_RECREATING
    assert LWS.gang_schedulers == upstream_lws.GANG_PROVIDERS
    assert (ss.GROUP_INDEX_LABEL, ss.PODSET_LABEL) == (upstream_aibrix.GROUP_INDEX_LABEL, upstream_aibrix.PODSET_NAME_LABEL)
    assert SS.group_label == upstream_aibrix.PODSET_NAME_LABEL and SS.leader_selector(None) == {
        upstream_aibrix.GROUP_INDEX_LABEL: "0"}
    assert (rbg.COMPONENT_LABEL, rbg.INSTANCE_LABEL) == (upstream_rbg.COMPONENT_NAME_LABEL, upstream_rbg.INSTANCE_NAME_LABEL)
    assert RBG.group_label == upstream_rbg.INSTANCE_NAME_LABEL and RBG.leader_selector(None) == {
        upstream_rbg.COMPONENT_NAME_LABEL: "leader"}
    assert (rbg.GANG_ANNOTATION, rbg.GANG_TIMEOUT_ANNOTATION) == (upstream_rbg.GANG_ANNOTATION,
                                                                   upstream_rbg.GANG_TIMEOUT_ANNOTATION)
    assert rbg.RECREATE_INSTANCE == upstream_rbg.LWP_DEFAULT_RESTART_POLICY
    assert STORMSERVICE_GROUP_NAME_MAX == 63 - upstream_aibrix.PODSET_NAME_SUFFIX_ESTIMATE - len(ss.ROLE_NAME)


@pytest.mark.parametrize("orchestrator, engine, tp, pp", CASES)
def test_the_workload_writes_what_the_controller_does_not_default(orchestrator, engine, tp, pp):
    obj = workload(orchestrator, engine, tp, pp)
    size = tp * pp // 8
    if orchestrator == "leaderworkerset":
        spec = obj["spec"]
        # No defaulting webhook needed: the controller dereferences rollingUpdateConfiguration unconditionally.
        assert set(spec["rolloutStrategy"]["rollingUpdateConfiguration"]) >= {"partition", "maxSurge", "maxUnavailable"}
        assert spec["leaderWorkerTemplate"]["restartPolicy"] == upstream_lws.DEFAULT_RESTART_POLICY
        assert spec["startupPolicy"] in upstream_lws.STARTUP_POLICIES
        # Volcano's pod group holds the whole group only when the workers are created with the leader.
        assert upstream_lws.volcano_min_member(size, spec["startupPolicy"]) == size == spec["leaderWorkerTemplate"]["size"]
        for t in ("leaderTemplate", "workerTemplate"):
            assert spec["leaderWorkerTemplate"][t]["spec"]["schedulerName"] == upstream_lws.VOLCANO_SCHEDULER_NAME
    elif orchestrator == "stormservice":
        (role,) = obj["spec"]["template"]["spec"]["roles"]
        # AIBrix copies minMember as given (never derived): the group's size, or no gang.
        assert role["schedulingStrategy"] == {"coschedulingSchedulingStrategy": {"minMember": size}}
        assert GANG[orchestrator] == "coscheduling"
    else:
        (role,) = obj["spec"]["roles"]
        assert obj["metadata"]["annotations"][upstream_rbg.GANG_ANNOTATION] == "true"
        assert role["leaderWorkerPattern"]["restartPolicy"] == upstream_rbg.LWP_DEFAULT_RESTART_POLICY
        assert role["leaderWorkerPattern"]["size"] == size


def _at_tag(repo: str, tag: str, path: str) -> str:
    mirror = MIRRORS / repo.replace("/", "+") / "repo"
    if not mirror.is_dir():
        pytest.skip(f"no mirror of {repo} (the workplace's, not the project's)")
    return subprocess.run(["git", "-C", str(mirror), "show", f"{tag}:{path}"], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("module, source", [(upstream_lws, "SOURCE"), (upstream_aibrix, "GROUP_SOURCE"),
                                            (upstream_rbg, "SOURCE")], ids=lambda x: getattr(x, "__name__", x))
def test_each_pinned_line_is_in_its_file_at_the_tag(module, source):
    decl = module.PORTED_FROM
    for path, text in getattr(module, source):
        assert any(path == f or (f.endswith("/") and path.startswith(f)) for f in decl["files"]), path
        assert text in _at_tag(decl["repo"], module.TAG, path), f"{decl['repo']} {module.TAG} {path}: {text}"
