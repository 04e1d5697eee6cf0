"""The Kubernetes API server's validation beyond the OpenAPI schema, for the kinds we render. This
module holds the value formats (names, label keys and values, ports, env names, keys, paths,
resource names, quantities); the checks that use them are split by what they check:
objectmeta.py (ObjectMeta, labels, selectors), podspec.py (pod templates), kinds.py (each kind's
spec, and check_object, which runs what applies; check_object here is kept for callers).

Every check returns the server's own error text and names the upstream function it mirrors, so
these four modules are the ones to re-check when the supported Kubernetes range moves. Upstream:
kubernetes/kubernetes for 1.37, the newest version tests/test_schema.py validates against (read
from a stored snapshot near commit 008b3652959ca58af8be3fb5b6ecfe9ae7638282; the whole repository
was too large to fetch at the v1.37 tag, so re-read these functions at the tag when bumping):

  A = staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
  C = staging/src/k8s.io/apimachinery/pkg/api/validate/content/{dns,kube}.go
  M = staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go, generic.go, path/name.go
  R = staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go
  H = pkg/apis/core/helper/helpers.go
  V = pkg/apis/{core,apps,batch,networking,policy}/validation/validation.go

Where the server accepts something older supported versions (1.29) refuse, the older rule is kept:
env var names (IsRelaxedEnvVarName since 1.34) and Service names (RelaxedServiceNameValidation: a
1.37 server takes any DNS-1123 label, `1-model` too; 1.29 wants a DNS-1035 label). Create-time rules
only: no update, status or ratcheting rules. e2e/test_differential.py sends every rendered object
and every refused one the tests build to a real kube-apiserver (v1.37.2) and lists these older rules
(DELIBERATELY_STRICTER) as the only cases where it may accept what this module refuses.
"""

from __future__ import annotations

import re
from decimal import Decimal

from config_model import k8s
from policy import k8s_names as names
from policy import quantity

# The name and label rules are policy/k8s_names.py's (the apimachinery functions, ported once, which
# the stack config uses too); this module words their findings as the server does, lengths in bytes
# as Go's len counts them.

# The strict form (A: IsEnvVarName). Kubernetes 1.34 relaxed it (IsRelaxedEnvVarName, any printable
# ASCII but '='), but we support clusters back to 1.29, which refuse anything else.
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
PERCENT = re.compile(r"[0-9]+%")
INT32 = (-(2**31), k8s.INT32_MAX)


def _full(regex: re.Pattern, value: str) -> bool:
    # Go's regexp with ^...$ anchors; Python's fullmatch, so a trailing newline is not accepted.
    return regex.fullmatch(value) is not None


_LABEL_KEY_FORMAT = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                     "alphanumeric character")
_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
              "and must start and end with an alphanumeric character")
# The server's words for each finding, without the "(e.g. ..., regex used for validation is ...)"
# tail RegexError adds. Lengths: A's MaxLenError says "characters", C's (label keys and values) "bytes".
_WORDS = {
    names.TOO_LONG: "must be no more than {} characters",
    names.DOTS: "must not contain dots",
    names.KEY_PARTS: f"a valid label key {_LABEL_KEY_FORMAT} with an optional DNS subdomain prefix and '/'",
    names.PREFIX_EMPTY: "prefix part must be non-empty",
    names.PREFIX_TOO_LONG: "prefix part must be no more than {} bytes",
    names.PREFIX_FORMAT: f"prefix part {_SUBDOMAIN}",
    names.NAME_EMPTY: "name part must be non-empty",
    names.NAME_TOO_LONG: "name part must be no more than {} bytes",
    names.NAME_FORMAT: f"name part {_LABEL_KEY_FORMAT}",
}


def _words(findings: list[names.Finding], format_words: str | None = None, too_long: str | None = None) -> list[str]:
    words = {**_WORDS, names.FORMAT: format_words, **({names.TOO_LONG: too_long} if too_long else {})}
    return [words[what].format(limit) for what, limit in findings]


