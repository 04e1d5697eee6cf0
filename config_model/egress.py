"""networkPolicy.egress: what the pods of this stack may connect to (components/network_egress.py
builds the policies; docs/gateway-and-network.md says what each pod is allowed and why).

A NetworkPolicy names no host: a peer is pods (by labels, in namespaces by labels) or an IP block
(k8s.io/api networking/v1 types.go NetworkPolicyPeer, IPBlock). So the cluster's DNS pods are named by
their labels, and an object store reached by name is reached through an IP block."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from config_model.names import NAME_ERROR, LabelKey, NonEmptyLabelValue
from config_model.types import DnsLabel, Model


def _cidr(value: str) -> str:
    """What kube-apiserver v1.37.2 takes in an ipBlock (pkg/apis/networking/validation ValidateIPBlock,
    apimachinery pkg/util/validation/ip.go IsValidCIDRForLegacyField with StrictIPCIDRValidation): an
    address/prefix with no bits set beyond the prefix, no IPv4-mapped IPv6; written in canonical form."""
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise PydanticCustomError(NAME_ERROR, "must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32") from None
    if "/" not in value:
        raise PydanticCustomError(NAME_ERROR, f"must be a CIDR with a prefix length, such as {net}")
    if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
        raise PydanticCustomError(NAME_ERROR, "must not have an IPv4-mapped IPv6 address")
    address = ipaddress.ip_address(value.split("/")[0])
    if address != net.network_address:
        raise PydanticCustomError(NAME_ERROR, f"must not have bits set beyond the prefix length: {net} for the "
                                  f"network, {address}/{net.max_prefixlen} for the one address")
    if str(net) != value:
        raise PydanticCustomError(NAME_ERROR, f"must be in canonical form ({net})")
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]


class ClusterDns(Model):
    """The cluster's DNS pods: every pod of this stack that resolves a name (all but the image pre-pull
    holds) may reach them, and nothing else by default."""

    namespace: DnsLabel = Field("kube-system", description="Namespace of the cluster's DNS pods (kube-system on EKS, "
                                "GKE, AKS and kubeadm clusters; openshift-dns on OpenShift).")
    pod_labels: dict[LabelKey, NonEmptyLabelValue] = Field(
        default_factory=lambda: {"k8s-app": "kube-dns"}, min_length=1,
        description="Labels of the DNS pods (CoreDNS and kube-dns carry k8s-app: kube-dns on EKS, GKE, AKS and "
        "kubeadm). Wrong labels or namespace: every name lookup of this stack's pods times out "
        "(docs/gateway-and-network.md says how it shows and how to find the right ones).")
    port: int = Field(53, ge=1, le=65535, description="The port the DNS pods listen on, UDP and TCP: their container "
                      "port, which a policy sees after the DNS Service's translation (53 for CoreDNS and kube-dns; "
                      "5353 on OpenShift).")


class Egress(Model):
    """Default-deny egress for every pod of the namespace, with the allowances each pod needs."""

    enabled: bool = Field(True, description="Deny egress by default in the namespace and allow each pod of this stack only "
                          "what it needs: DNS; the sync Job the object store; the image mirror Job the registries; "
                          "the smoke, warm-up and load-test Jobs and OpenWebUI their model's endpoint; P/D and "
                          "multi-node engines their own peers. false: pods reach anything (docs/gateway-and-network.md).")
    dns: ClusterDns = Field(default_factory=ClusterDns, description="The cluster's DNS pods.")
    cluster_cidrs: list[Cidr] = Field(
        default_factory=list, max_length=64,
        description="The cluster's pod and Service CIDRs (on EKS the VPC's CIDRs, with custom networking also the pod "
        "subnets'). They are left out of every 'every address' allowance (the sync Job's store by name, the registries, "
        "OpenWebUI's external endpoint), so those pods reach no pod of the cluster through it. Unset: nothing is left "
        "out, and where the network plugin matches pod addresses against IP blocks (Calico does; Cilium does not) those "
        "pods may reach any pod listening on the allowed port (443). A store, registry or mirror inside these ranges "
        "must then be named by objectStoreCidrs (docs/gateway-and-network.md).")
    api_server_cidrs: list[Cidr] | None = Field(
        None, min_length=1, max_length=64,
        description="gateway.routingLayer inferencePool: addresses of the Kubernetes API server's endpoints, which the "
        "endpoint pickers watch their pool and its pods through (ports 443 and 6443: a policy sees the endpoint after "
        "the `kubernetes` Service's translation). Unset: every address but link-local and metadata ones, clusterCidrs "
        "not left out (on EKS the API server's endpoints sit in the VPC's ranges); `kubectl get endpointslices -n "
        "default -l kubernetes.io/service-name=kubernetes` shows them.")
    object_store_cidrs: list[Cidr] | None = Field(
        None, min_length=1, max_length=64,
        description="Addresses the sync Job may reach the object store at, on the endpoint's port (443 without one). "
        "Unset: the endpoint's own address when objectStore.endpoint names an IP, else every address (0.0.0.0/0 and "
        "::/0), since a policy cannot name a host. Link-local and metadata addresses (169.254.0.0/16, fe80::/10, "
        "fd00:ec2::/64: the cloud metadata service, the EKS Pod Identity Agent) are always left out, the agent let back in for "
        "workloadIdentity kind podIdentity only. Narrow it to the store's ranges (AWS publishes S3's and STS's per "
        "region in ip-ranges.json); with IRSA it must also cover STS.")
