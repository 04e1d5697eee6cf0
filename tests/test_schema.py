"""Every rendered object passes its schema: built-in kinds with kubernetes-validate in strict mode
(unknown fields refused) for the oldest and newest supported Kubernetes versions and the stack's
own, custom resources against their CRDs in ../shared/crds."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest
from conftest import PROJECT_DIR, k8s_objects, render_stack
from crd_schemas import crd_index, validate_custom_resource

from render import stackfile

OLDEST, NEWEST = "1.29", "1.37"


def is_builtin(obj: dict, version: str) -> bool:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return False
    except kubernetes_validate.ValidationError:
        pass
    return True


def strict_errors(obj: dict, version: str) -> list[str]:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [str(err)]
    return []


def strict_result(obj: dict, version: str) -> list[str] | None:
    """None when `version` has no built-in schema for the object's kind, else strict_errors(obj, version):
    one validation where is_builtin and strict_errors take one each."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return None
    except kubernetes_validate.ValidationError as err:
        return [str(err)]
    return []


def cluster_version(stack: str) -> str:
    return json.loads(stackfile.read(PROJECT_DIR, stack).config["llm-serving:cluster"])["kubernetesVersion"]


@pytest.mark.parametrize("version", [OLDEST, NEWEST, "stack"])
def test_builtin_objects_pass_strict_validation(rendered, stack, version):
    version = cluster_version(stack) if version == "stack" else version
    builtin = [(o, errors) for o in k8s_objects(rendered) if (errors := strict_result(o, version)) is not None]
    assert len(builtin) >= 10
    for obj, errors in builtin:
        assert errors == [], f"{obj['kind']} {obj['metadata']['name']}"


def test_every_object_is_builtin_or_has_a_crd(rendered):
    index = crd_index()
    for obj in k8s_objects(rendered):
        if not is_builtin(obj, NEWEST):
            assert validate_custom_resource(obj, index) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_the_inference_pool_layers_objects_pass_their_schemas(version):
    """gateway.routingLayer inferencePool (issue 31, tests/pool_stacks.py): what the layer renders, on each
    orchestrator and a group, built-in kinds strict and the pool, route and grant against their CRDs. The oldest
    version on the first stack only: the others' objects have the same fields, other names and selectors (about
    50 ms an object a version)."""
    from pool_stacks import POOL_STACKS, layer_objects
    index, kinds = crd_index(), set()
    for name in list(POOL_STACKS)[:1] if version == OLDEST else POOL_STACKS:
        for obj in layer_objects(name):
            errors = strict_result(obj, version)
            if errors is None:
                errors = validate_custom_resource(obj, index)
            kinds.add(obj["kind"])
            assert errors == [], (name, obj["kind"], obj["metadata"]["name"], errors)
    assert {"InferencePool", "HTTPRoute", "ReferenceGrant", "Deployment", "Service", "Role", "RoleBinding",
            "ServiceAccount", "ConfigMap", "NetworkPolicy"} <= kinds


def test_strict_mode_refuses_unknown_fields():
    """Without strict, kubernetes-validate passes unknown fields; the tests above would be toothless."""
    dep = copy.deepcopy(next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "Deployment"))
    dep["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    kubernetes_validate.validate(dep, NEWEST, strict=False)
    assert strict_errors(dep, NEWEST)


def test_crd_index_covers_the_upstream_kinds_we_target():
    index = crd_index()
    for key in [("orchestration.aibrix.ai/v1alpha1", "StormService"),
                ("orchestration.aibrix.ai/v1alpha1", "RayClusterFleet"),
                ("workloads.x-k8s.io/v1alpha2", "RoleBasedGroup"),
                ("gateway.networking.k8s.io/v1", "HTTPRoute"),
                ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"),
                ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")]:
        assert key in index, key


def test_crd_validation_accepts_a_good_route_and_rejects_a_bad_one():
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "r", "namespace": "n"},
             "spec": {"parentRefs": [{"name": "aibrix-eg", "namespace": "aibrix-system"}],
                      "rules": [{"backendRefs": [{"name": "svc", "port": 8000}]}]}}
    assert validate_custom_resource(route, crd_index()) == []
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = "eight-thousand"
    assert validate_custom_resource(route, crd_index())
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = 8000
    route["spec"]["rules"][0]["timeout"] = "120s"  # misspelt: the API server would drop it silently
    assert any("timeout" in e for e in validate_custom_resource(route, crd_index()))
    assert validate_custom_resource({"apiVersion": "x/v1", "kind": "Nope"}, crd_index()) == ["no CRD serves x/v1 Nope"]
