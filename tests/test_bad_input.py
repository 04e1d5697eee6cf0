"""Bad input fails safely: generated invalid stack configs always give a validation error naming a
field (never another exception, never a registered resource), and `make render` on a broken stack
file exits 2 with a short message and writes nothing."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess

from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config import SECRETS, raw_config

from render import runtime, stackfile
from stacks import loader
from stacks.loader import ConfigError

BASE = raw_config()
# file: llm-serving:<dotted path> = <value>: <what is allowed>; odd keys are quoted: images[':']
MESSAGE = r"^Pulumi\.fuzz\.yaml: llm-serving:[A-Za-z][\w.-]*(\[(\d+|'[^']*'|\"[^\"]*\")\][\w.-]*)* = .+: .+$"

WRONG_TYPES = st.one_of(st.text(max_size=8), st.integers(-10, 10), st.floats(allow_nan=False), st.booleans(),
                        st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = sorted(_paths(BASE), key=str)


def _set(cfg, path, value):
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _delete(cfg, path):
    node = cfg
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]


@st.composite
def broken_configs(draw):
    cfg = copy.deepcopy(BASE)
    kind = draw(st.sampled_from(["type", "missing", "range", "combination", "budget", "unknown"]))
    if kind == "type":
        path = draw(st.sampled_from(PATHS))
        _set(cfg, path, draw(WRONG_TYPES))
    elif kind == "missing":
        _delete(cfg, draw(st.sampled_from(["environment", "namespace", "gpuBudget", "objectStore", "modelVolume",
                                           "images", "models"]).map(lambda k: (k,))))
    elif kind == "range":
        field = draw(st.sampled_from([("gpuBudget",), ("models", 0, "replicas"), ("models", 0, "startupBudgetSeconds"),
                                      ("gpuPool", "shmSizeGiB"), ("models", 0, "vllm", "tensorParallelSize"),
                                      ("models", 0, "vllm", "gpuMemoryUtilization"), ("modelSync", "maxConcurrentRequests")]))
        cfg.setdefault("gpuPool", {})
        cfg.setdefault("modelSync", {})
        _set(cfg, field, draw(st.sampled_from([-1, -100, 0.0001, 10 ** 9, -0.5])))
    elif kind == "combination":
        cfg["models"][0].update(draw(st.sampled_from([
            {"engine": "sglang", "orchestrator": "deployment"}, {"orchestrator": "rolebasedgroup"},
            {"topology": "pd", "orchestrator": "deployment"}, {"topology": "pd-same-pod", "orchestrator": "stormservice"},
            {"orchestrator": "stormservice"}, {"topology": "hybrid", "orchestrator": "rayclusterfleet"}])))
    elif kind == "budget":
        cfg["gpuBudget"] = draw(st.integers(0, 7))
        cfg["models"][0]["replicas"] = draw(st.integers(1, 4))
    else:
        cfg[draw(st.sampled_from(["gpuBuget", "model", "namespaces", "image"]))] = draw(WRONG_TYPES)
    return cfg


def _is_valid(cfg) -> bool:
    try:
        loader.validate(cfg, "fuzz", SECRETS)
    except ConfigError:
        return False
    return True


@settings(max_examples=220, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(broken_configs().filter(lambda c: not _is_valid(c)))
def test_every_invalid_config_names_its_field(cfg):
    try:
        loader.validate(cfg, "fuzz", SECRETS)
    except ConfigError as err:
        lines = str(err).splitlines()
        assert lines and all(re.match(MESSAGE, line) for line in lines), lines
    else:
        raise AssertionError("expected a ConfigError")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(broken_configs().filter(lambda c: not _is_valid(c)))
def test_an_invalid_config_registers_nothing(cfg):
    sf = stackfile.StackFile(stack="fuzz", path=PROJECT_DIR / "Pulumi.fuzz.yaml")
    sf.config = {f"llm-serving:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in cfg.items()}
    sf.config.update({f"llm-serving:{k}": stackfile.MASK for k in SECRETS})
    sf.secret_keys = [f"llm-serving:{k}" for k in SECRETS]
    registered = []
    original = runtime.record

    def spy(*args, **kwargs):
        rendered = original(*args, **kwargs)
        registered.extend(rendered.resources)
        return rendered
    runtime.record = spy
    try:
        try:
            runtime.render(sf)
        except ConfigError:
            pass
        else:
            raise AssertionError("expected a ConfigError")
    finally:
        runtime.record = original
    assert registered == []


def test_make_render_on_a_broken_stack_file(tmp_path):
    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=PROJECT_DIR,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (PROJECT_DIR / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_DIR / name, repo / name)
    dev = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    (repo / "Pulumi.broken.yaml").write_text(dev.replace("llm-serving:gpuBudget: 8", "llm-serving:gpuBudget: two")
                                             .replace("tensorParallelSize: 8", "tensorParallelSize: 3"))
    venv = PROJECT_DIR / ".venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    proc = subprocess.run(["make", "render", "STACK=broken", f"VENV={venv}"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr.strip().splitlines()
    assert message[0] == "invalid stack configuration (1 problem):"
    assert "Pulumi.broken.yaml: llm-serving:gpuBudget = 'two': Input should be a valid integer" in proc.stderr
    assert len(message) <= 20 and "Traceback" not in proc.stderr
    assert not (repo / "build").exists()
