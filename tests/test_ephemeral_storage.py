"""Ephemeral storage on every container (issue 30): one rule (policy/ephemeral_storage.py), applied by every pod
builder and checked by the pack's `ephemeral-storage` rule, which tests/test_policy.py, test_topologies.py,
test_pd.py and test_pack_groups.py run over every render (custom resources' pod templates included)."""

from __future__ import annotations

import copy

import pytest
from conftest import k8s_objects, render_stack

from components.scanner_exceptions import KUBE_SCORE_IGNORE, KUBE_SCORE_REASON, scanner_exceptions
from policy import ephemeral_storage as es
from policy.rules import RESOURCE_POLICIES
from policy.workloads import containers, pod_templates

RULE = next(p for p in RESOURCE_POLICIES if p.name == "ephemeral-storage")
MI, GI = 2**20, 2**30


def _violations(obj: dict) -> list[str]:
    api = obj["apiVersion"]
    return RULE.check(f"kubernetes:{api if '/' in api else 'core/' + api}:{obj['kind']}", obj)


def _quantity(c: dict, kind: str) -> int:
    return es._bytes(c["resources"][kind][es.RESOURCE])


def test_a_disk_empty_dir_is_shared_by_the_containers_that_mount_it_and_memory_is_not_counted():
    pod = {"volumes": [{"name": "work", "emptyDir": {"sizeLimit": "1Gi"}},
                       {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                       {"name": "cache", "emptyDir": {"sizeLimit": "3Gi"}}],
           "initContainers": [{"name": "init", "securityContext": {"readOnlyRootFilesystem": True},
                               "volumeMounts": [{"name": "cache", "mountPath": "/c"}]}],
           "containers": [{"name": "a", "volumeMounts": [{"name": "work", "mountPath": "/w"},
                                                          {"name": "shm", "mountPath": "/dev/shm"},
                                                          {"name": "cache", "mountPath": "/c"}]},
                          {"name": "b", "securityContext": {"readOnlyRootFilesystem": True},
                           "volumeMounts": [{"name": "work", "mountPath": "/w"}]}]}
    es.with_ephemeral_storage(pod, {"a": (2 * GI, 10 * GI)})
    init, a, b = pod["initContainers"][0], *pod["containers"]
    # a: logs + writable + half of work + all of cache (b does not mount it); b: logs + half of work.
    assert (_quantity(a, "requests"), _quantity(a, "limits")) == (es.LOGS + 2 * GI + GI // 2 + 3 * GI,
                                                                   es.LOGS + 10 * GI + GI // 2 + 3 * GI)
    assert _quantity(b, "requests") == _quantity(b, "limits") == es.LOGS + GI // 2
    # An init container runs alone: the whole emptyDir.
    assert _quantity(init, "limits") == es.LOGS + 3 * GI
    requests, limits = es.pod_totals(pod)
    assert limits >= 4 * GI + 2 * es.LOGS and requests == _quantity(a, "requests") + _quantity(b, "requests")


def test_a_writer_without_an_allowance_and_an_unbounded_empty_dir_are_refused():
    with pytest.raises(ValueError, match="container w writes its root filesystem"):
        es.with_ephemeral_storage({"containers": [{"name": "w"}]})
    with pytest.raises(ValueError, match="emptyDir tmp has no sizeLimit"):
        es.with_ephemeral_storage({"volumes": [{"name": "tmp", "emptyDir": {}}], "containers": []})


def test_two_containers_sharing_one_resources_dict_each_get_their_own():
    shared = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    pod = {"volumes": [{"name": "x", "emptyDir": {"sizeLimit": "2Gi"}}],
           "containers": [{"name": n, "resources": shared, "securityContext": {"readOnlyRootFilesystem": True},
                           "volumeMounts": [{"name": "x", "mountPath": "/x"}] if n == "a" else []} for n in "ab"]}
    es.with_ephemeral_storage(pod)
    a, b = pod["containers"]
    assert _quantity(a, "limits") == es.LOGS + 2 * GI and _quantity(b, "limits") == es.LOGS
    assert shared == {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}


@pytest.mark.parametrize("stack,kind", [("dev", "Deployment"), ("staging", "StormService"), ("dev", "Job"),
                                        ("dev", "DaemonSet")])
def test_the_pack_refuses_a_container_without_it_and_limits_below_the_empty_dirs(stack, kind):
    """Custom resources too (kube-score does not read them): the StormService's engine and its model gate."""
    obj = copy.deepcopy(next(o for o in k8s_objects(render_stack(stack)) if o["kind"] == kind))
    assert _violations(obj) == []
    ref = pod_templates(kind, obj)[0]
    group, c = list(containers(ref.template))[0]
    del c["resources"]["limits"][es.RESOURCE]
    assert any(f"container {c['name']} has no ephemeral-storage limits" in v for v in _violations(obj))
    c["resources"]["limits"][es.RESOURCE] = "1Mi"
    spec = ref.template["spec"]
    spec.setdefault("volumes", []).append({"name": "big", "emptyDir": {"sizeLimit": "1Ti"}})
    assert any("less than its disk emptyDirs' sizeLimits" in v for v in _violations(obj))


def test_kube_score_exceptions_pair_each_ignored_id_with_its_reason_beside_checkov_s():
    out = scanner_exceptions({"CKV_K8S_8": "a reason of five words", "pod-probes-identical": "why one",
                              "container-image-pull-policy": "why two"})
    assert out == {"checkov.io/skip1": "CKV_K8S_8=a reason of five words",
                   KUBE_SCORE_IGNORE: "container-image-pull-policy,pod-probes-identical",
                   f"{KUBE_SCORE_REASON}1": "container-image-pull-policy=why two",
                   f"{KUBE_SCORE_REASON}2": "pod-probes-identical=why one"}
    # Ignoring container-resources would silently ignore the ephemeral-storage check too.
    for check in ("container-resources", "container-ephemeral-storage-request-and-limit"):
        with pytest.raises(ValueError, match="never ignored"):
            scanner_exceptions({check: "no"})
