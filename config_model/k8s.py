"""The Kubernetes and AWS rules a config value meets once it becomes a name, a label or a path.

Each check returns what is wrong, in words a stack-file refusal can print (empty when the value is
valid). Ported from the API server's own code at the newest Kubernetes the stacks support
(kubernetes/apimachinery v0.36.3 and v0.37.0-beta.0, identical here; k8s.io/api v0.36.3):

  D = pkg/api/validate/content/dns.go          (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label)
  K = pkg/api/validate/content/kube.go         (IsLabelKey, IsLabelValue)
  T = k8s.io/api core/v1/types.go              (EnvVar.Value, Container.Args, VolumeMount.MountPath)
  W = k8s.io/api core/v1/well_known_labels.go
  H = kubernetes pkg/apis/core/helper/helpers.go (IsNativeResource, IsExtendedResourceName)
Go's regexp `$` matches only at the end of the text, so every pattern here is used with fullmatch.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63        # D DNS1123LabelMaxLength
DNS1123_SUBDOMAIN_MAX = 253   # D DNS1123SubdomainMaxLength
DNS1035_LABEL_MAX = 63        # D DNS1035LabelMaxLength
LABEL_VALUE_MAX = 63          # K LabelValueMaxLength
LABEL_KEY_NAME_MAX = 63       # K labelKeyMaxLength
INT32_MAX = 2**31 - 1         # every int32 field of the API (progressDeadlineSeconds, failureThreshold)
# AWS IAM CreateUser UserName: 1-64 characters of [\w+=,.@-] (IAM User Guide, "IAM and AWS STS
# quotas, name requirements, and character limits"; IAM API Reference, CreateUser).
IAM_USER_NAME_MAX = 64
IAM_NAME = re.compile(r"[\w+=,.@-]+", re.ASCII)
# ECR CreatePullThroughCacheRule ecrRepositoryPrefix: 2-30 characters (ECR API Reference).
ECR_CACHE_PREFIX_MAX = 30

# The formats themselves, shared with apivalidation/apiserver.py (which words its errors as the
# API server does): one definition of each rule to re-check when Kubernetes moves.
DNS1123_LABEL_FORMAT = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN_FORMAT = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL_FORMAT = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME_FORMAT = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _too_long(value: str, limit: int) -> list[str]:
    return [f"must be no more than {limit} characters"] if len(value) > limit else []


def dns1123_label(value: str) -> list[str]:
    """D IsDNS1123Label: namespaces, container and port names, most object names we derive."""
    return _too_long(value, DNS1123_LABEL_MAX) + ([] if DNS1123_LABEL_FORMAT.fullmatch(value) else [
        "must be a lowercase RFC 1123 label: lowercase letters, digits or '-', alphanumeric at both ends"])


def dns1123_subdomain(value: str) -> list[str]:
    """D IsDNS1123Subdomain: StorageClass names, label key prefixes."""
    return _too_long(value, DNS1123_SUBDOMAIN_MAX) + ([] if DNS1123_SUBDOMAIN_FORMAT.fullmatch(value) else [
        "must be a lowercase RFC 1123 subdomain: lowercase letters, digits, '-' or '.', alphanumeric at both ends"])


def dns1035_label(value: str) -> list[str]:
    """D IsDNS1035Label: Service names (pkg/apis/core/validation ValidateServiceName)."""
    return _too_long(value, DNS1035_LABEL_MAX) + ([] if DNS1035_LABEL_FORMAT.fullmatch(value) else [
        "must be a DNS-1035 label: lowercase letters, digits or '-', starting with a letter, alphanumeric at the end"])


def label_value(value: str) -> list[str]:
    """K IsLabelValue: empty, or up to 63 of [-A-Za-z0-9_.] with alphanumerics at both ends."""
    return _too_long(value, LABEL_VALUE_MAX) + ([] if value == "" or LABEL_NAME_FORMAT.fullmatch(value) else [
        "must be a label value: letters, digits, '-', '_' or '.', alphanumeric at both ends"])


def label_key(value: str) -> list[str]:
    """K IsLabelKey: [prefix/]name, the prefix a DNS-1123 subdomain, the name as a label value but non-empty."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["must be a label key: an optional DNS subdomain prefix and '/', then a name"]
    errs = [f"prefix part {e}" for e in (dns1123_subdomain(parts[0]) if len(parts) == 2 else [])]
    name = parts[-1]
    if len(name) > LABEL_KEY_NAME_MAX:
        errs.append(f"name part must be no more than {LABEL_KEY_NAME_MAX} characters")
    if not LABEL_NAME_FORMAT.fullmatch(name):
        errs.append("name part must be letters, digits, '-', '_' or '.', alphanumeric at both ends")
    return errs


def extended_resource_name(value: str) -> list[str]:
    """H IsExtendedResourceName: a qualified name with a domain outside kubernetes.io, not
    `requests.`-prefixed, and `requests.<name>` a valid label key (quota names it so)."""
    if "/" not in value or "kubernetes.io/" in value:
        return ["must be an extended resource name: domain/name with a domain outside kubernetes.io, "
                "e.g. rdma/rdma_shared_device_a"]
    if value.startswith("requests."):
        return ["must not start with 'requests.'"]
    # validateContainerResourceName checks the name itself as a label key too.
    return label_key(value) or [f"'requests.{value}' {e}" for e in label_key("requests." + value)]


def kubelet_expansions(value: str) -> list[str]:
    """T: the kubelet rewrites container command, args and env values: $(VAR) becomes the
    variable's value and $$ becomes $ (third_party/forked/golang/expansion/expand.go). The program
    passes config values literally, so either sequence would change what the engine is told."""
    return ["must not contain '$(' or '$$': the kubelet expands $(VAR) and turns $$ into $ in container "
            "command, args and env"] if "$(" in value or "$$" in value else []


# W: labels on every node of a cluster: the kubelet registers each node with hostname, os and arch
# (pkg/kubelet/kubelet_node_status.go initialNode: v1.LabelHostname, LabelOSStable, LabelArchStable),
# the beta os/arch twins on older kubelets, and a cloud provider adds zone, region and instance type.
EVERY_NODE_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
})
