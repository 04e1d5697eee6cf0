"""Manifest scanning with checkov (offline), YAML lint of what the repo ships. Deliberate exceptions
live on the objects as annotations with a reason; no check is skipped on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import IN_CI, PROJECT_DIR, STACKS, k8s_objects, render_stack
from yamllint import linter
from yamllint.config import YamlLintConfig

from render import output

# make test runs --dist loadgroup: one worker takes the whole file, so checkov starts once for it.
pytestmark = pytest.mark.xdist_group("scan")
from tools.check_stack import CHECKOV, checkov_scan_many


def checkov() -> str:
    if not Path(CHECKOV).exists():
        if IN_CI:
            pytest.fail(f"checkov is missing at {CHECKOV}; `make test` installs it from requirements-scan.txt")
        pytest.skip("checkov is not installed (run `make test`)")
    return CHECKOV


def scan(manifests: str, tmp_path: Path) -> dict:
    """The scan `make check` runs (tools/check_stack.py), over one manifest file."""
    results = checkov_scan_many({"manifests": manifests}, tmp_path, checkov())["manifests"]
    assert results["summary"]["parsing_errors"] == 0
    return results


def same_pod_manifests() -> str:
    from variants import dev_config, model, render, variant_file
    m = model(topology="pd-same-pod")
    m["vllm"] = {**m["vllm"], "tensorParallelSize": 4}
    images = dev_config()["images"] | {"vllmRay": {"upstream": "r/x:1", "digest": "sha256:" + "7" * 64, "rayVersion": "2.47.1"}}
    return output.kubernetes_yaml(render(variant_file(images=images, models=[m])))


def broken_manifest() -> str:
    """A privileged engine pod: the scan must fail it (CKV_K8S_16), or it is vacuous."""
    dep = next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "Deployment" and o["metadata"]["name"] != "open-webui")
    dep = json.loads(json.dumps(dep))
    dep["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    return yaml.safe_dump(dep)


@pytest.fixture(scope="module")
def scans(tmp_path_factory) -> dict[str, dict]:
    """The scan `make check` runs (tools/check_stack.py), over every manifest below in one checkov run."""
    from pool_stacks import POOL_STACKS, layer_objects
    manifests = {**{stack: output.kubernetes_yaml(render_stack(stack)) for stack in STACKS},
                 "same-pod": same_pod_manifests(), "broken": broken_manifest(),
                 "picker-unbounded": unbounded_picker(),
                 **{name: yaml.safe_dump_all(layer_objects(name), sort_keys=False) for name in POOL_STACKS}}
    results = checkov_scan_many(manifests, tmp_path_factory.mktemp("checkov"), checkov())
    assert all(r["summary"]["parsing_errors"] == 0 for r in results.values())
    return results


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_finds_nothing_in_any_stack(stack, scans):
    results = scans[stack]
    failed = [f"{c['check_id']} {c['resource']}" for c in results["failed_checks"]]
    assert failed == []
    assert results["summary"]["passed"] > 100 and results["summary"]["resource_count"] >= 10


def test_checkov_finds_nothing_in_the_same_pod_topology(scans):
    assert scans["same-pod"]["failed_checks"] == [] and scans["same-pod"]["summary"]["passed"] > 100


def test_checkov_finds_nothing_on_the_inference_pool_layer(scans):
    """gateway.routingLayer inferencePool (issue 31, tests/pool_stacks.py): what the layer renders (the endpoint
    picker's Deployment, Service, RBAC and ConfigMap, the pool's NetworkPolicies, route and grant; the rest of each
    render is the aibrix layer's, scanned in the stacks above) for each orchestrator's engines and a group's."""
    from pool_stacks import POOL_STACKS
    for name in POOL_STACKS:
        assert [f"{c['check_id']} {c['resource']}" for c in scans[name]["failed_checks"]] == [], name
        assert scans[name]["summary"]["passed"] > 100, (name, scans[name]["summary"])
    # Not vacuous: the picker without the CPU limit the chart leaves out (policy/endpoint_picker.py) is flagged.
    assert [c["check_id"] for c in scans["picker-unbounded"]["failed_checks"]] == ["CKV_K8S_11"]


def unbounded_picker() -> str:
    from pool_stacks import pool_render
    dep = next(o for o in k8s_objects(pool_render("pool-vllm-deployment")) if o["kind"] == "Deployment"
               and o["metadata"]["name"].endswith("-pool-epp"))
    dep = json.loads(json.dumps(dep))
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].pop("cpu")
    return yaml.safe_dump(dep)


def test_checkov_does_fail_a_broken_manifest(scans):
    """The scan is not vacuous: a privileged pod fails it, and only its own file's findings are its."""
    assert "CKV_K8S_16" in {c["check_id"] for c in scans["broken"]["failed_checks"]}
    assert all(c["file_path"] == "/broken/kubernetes.yaml" for c in scans["broken"]["failed_checks"])


def test_every_scanner_exception_says_why():
    for stack in STACKS:
        for obj in k8s_objects(render_stack(stack)):
            for key, value in ((obj.get("metadata") or {}).get("annotations") or {}).items():
                if key.startswith("checkov.io/skip"):
                    check, _, reason = value.partition("=")
                    assert check.startswith("CKV") and len(reason.split()) >= 5, (obj["metadata"]["name"], value)


SHIPPED_YAML = sorted([*PROJECT_DIR.glob("Pulumi*.yaml"), PROJECT_DIR / "policy" / "PulumiPolicy.yaml",
                       *PROJECT_DIR.glob("examples/*/Pulumi.yaml"), *PROJECT_DIR.glob(".github/workflows/*.yml"),
                       PROJECT_DIR / ".yamllint"])


@pytest.mark.parametrize("path", SHIPPED_YAML, ids=lambda p: str(p.relative_to(PROJECT_DIR)))
def test_shipped_yaml_is_lint_clean(path):
    config = YamlLintConfig(file=str(PROJECT_DIR / ".yamllint"))
    problems = [f"{p.line}:{p.column} {p.message}" for p in linter.run(path.read_text(), config, str(path))]
    assert problems == []
