"""Issue 19: one module per engine (policy/engines/vllm.py, sglang.py) holds every engine-specific fact,
and each fact is the pinned engines' own (tests/upstream_vllm.py, tests/upstream_sglang.py, the installed
SGLang wheels); everything else asks the modules, so an engine name is switched on in few files."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
import upstream_sglang
import upstream_vllm
from conftest import PROJECT_DIR
from engine_containers import engine_containers, engine_packages, sglang_options
from test_network_monitoring import exposed_samples

from components import engines as model_engines
from components.pod_template import CACHE_MOUNT, cache_env
from config_model import Images, ServedModel
from config_model.types import stack_key
from policy import engines
from policy.engines import ENGINES, Engine, engine_named, engine_of_argv, sglang, vllm
from policy.profiles import deepseek_v4

UPSTREAM = {"vllm": upstream_vllm, "sglang": upstream_sglang}
TESTS = Path(__file__).resolve().parent


# ---- the modules and the registry ----

@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.NAME)
def test_every_engine_module_has_the_whole_interface(engine):
    hints = typing.get_type_hints(Engine)
    for name, hint in hints.items():
        value = getattr(engine, name)
        # `str | None`: an optional fact, None where the engine has none
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (typing.get_origin(hint) or hint,)
        assert isinstance(value, allowed), (engine.NAME, name, value)
    methods = [n for n, v in vars(Engine).items() if callable(v) and not n.startswith("_")]
    assert methods and all(callable(getattr(engine, n)) for n in methods), engine.NAME


def test_the_registry_holds_the_engines_the_config_offers():
    assert engines.NAMES == typing.get_args(ServedModel.model_fields["engine"].annotation) == ("vllm", "sglang")
    assert all(engine_named(e.NAME) is e for e in ENGINES)
    with pytest.raises(KeyError, match="the engines are vllm, sglang"):
        engine_named("tgi")
    image_keys = {stack_key(n) for n in Images.model_fields}
    for e in ENGINES:
        assert e.SECTION in ServedModel.model_fields and e.IMAGE_KEY in image_keys
        assert e.OFFLOAD_BACKEND in typing.get_args(ServedModel.model_fields["kv_cache_offload"].annotation
                                                    .model_fields["backend"].annotation)
    assert len({e.PORT for e in ENGINES}) == len(ENGINES) and len({e.OFFLOAD_BACKEND for e in ENGINES}) == len(ENGINES)


def test_every_rendered_engine_container_is_found_by_its_argv():
    seen = set()
    for c in engine_containers():
        argv = [str(a) for a in (c.container.get("command") or []) + (c.container.get("args") or [])]
        assert engine_of_argv(argv) is engine_named(c.engine), c.where
        seen.add(c.engine)
    assert seen == set(engines.NAMES)


@pytest.mark.parametrize("argv,name", [
    (["sglang", "serve", "--model-path", "/models/vllm"], "sglang"),
    (["/bin/sh", "-c", 'eval "$X" & exec "$@"', "ray-head", "vllm", "serve", "/m"], "vllm"),
    (["sh", "-c", "exec sglang serve --tp-size 8"], "sglang"),
    (["python3", "-m", "sglang.launch_server", "--model-path", "/m"], "sglang"),
    (["/usr/local/bin/vllm", "serve", "/m"], "vllm"),
    (["python3", "server.py", "--model", "/models/x"], None),
])
def test_the_engine_of_an_argv_is_its_first_word_naming_one(argv, name):
    found = engine_of_argv(argv)
    assert (found.NAME if found else None) == name


def test_the_components_ask_the_engine_of_the_model():
    m = ServedModel(name="s", profile="deepseek-v4", served_model_name="s", directory="d", object_prefix="p", revision="r", engine="sglang",
                    orchestrator="rolebasedgroup")
    cmd = model_engines.engine_command("/models/d", m)
    assert cmd.command == [sglang.COMMAND] and f"$({sglang.API_KEY_ENV})" in cmd.args
    assert cmd.args[cmd.args.index("--port") + 1] == str(sglang.PORT) and sglang.ENV.items() <= cmd.env.items()
    assert model_engines.max_model_len(m) == deepseek_v4.ASSUMED_CONTEXT["sglang"] and model_engines.tokenizer_mode(m) == "auto"
    v = ServedModel(name="v", profile="deepseek-v4", served_model_name="v", directory="d", object_prefix="p", revision="r",
                    kvCacheOffload={"backend": "native", "sizeGiB": 96}, vllm={"dataParallelSize": 2,
                                                                               "tensorParallelSize": 4})
    cmd = model_engines.engine_command("/models/d", v)
    assert cmd.command == [vllm.COMMAND] and cmd.env == model_engines.OFFLINE_ENV
    assert cmd.args[-4:] == ["--kv-offloading-backend", "native", "--kv-offloading-size", "96"]
    # One arithmetic for the pod's memory (the program) and the argv (the pack): 96 GiB per DP engine.
    assert model_engines.offload_memory_gib(v) == model_engines.offload_shm_gib(v) == 192
    assert vllm.offload_gib_of_argv(cmd.args) == 192


# ---- each fact is the pinned engines' own ----

def test_vllm_offload_facts_are_the_pinned_releases():  # the flags: tests/test_engine_flags.py, by vLLM's parsers
    assert vllm.OFFLOAD_BACKEND in upstream_vllm.KV_OFFLOADING_BACKENDS
    assert vllm.OFFLOAD_IN_SHM == ("/dev/shm" in upstream_vllm.OFFLOAD_BUFFER.values())


@pytest.mark.parametrize("version", upstream_sglang.RELEASES)
def test_sglang_flags_the_pack_reads_are_declared_by_the_release(version):
    options = sglang_options(version)
    for flag in (*sglang.TENSOR_PARALLEL_FLAGS, *sglang.DATA_PARALLEL_FLAGS):
        assert options.get(flag) is True, (version, flag)
    assert "--tp" not in options and "--dp" not in options
    assert sglang.OFFLOAD_IN_SHM == upstream_sglang.HICACHE_IN_DEV_SHM


@pytest.mark.parametrize("version", upstream_sglang.RELEASES)
def test_sglang_port_is_the_release_default(version):
    """Not required (serve_args passes --port), but the default keeps a hand-run engine where ours listen."""
    root = engine_packages() / f"sglang=={version}"
    defaults = {node.target.id: ast.literal_eval(node.value)
                for pattern in upstream_sglang.FIELD_SOURCES[version] for path in sorted(root.glob(pattern))
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "port"
                and isinstance(node.value, ast.Constant)}
    assert defaults == {"port": sglang.PORT}


def _sglang_environ(version: str, env: dict[str, str], names: list[str]) -> dict:
    """Which of `names` the release's environment module declares, and their values under `env`: its own
    code, run in a child process whose environment is exactly `env` (tests/engine_probe.py loads it)."""
    code = ("import json, pathlib, sys; import engine_probe as p; "
            f"p.ENVIRON[{f'sglang=={version}'!r}] = {upstream_sglang.ENVIRON!r}; "
            f"envs = p.sglang_environ(pathlib.Path({str(engine_packages())!r}), {f'sglang=={version}'!r}).envs; "
            f"print(json.dumps({{n: getattr(envs, n).get() for n in {names!r} if hasattr(type(envs), n)}}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=TESTS, env={**env, "HOME": "/root", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("version", upstream_sglang.RELEASES)
def test_sglang_environment_does_what_the_module_says(version):
    """ENV turns health generation off, which is on by default; every cache variable of the module is one
    the release declares (SGLANG_JIT_CACHE_DIR from 0.5.23 on, tests/upstream_sglang.py STATEMENTS)."""
    names = list(sglang.ENV)
    assert _sglang_environ(version, {}, names) == dict.fromkeys(names, True)
    assert _sglang_environ(version, dict(sglang.ENV), names) == dict.fromkeys(names, False)
    caches = sglang.cache_env(CACHE_MOUNT)
    declared = _sglang_environ(version, caches, list(caches))
    expected = {k: v for k, v in caches.items() if version != "0.5.17" or k != "SGLANG_JIT_CACHE_DIR"}
    assert declared == expected


def test_vllm_cache_variables_are_the_ones_vllm_reads():
    assert set(vllm.cache_env(CACHE_MOUNT)) <= {r.variable for r in upstream_vllm.READ if "vllm" in r.engines}


def test_every_engines_cache_variables_reach_the_engine_containers():
    rendered = cache_env()
    for e in ENGINES:
        assert e.cache_env(CACHE_MOUNT).items() <= rendered.items(), e.NAME
    for c in engine_containers():
        assert rendered.items() <= dict(c.env).items(), c.where


def _labels(matchers: str) -> set[str]:
    return set(re.findall(r"(\w+)\s*(?:=~|!=|=)", matchers))


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.NAME)
def test_metric_names_are_the_ones_the_engine_exports(engine):
    facts = UPSTREAM[engine.NAME]
    exported = exposed_samples({**facts.METRICS, **getattr(facts, "HTTP_METRICS", {})})
    kind = {n: k for n, (k, _, _) in {**facts.METRICS, **getattr(facts, "HTTP_METRICS", {})}.items()}
    for gauge in (*engine.IN_FLIGHT_GAUGES, engine.QUEUE_GAUGE, engine.KV_CACHE_GAUGE):
        assert kind.get(gauge) == "gauge", gauge
    assert engine.QUEUE_GAUGE == engine.IN_FLIGHT_GAUGES[1]
    for histogram in (engine.TTFT_HISTOGRAM, engine.TPOT_HISTOGRAM, engine.ITL_HISTOGRAM):
        assert kind.get(histogram) == "histogram" and f"{histogram}_bucket" in exported, histogram
    assert engine.GENERATION_TOKENS_TOTAL in exported
    name, matchers, failed = engine.HTTP_RESPONSES
    assert _labels(matchers) | _labels(failed) <= exported[name], engine.HTTP_RESPONSES


def test_vllm_http_failures_and_nixl_names_are_vllms():
    assert vllm.HTTP_RESPONSES[2] == f'status="{upstream_vllm.HTTP_STATUS_5XX}"'
    assert vllm.NIXL_TRANSFERS_HISTOGRAM == upstream_vllm.NIXL_TRANSFERS_HISTOGRAM
    assert vllm.NIXL_FAILURE_COUNTERS == upstream_vllm.NIXL_FAILURE_COUNTERS
    assert upstream_vllm.METRICS[vllm.NIXL_BYTES_HISTOGRAM][0] == "histogram"


def test_the_shipped_client_spells_the_gauges_as_the_modules_do():
    """components/scripts/openai_client.py runs in plain python images without this package, and its table
    reaches the load test and the preStop drain there: passing the names as arguments instead would change
    every rendered engine pod and load-test Job. So it keeps its own copy, which must be the modules'."""
    sys.path.insert(0, str(PROJECT_DIR / "components" / "scripts"))
    try:
        import openai_client
    finally:
        sys.path.pop(0)
    assert openai_client.IN_FLIGHT_GAUGES == {e.NAME: e.IN_FLIGHT_GAUGES for e in ENGINES}


