"""Names, labels and paths are valid by construction: what the API server, the kubelet, a CRD's CEL
rule or AWS would refuse is refused when the stack file is read, under the field that holds it,
with the value and the limit (issue 11)."""

from __future__ import annotations

import copy
import re

import pytest
from test_config import SECRETS, raw_config

from components.network import NetworkArgs, policies
from stacks import loader
from stacks.loader import ConfigError

BASE = raw_config()


def refusals(change, stack: str = "dev") -> list[str]:
    cfg = copy.deepcopy(BASE)
    change(cfg)
    try:
        loader.validate(cfg, stack, SECRETS)
    except ConfigError as err:
        return str(err).splitlines()
    return []


def model(**values):
    return lambda cfg: cfg["models"][0].update(values)


def section(name: str, **values):
    return lambda cfg: cfg.setdefault(name, {}).update(values)


def ops(name: str, **values):
    return lambda cfg: cfg.setdefault("operations", {}).setdefault(name, {}).update(values)


def aws_credentials(cfg):
    # On AWS S3: an AWS region name (dev's is COS's ap-shanghai).
    cfg["objectStore"].update(createCredentials=True, create=True, region="ap-east-1")
    cfg["objectStore"].pop("endpoint", None)


PD = {"topology": "pd", "orchestrator": "rayclusterfleet"}
CASES = [
    # (change, stack-file field, what the refusal says)
    (model(name="m" * 56, **PD), "models[0].name", "'" + "m" * 56 + "-prefill' (64 characters), which must be no "
     "more than 63 characters; this field may have at most 55 characters"),
    (model(name="m" * 61, **PD, pd={"rolesetName": "pair"}), "models[0].name", "RayClusterFleet name"),
    (model(name="m" * 55, topology="hybrid"), "models[0].name", "roleset-name label value of the combined pods"),
    (model(name="9lives"), "models[0].name", "DNS-1035 label"),
    (model(revision="-rc1"), "models[0].revision", "alphanumeric at both ends"),
    (model(revision="r" * 64), "models[0].revision", "no more than 63 characters"),
    (model(objectPrefix="models/$(HOME)"), "models[0].objectPrefix", "the kubelet expands $(VAR)"),
    (model(manifestSha256="AB" * 32), "models[0].manifestSha256", "a sha256 digest: 64 lowercase hex digits"),
    (model(manifestSha256="ab" * 31), "models[0].manifestSha256", "a sha256 digest: 64 lowercase hex digits"),
    (model(vllm={"toolCallParser": "a$$b"}), "models[0].vllm.toolCallParser", "turns $$ into $"),
    (model(pd={"rdma": {"resourceName": "rdma_shared_device_a"}}), "models[0].pd.rdma.resourceName",
     "extended resource name"),
    (model(pd={"rdma": {"resourceName": "kubernetes.io/rdma"}}), "models[0].pd.rdma.resourceName",
     "outside kubernetes.io"),
    (section("gpuPool", nodeSelector={"kubernetes.io/arch": "amd64"}), "gpuPool.nodeSelector['kubernetes.io/arch']",
     "must not be a label every node carries"),
    (section("gpuPool", nodeSelector={"gpu type": "h20"}), "gpuPool.nodeSelector['gpu type']", "the key name part"),
    (section("gpuPool", nodeSelector={"nvidia.com/gpu.product": "NVIDIA H20"}),
     "gpuPool.nodeSelector['nvidia.com/gpu.product']", "must be a label value"),
    (section("gpuPool", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "value": "present"}]),
     "gpuPool.tolerations[0].value", "must be unset when operator is 'Exists'"),
    (section("gpuPool", tolerations=[{"key": "gpu/", "operator": "Exists"}]), "gpuPool.tolerations[0].key",
     "name part"),
    (section("modelSync", nodeSelector={"pool": "-cpu"}), "modelSync.nodeSelector.pool", "must be a label value"),
    (ops("monitoring", labels={"release": "kube prometheus"}), "operations.monitoring.labels.release",
     "must be a label value"),
    (ops("loadTest", storageClass="gp3 encrypted"), "operations.loadTest.storageClass", "RFC 1123 subdomain"),
    (ops("openWebUI", storageClass="Fast_SSD"), "operations.openWebUI.storageClass", "RFC 1123 subdomain"),
    (section("modelVolume", kind="existingClaim", existingClaim={"claimName": "weights"}, mountPath="/models/../tmp"),
     "modelVolume.mountPath", "no '..'"),
    (lambda cfg: cfg["modelVolume"].update(mountPath="/opt"), "modelVolume.mountPath",
     "must not be, contain or lie inside /opt/llm-serving"),
    (lambda cfg: cfg["modelVolume"].update(mountPath="/dev/shm"), "modelVolume.mountPath", "/dev/shm"),
    (lambda cfg: cfg["modelVolume"].update(mountPath="/models:ro"), "modelVolume.mountPath", "must not contain ':'"),
    (model(startupBudgetSeconds=2**31 - 1), "models[0].startupBudgetSeconds",
     "progressDeadlineSeconds 2147484247, above the int32 maximum 2147483647; at most 2147483047"),
    (section("gateway", paths=["/v1//chat"]), "gateway.paths[0]", "must not contain '//'"),
    (section("gateway", paths=["/v1/chat#frag"]), "gateway.paths[0]", "must not contain '#'"),
    (section("gateway", paths=["/v1/.."]), "gateway.paths[0]", "must not end with '/..'"),
    (section("gateway", externalEndpoint="https://$(GATEWAY)"), "gateway.externalEndpoint", "kubelet expands"),
    (ops("smoke", prompt="say $(HOSTNAME)"), "operations.smoke.prompt", "kubelet expands"),
    (lambda cfg: cfg["images"].update(mirror={"kind": "ecr", "ecr": {"repositoryPrefix": "llm-serving-images-x"}}),
     "images.mirror.ecr.repositoryPrefix", "derives the pull-through cache prefix 'llm-serving-images-x-docker-hub' "
     "(31 characters) for docker.io, which ECR allows at most 30; this field may have at most 19 characters"),
    (lambda cfg: (cfg.update(namespace="team-" + "n" * 31), aws_credentials(cfg)), "namespace",
     "IAM user name (stack 'dev') 'llm-serving-team-nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn-dev-model-reader' (65 characters), "
     "which must be no more than 64 characters; this field may have at most 35 characters"),
]


