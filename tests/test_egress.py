"""Issue 30: default-deny egress. Over every render (the shipped stacks, each orchestrator and P/D topology,
the multi-node groups), with networking.k8s.io/v1 semantics (tests/netpol.py), every pod of the stack
reaches exactly what it needs and nothing else. What it needs is read off the rendered pods themselves,
never off the policies: the endpoint in a Job's arguments resolved through the rendered Services (a
Service is reached at its pods' target port), the registries in the mirror's image list, the store's
endpoint in the sync Job's environment, the P/D roleset and multi-node group labels. A negative control
drops each allowance in turn and shows the check notices."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
import upstream_aibrix as aibrix
import upstream_envoy_gateway as envoy_gateway
from conftest import k8s_objects, render_stack
from group_pods import group_pods
from multinode_stacks import GROUP_PAIRS
from netpol import Address, Pod, allowed
from test_consumers import direct
from test_gpu_accounting import stack_config
from test_multinode_network import GROUP_PORTS
from test_multinode_network import objects as group_objects
from test_pd import rendered as rendered_pd
from test_topologies import rendered_pair
from variants import render, variant_file

from components.network_egress import object_store_rules
from policy.workloads import containers, pod_templates
from stacks.loader import ConfigError

COMPONENT, PART_OF, MODEL = "app.kubernetes.io/component", "app.kubernetes.io/part-of", "llm-serving.io/model"
DNS_LABELS = {"k8s-app": "kube-dns"}
ENVOY_LABELS = envoy_gateway.proxy_pod_labels(aibrix.AIBRIX_NAMESPACE, aibrix.GATEWAY_NAME)
ENVOY_PORTS = {"http-80": envoy_gateway.proxy_container_port(aibrix.GATEWAY_LISTENER_PORT)}
# The cluster's DNS pod and our Gateway's proxy pod, without and with an address (see CLUSTER_CIDRS).
DNS = Pod("kube-system", DNS_LABELS, {"dns": 53})
ENVOY = Pod(envoy_gateway.CONTROLLER_NAMESPACE, ENVOY_LABELS, ENVOY_PORTS)
ADDRESSED = {DNS.namespace: Pod("kube-system", DNS_LABELS, {"dns": 53}, ip="10.244.250.10"),
             ENVOY.namespace: Pod(ENVOY.namespace, ENVOY_LABELS, ENVOY_PORTS, ip="10.244.250.11")}
INTERNET = Address("198.51.100.7")            # TEST-NET-2: an object store, a registry, anywhere outside
INTERNET6 = Address("2001:db8::7")
METADATA = [Address("169.254.169.254"), Address("fd00:ec2::254")]
POD_IDENTITY_AGENT = Address("169.254.170.23")
OUTSIDE = [INTERNET, INTERNET6, *METADATA, POD_IDENTITY_AGENT]
PROBES = (22, 80, 443, 6443, 8000, 45678)     # ports no rule should open by accident

RENDERS = ["dev", "staging", "prod", "vllm-deployment", "vllm-stormservice", "sglang-rolebasedgroup", "pd",
           "pd-same-pod", "hybrid", *(f"group-{o}-{e}" for o, e in GROUP_PAIRS), "dev-cluster-cidrs",
           # Without the gateway (and with clients): the Jobs and OpenWebUI reach the Service's pods.
           "direct-vllm-deployment", "direct-pd-same-pod"]
# The cluster's pod and Service ranges, declared (networkPolicy.egress.clusterCidrs) in the one render whose
# pods get addresses in them: there an ipBlock is taken to match pod addresses too (Calico's reading); in the
# others no pod has an address, so only selectors reach pods (Cilium's), which is all a stack that declares no
# ranges can promise.
CLUSTER_CIDRS = ["10.244.0.0/16", "10.96.0.0/12"]


@functools.lru_cache(maxsize=None)
def cluster_cidrs_render():
    return render(variant_file(networkPolicy={"egress": {"clusterCidrs": CLUSTER_CIDRS}}))


def objects_of(name: str) -> list[dict]:
    if name in ("dev", "staging", "prod"):
        return k8s_objects(render_stack(name))
    if name == "dev-cluster-cidrs":
        return k8s_objects(cluster_cidrs_render())
    if name.startswith("direct-"):
        return k8s_objects(direct(name.removeprefix("direct-"), True))
    if name.startswith("group-"):
        return group_objects(*name.split("-")[1:])
    # One topology's render, not test_network_monitoring's dict of all six (each is cached where it is made).
    return k8s_objects({"vllm-deployment": lambda: render_stack("dev"),
                        "sglang-rolebasedgroup": lambda: rendered_pair("sglang", "rolebasedgroup"),
                        "vllm-stormservice": lambda: rendered_pair("vllm", "stormservice"),
                        "pd": lambda: rendered_pd("pd", "rayclusterfleet", 24),
                        "pd-same-pod": lambda: rendered_pd("pd-same-pod", "deployment", 8),
                        "hybrid": lambda: rendered_pd("hybrid", "stormservice", 32)}[name]())


@dataclass(frozen=True, eq=False)
class Placed:
    pod: Pod
    template: dict
    group: bool          # one of the pods a multi-node controller makes of the model's groups


@functools.lru_cache(maxsize=None)
def world(name: str) -> tuple[list[dict], list[Placed]]:
    """The render's NetworkPolicies and its pods, each with an IP (so an ipBlock could match it)."""
    objs = objects_of(name)
    made: list[tuple[dict, dict, dict, bool]] = []
    for o in objs:
        group = group_pods(o)
        made += [(o, p.labels, p.ports, {}, True) for p in group] or [
            (o, dict(ref.template["metadata"].get("labels") or {}),
             {p["name"]: p["containerPort"] for _, c in containers(ref.template) for p in c.get("ports") or [] if "name" in p},
             ref.template, False) for ref in pod_templates(o["kind"], o)]
    addressed = name == "dev-cluster-cidrs"
    placed = [Placed(Pod(o["metadata"]["namespace"], labels, ports,
                         ip=f"10.244.{i // 250}.{i % 250 + 2}" if addressed else None), t, g)
              for i, (o, labels, ports, t, g) in enumerate(made)]
    return [o for o in objs if o["kind"] == "NetworkPolicy"], placed


