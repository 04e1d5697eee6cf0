"""The API server's rules beyond the schema (apivalidation/apiserver.py, ranges.py) over every
rendered object: every committed stack and topology variant passes, and each rule refuses a
hostile object with the server's message."""

from __future__ import annotations

import copy
import functools

import pytest
import test_pd
from conftest import k8s_objects, render_stack
from crd_schemas import raw_crd_index
from variants import render, sglang_stack

import apivalidation
from apivalidation import apiserver


def index():
    return raw_crd_index()


@functools.lru_cache(maxsize=None)
def _sglang():
    return render(sglang_stack())


def variants():
    from pool_stacks import pool_renders
    return [test_pd.rendered(*case) for case in test_pd.CASES] + [_sglang()] + list(pool_renders().values())


def test_every_committed_stack_passes(rendered):
    assert apivalidation.report(apivalidation.validate(k8s_objects(rendered), index())).count("\n") == 0


def test_every_topology_variant_passes():
    for r in variants():
        problems = apivalidation.validate(k8s_objects(r), index())
        assert problems == [], apivalidation.report(problems)


def obj(kind: str, stack: str = "dev") -> dict:
    return copy.deepcopy(next(o for o in k8s_objects(render_stack(stack)) if o["kind"] == kind))


def problems(o: dict) -> list[str]:
    return [p.line() for p in apivalidation.validate([o], index())]


def refused(o: dict, *fragments: str) -> None:
    lines = problems(o)
    assert any(all(f in line for f in fragments) for line in lines), (fragments, lines)


def pod(o: dict) -> dict:
    return o["spec"]["template"]["spec"]


def engine(o: dict) -> dict:
    return pod(o)["containers"][0]


# ---- names ----

def test_a_service_name_must_be_a_dns1035_label():
    """The 1.29 rule, kept on purpose: kube-apiserver v1.37.2 accepts `1-model` (RelaxedServiceNameValidation),
    older supported clusters refuse it (e2e/test_differential.py DELIBERATELY_STRICTER)."""
    svc = obj("Service")
    svc["metadata"]["name"] = "1-model"
    refused(svc, "Service", "metadata.name = '1-model'", "DNS-1035 label", "ValidateServiceName")
    # The same name is a fine Deployment name (DNS subdomain): the rule is per kind.
    dep = obj("Deployment")
    dep["metadata"]["name"] = "1-model"
    assert not [line for line in problems(dep) if "metadata.name" in line]


def test_a_truncated_network_policy_name_ending_in_dash_is_refused():
    pol = obj("NetworkPolicy")
    pol["metadata"]["name"] = "deepseek-v4-flash-prefill-"
    refused(pol, "NetworkPolicy", "metadata.name", "RFC 1123 subdomain", "NameIsDNSSubdomain")


def test_a_namespace_name_must_be_a_label_and_a_job_name_a_label_value():
    ns = obj("Namespace")
    ns["metadata"]["name"] = "llm.serving"
    refused(ns, "Namespace llm.serving", "must not contain dots")
    job = obj("Job")
    job["metadata"]["name"] = "sync-" + "a" * 60
    # Reported where the server reports it (kube-apiserver v1.37.2: `spec.template.labels: Invalid value:
    # "sync-aaa...": must be no more than 63 bytes`): generateSelector put the name in the template's labels.
    refused(job, "spec.template.labels[batch.kubernetes.io/job-name]", "must be no more than 63 bytes", "generateSelector")


# ---- labels, selectors, annotations ----

@pytest.mark.parametrize("value,message", [("a" * 64, "no more than 63"), ("-rev", "start and end with an alphanumeric")])
def test_label_values(value, message):
    dep = obj("Deployment")
    dep["metadata"]["labels"]["app.kubernetes.io/version"] = value
    refused(dep, "metadata.labels[app.kubernetes.io/version]", message, "ValidateLabels")