def dns1123_label(value: str) -> list[str]:
    """A: IsDNS1123Label."""
    return _words(names.dns1123_label(value), "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                  "characters or '-', and must start and end with an alphanumeric character")


def dns1123_subdomain(value: str) -> list[str]:
    """A/C: IsDNS1123Subdomain."""
    return _words(names.dns1123_subdomain(value), _SUBDOMAIN)


def dns1035_label(value: str) -> list[str]:
    """A: IsDNS1035Label (Service names: a Service name becomes a DNS label and an env var prefix)."""
    return _words(names.dns1035_label(value), "a DNS-1035 label must consist of lower case alphanumeric characters "
                  "or '-', start with an alphabetic character, and end with an alphanumeric character")


def path_segment_name(value: str) -> list[str]:
    """M path/name.go: IsValidPathSegmentName, which every name is checked against besides its kind's rule."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def label_key(value: str) -> list[str]:
    """C: IsLabelKey (= IsQualifiedName): optional DNS-subdomain prefix, '/', name of at most 63 bytes."""
    return _words(names.label_key(value))


def label_value(value: str) -> list[str]:
    """C: IsLabelValue: empty, or at most 63 bytes of [-A-Za-z0-9_.] starting and ending alphanumeric."""
    return _words(names.label_value(value), "a valid label must be an empty string or consist of alphanumeric "
                  "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                  too_long="must be no more than {} bytes")


def port_name(value: str) -> list[str]:
    """A: IsValidPortName (IANA_SVC_NAME, RFC 6335)."""
    errs = ["must be no more than 15 characters"] if len(value) > 15 else []
    if not re.fullmatch(r"[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def port_number(value: int) -> list[str]:
    """A: IsValidPortNum."""
    return [] if 1 <= value <= 65535 else ["must be between 1 and 65535, inclusive"]


def _chdir_prefix(value: str) -> list[str]:
    """A: hasChDirPrefix."""
    if value in (".", ".."):
        return [f"must not be '{value}'"]
    return ["must not start with '..'"] if value.startswith("..") else []


def env_var_name(value: str) -> list[str]:
    """A: IsEnvVarName."""
    errs = [] if _full(ENV_VAR_NAME, value) else [
        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
        "and must not start with a digit"]
    return errs + _chdir_prefix(value)


def config_map_key(value: str) -> list[str]:
    """A: IsConfigMapKey (ConfigMap and Secret data keys, keyRefs)."""
    errs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _full(CONFIG_MAP_KEY, value):
        errs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.'")
    return errs + _chdir_prefix(value)


def percent(value: str) -> list[str]:
    """A: IsValidPercent."""
    return [] if _full(PERCENT, value) else ["a valid percent string must be a numeric string followed by an ending '%'"]


# V core ValidateSecret / ValidateConfigMap: core.MaxSecretSize, the most data one object may hold.
MAX_DATA_SIZE = 1024 * 1024


def annotations(values: dict) -> list[tuple[str, str]]:
    """M: ValidateAnnotations: keys are label keys compared lowercased; keys plus values at most 256 KiB."""
    errs = [(k, m) for k in values for m in label_key(k.lower())]
    total = sum(len(k.encode()) + len(str(v).encode()) for k, v in values.items())
    if total > 256 * 1024:
        errs.append(("", f"Too long: may not be more than {256 * 1024} bytes"))
    return errs


def kubelet_references(text: str) -> list[str]:
    """The `$(NAME)` references the kubelet replaces in command, args and env values
    (third_party/forked/golang/expansion/expand.go: Expand; `$$` escapes a `$`)."""
    found, i = [], 0
    while i < len(text) - 1:
        if text[i] == "$" and text[i + 1] == "$":
            i += 2
        elif text[i] == "$" and text[i + 1] == "(":
            end = text.find(")", i + 2)
            if end < 0:
                break
            name = text[i + 2:end]
            # expand.go looks a name up in the container's environment (and the service-link
            # variables): only a name an environment variable can have is ever replaced.
            if ENV_VAR_NAME.fullmatch(name):
                found.append(name)
            i = end + 1
        else:
            i += 1
    return found


def local_descending_path(value: str) -> list[str]:
    """V core validateLocalDescendingPath + validatePathNoBacksteps: relative, no '..' element."""
    errs = ["must be a relative path"] if value.startswith("/") else []
    if ".." in value.replace("\\", "/").split("/"):
        errs.append("must not contain '..'")
    return errs


# ---- resource names (H) ----

STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


is_native_resource = names.is_native_resource        # H: IsNativeResource
is_extended_resource = names.is_extended_resource    # H: IsExtendedResourceName


def container_resource_name(name: str) -> list[str]:
    """pkg/apis/core/validation/validation.go: validateContainerResourceName (via validateResourceName)."""
    errs = label_key(name)
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append("must be a standard resource for containers")
    elif not is_native_resource(name) and not is_extended_resource(name):
        errs.append("doesn't follow extended resource name standard")
    return errs


# ---- quantities (R: ParseQuantity) ----

def parse_quantity(value: object) -> Decimal | None:
    """R: the value of a Quantity field as the server decodes it (policy.quantity.parse_field:
    ParseQuantity after Quantity.UnmarshalJSON, so " 1Gi" is 1Gi and a YAML number its JSON text);
    None if refused. A missing value (None) stays refused here, as the callers expect."""
    return quantity.try_parse_field(value) if value is not None else None


# ---- objects: pkg/apis/{core,apps,batch,networking,policy}/validation/validation.go (V below) ----
# Each check names the function of V it mirrors. Only create-time rules: no update or status rules.


def check_object(obj: dict) -> list[tuple[str, object, str]]:
    """Every rule that applies to the object's kind: apivalidation/kinds.py check_object (imported
    here when called, since the per-kind modules build on this one)."""
    from apivalidation import kinds

    return kinds.check_object(obj)
