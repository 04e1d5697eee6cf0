"""The Kubernetes and AWS rules a config value meets once it becomes a name, a label or a path.

Each check returns what is wrong, in words a stack-file refusal can print (empty when the value is
valid). The Kubernetes name and label rules themselves are policy/k8s_names.py's (ported once from
k8s.io/apimachinery v0.37.2, which the render's API-server check uses too); this module words their
findings for a stack file, counting characters as its words say. The rest is ported here:

  T = k8s.io/api core/v1/types.go              (EnvVar.Value, Container.Args, VolumeMount.MountPath)
  W = k8s.io/api core/v1/well_known_labels.go
  H = kubernetes pkg/apis/core/helper/helpers.go (IsExtendedResourceName, via policy/k8s_names.py)
"""

from __future__ import annotations

import re

from policy import k8s_names as names
from policy.k8s_names import (  # noqa: F401 - the limits and formats, for the config model's other modules
    DNS1035_LABEL_MAX,
    DNS1123_LABEL_MAX,
    DNS1123_SUBDOMAIN_MAX,
    LABEL_KEY_NAME_MAX,
    LABEL_VALUE_MAX,
)

INT32_MAX = 2**31 - 1         # every int32 field of the API (progressDeadlineSeconds, failureThreshold)
# AWS IAM CreateUser UserName: 1-64 characters of [\w+=,.@-] (IAM User Guide, "IAM and AWS STS
# quotas, name requirements, and character limits"; IAM API Reference, CreateUser).
IAM_USER_NAME_MAX = 64
IAM_NAME = re.compile(r"[\w+=,.@-]+", re.ASCII)
# ECR CreatePullThroughCacheRule ecrRepositoryPrefix: 2-30 characters (ECR API Reference).
ECR_CACHE_PREFIX_MAX = 30

# The formats, under the names other modules have used.
DNS1123_LABEL_FORMAT = names.DNS1123_LABEL
DNS1123_SUBDOMAIN_FORMAT = names.DNS1123_SUBDOMAIN
DNS1035_LABEL_FORMAT = names.DNS1035_LABEL
LABEL_NAME_FORMAT = names.LABEL_KEY_NAME

_LABEL = "must be a lowercase RFC 1123 label: lowercase letters, digits or '-', alphanumeric at both ends"
_SUBDOMAIN = "must be a lowercase RFC 1123 subdomain: lowercase letters, digits, '-' or '.', alphanumeric at both ends"
_DNS1035 = ("must be a DNS-1035 label: lowercase letters, digits or '-', starting with a letter, alphanumeric at "
            "the end")
_LABEL_VALUE = "must be a label value: letters, digits, '-', '_' or '.', alphanumeric at both ends"
# The stack-file words of each finding (policy/k8s_names.py); None: said by another finding of the same value.
# FORMAT and DOTS take the words of the rule that found them.
_WORDS = {
    names.KEY_PARTS: "must be a label key: an optional DNS subdomain prefix and '/', then a name",
    names.PREFIX_EMPTY: f"prefix part {_SUBDOMAIN}",
    names.PREFIX_TOO_LONG: "prefix part must be no more than {} characters",
    names.PREFIX_FORMAT: f"prefix part {_SUBDOMAIN}",
    names.NAME_EMPTY: None,  # the name-format finding says it
    names.NAME_TOO_LONG: "name part must be no more than {} characters",
    names.NAME_FORMAT: "name part must be letters, digits, '-', '_' or '.', alphanumeric at both ends",
    names.TOO_LONG: "must be no more than {} characters",
}


def _words(findings: list[names.Finding], format_words: str | None = None) -> list[str]:
    words = {**_WORDS, names.FORMAT: format_words, names.DOTS: format_words}
    return [words[what].format(limit) for what, limit in findings if words[what] is not None]


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: namespaces, container and port names, most object names we derive."""
    return _words(names.dns1123_label(value, size=len), _LABEL)


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: StorageClass names, label key prefixes."""
    return _words(names.dns1123_subdomain(value, size=len), _SUBDOMAIN)


def dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: Service names (pkg/apis/core/validation ValidateServiceName)."""
    return _words(names.dns1035_label(value, size=len), _DNS1035)


def label_value(value: str) -> list[str]:
    """IsLabelValue: empty, or up to 63 of [-A-Za-z0-9_.] with alphanumerics at both ends."""
    return _words(names.label_value(value, size=len), _LABEL_VALUE)


def label_key(value: str) -> list[str]:
    """IsLabelKey: [prefix/]name, the prefix a DNS-1123 subdomain, the name as a label value but non-empty."""
    return _words(names.label_key(value, size=len))


def extended_resource_name(value: str) -> list[str]:
    """H IsExtendedResourceName: a qualified name with a domain outside kubernetes.io, not
    `requests.`-prefixed, and `requests.<name>` a valid label key (quota names it so)."""
    if names.is_native_resource(value):
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
