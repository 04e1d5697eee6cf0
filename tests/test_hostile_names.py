"""Hostile values in every name-, label- and path-like field of the dev stack, through the render
CLI in process: each is refused under that field (exit 2, one line per problem, nothing written) or
renders objects the API server and the CRDs' CEL rules accept. The render itself refuses such objects
(apivalidation, exit 2) but without naming a stack-file field: that refusal fails this test, since the
config must refuse first."""

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest
from conftest import PROJECT_DIR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from variants import dev_config

from config_model import k8s
from render.__main__ import main as render_main

# Where each field sits in the dev stack's config, as a setter; its stack-file path prefix.
FIELDS = {
    "namespace": lambda c, v: c.update(namespace=v),
    "models[0].name": lambda c, v: c["models"][0].update(name=v),
    "models[0].servedModelName": lambda c, v: c["models"][0].update(servedModelName=v),
    "models[0].revision": lambda c, v: c["models"][0].update(revision=v),
    "models[0].directory": lambda c, v: c["models"][0].update(directory=v),
    "models[0].objectPrefix": lambda c, v: c["models"][0].update(objectPrefix=v),
    "models[0].pd": lambda c, v: c["models"][0].update(pd={"rolesetName": v, "rdma": {"resourceName": v}}),
    "models[0].vllm": lambda c, v: c["models"][0].setdefault("vllm", {}).update(toolCallParser=v, reasoningParser=v),
    "gpuPool.nodeSelector": lambda c, v: c.setdefault("gpuPool", {}).update(nodeSelector={v: v}),
    "gpuPool.tolerations": lambda c, v: c.setdefault("gpuPool", {}).update(
        tolerations=[{"key": v, "operator": "Equal", "value": v, "effect": "NoSchedule"}]),
    "modelSync.nodeSelector": lambda c, v: c.setdefault("modelSync", {}).update(nodeSelector={v: v}),
    # Paths start with '/' (most of the time): the rest of the value is what is hostile.
    "modelVolume.mountPath": lambda c, v: c["modelVolume"].update(mountPath=v if v.startswith("/") else f"/{v}"),
    "compileCache": lambda c, v: c.update(compileCache={"kind": "existingClaim", "claimName": v}),
    "gateway": lambda c, v: c.setdefault("gateway", {}).update(name=v, namespace=v, proxyNamespace=v),
    "gateway.paths": lambda c, v: c.setdefault("gateway", {}).update(paths=[v if v.startswith("/") else f"/{v}"]),
    "operations.monitoring": lambda c, v: c.setdefault("operations", {}).setdefault("monitoring", {}).update(
        labels={v: v}, prometheusNamespace=v),
    "operations.loadTest.storageClass": lambda c, v: c.setdefault("operations", {}).setdefault("loadTest", {}).update(
        storageClass=v, enabled=True),
    "operations.smoke": lambda c, v: c.setdefault("operations", {}).setdefault("smoke", {}).update(prompt=v),
}

# What breaks names, labels and paths: case, edges, dots and slashes, expansion, length around 63.
PIECES = ["-", "$(HOME)", "a", "z9", ".", "_", "/", "..", "//", "#", "$$", ":", " ", "A", "é", "%2F", "*", "\\",
          "nvidia.com/", "kubernetes.io/os", "x" * 30, "y" * 60]
SPECIAL = ["/", "/models/", "/models/../opt/llm-serving", "/opt", "/dev/shm/x", "kubernetes.io/hostname"]


def hostile(field: str) -> st.SearchStrategy[str]:
    """Hostile text, its pieces rotated per field: derandomized Hypothesis starts from the first
    piece, so each field starts from a different hostile value instead of all from the same."""
    turn = sorted(FIELDS).index(field) * 5 % len(PIECES)
    pieces = PIECES[turn:] + PIECES[:turn]
    special = SPECIAL[turn % len(SPECIAL):] + SPECIAL[:turn % len(SPECIAL)]
    return st.one_of(st.lists(st.sampled_from(pieces), min_size=1, max_size=5).map("".join),
                     st.integers(1, 80).map(lambda n: "m" * ((n + 7 * turn) % 80 + 1)), st.sampled_from(special))


BASE = dev_config()


def stack_file(cfg: dict) -> str:
    # JSON is YAML: every value as the CLI would store it in the stack file.
    lines = ["config:"] + [f"  llm-serving:{key}: {json.dumps(value)}" for key, value in cfg.items()]
    return "\n".join(lines) + "\n"


def aws_problems(out) -> list[str]:
    """The render's exit 0 already means apivalidation accepted every Kubernetes object; AWS names
    are not Kubernetes objects: the IAM user name against AWS's rule."""
    return [f"IAM user name {r['inputs']['name']!r}" for r in json.loads((out / "resources.json").read_text())
            if r.get("type") == "aws:iam/user:User" and (len(r["inputs"]["name"]) > k8s.IAM_USER_NAME_MAX
                                                          or not k8s.IAM_NAME.fullmatch(r["inputs"]["name"]))]


# Every field gets its own few examples, fixed (derandomize) so the suite stays a few seconds.
@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hostile_value_is_refused_under_its_field_or_renders_objects_the_api_server_accepts(
        tmp_path_factory, capsys, field, data):
    value = data.draw(hostile(field), label="value")
    cfg = copy.deepcopy(BASE)
    FIELDS[field](cfg, value)
    project = tmp_path_factory.mktemp("hostile")
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "Pulumi.hostile.yaml").write_text(stack_file(cfg))
    out = project / "out"
    code = render_main(["--stack", "hostile", "--project-dir", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert not out.exists()
        problems = err.splitlines()[1:]
        prefix = re.escape(f"Pulumi.hostile.yaml: llm-serving:{field}")
        assert problems and all(re.match(prefix + r"[.\[ ]", line) for line in problems), (value, problems)
    else:
        assert aws_problems(out) == [], value