def test_label_keys_and_selectors():
    dep = obj("Deployment")
    dep["metadata"]["labels"]["bad key"] = "x"
    refused(dep, "metadata.labels[bad key]", "name part must consist", "ValidateLabelName")
    dep = obj("Deployment")
    dep["spec"]["selector"]["matchLabels"] = {"app": "other"}
    refused(dep, "spec.template.metadata.labels", "`selector` does not match template `labels`")
    pol = obj("NetworkPolicy")
    pol["spec"]["podSelector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}
    refused(pol, "spec.podSelector.matchExpressions[0].values", "must be specified when `operator` is 'In'")


def test_network_policy_peers_and_ip_blocks():
    """kube-apiserver v1.37.2 pkg/apis/networking/validation ValidateNetworkPolicyPeer and ValidateIPBlock
    (the sync Job's egress uses ipBlock peers: components/network_egress.py)."""
    base = next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "NetworkPolicy"
                and o["metadata"]["name"] == "llm-serving-model-sync-egress")
    assert problems(base) == []
    cases = [({}, "spec.egress[0].to[0]", "must specify a peer"),
             ({"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}, "spec.egress[0].to[0]", "may not specify both ipBlock"),
             ({"ipBlock": {"cidr": "10.0.0.1/8"}}, "ipBlock.cidr", "must not have bits set beyond the prefix length"),
             ({"ipBlock": {"cidr": "010.0.0.0/8"}}, "ipBlock.cidr", "must not have leading 0s"),
             ({"ipBlock": {"cidr": "10.0.0.0"}}, "ipBlock.cidr", "must be a valid CIDR value"),
             ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}}, "ipBlock.except[0]", "strict subset"),
             ({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}}, "ipBlock.except[0]", "strict subset"),
             ({"ipBlock": {"cidr": "0.0.0.0/0", "except": ["fe80::/10"]}}, "ipBlock.except[0]", "strict subset")]
    for peer, where, message in cases:
        pol = copy.deepcopy(base)
        pol["spec"]["egress"][0]["to"] = [peer]
        refused(pol, where, message)
    pol = copy.deepcopy(base)
    pol["spec"]["policyTypes"] = ["Egress", "Outbound"]
    refused(pol, "spec.policyTypes[1]", "Unsupported value")


def test_annotations_total_size():
    dep = obj("Deployment")
    dep["metadata"]["annotations"] = {"example.com/big": "x" * (256 * 1024)}
    # kube-apiserver v1.37.2: `metadata.annotations: Too long: may not be more than 262144 bytes`
    refused(dep, "metadata.annotations", "Too long: may not be more than 262144 bytes", "ValidateAnnotations")


# ---- containers ----

def test_port_and_container_names():
    dep = obj("Deployment")
    engine(dep)["ports"] = [{"name": "http-endpoint-8000", "containerPort": 8000},
                            {"name": "metrics", "containerPort": 8001}, {"name": "metrics", "containerPort": 8002}]
    refused(dep, "ports[0].name", "no more than 15 characters", "validateContainerPorts")
    refused(dep, "ports[2].name", "Duplicate value")
    dep = obj("Deployment")
    engine(dep)["name"] = "vLLM"
    refused(dep, "containers[0].name = 'vLLM'", "RFC 1123 label")
    dep = obj("Deployment")
    pod(dep)["initContainers"] = [copy.deepcopy(engine(dep))]
    pod(dep)["initContainers"][0].pop("startupProbe", None)
    # kube-apiserver v1.37.2: `spec.template.spec.initContainers[0].name: Duplicate value: "engine"`
    # (validateInitContainers checks each init container against the containers).
    refused(dep, "spec.template.spec.initContainers[0].name", "Duplicate value", "validateContainers")
    assert not [line for line in problems(dep) if "spec.template.spec.containers[0].name" in line]


def test_init_containers_take_no_probes_or_hooks_unless_restartable():
    """kube-apiserver v1.37.2 refused the engine copied into initContainers with
    `spec.template.spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers
    without restartPolicy=Always` (and the same for livenessProbe and readinessProbe), which
    apivalidation did not check (e2e/test_differential.py). A sidecar (restartPolicy Always) may."""
    dep = obj("Deployment")
    init = copy.deepcopy(engine(dep))
    init["name"] = "engine-init"
    assert {"lifecycle", "livenessProbe", "readinessProbe", "startupProbe"} <= set(init)
    pod(dep)["initContainers"] = [init]
    for f in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
        refused(dep, f"spec.template.spec.initContainers[0].{f}",
                "may not be set for init containers without restartPolicy=Always", "validateInitContainers")
    init["restartPolicy"] = "Always"
    assert not [line for line in problems(dep) if "initContainers" in line], problems(dep)