@pytest.mark.parametrize("change,field,says", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_value_the_cluster_or_aws_would_refuse_is_refused_under_its_field(change, field, says):
    lines = refusals(change)
    mine = [line for line in lines if line.startswith(f"Pulumi.dev.yaml: llm-serving:{field} = ")]
    assert mine and any(says in line for line in mine), lines


def test_the_iam_user_name_is_checked_for_the_stack_being_rendered():
    """The stack name is part of the IAM user name: the same namespace fits one stack and not another."""
    def change(cfg):
        cfg.update(namespace="team-" + "n" * 27)
        aws_credentials(cfg)
    assert refusals(change, "dev") == []
    assert [line for line in refusals(change, "production") if "IAM user name" in line]


def test_the_committed_values_stay_valid():
    assert refusals(lambda cfg: None) == []


def test_long_rolesets_get_distinct_valid_network_policy_names():
    """`llm-serving-pd-<roleset>`[:63] cut two long rolesets sharing a prefix to one name, so one
    NetworkPolicy replaced the other, and could end in '-'."""
    from config_model import k8s
    a, b = "r" * 47 + "-" + "a" * 12, "r" * 47 + "-" + "b" * 12
    names = [n for n in policies(NetworkArgs(namespace="ns", rolesets=[a, b])) if n.startswith("llm-serving-pd-")]
    assert len(names) == 2
    assert all(k8s.dns1123_label(n) == [] for n in names), names


@pytest.mark.parametrize("length", [1, 62, 63, 64, 200])
def test_bounded_names_fit_and_stay_distinct(length):
    from config_model import derived
    one, other = "a" * length, "a" * (length - 1) + "b"
    assert len(derived.bounded(one)) <= 63 and derived.bounded(one) != derived.bounded(other)
    assert derived.bounded(one) == one if length <= 63 else re.fullmatch(r"a{54}-[0-9a-f]{8}", derived.bounded(one))


@pytest.mark.parametrize("value,errors", [
    ("nvidia.com/gpu.product", []), ("a/b/c", ["must be a label key"]), ("-a", ["name part"]),
    ("Example.com/x", ["prefix part"]), ("x" * 64, ["name part must be no more than 63"])])
def test_label_keys_follow_apimachinery(value, errors):
    from config_model import k8s
    found = k8s.label_key(value)
    assert len(found) == len(errors) and all(e in f for e, f in zip(errors, found)), found


def test_kubelet_expansion_sees_what_the_kubelet_rewrites():
    from config_model import k8s
    assert k8s.kubelet_expansions("$(A)") and k8s.kubelet_expansions("a$$b")
    assert k8s.kubelet_expansions("price $5 (USD)") == [] and k8s.kubelet_expansions("$") == []