def argv(template: dict) -> list[str]:
    return [a for _, c in containers(template) for a in (c.get("command") or []) + (c.get("args") or [])]


def env(template: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for _, c in containers(template) for e in c.get("env") or []}


def service_targets(objs: list[dict], pods: list[Pod], url: str, envoy: Pod) -> list[tuple[Pod, int]]:
    """Where a connection to `url` arrives, as a NetworkPolicy sees it: the Envoy proxy pods on their
    container port for the gateway's Service, else the Service's pods on its target port."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    name, ns = host.split(".")[:2]
    if ns == envoy_gateway.CONTROLLER_NAMESPACE:
        return [(envoy, envoy.ports["http-80"])] if port == aibrix.GATEWAY_LISTENER_PORT else []
    (svc,) = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == name
              and o["metadata"]["namespace"] == ns]
    out = []
    for sp in (sp for sp in svc["spec"]["ports"] if sp["port"] == port):
        target = sp.get("targetPort", sp["port"])
        for p in pods:
            if p.namespace == ns and svc["spec"]["selector"].items() <= p.labels.items():
                if isinstance(target, int) or target in p.ports:
                    out.append((p, target if isinstance(target, int) else p.ports[target]))
    return out


Need = set[tuple[int, "int | None", str]]   # (id of the destination, port or None for every port, protocol)


def to(dst: Pod | Address, port: int | None, *protocols: str) -> Need:
    return {(id(dst), port, proto) for proto in protocols or ("TCP",)}


def peers(name: str) -> tuple[Pod, Pod]:
    """The DNS pod and the proxy pod of this render: with addresses where the stack's pods have them."""
    if name == "dev-cluster-cidrs":
        return ADDRESSED[DNS.namespace], ADDRESSED[ENVOY.namespace]
    return DNS, ENVOY