def test_extended_resources_must_be_qualified_whole_and_equal():
    dep = obj("Deployment")
    res = engine(dep)["resources"]
    res["limits"]["gpu"] = 8
    refused(dep, "limits[gpu]", "must be a standard resource for containers")
    dep = obj("Deployment")
    res = engine(dep)["resources"]
    res["limits"]["nvidia.com/gpu"], res["requests"]["nvidia.com/gpu"] = "8", "4"
    refused(dep, "requests[nvidia.com/gpu]", "must be equal to nvidia.com/gpu limit")
    res["limits"]["nvidia.com/gpu"] = res["requests"]["nvidia.com/gpu"] = "1500m"
    refused(dep, "nvidia.com/gpu", "must be an integer")
    res["limits"]["memory"] = "lots"
    refused(dep, "limits[memory] = 'lots'", "ParseQuantity")


def test_env_names_and_kubelet_expansion():
    dep = obj("Deployment")
    engine(dep)["env"] = [{"name": "1BAD", "value": "x"}, {"name": "OK", "value": "key $(HF_TOKEN) and $$(LITERAL)"}]
    refused(dep, "env[0].name = '1BAD'", "must not start with a digit", "ValidateEnv")
    lines = problems(dep)
    assert any("env[1].value" in line and "$(HF_TOKEN)" in line for line in lines), lines
    assert not any("$(LITERAL)" in line.rsplit(": ", 1)[-1] for line in lines)
    engine(dep)["args"] = ["--served-model-name", "m$(OK)", "--api-key", "$(OK)", "$(UNDEFINED)"]
    refused(dep, "args[1]", "the kubelet expands $(OK) inside this value", "expansion.Expand")
    refused(dep, "args[4]", "$(UNDEFINED) names no variable of the container")
    assert not any("args[3]" in line for line in problems(dep))
    assert apiserver.kubelet_references("$((attempt + 1)) $$(A) $(B_1) $(") == ["B_1"]


def test_mount_paths_unique_and_subpaths_descending():
    dep = obj("Deployment")
    mounts = engine(dep)["volumeMounts"]
    mounts.append({**mounts[0], "name": mounts[-1]["name"]})
    refused(dep, "mountPath", "must be unique", "ValidateVolumeMounts")
    dep = obj("Deployment")
    engine(dep)["volumeMounts"][0]["subPath"] = "../etc"
    refused(dep, "subPath = '../etc'", "must not contain '..'")
    engine(dep)["volumeMounts"][0]["name"] = "nope"
    refused(dep, "volumeMounts[0].name = 'nope'", "Not found")


def test_probes_tolerations_node_selectors_and_affinity():
    dep = obj("Deployment", "prod")
    engine(dep)["startupProbe"]["successThreshold"] = 2
    refused(dep, "startupProbe.successThreshold", "must be 1", "validateProbe")
    pod(dep)["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "present"},
                               {"key": "", "operator": "Equal", "value": "x"}]
    refused(dep, "tolerations[0].operator", "value must be empty when `operator` is 'Exists'")
    refused(dep, "tolerations[1].operator", "operator must be Exists when `key` is empty")
    pod(dep)["nodeSelector"] = {"node.kubernetes.io/gpu model": "H20"}
    refused(dep, "nodeSelector[node.kubernetes.io/gpu model]", "name part must consist")
    job = obj("Job", "prod")
    terms = pod(job)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[0]["matchExpressions"][0]["values"] = ["NVIDIA H20 / 96GB"]
    refused(job, "matchExpressions[0].values[0]", "a valid label must be", "validateNodeSelectorRequirement")


# ---- storage, services, policies ----

def test_storage_class_names_are_dns_subdomains():
    for kind in ("PersistentVolume", "PersistentVolumeClaim"):
        o = obj(kind, "prod")
        o["spec"]["storageClassName"] = "fast ssd"
        refused(o, kind, "spec.storageClassName = 'fast ssd'", "ValidateClassName")


