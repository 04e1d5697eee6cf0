"""Issue 10 item 8: every cache either engine writes at start or on a first request lands on the
keyed cache volume. The pinned upstream code that computes each path runs with the rendered
container's environment (tests/engine_probe.py); what cannot run here is checked against the
variables recorded in the citation module of the project that reads them (tests/upstream_*.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import upstream_cuda
import upstream_deepgemm
import upstream_flashinfer
import upstream_huggingface_hub
import upstream_pytorch
import upstream_sglang
import upstream_tilelang
import upstream_triton
import upstream_tvm_ffi
import upstream_vllm
from engine_containers import ENGINES, engine_containers, engine_packages

from components.pod_template import cache_key_annotation

PROBE = Path(__file__).with_name("engine_probe.py")
ENGINE_FACTS = {"vllm": upstream_vllm, "sglang": upstream_sglang}
STATEMENTS = upstream_sglang.STATEMENTS + upstream_tvm_ffi.STATEMENTS
READ = sum((m.READ for m in (upstream_vllm, upstream_deepgemm, upstream_triton, upstream_pytorch,
                             upstream_flashinfer, upstream_cuda, upstream_huggingface_hub)), ())


def cache_mount(c) -> str:
    """The compile-cache mount, which must be the pod's keyed subdirectory."""
    mount = next(m for m in c.container["volumeMounts"] if m["name"] == "compile-cache")
    assert mount["subPath"] == c.annotations[cache_key_annotation(c.container["name"])], c.where
    return mount["mountPath"]


def under(path: str, mount: str) -> bool:
    return Path(path).is_absolute() and Path(path).resolve().is_relative_to(Path(mount))


def probe_request(engine: str, version: str) -> dict:
    facts = ENGINE_FACTS[engine]
    tilelang = f"tilelang=={facts.TILELANG[version]}"
    tvm_ffi = f"apache-tvm-ffi=={facts.TVM_FFI[version]}"
    pins = {tvm_ffi} | ({f"sglang=={version}"} if engine == "sglang" else set())
    return {"environ": [[f"sglang=={version}", upstream_sglang.ENVIRON]] if engine == "sglang" else [],
            "tilelang": [[tilelang, upstream_tilelang.ENV, list(upstream_tilelang.ATTRIBUTES)]],
            "statements": [[s.pin, s.path, s.target] for s in STATEMENTS if s.pin in pins]}


def run_probe(env: dict[str, str], request: dict) -> dict[str, str]:
    # Exactly the container's variables, HOME as in the vendor images (root), nothing from this shell.
    proc = subprocess.run([sys.executable, str(PROBE), str(engine_packages()), json.dumps(request)],
                          env={**env, "HOME": "/root", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


VERSIONS = [(engine, v) for engine, facts in ENGINE_FACTS.items() for v in facts.RELEASES]


def distinct(engine: str):
    """One container per distinct (env, mount): the probe's answer depends on nothing else."""
    out = {}
    for c in engine_containers():
        if c.engine == engine:
            out.setdefault((c.env, cache_mount(c)), c)
    return list(out.values())


@pytest.mark.parametrize("engine,version", VERSIONS)
def test_every_cache_path_upstream_computes_is_under_the_keyed_mount(engine, version):
    request = probe_request(engine, version)
    for c in distinct(engine):
        mount = cache_mount(c)
        paths = run_probe(dict(c.env), request)
        # Each source asked about answered (a bump that moves a reader fails here, not silently).
        assert len([k for k in paths if "tilelang" in k]) == 2
        assert len([k for k in paths if ": " in k]) == len(request["statements"])
        if engine == "sglang":
            assert f"sglang=={version} envs.SGLANG_CACHE_DIR" in paths
        outside = {k: v for k, v in paths.items() if not under(v, mount)}
        assert outside == {}, f"{c.where} ({engine} {version}): caches outside {mount}: {outside}"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_variable_read_where_code_cannot_run_here_points_under_the_mount(engine):
    for c in engine_containers():
        if c.engine != engine:
            continue
        env, mount = dict(c.env), cache_mount(c)
        for read in READ:
            if engine in read.engines:
                assert read.variable in env, f"{c.where}: {read.variable} unset: {read.unset} ({read.source})"
                assert under(env[read.variable], mount), (c.where, read.variable, env[read.variable])


def test_deep_gemm_sees_one_directory_whichever_engine_sets_it():
    # SGLang replaces DG_JIT_CACHE_DIR with SGLANG_DG_CACHE_DIR; vLLM keeps DG_JIT_CACHE_DIR when set.
    for c in engine_containers():
        env = dict(c.env)
        assert env["DG_JIT_CACHE_DIR"] == env["SGLANG_DG_CACHE_DIR"], c.where
