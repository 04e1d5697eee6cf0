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
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_config import SECRETS, raw_config

from render import runtime, stackfile
from render.__main__ import main as render_main
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
    # The program sees text: `namespace: 0` arrives as the valid name "0" (plaintext.go marshalText).
    assume(not _is_valid({key: loader.decode(key, text) for key, text in
                          ((full.removeprefix("llm-serving:"), text) for full, text in sf.config.items())}))
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
    # The project's virtualenvs, so the copy builds none (make would otherwise bootstrap them in the copy).
    venvs = [f"VENV={PROJECT_DIR / '.venv'}", f"UV_VENV={PROJECT_DIR / '.venv-uv'}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    proc = subprocess.run(["make", "render", "STACK=broken", *venvs], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr.strip().splitlines()
    assert message[0] == "invalid stack configuration (1 problem):"
    assert "Pulumi.broken.yaml: llm-serving:gpuBudget = 'two': Input should be a valid integer" in proc.stderr
    assert len(message) <= 20 and "Traceback" not in proc.stderr
    assert not (repo / "build").exists()


# Plain scalars as a stack file may spell them: YAML 1.1 booleans, octal, dates, null, non-finite,
# out-of-range numbers, tags, anchors and block text (go-yaml v3 reads each its own way).
YAML_SCALARS = ["off", "yes", "on", "0777", "~", '""', "1e3", ".inf", ".nan", "2024-01-01", "[]", "{}", "-1", "0", "4096",
                "true", "x y", "1.5", "99999999999999999999", "!!binary aGk=", "!!int x", "!!str 5", "*nowhere",
                "'a\\nb'", "null", "[1, {a: 2}]", "{secure: v1:x}", "& x", "|\n          two\n          lines"]
DEV_LINES = (PROJECT_DIR / "Pulumi.dev.yaml").read_text().splitlines()
VALUE_LINES = [i for i, line in enumerate(DEV_LINES) if re.match(r"^\s+[-\w:]*\w: \S", line)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(VALUE_LINES), st.sampled_from(YAML_SCALARS)), min_size=1, max_size=3))
def test_any_stack_file_value_renders_or_exits_2_one_line_per_problem(tmp_path_factory, capsys, edits):
    """The whole render CLI, in process, on a stack file whose values are replaced: exit 0, or exit 2
    with one `Pulumi.fuzz.yaml...` line per problem, never a traceback, nothing written."""
    lines = list(DEV_LINES)
    for index, scalar in edits:
        lines[index] = f"{lines[index].split(': ', 1)[0]}: {scalar}"
    project = tmp_path_factory.mktemp("fuzz")
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "Pulumi.fuzz.yaml").write_text("\n".join(lines) + "\n")
    out = project / "out"
    code = render_main(["--stack", "fuzz", "--project-dir", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert not out.exists()
        problems = err.splitlines()[1:]
        assert problems and all(re.match(r"^Pulumi\.fuzz\.yaml(:\d+)?: \S", line) for line in problems), problems