def test_service_ports_and_pdb_and_secret_keys():
    svc = obj("Service")
    svc["spec"]["ports"].append({"port": 70000, "targetPort": "http-endpoint-port"})
    refused(svc, "spec.ports[1].name", "Required value")
    refused(svc, "spec.ports[1].port = 70000", "between 1 and 65535")
    refused(svc, "spec.ports[1].targetPort", "no more than 15 characters")
    pdb = obj("PodDisruptionBudget")
    pdb["spec"]["maxUnavailable"] = "150%"
    refused(pdb, "spec.maxUnavailable = '150%'", "must not be greater than 100%")
    # The minAvailable form some engines get (components/operations.py disruption_budget).
    pdb = obj("PodDisruptionBudget", "staging")
    assert pdb["spec"]["minAvailable"] == 0 and problems(pdb) == []
    pdb["spec"]["minAvailable"] = -1
    refused(pdb, "spec.minAvailable = -1", "must be greater than or equal to 0")
    pdb["spec"]["minAvailable"], pdb["spec"]["maxUnavailable"] = 1, 1
    refused(pdb, "minAvailable and maxUnavailable cannot be both set")
    secret = obj("Secret")
    secret["stringData"] = {"api key": "x"}
    # kube-apiserver v1.37.2 names `data[api key]`: stringData is merged into data before validation.
    refused(secret, "data[api key]", "a valid config key", "stringData merged into data")


# ---- integer ranges ----

def test_int32_overflow_is_refused():
    dep = obj("Deployment")
    dep["spec"]["progressDeadlineSeconds"] = 2**31
    refused(dep, "spec.progressDeadlineSeconds = 2147483648", "overflows int32")
    job = obj("Job")
    pod(job)["activeDeadlineSeconds"] = 2**31
    # int64 in Go, but ValidatePodSpec caps it at MaxInt32.
    refused(job, "spec.template.spec.activeDeadlineSeconds", "between 1 and 2147483647", "ValidatePodSpec")
    job["spec"]["backoffLimit"] = 2**40
    refused(job, "spec.backoffLimit", "overflows int32")
    # Server-side apply (what pulumi-kubernetes sends) takes this one and keeps 0 (kube-apiserver v1.37.2,
    # e2e/test_differential.py): refused here still, and the message says so.
    job = obj("Job")
    job["spec"]["backoffLimit"] = 2**40
    refused(job, "spec.backoffLimit", "server-side apply wraps it around")


def test_custom_resource_pod_templates_are_checked_too():
    storm = copy.deepcopy(next(o for o in k8s_objects(test_pd.rendered("hybrid", "stormservice", 32))
                               if o["kind"] == "StormService"))
    tmpl = storm["spec"]["template"]["spec"]["roles"][0]["template"]
    tmpl["spec"]["containers"][0]["volumeMounts"].append(dict(tmpl["spec"]["containers"][0]["volumeMounts"][0]))
    refused(storm, "StormService", "roles[0].template.spec.containers[0].volumeMounts", "must be unique")


def test_render_exits_2_and_writes_nothing_on_a_refused_object(tmp_path, monkeypatch, capsys):
    """`python -m render`'s main: the render returns an object the server refuses (a Service name
    no config rule stops yet), so it exits 2 with one line naming it, and writes nothing."""
    from render import __main__ as cli
    from render import runtime

    rendered = copy.deepcopy(render_stack("dev"))
    svc = next(r.inputs for r in rendered.resources if r.inputs.get("kind") == "Service")
    svc["metadata"]["name"] = "9lives"
    monkeypatch.setattr(runtime, "render", lambda stack, previous=None: rendered)
    out = tmp_path / "out"
    assert cli.main(["--stack", "dev", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Service llm-serving-dev/9lives: metadata.name = '9lives': a DNS-1035 label" in err, err
    assert not out.exists()


def test_daemonset_rules():
    """V apps ValidateDaemonSetSpec / ValidateRollingUpdateDaemonSet (the engine image pre-pull)."""
    ds = obj("DaemonSet")
    assert problems(ds) == []
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = 1
    refused(ds, "spec.updateStrategy.rollingUpdate.maxSurge", "may not be set when maxUnavailable is non-zero")
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": "0%"}
    refused(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable", "cannot be 0 when maxSurge is 0")
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": "101%"}
    refused(ds, "maxUnavailable", "must not be greater than 100%")
    ds = obj("DaemonSet")
    ds["spec"]["selector"]["matchLabels"] = {"app": "other"}
    refused(ds, "spec.template.metadata.labels", "`selector` does not match template `labels`")
    ds = obj("DaemonSet")
    pod(ds)["restartPolicy"] = "Never"
    refused(ds, "spec.template.spec.restartPolicy", "Unsupported value")
    pod(ds)["restartPolicy"] = "Always"
    pod(ds)["activeDeadlineSeconds"] = 60
    refused(ds, "activeDeadlineSeconds in DaemonSet is not Supported")