@functools.lru_cache(maxsize=None)
def needs(name: str) -> dict[int, Need]:
    """Per pod of the stack (by id), the connections it needs."""
    _, placed = world(name)
    dns, envoy = peers(name)
    objs = objects_of(name)
    pods = [x.pod for x in placed]
    out: dict[int, Need] = {}
    for x in placed:
        pod, template = x.pod, x.template
        want: Need = set()
        if PART_OF in pod.labels:
            want |= to(dns, 53, "UDP", "TCP")
        kind = pod.labels.get(COMPONENT)
        if kind == "engine":
            roleset = pod.labels.get("roleset-name")
            for y in placed:
                other = y.pod
                if other is pod:
                    continue
                if roleset and other.labels.get("roleset-name") == roleset and {
                        pod.labels.get("role-name"), other.labels.get("role-name")} <= {"prefill", "decode"}:
                    want |= to(other, None, "TCP", "UDP")   # NIXL's side channel, UCX on any port
                if x.group and y.group and other.labels.get(MODEL) == pod.labels[MODEL]:
                    want |= to(other, None, "TCP")          # the pods of the model's groups, every TCP port
        elif kind == "model-sync":
            store = env(template).get("ENDPOINT_URL", "")
            port = (urlsplit(store).port or 443) if store else 443
            want |= to(INTERNET, port) | to(INTERNET6, port)
        elif kind == "image-mirror":
            for line in env(template)["IMAGE_LIST"].splitlines():
                for ref in line.split()[:2]:
                    host = ref.split("/")[0]
                    port = int(host.rsplit(":", 1)[1]) if ":" in host else 443
                    want |= to(INTERNET, port) | to(INTERNET6, port)
        elif kind in ("smoke", "warmup", "loadtest"):
            args = argv(template)
            if kind == "loadtest":
                plan = json.loads(args[args.index("--plan") + 1])
                url, engines = plan["endpoint"], plan["engines"]
                for p in engines["ports"]:
                    for q, port in service_targets(objs, pods, f"http://{engines['host']}:{p}", envoy):
                        want |= to(q, port)
            else:
                url = args[args.index("--endpoint") + 1]
                if "--route" in args and args[args.index("--route") + 1] in ("pd", "hybrid", "same-pod"):
                    # The P/D pair's /metrics by pod IP (components/scripts/route_evidence.py).
                    for side in ("--prefill-port", "--decode-port"):
                        port = int(args[args.index(side) + 1])
                        for q in pods:
                            if q.labels.get(COMPONENT) == "engine" and q.labels.get(MODEL) == pod.labels[MODEL] \
                                    and port in q.ports.values():
                                want |= to(q, port)
            for q, port in service_targets(objs, pods, url, envoy):
                want |= to(q, port)
        elif kind == "ui":
            url = env(template)["OPENAI_API_BASE_URLS"]
            if ".svc.cluster.local" in url:
                for q, port in service_targets(objs, pods, url, envoy):
                    want |= to(q, port)
            else:
                parts = urlsplit(url)
                port = parts.port or (443 if parts.scheme == "https" else 80)
                want |= to(INTERNET, port) | to(INTERNET6, port) | to(envoy, envoy.ports["http-80"])
        out[id(pod)] = want
    return out


def mismatches(name: str, policies: list[dict], limit: int = 20) -> list[str]:
    """Every connection whose fate differs from the need: needed and refused, or unneeded and allowed."""
    _, placed = world(name)
    wanted = needs(name)
    dns, envoy = peers(name)
    found = []
    for x in placed:
        src, want = x.pod, wanted[id(x.pod)]
        for dst in [dns, envoy, *OUTSIDE, *(y.pod for y in placed if y.pod is not src)]:
            ports = set(PROBES) | set(getattr(dst, "ports", {}).values()) | {p for d, p, _ in want if d == id(dst) and p}
            for port in ports:
                for proto in ("TCP", "UDP"):
                    need = (id(dst), port, proto) in want or (id(dst), None, proto) in want
                    if allowed(policies, src, dst, port, proto) != need:
                        found.append(f"{src.labels.get('app.kubernetes.io/name')} -> {getattr(dst, 'labels', dst)} "
                                     f"{port}/{proto}: {'refused' if need else 'allowed'}")
                        if len(found) >= limit:
                            return found
    return found


