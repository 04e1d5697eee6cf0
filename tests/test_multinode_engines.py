"""Issue 29: every rank of every group the multi-node stacks render (tests/multinode_pods.py: each GROUP_PAIRS
stack at TP 8 x PP 2 and TP 16 x PP 1, the controllers' variables injected and expanded as the kubelet does)
is accepted by the pinned engines' own parsers, and vLLM's engine config puts it where the group needs it: the
world size is the group's GPUs, the node count its pods, the node rank its own. vLLM's parsers run in the
session's one batch (engine_containers.vllm_releases); SGLang's option strings are read from its source
(tests/sglang_cli.py). The engines' multi-node constants (policy/engines/) are checked against the installed
releases (tests/upstream_vllm.py, upstream_sglang.py MULTI_NODE_SOURCE)."""

from __future__ import annotations

import ast
import re

import pytest
import sglang_cli
import upstream_sglang
import upstream_vllm
import vllm_cli
from engine_containers import engine_packages, sglang_options
from engine_containers import option_names as flags
from engine_containers import vllm_releases as parse_every_vllm_argv
from multinode_pods import group_pods, pod, pod_ids

from policy.engines import sglang, vllm
from policy.manifests import flag_value
from policy.workloads import gpu_count

# Rendered when a test first asks (tests/multinode_pods.py), not at collection on every worker; one worker.
pytestmark = pytest.mark.xdist_group("multinode")
VLLM_PODS, SGLANG_PODS = pod_ids("vllm"), pod_ids("sglang")
GPUS_PER_NODE = 8   # H20 nodes of tests/multinode_stacks.py


def value(argv: tuple[str, ...], flag: str) -> str:
    (i,) = [i for i, a in enumerate(argv) if a == flag]
    return argv[i + 1]


@pytest.fixture(scope="session")
def vllm_releases(tmp_path_factory) -> dict[str, vllm_cli.Release]:
    return parse_every_vllm_argv(tmp_path_factory)


def test_every_pair_and_shape_renders_every_rank_of_a_group():
    seen = {(p.orchestrator, p.engine, p.tp, p.pp) for p in group_pods()}
    assert len(seen) == 8 and {p.where for p in group_pods()} == set(VLLM_PODS) | set(SGLANG_PODS)
    assert {p.rank for p in group_pods()} == {0, 1}
    for p in group_pods():
        gpus = gpu_count(p.container)[1]
        assert gpus == GPUS_PER_NODE and p.size * gpus == p.tp * p.pp, p.where
        assert p.env[vllm.HOST_IP_ENV if p.engine == "vllm" else sglang.HOST_IP_ENV] == p.pod_ip, p.where
        assert "$(" not in " ".join(p.argv), p.where   # every reference expanded: each names an injected variable


@pytest.mark.parametrize("version", upstream_vllm.RELEASES)
@pytest.mark.parametrize("where", sorted(VLLM_PODS))
def test_vllm_accepts_every_rank_and_configures_it_as_part_of_the_group(vllm_releases, version, where):
    p, r = pod(where), vllm_releases[version]
    assert r.results[p.argv] is None, f"vLLM {version} `vllm {' '.join(p.argv)}`: {r.results[p.argv]}"
    assert not [f for f in flags(p.argv[1:]) if f not in r.options], "abbreviations only"
    # The leader serves; every other rank runs headless (no API server: upstream_vllm HEADLESS_FUNCTION).
    assert ("--headless" in p.argv) == (p.rank > 0)
    assert (value(p.argv, "--nnodes"), value(p.argv, "--node-rank")) == (str(p.size), str(p.rank))
    assert (value(p.argv, "--master-addr"), value(p.argv, "--master-port")) == (p.leader_address, str(vllm.MASTER_PORT))
    config = r.configs[p.argv]
    assert isinstance(config, dict), f"vLLM {version} create_engine_config: {config}"
    assert config["world_size"] == p.tp * p.pp == p.size * gpu_count(p.container)[1]
    assert config["local_world_size"] == gpu_count(p.container)[1]
    assert config["nnodes"] == p.size and 0 <= config["node_rank"] == p.rank < config["nnodes"]
    assert (config["tensor_parallel_size"], config["pipeline_parallel_size"]) == (p.tp, p.pp)
    assert (config["master_addr"], config["master_port"]) == (p.leader_address, vllm.MASTER_PORT)
    assert config["distributed_executor_backend"] == "mp"