# ---- the pack reads the argv by the engine's own flags ----

def _gpu_parallel_size(obj: dict) -> list[str]:
    from policy import rules
    policy = next(p for p in rules.RESOURCE_POLICIES if p.name == "gpu-parallel-size")
    group, version = obj["apiVersion"].split("/") if "/" in obj["apiVersion"] else ("core", obj["apiVersion"])
    return policy.check(f"kubernetes:{group}/{version}:{obj['kind']}", obj)


def _dev_deployment() -> tuple[dict, dict]:
    import copy

    from conftest import k8s_objects, render_stack
    dep = copy.deepcopy(next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "Deployment"))
    return dep, next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "engine")


def test_the_pack_reads_the_parallel_size_by_the_engines_declared_flags():
    dep, c = _dev_deployment()
    assert _gpu_parallel_size(dep) == []
    # SGLang's --tp-size is its declared name, vLLM declares none such: a vLLM argv spelling it asks for TP 1.
    c["args"][c["args"].index("--tensor-parallel-size")] = "--tp-size"
    assert any("parallel size of 1" in v for v in _gpu_parallel_size(dep))
    c["command"] = [sglang.COMMAND]
    assert _gpu_parallel_size(dep) == []


def test_a_gpu_container_running_no_known_engine_is_refused():
    dep, c = _dev_deployment()
    c["command"], c["args"] = ["python3"], ["server.py", "--tensor-parallel-size", "8"]
    assert _gpu_parallel_size(dep) == [
        "Deployment llm-serving-dev/deepseek-v4-flash: container engine has 8 GPUs but its argv runs none of the "
        "engines vllm, sglang, so its parallel size cannot be read."]