@pytest.mark.parametrize("name", RENDERS)
def test_every_pod_reaches_exactly_what_it_needs(name):
    policies, placed = world(name)
    wanted = needs(name)
    kinds = {x.pod.labels.get(COMPONENT) for x in placed}
    assert {"engine", "model-sync", "smoke", "image-prepull"} <= kinds, kinds
    assert mismatches(name, policies) == []
    # The needs are not empty where the issue names them: the sync Job's store, a smoke Job's endpoint.
    for x in placed:
        if x.pod.labels.get(COMPONENT) in ("model-sync", "smoke"):
            assert len(wanted[id(x.pod)]) > 2, x.pod.labels


def test_the_shapes_the_issue_names():
    """Spelled out once, beside the general check: an engine reaches neither the store nor the internet
    nor the metadata service, the sync Job no engine, P/D peers and a group's ranks each other."""
    for name in ("dev", "pd", "group-leaderworkerset-vllm"):
        policies, placed = world(name)
        engines = [x.pod for x in placed if x.pod.labels.get(COMPONENT) == "engine"]
        sync = next(x.pod for x in placed if x.pod.labels.get(COMPONENT) == "model-sync")
        for e in engines:
            assert not any(allowed(policies, e, a, port) for a in OUTSIDE for port in PROBES), name
            assert not any(allowed(policies, sync, e, port) for port in (*e.ports.values(), *PROBES)), name
        assert allowed(policies, sync, INTERNET, 443) and not allowed(policies, sync, METADATA[0], 80)
        if name == "pd":
            prefill, decode = (next(e for e in engines if e.labels["role-name"] == s) for s in ("prefill", "decode"))
            assert allowed(policies, decode, prefill, prefill.ports["nixl"]) and allowed(policies, prefill, decode, 45678)
        if name.startswith("group"):
            assert all(allowed(policies, a, b, port) for a in engines for b in engines if a is not b for port in GROUP_PORTS)


@pytest.mark.parametrize("name", ["staging", "pd"])
def test_dropping_any_allowance_is_caught(name):
    """Negative control: each egress policy is needed (drop it and some needed connection is refused), and
    the default deny is what refuses the rest (drop it and something unneeded gets through)."""
    policies, _ = world(name)
    egress = [p for p in policies if "Egress" in p["spec"].get("policyTypes", [])]
    assert len(egress) >= 4
    for p in egress:
        rest = [q for q in policies if q is not p]
        assert mismatches(name, rest, limit=1), p["metadata"]["name"]


def rules_policy(rules) -> list[dict]:
    return [{"metadata": {"namespace": "ns"}, "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": list(rules)}}]