@pytest.mark.parametrize("where", sorted(SGLANG_PODS))
def test_sglang_accepts_every_rank_with_its_dist_init_address(where):
    p = pod(where)
    # Every release a stack runs: the unit stacks 0.5.23, the e2e variants 0.5.17 (e2e/stackfiles.py).
    for release in upstream_sglang.RELEASES:
        options = sglang_options(release)
        sglang_cli.parser(options).parse_args(list(p.argv[1:]))   # raises Refused as `sglang serve` would exit 2
        assert not [f for f in flags(p.argv[1:]) if f not in options], f"abbreviations only ({release})"
    assert (value(p.argv, "--nnodes"), value(p.argv, "--node-rank")) == (str(p.size), str(p.rank))
    assert value(p.argv, "--dist-init-addr") == f"{p.leader_address}:{sglang.DIST_INIT_PORT}"
    # PP 1 is SGLang's default and not rendered.
    tp, pp = (int(flag_value(list(p.argv), *f) or 1) for f in (sglang.TENSOR_PARALLEL_FLAGS, sglang.PIPELINE_PARALLEL_FLAGS))
    assert (tp, pp) == (p.tp, p.pp) and sglang.parallel_size_of_argv(list(p.argv)) == p.size * GPUS_PER_NODE
    # check_server_args (launch time, not run here): (tp x pp) % nnodes == 0, no DP across nodes.
    assert (tp * pp) % p.size == 0 and "--dp-size" not in p.argv and "--data-parallel-size" not in p.argv
    # Every rank serves on the pod's address (rank >= 1 the dummy health server), so every rank is probed.
    assert value(p.argv, "--host") == "0.0.0.0" and p.container.get("readinessProbe")


def test_only_the_vllm_leader_serves_a_port():
    for p in map(pod, VLLM_PODS):
        served = bool(p.container.get("ports")) and bool(p.container.get("readinessProbe"))
        assert served == (p.rank == 0) and bool(p.container.get("lifecycle")) == (p.rank == 0), p.where


# ---- the engines' multi-node constants, against the installed releases ----

def _vllm_source(version: str, path: str) -> str:
    site = next((vllm_cli.venvs() / version).glob("lib/python*/site-packages"))
    return (site / path).read_text()


@pytest.mark.parametrize("version", upstream_vllm.RELEASES)
def test_vllm_multi_node_facts_are_the_installed_releases(vllm_releases, version):
    for path, text in upstream_vllm.MULTI_NODE_SOURCE:
        assert text in _vllm_source(version, path), (version, path, text)
    path, name = upstream_vllm.HEADLESS_FUNCTION
    (fn,) = [n for n in ast.walk(ast.parse(_vllm_source(version, path))) if isinstance(n, ast.FunctionDef)
             and n.name == name]
    assert "run_server" not in ast.unparse(fn) and "serve_http" not in ast.unparse(fn)
    assert vllm.WORKER_SERVES_HTTP is False and vllm.MASTER_PORT == upstream_vllm.MASTER_PORT_DEFAULT
    assert vllm.HOST_IP_ENV == "VLLM_HOST_IP"
    options = vllm_releases[version].options
    assert {f: options.get(f) for f in vllm.GROUP_FLAGS} == {f: f != "--headless" for f in vllm.GROUP_FLAGS}
    assert all(options.get(f) is True for f in (*vllm.PIPELINE_PARALLEL_FLAGS, "-pp", "-n", "-r"))
    assert {"-n", "-r"} <= set(vllm.UNRENDERED_OWNED_FLAGS)


def test_sglang_multi_node_facts_are_the_installed_release():
    root = engine_packages() / f"sglang=={upstream_sglang.MULTI_NODE_RELEASE}"
    for path, text in upstream_sglang.MULTI_NODE_SOURCE:
        assert text in (root / path).read_text(), (path, text)
    assert re.search(rf'os\.getenv\("{sglang.HOST_IP_ENV}"', (root / "sglang/srt/utils/network.py").read_text())
    assert sglang.WORKER_SERVES_HTTP is True
    options = sglang_options(upstream_sglang.MULTI_NODE_RELEASE)
    assert all(options.get(f) is True for f in (*sglang.GROUP_FLAGS, upstream_sglang.DIST_INIT_ALIAS,
                                                *sglang.PIPELINE_PARALLEL_FLAGS))
    assert "--headless" not in options