# ---- an engine name is switched on in at most three production files ----

NAMES = set(engines.NAMES)
PRODUCTION = ("components", "policy", "config_model", "stacks", "render")


def _names_in(node: ast.AST | None) -> bool:
    """An engine name as a literal, or a tuple/list/set of literals holding one."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_in(e) for e in node.elts)
    return False


def switches(path: Path) -> list[int]:
    """Lines where the file switches on an engine name: a comparison with one (`== "sglang"`,
    `in ("vllm", "sglang")`), a dict keyed by one, a subscript by one, a Literal of them, a case of one."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            hit = any(_names_in(n) for n in (node.left, *node.comparators))
        elif isinstance(node, ast.Dict):
            hit = any(_names_in(k) for k in node.keys)
        elif isinstance(node, ast.Subscript):
            hit = _names_in(node.slice)
        elif isinstance(node, ast.MatchValue):
            hit = _names_in(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            hit = any(k.arg in NAMES for k in node.keywords)
        else:
            hit = False
        if hit:
            lines.append(node.lineno)
    return sorted(set(lines))


def switching_files() -> dict[str, list[int]]:
    out = {}
    for package in PRODUCTION:
        for path in sorted((PROJECT_DIR / package).rglob("*.py")):
            rel = path.relative_to(PROJECT_DIR).as_posix()
            # A model profile (policy/profiles/) is a table of each engine's settings for one model family,
            # keyed by engine name; tests/test_profiles.py requires an entry per engine in every profile.
            if rel.startswith("policy/profiles/"):
                continue
            if lines := switches(path):
                out[rel] = lines
    return out


def test_an_engine_name_is_switched_on_in_at_most_three_production_files():
    found = switching_files()
    print("engine-name switches:", json.dumps(found))
    # config_model/serving.py's Literal (config_model is a leaf and cannot ask) and openai_client.py's copy
    # (see the test above) are the only ones outside policy/engines/.
    assert len(found) <= 3, found


def test_the_count_sees_every_form_of_switch(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('from typing import Literal\n'
                 'a = x == "sglang"\n'
                 'b = y in ("vllm", "other")\n'
                 'c = {"vllm": 1}\n'
                 'd = table["sglang"]\n'
                 'E = Literal["vllm", "sglang"]\n'
                 'match z:\n    case "vllm":\n        pass\n'
                 'f = dict(sglang=2)\n'
                 'g = "vllm serve"  # a word in a string is not a switch\n'
                 'h = vllm.PORT\n')
    assert switches(f) == [2, 3, 4, 5, 6, 8, 10]
