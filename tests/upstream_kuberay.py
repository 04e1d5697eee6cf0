"""KubeRay v1.2.1 behaviour the stacks depend on (github.com/ray-project/kuberay, tag v1.2.1): the one
place a maintainer re-checks when bumping the KubeRay that AIBrix's dependency bundle brings."""

from __future__ import annotations

TAG = "v1.2.1"

# Two upstreams: KubeRay itself (compared with the KubeRay AIBrix's bundle brings, components/platform.py
# AIBRIX_BUNDLED) and the AIBrix naming is_head_service_name relies on (compared with
# Platform.aibrix_version), by tests/test_upstream_releases.py.
PORTED_FROM = (
    {"repo": "ray-project/kuberay", "release": TAG, "component": "kuberay",
     "files": ("ray-operator/controllers/ray/utils/util.go",
               "ray-operator/controllers/ray/raycluster_controller.go")},
    {"repo": "vllm-project/aibrix", "release": "v0.7.0", "component": "aibrix",
     "files": ("pkg/controller/rayclusterfleet/sync.go",
               "pkg/controller/rayclusterreplicaset/rayclusterreplicaset_utils.go")},
)


def check_name(s: str) -> str:
    """ray-operator/controllers/ray/utils/util.go CheckName: keep the last 50 characters; a leading
    digit or punctuation becomes 'r'."""
    if len(s) > 50:
        s = s[len(s) - 50:]
    if s[0].isdigit() or not s[0].isalnum():
        s = "r" + s[1:]
    return s


def head_service_name(raycluster: str) -> str:
    """utils/util.go GenerateHeadServiceName for a RayCluster without headService.name."""
    return check_name(f"{raycluster}-head-svc")


def is_head_service_name(name: str) -> bool:
    """Whether a Service name could be a head Service of some RayCluster: AIBrix names each fleet's
    clusters `<fleet>-<template hash>-<random>` (aibrix v0.7.0 pkg/controller/rayclusterfleet/sync.go,
    rayclusterreplicaset_utils.go GenerateName), so any name ending in -head-svc can be taken."""
    return name.endswith("-head-svc")


# The controller ownerReference on a RayCluster's pods: ray-operator/controllers/ray/raycluster_controller.go
# buildHeadPod and buildWorkerPod, controllerutil.SetControllerReference(&instance, &pod, ...) with the
# RayCluster. Whether RayCluster has /scale is read from its CRD (../shared/crds/kuberay/v1.2.1).
POD_CONTROLLER = ("ray.io/v1", "RayCluster")
