"""Kubernetes name and label rules, written once: DNS-1123 labels and subdomains, DNS-1035 labels,
label keys and values, their lengths, and which resource names are native or extended. The stack
config (config_model/k8s.py, which words each finding for a stack-file refusal) and the render's
API-server check (apivalidation/apiserver.py, which words it as the server does) both ask here.
Standard library only: this is a module of the policy pack's directory that the rest imports.

Ported from k8s.io/apimachinery v0.37.2 (the Go module in /root/go/pkg/mod):
  A = pkg/util/validation/validation.go   IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label and
                                          their *Fmt, *MaxLength constants
  C = pkg/api/validate/content/kube.go    IsLabelKey (= IsQualifiedName), IsLabelValue
  H = k8s.io/kubernetes v1.37.2 pkg/apis/core/helper/helpers.go  IsNativeResource, IsExtendedResourceName
A function here returns findings, (what, limit) pairs, in the order upstream appends its messages;
empty means valid. Go's `len` of a string counts bytes, so lengths are UTF-8 bytes unless the caller
passes `size` (the stack-file wording counts characters: it says "characters", and a value where the
two differ is not ASCII, so it fails the format anyway). Go's regexp anchors `^...$` match only the
whole text: every format is used with fullmatch (a trailing newline is not accepted).
"""

from __future__ import annotations

import re
from typing import Callable

DNS1123_LABEL_MAX = 63        # A DNS1123LabelMaxLength
DNS1123_SUBDOMAIN_MAX = 253   # A DNS1123SubdomainMaxLength
DNS1035_LABEL_MAX = 63        # A DNS1035LabelMaxLength
LABEL_VALUE_MAX = 63          # C LabelValueMaxLength
LABEL_KEY_NAME_MAX = 63       # C labelKeyMaxLength

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"                                  # A dns1123LabelFmt
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"        # A dns1123SubdomainFmt
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"                                     # A dns1035LabelFmt
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"                           # C labelKeyFmt
DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)
# A label key's name part; a label value is this or empty (C labelValueFmt = "(" + labelKeyFmt + ")?").
LABEL_KEY_NAME = re.compile(LABEL_KEY_FMT)

# The same two rules with the length folded into the pattern, for a pydantic field (config_model/types.py):
# a DNS-1123 label, and a label value that is not empty.
DNS1123_LABEL_PATTERN = rf"^[a-z0-9]([-a-z0-9]{{0,{DNS1123_LABEL_MAX - 2}}}[a-z0-9])?$"
LABEL_VALUE_PATTERN = rf"^[A-Za-z0-9]([A-Za-z0-9._\-]{{0,{LABEL_VALUE_MAX - 2}}}[A-Za-z0-9])?$"

# What a finding says is wrong; its second element is the limit for the *_TOO_LONG ones, else None.
TOO_LONG = "too long"
FORMAT = "format"
DOTS = "dots"                    # A IsDNS1123Label: a valid subdomain, so it is the dots
KEY_PARTS = "more than one '/'"  # C IsLabelKey: default case of the split
PREFIX_EMPTY = "prefix empty"
PREFIX_TOO_LONG = "prefix too long"
PREFIX_FORMAT = "prefix format"
NAME_EMPTY = "name empty"
NAME_TOO_LONG = "name too long"
NAME_FORMAT = "name format"

Finding = tuple[str, "int | None"]
Size = Callable[[str], int]


def utf8_len(value: str) -> int:
    """Go's len(string)."""
    return len(value.encode())


def _length(value: str, limit: int, size: Size) -> list[Finding]:
    return [(TOO_LONG, limit)] if size(value) > limit else []


def dns1123_label(value: str, size: Size = utf8_len) -> list[Finding]:
    """A IsDNS1123Label: too long, then the format (DOTS when it would be a valid subdomain)."""
    found = _length(value, DNS1123_LABEL_MAX, size)
    if not DNS1123_LABEL.fullmatch(value):
        found.append((DOTS, None) if DNS1123_SUBDOMAIN.fullmatch(value) else (FORMAT, None))
    return found


def dns1123_subdomain(value: str, size: Size = utf8_len) -> list[Finding]:
    """A IsDNS1123Subdomain."""
    return _length(value, DNS1123_SUBDOMAIN_MAX, size) + ([] if DNS1123_SUBDOMAIN.fullmatch(value) else [(FORMAT, None)])


def dns1035_label(value: str, size: Size = utf8_len) -> list[Finding]:
    """A IsDNS1035Label."""
    return _length(value, DNS1035_LABEL_MAX, size) + ([] if DNS1035_LABEL.fullmatch(value) else [(FORMAT, None)])


def label_value(value: str, size: Size = utf8_len) -> list[Finding]:
    """C IsLabelValue: empty, or at most 63 of [-A-Za-z0-9_.] with alphanumerics at both ends."""
    return _length(value, LABEL_VALUE_MAX, size) + ([] if value == "" or LABEL_KEY_NAME.fullmatch(value)
                                                   else [(FORMAT, None)])


def label_key(value: str, size: Size = utf8_len) -> list[Finding]:
    """C IsLabelKey: [prefix/]name; the prefix non-empty and a DNS-1123 subdomain, the name non-empty,
    at most 63 long, in the label format."""
    parts = value.split("/")
    if len(parts) > 2:
        return [(KEY_PARTS, None)]
    found: list[Finding] = []
    if len(parts) == 2:
        prefix = parts[0]
        as_prefix = {TOO_LONG: PREFIX_TOO_LONG, FORMAT: PREFIX_FORMAT}
        found += [(PREFIX_EMPTY, None)] if not prefix else [
            (as_prefix[what], limit) for what, limit in dns1123_subdomain(prefix, size)]
    name = parts[-1]
    if not name:
        found.append((NAME_EMPTY, None))
    elif size(name) > LABEL_KEY_NAME_MAX:
        found.append((NAME_TOO_LONG, LABEL_KEY_NAME_MAX))
    if not LABEL_KEY_NAME.fullmatch(name):
        found.append((NAME_FORMAT, None))
    return found


# H: core.ResourceDefaultNamespacePrefix and core.DefaultResourceRequestsPrefix.
RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
RESOURCE_REQUESTS_PREFIX = "requests."


def is_native_resource(name: str) -> bool:
    """H IsNativeResource: no domain, or one in the kubernetes.io/ namespace."""
    return "/" not in name or RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_extended_resource(name: str) -> bool:
    """H IsExtendedResourceName: not native, not requests.-prefixed, and requests.<name> a label key
    (the quota resource name it becomes)."""
    return (not is_native_resource(name) and not name.startswith(RESOURCE_REQUESTS_PREFIX)
            and not label_key(RESOURCE_REQUESTS_PREFIX + name))