def test_the_sync_job_reaches_what_its_credential_mode_needs():
    sync = Pod("ns", {})
    base = variant_file(objectStore={"bucketName": "models-bucket", "region": "eu-west-1", "createCredentials": False})
    static = rules_policy(object_store_rules(stack_config(base)))
    assert allowed(static, sync, INTERNET, 443) and allowed(static, sync, INTERNET6, 443)
    assert not any(allowed(static, sync, a, p) for a in (*METADATA, POD_IDENTITY_AGENT) for p in (80, 443))
    assert not allowed(static, sync, INTERNET, 80)
    podid = variant_file(objectStore={"bucketName": "models-bucket", "region": "eu-west-1", "createCredentials": False,
                                      "workloadIdentity": {"kind": "podIdentity", "clusterName": "gpu"}})
    agent = rules_policy(object_store_rules(stack_config(podid)))
    assert allowed(agent, sync, POD_IDENTITY_AGENT, 80) and allowed(agent, sync, Address("fd00:ec2::23"), 80)
    assert not any(allowed(agent, sync, a, p) for a in METADATA for p in (80, 443))
    # An endpoint by IP: that address only, on its port; narrowed by objectStoreCidrs: those only.
    by_ip = variant_file(objectStore={"bucketName": "models-bucket", "createCredentials": False, "create": False,
                                      "endpoint": "https://192.0.2.10:9000"})
    store = rules_policy(object_store_rules(stack_config(by_ip)))
    assert allowed(store, sync, Address("192.0.2.10"), 9000)
    assert not allowed(store, sync, Address("192.0.2.11"), 9000) and not allowed(store, sync, Address("192.0.2.10"), 443)
    narrowed = variant_file(networkPolicy={"egress": {"objectStoreCidrs": ["3.5.0.0/16"]}})
    s3 = rules_policy(object_store_rules(stack_config(narrowed)))
    assert allowed(s3, sync, Address("3.5.140.2"), 443) and not allowed(s3, sync, INTERNET, 443)


@pytest.mark.parametrize("cidr,message", [
    ("10.0.0.1/8", "must not have bits set beyond the prefix length: 10.0.0.0/8 for the network, 10.0.0.1/32"),
    ("10.0.0.0", "must be a CIDR with a prefix length, such as 10.0.0.0/32"),
    ("::ffff:10.0.0.0/104", "must not have an IPv4-mapped IPv6 address"), ("2001:DB8::/32", "canonical form (2001:db8::/32)"),
    ("example.com/8", "must be a CIDR")])
def test_a_bad_cidr_is_refused_under_its_field(cidr, message):
    with pytest.raises(ConfigError) as err:
        render(variant_file(networkPolicy={"egress": {"clusterCidrs": ["10.244.0.0/16", cidr]}}))
    assert str(err.value).startswith(f"Pulumi.variant.yaml: llm-serving:networkPolicy.egress.clusterCidrs[1] = '{cidr}': ")
    assert message in str(err.value), str(err.value)


def test_egress_settings_without_the_network_policies_are_refused():
    with pytest.raises(ConfigError) as err:
        render(variant_file(networkPolicy={"enabled": False, "egress": {"dns": {"port": 5353}}}))
    assert str(err.value) == ("Pulumi.variant.yaml: llm-serving:networkPolicy.egress = '(set)': needs "
                              "networkPolicy.enabled: true; without the NetworkPolicies no pod's egress is restricted, "
                              "so these settings would change nothing")


def test_the_pack_warns_about_a_namespace_without_default_deny_egress():
    from conftest import stack_resources

    from policy.stack_rules import namespaces_deny_egress
    resources = stack_resources(render_stack("dev"))
    assert namespaces_deny_egress(resources) == []
    deny = "llm-serving-default-deny-egress"
    rest = [r for r in resources if r.props.get("metadata", {}).get("name") != deny]
    (message,) = namespaces_deny_egress(rest)
    assert "llm-serving-dev" in message and "denies egress by default" in message
    # A policy over every pod that also allows some egress is no default deny.
    (r,) = [r for r in resources if r.props.get("metadata", {}).get("name") == deny]
    opened = [*rest, type(r)(**{**r.__dict__, "props": {**r.props, "spec": {**r.props["spec"], "egress": [{}]}}})]
    assert namespaces_deny_egress(opened)


def test_the_default_deny_comes_after_every_allowance():
    """Created after (and deleted before) every allowance: a running sync Job never sees the deny alone."""
    resources = {r.name: r for r in render_stack("staging").resources if r.type.endswith(":NetworkPolicy")}
    deny = resources.pop("network-llm-serving-default-deny-egress")
    allowances = {n for n, r in resources.items() if "Egress" in r.inputs["spec"].get("policyTypes", [])}
    assert len(allowances) >= 5
    assert allowances <= {d.rsplit("::", 1)[1] for d in deny.options["dependsOn"]}
