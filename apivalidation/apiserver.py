"""The Kubernetes API server's validation beyond the OpenAPI schema, for the kinds we render: value
formats (names, label keys and values, quantities) and the per-kind checks that use them.

Every check returns the server's own error text and names the upstream function it mirrors, so
this is the one module to re-check when the supported Kubernetes range moves. Upstream:
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
from policy import quantity

# The name and label formats are config_model/k8s.py's (the same apimachinery functions, ported once);
# this module words the errors as the server does.
DNS1123_LABEL = k8s.DNS1123_LABEL_FORMAT
DNS1123_SUBDOMAIN = k8s.DNS1123_SUBDOMAIN_FORMAT
DNS1035_LABEL = k8s.DNS1035_LABEL_FORMAT
LABEL_KEY_NAME = k8s.LABEL_NAME_FORMAT
# The strict form (A: IsEnvVarName). Kubernetes 1.34 relaxed it (IsRelaxedEnvVarName, any printable
# ASCII but '='), but we support clusters back to 1.29, which refuse anything else.
ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
PERCENT = re.compile(r"[0-9]+%")
INT32 = (-(2**31), k8s.INT32_MAX)


def _full(regex: re.Pattern, value: str) -> bool:
    # Go's regexp with ^...$ anchors; Python's fullmatch, so a trailing newline is not accepted.
    return regex.fullmatch(value) is not None


def dns1123_label(value: str) -> list[str]:
    """A: IsDNS1123Label."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _full(DNS1123_LABEL, value):
        errs.append("must not contain dots" if _full(DNS1123_SUBDOMAIN, value) else
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                    "and must start and end with an alphanumeric character")
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """A/C: IsDNS1123Subdomain."""
    errs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _full(DNS1123_SUBDOMAIN, value):
        errs.append("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character")
    return errs


def dns1035_label(value: str) -> list[str]:
    """A: IsDNS1035Label (Service names: a Service name becomes a DNS label and an env var prefix)."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _full(DNS1035_LABEL, value):
        errs.append("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                    "start with an alphabetic character, and end with an alphanumeric character")
    return errs


def path_segment_name(value: str) -> list[str]:
    """M path/name.go: IsValidPathSegmentName, which every name is checked against besides its kind's rule."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def label_key(value: str) -> list[str]:
    """C: IsLabelKey (= IsQualifiedName): optional DNS-subdomain prefix, '/', name of at most 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character with an optional DNS subdomain prefix and '/'"]
    errs = []
    if len(parts) == 2:
        prefix = parts[0]
        # 1.37 words the prefix's length in bytes, unlike a name's (content/kube.go IsLabelKey)
        errs += ["prefix part must be non-empty"] if not prefix else [
            f"prefix part {m.replace('253 characters', '253 bytes')}" for m in dns1123_subdomain(prefix)]
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _full(LABEL_KEY_NAME, name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                    "with an alphanumeric character")
    return errs


def label_value(value: str) -> list[str]:
    """C: IsLabelValue: empty, or at most 63 bytes of [-A-Za-z0-9_.] starting and ending alphanumeric."""
    errs = ["must be no more than 63 bytes"] if len(value.encode()) > 63 else []
    if value and not _full(LABEL_KEY_NAME, value):
        errs.append("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
    return errs


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


def annotations(values: dict) -> list[tuple[str, str]]:
    """M: ValidateAnnotations: keys are label keys compared lowercased; keys plus values at most 256 KiB."""
    errs = [(k, m) for k in values for m in label_key(k.lower())]
    total = sum(len(k.encode()) + len(str(v).encode()) for k, v in values.items())
    if total > 256 * 1024:
        errs.append(("", f"Too long: may not be more than {256 * 1024} bytes"))
    return errs


# ---- resource names (H) ----

STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


def is_native_resource(name: str) -> bool:
    """H: IsNativeResource: no domain, or a kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """H: IsExtendedResourceName: not native, not requests.-prefixed, and 'requests.<name>' is a label key."""
    return not is_native_resource(name) and not name.startswith("requests.") and not label_key("requests." + name)


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

class Check:
    """Collects (field, value, message) for one object."""

    def __init__(self) -> None:
        self.found: list[tuple[str, object, str]] = []

    def add(self, path: str, value: object, errs: list[str], rule: str) -> None:
        for err in errs:
            self.found.append((path, value, f"{err} ({rule})"))

    def each_str(self, path: str, value: object, fn, rule: str) -> None:
        if isinstance(value, str):
            self.add(path, value, fn(value), rule)


def _name_rule(kind: str):
    """The name function each kind's Validate<Kind> passes to ValidateObjectMeta."""
    if kind == "Service":
        # The 1.29 rule; 1.37 relaxed it to a DNS-1123 label (module docstring).
        return dns1035_label, "V core ValidateServiceName = NameIsDNS1035Label"
    if kind == "Namespace":
        return dns1123_label, "V core ValidateNamespaceName = NameIsDNSLabel"
    return dns1123_subdomain, f"V {kind} name = NameIsDNSSubdomain"


def object_meta(c: Check, kind: str, meta: dict, namespaced: bool) -> None:
    """M: ValidateObjectMetaAccessor (name, namespace, labels, annotations)."""
    name = meta.get("name") or ""
    fn, rule = _name_rule(kind)
    c.add("metadata.name", name, ["name or generateName is required"] if not name else fn(name), rule)
    c.add("metadata.name", name, path_segment_name(name), "M path.IsValidPathSegmentName")
    if namespaced:
        ns = meta.get("namespace") or ""
        c.add("metadata.namespace", ns, ["is required"] if not ns else dns1123_label(ns), "M ValidateNamespaceName")
    labels(c, "metadata.labels", meta.get("labels") or {})
    for key, err in annotations(meta.get("annotations") or {}):
        c.add(f"metadata.annotations[{key}]" if key else "metadata.annotations", key, [err], "M ValidateAnnotations")


def labels(c: Check, path: str, values: dict) -> None:
    """staging/.../apis/meta/v1/validation: ValidateLabels (keys IsQualifiedName, values IsValidLabelValue)."""
    for key, value in values.items():
        c.add(f"{path}[{key}]", key, label_key(key), "ValidateLabelName")
        c.add(f"{path}[{key}]", value, label_value(str(value)) if isinstance(value, str) else ["must be a string"],
              "ValidateLabels")


def label_selector(c: Check, path: str, sel: dict | None) -> None:
    """meta/v1/validation: ValidateLabelSelector and ValidateLabelSelectorRequirement."""
    if not sel:
        return
    labels(c, f"{path}.matchLabels", sel.get("matchLabels") or {})
    for i, req in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op, values = req.get("operator"), req.get("values") or []
        if op in ("In", "NotIn") and not values:
            c.add(f"{p}.values", values, ["must be specified when `operator` is 'In' or 'NotIn'"],
                  "ValidateLabelSelectorRequirement")
        elif op in ("Exists", "DoesNotExist") and values:
            c.add(f"{p}.values", values, ["may not be specified when `operator` is 'Exists' or 'DoesNotExist'"],
                  "ValidateLabelSelectorRequirement")
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            c.add(f"{p}.operator", op, ["not a valid selector operator"], "ValidateLabelSelectorRequirement")
        c.add(f"{p}.key", req.get("key"), label_key(str(req.get("key") or "")), "ValidateLabelName")
        for j, v in enumerate(values):
            c.add(f"{p}.values[{j}]", v, label_value(str(v)), "ValidateLabelSelectorRequirement")


def _selector_matches(sel: dict, template_labels: dict) -> bool:
    """apimachinery labels.Selector.Matches for the selector forms a workload uses."""
    if any(template_labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for req in sel.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        has = key in template_labels
        if ((op == "In" and template_labels.get(key) not in values) or (op == "NotIn" and has and template_labels[key] in values)
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has)):
            return False
    return True


def non_negative(c: Check, path: str, value: object, rule: str) -> None:
    """V core ValidateNonnegativeField."""
    if isinstance(value, int) and value < 0:
        c.add(path, value, ["must be greater than or equal to 0"], rule)


def int_or_percent(c: Check, path: str, value: object, rule: str) -> None:
    """V apps ValidatePositiveIntOrPercent / IsNotMoreThan100Percent."""
    if isinstance(value, str):
        errs = percent(value)
        if not errs and int(value[:-1]) > 100:
            errs = ["must not be greater than 100%"]
        c.add(path, value, errs, rule)
    else:
        non_negative(c, path, value, rule)


# ---- pod templates: V core ValidatePodTemplateSpec -> ValidatePodSpec ----

def _port_ref(c: Check, path: str, port: object, rule: str) -> None:
    """An IntOrString port: a number IsValidPortNum, a name IsValidPortName (V core ValidatePortNumOrName)."""
    if isinstance(port, int):
        c.add(path, port, port_number(port), rule)
    elif isinstance(port, str):
        c.add(path, port, port_name(port), rule)


def _probe(c: Check, path: str, probe: dict | None, liveness_or_startup: bool) -> None:
    """V core validateProbe and validateHandler: one handler, non-negative counts, ports."""
    if not probe:
        return
    handlers = [h for h in ("exec", "httpGet", "tcpSocket", "grpc") if probe.get(h) is not None]
    if len(handlers) != 1:
        c.add(path, handlers, ["must specify exactly one handler type"], "V core validateHandler")
    for f in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        non_negative(c, f"{path}.{f}", probe.get(f), "V core validateProbe")
    if liveness_or_startup and probe.get("successThreshold") not in (None, 1):
        c.add(f"{path}.successThreshold", probe["successThreshold"], ["must be 1"], "V core validateProbe")
    grace = probe.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace <= 0:
        c.add(f"{path}.terminationGracePeriodSeconds", grace, ["must be greater than 0"], "V core validateProbe")
    for h in ("httpGet", "tcpSocket"):
        if isinstance(probe.get(h), dict):
            _port_ref(c, f"{path}.{h}.port", probe[h].get("port"), f"V core validate{h[0].upper()}{h[1:]}Action")


def _resources(c: Check, path: str, res: dict | None) -> None:
    """V core ValidateContainerResourceRequirements: names, quantities, requests <= limits, and
    extended resources whole, with requests equal to limits (they cannot be overcommitted)."""
    res = res or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    parsed: dict[str, dict[str, Decimal]] = {"limits": {}, "requests": {}}
    for part, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            p = f"{path}.{part}[{name}]"
            c.add(p, name, container_resource_name(name), "V core validateContainerResourceName")
            q = parse_quantity(raw)
            if q is None:
                c.add(p, raw, ["quantities must match the regular expression "
                               "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"], "R ParseQuantity")
                continue
            parsed[part][name] = q
            if q < 0:
                c.add(p, raw, ["must be greater than or equal to 0"], "V core ValidateNonnegativeQuantity")
            if is_extended_resource(name) and q != q.to_integral_value():
                c.add(p, raw, ["must be an integer"], "V core validateResourceQuantityValue")
    for name, q in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and q > limit:
            c.add(f"{path}.requests[{name}]", requests[name], [f"must be less than or equal to {name} limit of {limits[name]}"],
                  "V core ValidateContainerResourceRequirements")
        if is_extended_resource(name):
            if limit is None:
                c.add(f"{path}.limits[{name}]", None, ["Limit must be set for non overcommitable resources"],
                      "V core ValidateContainerResourceRequirements")
            elif limit != q:
                c.add(f"{path}.requests[{name}]", requests[name], ["must be equal to " f"{name} limit of {limits[name]}"],
                      "V core ValidateContainerResourceRequirements")


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


def _expansions(c: Check, path: str, ctr: dict) -> None:
    """The program's one use of expansion is a whole value naming a variable the container defines
    (`--api-key $(SGLANG_API_KEY)`, the key from a Secret). A reference inside other text, or to a
    name the container does not define, is a value from the stack file that the kubelet would
    rewrite or leave dangling: refused (a stricter rule than the server's, which accepts any text)."""
    env = [e.get("name") for e in ctr.get("env") or []]
    opaque = bool(ctr.get("envFrom"))  # names an envFrom brings in are unknown here
    values = [(f"{path}.command[{i}]", v, env) for i, v in enumerate(ctr.get("command") or [])]
    values += [(f"{path}.args[{i}]", v, env) for i, v in enumerate(ctr.get("args") or [])]
    # An env value sees only the variables defined before it (expand.go mapping order).
    values += [(f"{path}.env[{i}].value", e.get("value"), env[:i]) for i, e in enumerate(ctr.get("env") or [])]
    for p, v, defined in values:
        if not isinstance(v, str):
            continue
        for ref in kubelet_references(v):
            if v != f"$({ref})":
                c.add(p, v, [f"the kubelet expands $({ref}) inside this value; write $$({ref}) for the literal text"],
                      "expansion.Expand")
            elif ref not in defined and not opaque:
                c.add(p, v, [f"$({ref}) names no variable of the container, so the kubelet leaves it as text"],
                      "expansion.Expand")


def _container(c: Check, path: str, ctr: dict, volumes: set[str], init: bool) -> None:
    """V core validateContainerCommon: name, image, ports, env, mounts, probes, resources."""
    c.add(f"{path}.name", ctr.get("name"), dns1123_label(str(ctr.get("name") or "")), "V core validateContainerCommon")
    if not ctr.get("image"):
        c.add(f"{path}.image", ctr.get("image"), ["is required"], "V core validateContainerCommon")
    port_names: set[str] = set()
    for i, port in enumerate(ctr.get("ports") or []):
        p = f"{path}.ports[{i}]"
        name = port.get("name")
        if name:
            c.add(f"{p}.name", name, port_name(name), "V core validateContainerPorts")
            if name in port_names:
                c.add(f"{p}.name", name, ["Duplicate value"], "V core validateContainerPorts")
            port_names.add(name)
        c.add(f"{p}.containerPort", port.get("containerPort"), port_number(int(port.get("containerPort") or 0)),
              "V core validateContainerPorts")
        if port.get("hostPort"):
            c.add(f"{p}.hostPort", port["hostPort"], port_number(int(port["hostPort"])), "V core validateContainerPorts")
    for i, env in enumerate(ctr.get("env") or []):
        p = f"{path}.env[{i}]"
        c.add(f"{p}.name", env.get("name"), env_var_name(str(env.get("name") or "")), "V core ValidateEnv")
        source = env.get("valueFrom") or {}
        if source:
            if env.get("value"):
                c.add(f"{p}.valueFrom", source, ["may not be specified when `value` is not empty"], "V core validateEnvVarValueFrom")
            if len([k for k in source if source[k] is not None]) != 1:
                c.add(f"{p}.valueFrom", source, ["may not have more than one field specified at a time"],
                      "V core validateEnvVarValueFrom")
            for ref in ("secretKeyRef", "configMapKeyRef"):
                if isinstance(source.get(ref), dict):
                    c.each_str(f"{p}.valueFrom.{ref}.key", source[ref].get("key"), config_map_key, f"V core validate{ref[0].upper()}{ref[1:]}")
                    c.each_str(f"{p}.valueFrom.{ref}.name", source[ref].get("name"), dns1123_subdomain, f"V core validate{ref[0].upper()}{ref[1:]}")
    _expansions(c, path, ctr)
    mounts: set[str] = set()
    for i, m in enumerate(ctr.get("volumeMounts") or []):
        p = f"{path}.volumeMounts[{i}]"
        if m.get("name") not in volumes:
            c.add(f"{p}.name", m.get("name"), ["Not found"], "V core ValidateVolumeMounts")
        mount_path = m.get("mountPath") or ""
        if not mount_path:
            c.add(f"{p}.mountPath", mount_path, ["Required value"], "V core ValidateVolumeMounts")
        elif mount_path in mounts:
            c.add(f"{p}.mountPath", mount_path, ["must be unique"], "V core ValidateVolumeMounts")
        mounts.add(mount_path)
        for sub in ("subPath", "subPathExpr"):
            if m.get(sub):
                c.add(f"{p}.{sub}", m[sub], local_descending_path(m[sub]), "V core validateLocalDescendingPath")
    # V core validateInitContainers: only a restartable init container (a sidecar, restartPolicy
    # Always) may have probes or lifecycle hooks; the others run to completion before the pod starts.
    sidecar = ctr.get("restartPolicy") == "Always"
    if init and not sidecar:
        for f in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
            if ctr.get(f) is not None:
                c.add(f"{path}.{f}", ctr[f], ["may not be set for init containers without restartPolicy=Always"],
                      "V core validateInitContainers")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if init and not sidecar and ctr.get(probe) is not None:
            continue  # forbidden above; upstream validates no further
        _probe(c, f"{path}.{probe}", ctr.get(probe), probe != "readinessProbe")
    _resources(c, f"{path}.resources", ctr.get("resources"))


def local_descending_path(value: str) -> list[str]:
    """V core validateLocalDescendingPath + validatePathNoBacksteps: relative, no '..' element."""
    errs = ["must be a relative path"] if value.startswith("/") else []
    if ".." in value.replace("\\", "/").split("/"):
        errs.append("must not contain '..'")
    return errs


def _tolerations(c: Check, path: str, tolerations: list) -> None:
    """V core ValidateTolerations."""
    for i, t in enumerate(tolerations):
        p, key, op, value = f"{path}[{i}]", t.get("key") or "", t.get("operator") or "Equal", t.get("value") or ""
        if key:
            c.add(f"{p}.key", key, label_key(key), "V core ValidateTolerations")
        elif op != "Exists":
            c.add(f"{p}.operator", op, ["operator must be Exists when `key` is empty, which means \"match all values and all keys\""],
                  "V core ValidateTolerations")
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            c.add(f"{p}.effect", t.get("effect"), ["effect must be 'NoExecute' when `tolerationSeconds` is set"],
                  "V core ValidateTolerations")
        if op == "Equal":
            c.add(f"{p}.value", value, label_value(value), "V core ValidateTolerations")
        elif op == "Exists" and value:
            c.add(f"{p}.operator", t, ["value must be empty when `operator` is 'Exists'"], "V core ValidateTolerations")
        elif op not in ("Equal", "Exists"):
            c.add(f"{p}.operator", op, ["Unsupported value: supported values: \"Equal\", \"Exists\""], "V core ValidateTolerations")
        if t.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            c.add(f"{p}.effect", t["effect"], ["Unsupported value"], "V core validateTaintEffect")


def _node_selector_terms(c: Check, path: str, terms: list) -> None:
    """V core validateNodeSelectorTerm / validateNodeSelectorRequirement (values as label values:
    a node label can never hold another value, and new objects get no ratcheting)."""
    for i, term in enumerate(terms):
        for group in ("matchExpressions", "matchFields"):
            for j, req in enumerate(term.get(group) or []):
                p, op, values = f"{path}[{i}].{group}[{j}]", req.get("operator"), req.get("values") or []
                c.add(f"{p}.key", req.get("key"), label_key(str(req.get("key") or "")), "V core validateNodeSelectorRequirement")
                if op in ("In", "NotIn") and not values:
                    c.add(f"{p}.values", values, ["must be specified when `operator` is 'In' or 'NotIn'"], "V core validateNodeSelectorRequirement")
                elif op in ("Exists", "DoesNotExist") and values:
                    c.add(f"{p}.values", values, ["may not be specified when `operator` is 'Exists' or 'DoesNotExist'"], "V core validateNodeSelectorRequirement")
                elif op in ("Gt", "Lt") and len(values) != 1:
                    c.add(f"{p}.values", values, ["must be specified single value when `operator` is 'Lt' or 'Gt'"], "V core validateNodeSelectorRequirement")
                elif op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    c.add(f"{p}.operator", op, ["not a valid selector operator"], "V core validateNodeSelectorRequirement")
                for k, v in enumerate(values):
                    c.add(f"{p}.values[{k}]", v, label_value(str(v)), "V core validateNodeSelectorRequirement")


def _affinity(c: Check, path: str, affinity: dict) -> None:
    """V core validateAffinity: node affinity terms and pod (anti-)affinity label selectors."""
    node = affinity.get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    _node_selector_terms(c, f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                         required.get("nodeSelectorTerms") or [])
    for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        _node_selector_terms(c, f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                             [pref.get("preference") or {}])
    for kind in ("podAffinity", "podAntiAffinity"):
        for when in ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"):
            for i, term in enumerate((affinity.get(kind) or {}).get(when) or []):
                term = term.get("podAffinityTerm", term)
                p = f"{path}.{kind}.{when}[{i}]"
                label_selector(c, f"{p}.labelSelector", term.get("labelSelector"))
                c.add(f"{p}.topologyKey", term.get("topologyKey"), label_key(str(term.get("topologyKey") or "")),
                      "V core validatePodAffinityTerm")


def pod_template(c: Check, path: str, template: dict, restart_policies: tuple[str, ...]) -> None:
    """V core ValidatePodTemplateSpec: template labels and annotations, then ValidatePodSpec."""
    meta = template.get("metadata") or {}
    labels(c, f"{path}.metadata.labels", meta.get("labels") or {})
    for key, err in annotations(meta.get("annotations") or {}):
        c.add(f"{path}.metadata.annotations", key, [err], "M ValidateAnnotations")
    spec = template.get("spec") or {}
    sp = f"{path}.spec"
    volumes: set[str] = set()
    for i, vol in enumerate(spec.get("volumes") or []):
        name = str(vol.get("name") or "")
        c.add(f"{sp}.volumes[{i}].name", name, dns1123_label(name), "V core ValidateVolumes")
        if name in volumes:
            c.add(f"{sp}.volumes[{i}].name", name, ["Duplicate value"], "V core ValidateVolumes")
        volumes.add(name)
        for src, field in (("persistentVolumeClaim", "claimName"), ("secret", "secretName"), ("configMap", "name")):
            if isinstance(vol.get(src), dict):
                c.each_str(f"{sp}.volumes[{i}].{src}.{field}", vol[src].get(field), dns1123_subdomain,
                           f"V core validate{src[0].upper()}{src[1:]}VolumeSource")
                for j, item in enumerate(vol[src].get("items") or []):
                    c.each_str(f"{sp}.volumes[{i}].{src}.items[{j}].path", item.get("path"), local_descending_path,
                               "V core validateKeyToPath")
        if isinstance(vol.get("emptyDir"), dict) and vol["emptyDir"].get("sizeLimit") is not None:
            if parse_quantity(vol["emptyDir"]["sizeLimit"]) is None:
                c.add(f"{sp}.volumes[{i}].emptyDir.sizeLimit", vol["emptyDir"]["sizeLimit"], ["not a quantity"], "R ParseQuantity")
    names: set[str] = set()
    # V core validateContainers runs first; validateInitContainers then checks each init container's
    # name against every name before it, so a clash is reported at initContainers[i].name.
    for group in ("containers", "initContainers"):
        for i, ctr in enumerate(spec.get(group) or []):
            _container(c, f"{sp}.{group}[{i}]", ctr, volumes, group == "initContainers")
            if ctr.get("name") in names:
                c.add(f"{sp}.{group}[{i}].name", ctr.get("name"), ["Duplicate value"], "V core validateContainers")
            names.add(ctr.get("name"))
    if not spec.get("containers"):
        c.add(f"{sp}.containers", [], ["Required value"], "V core validateContainers")
    if spec.get("restartPolicy", "Always") not in restart_policies:
        c.add(f"{sp}.restartPolicy", spec.get("restartPolicy"), [f"Unsupported value: supported values: {', '.join(restart_policies)}"],
              "V core validateRestartPolicy / V apps+batch ValidatePodTemplateSpecForReplicaSet, ValidateJobSpec")
    labels(c, f"{sp}.nodeSelector", spec.get("nodeSelector") or {})
    _tolerations(c, f"{sp}.tolerations", spec.get("tolerations") or [])
    _affinity(c, f"{sp}.affinity", spec.get("affinity") or {})
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= INT32[1]:
        c.add(f"{sp}.activeDeadlineSeconds", deadline, [f"must be between 1 and {INT32[1]}, inclusive"], "V core ValidatePodSpec")
    non_negative(c, f"{sp}.terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"), "V core ValidatePodSpec")
    for f, fn in (("serviceAccountName", dns1123_subdomain), ("priorityClassName", dns1123_subdomain),
                  ("hostname", dns1123_label), ("subdomain", dns1123_label)):
        if spec.get(f):
            c.add(f"{sp}.{f}", spec[f], fn(spec[f]), "V core ValidatePodSpec")


# ---- kinds ----

CLUSTER_SCOPED = {"Namespace", "PersistentVolume"}
MAX_DATA_SIZE = 1024 * 1024  # V core ValidateSecret / ValidateConfigMap: core.MaxSecretSize


def _selects_template(c: Check, sel: dict, tmpl_labels: dict, kind: str, where: str) -> None:
    """The apps validations' shared selector rules: valid, non-empty, and matching the template's labels."""
    label_selector(c, "spec.selector", sel)
    if not sel.get("matchLabels") and not sel.get("matchExpressions"):
        c.add("spec.selector", sel, [f"empty selector is invalid for {kind}"], where)
    elif not _selector_matches(sel, tmpl_labels):
        c.add("spec.template.metadata.labels", tmpl_labels, ["`selector` does not match template `labels`"], where)


def _deployment(c: Check, spec: dict) -> None:
    """V apps ValidateDeploymentSpec and ValidateDeploymentStrategy."""
    sel, tmpl_labels = spec.get("selector") or {}, ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    _selects_template(c, sel, tmpl_labels, "deployment", "V apps ValidateDeploymentSpec")
    for f in ("replicas", "minReadySeconds", "revisionHistoryLimit"):
        non_negative(c, f"spec.{f}", spec.get(f), "V apps ValidateDeploymentSpec")
    deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
    if isinstance(deadline, int) and deadline <= ready:
        c.add("spec.progressDeadlineSeconds", deadline, ["must be greater than minReadySeconds"], "V apps ValidateDeploymentSpec")
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") == "Recreate" and rolling:
        c.add("spec.strategy.rollingUpdate", rolling, ["may not be specified when strategy `type` is 'Recreate'"],
              "V apps ValidateDeploymentStrategy")
    if rolling:
        for f in ("maxSurge", "maxUnavailable"):
            int_or_percent(c, f"spec.strategy.rollingUpdate.{f}", rolling.get(f), "V apps ValidateRollingUpdateDeployment")
        if rolling.get("maxSurge") in (0, "0%") and rolling.get("maxUnavailable") in (0, "0%"):
            c.add("spec.strategy.rollingUpdate.maxUnavailable", 0, ["may not be 0 when `maxSurge` is 0"],
                  "V apps ValidateRollingUpdateDeployment")
    pod_template(c, "spec.template", spec.get("template") or {}, ("Always",))


def _daemonset(c: Check, spec: dict) -> None:
    """V apps ValidateDaemonSetSpec, ValidateDaemonSetUpdateStrategy and ValidateRollingUpdateDaemonSet,
    after the v1 defaults (pkg/apis/apps/v1/defaults.go SetDefaults_DaemonSet: RollingUpdate,
    maxUnavailable 1, maxSurge 0)."""
    sel, tmpl = spec.get("selector") or {}, spec.get("template") or {}
    tmpl_labels = (tmpl.get("metadata") or {}).get("labels") or {}
    _selects_template(c, sel, tmpl_labels, "daemonset", "V apps ValidateDaemonSetSpec")
    if (tmpl.get("spec") or {}).get("activeDeadlineSeconds") is not None:
        c.add("spec.template.spec.activeDeadlineSeconds", tmpl["spec"]["activeDeadlineSeconds"],
              ["activeDeadlineSeconds in DaemonSet is not Supported"], "V apps ValidateDaemonSetSpec")
    for f in ("minReadySeconds", "revisionHistoryLimit"):
        non_negative(c, f"spec.{f}", spec.get(f), "V apps ValidateDaemonSetSpec")
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type", "RollingUpdate")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        unavailable, surge = rolling.get("maxUnavailable", 1), rolling.get("maxSurge", 0)
        for f, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
            int_or_percent(c, f"spec.updateStrategy.rollingUpdate.{f}", value, "V apps ValidateRollingUpdateDaemonSet")

        def nonzero(value: object) -> bool:
            # getIntOrPercentValue: a percent's number, else IntValue (0 for text that is not a number)
            if isinstance(value, str):
                return (int(value[:-1]) if not percent(value) else int(value) if value.isdigit() else 0) != 0
            return value != 0

        if nonzero(unavailable) and nonzero(surge):
            c.add("spec.updateStrategy.rollingUpdate.maxSurge", surge, ["may not be set when maxUnavailable is non-zero"],
                  "V apps ValidateRollingUpdateDaemonSet")
        elif not nonzero(unavailable) and not nonzero(surge):
            c.add("spec.updateStrategy.rollingUpdate.maxUnavailable", unavailable, ["cannot be 0 when maxSurge is 0"],
                  "V apps ValidateRollingUpdateDaemonSet")
    elif kind != "OnDelete":
        c.add("spec.updateStrategy", strategy, ['Unsupported value: supported values: "RollingUpdate", "OnDelete"'],
              "V apps ValidateDaemonSetUpdateStrategy")
    pod_template(c, "spec.template", tmpl, ("Always",))


def _job(c: Check, name: str, spec: dict) -> None:
    """V batch ValidateJob / validateJobSpec. The Job strategy (pkg/registry/batch/job/strategy.go,
    generateSelector) labels the pod template with batch.kubernetes.io/job-name=<name> before
    validation, so a Job name must also be a label value (at most 63 bytes); the server reports it
    there, at spec.template.labels (kube-apiserver v1.37.2, e2e/test_differential.py)."""
    c.add("spec.template.labels[batch.kubernetes.io/job-name]", name, label_value(name),
          "batch job strategy generateSelector labels the pod template with metadata.name + ValidateLabels")
    for f in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        non_negative(c, f"spec.{f}", spec.get(f), "V batch validateJobSpec")
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= 0:
        c.add("spec.activeDeadlineSeconds", deadline, ["must be greater than 0"], "V batch validateJobSpec")
    pod_template(c, "spec.template", spec.get("template") or {}, ("OnFailure", "Never"))


def _service(c: Check, spec: dict) -> None:
    """V core ValidateService / validateServicePort: port names are DNS-1123 labels, required and
    unique when there are several; target ports are numbers or IANA names."""
    ports, names = spec.get("ports") or [], set()
    for i, port in enumerate(ports):
        p, name = f"spec.ports[{i}]", port.get("name") or ""
        if len(ports) > 1 and not name:
            c.add(f"{p}.name", name, ["Required value"], "V core validateServicePort")
        if name:
            c.add(f"{p}.name", name, dns1123_label(name), "V core validateServicePort")
            if name in names:
                c.add(f"{p}.name", name, ["Duplicate value"], "V core validateServicePort")
            names.add(name)
        c.add(f"{p}.port", port.get("port"), port_number(int(port.get("port") or 0)), "V core validateServicePort")
        _port_ref(c, f"{p}.targetPort", port.get("targetPort"), "V core validateServicePort")
    labels(c, "spec.selector", spec.get("selector") or {})


def _data(c: Check, obj: dict) -> None:
    """V core ValidateSecret / ValidateConfigMap: keys IsConfigMapKey, unique across data and
    binaryData (stringData merges into data), at most 1 MiB in total."""
    keys: set[str] = set()
    total = 0
    for part in ("data", "stringData", "binaryData"):
        for key, value in (obj.get(part) or {}).items():
            # The v1 conversion merges a Secret's stringData into data before validation: the server
            # names data[key] (kube-apiserver v1.37.2, e2e/test_differential.py).
            where = "data" if part == "stringData" else part
            c.add(f"{where}[{key}]", key, config_map_key(key),
                  "V core ValidateSecret/ValidateConfigMap" + (" (stringData merged into data)" if part == "stringData" else ""))
            if part == "binaryData" and key in keys:
                c.add(f"{part}[{key}]", key, ["duplicate of key present in data"], "V core ValidateConfigMap")
            keys.add(key)
            total += len(str(value).encode())
    if total > MAX_DATA_SIZE:
        c.add("data", total, [f"Too long: may not be more than {MAX_DATA_SIZE} bytes"], "V core ValidateSecret/ValidateConfigMap")


def _storage(c: Check, kind: str, spec: dict) -> None:
    """V core ValidatePersistentVolume / ValidatePersistentVolumeClaimSpec: class names are DNS
    subdomains (ValidateClassName; '' means no class), access modes and sizes present, CSI driver names."""
    cls = spec.get("storageClassName")
    if cls:
        c.add("spec.storageClassName", cls, dns1123_subdomain(cls), "V core ValidateClassName")
    if not spec.get("accessModes"):
        c.add("spec.accessModes", None, ["at least 1 access mode is required"], f"V core Validate{kind}")
    size = (spec.get("capacity") if kind == "PersistentVolume" else (spec.get("resources") or {}).get("requests") or {}) or {}
    q = parse_quantity(size.get("storage")) if "storage" in size else None
    if q is None or (kind == "PersistentVolumeClaim" and q <= 0):
        c.add("spec.capacity.storage" if kind == "PersistentVolume" else "spec.resources.requests.storage",
              size.get("storage"), ["must be a positive quantity" if q is not None else "Required value (a quantity)"],
              f"V core Validate{kind}")
    csi = spec.get("csi")
    if isinstance(csi, dict):
        driver = str(csi.get("driver") or "")
        errs = ["must be no more than 63 characters"] if len(driver) > 63 else []
        c.add("spec.csi.driver", driver, errs + dns1123_subdomain(driver.lower()), "V core ValidateCSIDriverName")
        if not csi.get("volumeHandle"):
            c.add("spec.csi.volumeHandle", csi.get("volumeHandle"), ["Required value"], "V core validateCSIPersistentVolumeSource")
    nfs = spec.get("nfs")
    if isinstance(nfs, dict) and not str(nfs.get("path") or "").startswith("/"):
        c.add("spec.nfs.path", nfs.get("path"), ["must be an absolute path"], "V core validateNFSVolumeSource")
    if kind == "PersistentVolumeClaim":
        label_selector(c, "spec.selector", spec.get("selector"))
        if spec.get("volumeName"):
            c.add("spec.volumeName", spec["volumeName"], dns1123_subdomain(spec["volumeName"]), "V core ValidatePersistentVolumeName")


def _network_policy(c: Check, spec: dict) -> None:
    """V networking ValidateNetworkPolicySpec: selectors, peers, ports (endPort needs a numeric port)."""
    label_selector(c, "spec.podSelector", spec.get("podSelector"))
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or []):
            for j, port in enumerate(rule.get("ports") or []):
                p = f"spec.{direction}[{i}].ports[{j}]"
                _port_ref(c, f"{p}.port", port.get("port"), "V networking ValidateNetworkPolicyPort")
                end = port.get("endPort")
                if end is not None and (not isinstance(port.get("port"), int) or end < port["port"]):
                    c.add(f"{p}.endPort", end, ["must be greater than or equal to `port` and `port` must be a number"],
                          "V networking ValidateNetworkPolicyPort")
            for j, peer in enumerate(rule.get(peers_key) or []):
                p = f"spec.{direction}[{i}].{peers_key}[{j}]"
                label_selector(c, f"{p}.podSelector", peer.get("podSelector"))
                label_selector(c, f"{p}.namespaceSelector", peer.get("namespaceSelector"))


def _pdb(c: Check, spec: dict) -> None:
    """V policy ValidatePodDisruptionBudgetSpec: minAvailable xor maxUnavailable, ints or percents."""
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        c.add("spec", spec, ["minAvailable and maxUnavailable cannot be both set"], "V policy ValidatePodDisruptionBudgetSpec")
    for f in ("minAvailable", "maxUnavailable"):
        if spec.get(f) is not None:
            int_or_percent(c, f"spec.{f}", spec[f], "V policy ValidatePodDisruptionBudgetSpec")
    label_selector(c, "spec.selector", spec.get("selector"))


def check_object(obj: dict) -> list[tuple[str, object, str]]:
    """Every rule above that applies to the object's kind; (field, value, message with rule)."""
    from policy.workloads import pod_templates  # the one place that knows where CRs keep pod templates

    c = Check()
    kind, meta, spec = obj.get("kind", ""), obj.get("metadata") or {}, obj.get("spec") or {}
    object_meta(c, kind, meta, kind not in CLUSTER_SCOPED)
    if kind == "Deployment":
        _deployment(c, spec)
    elif kind == "DaemonSet":
        _daemonset(c, spec)
    elif kind == "Job":
        _job(c, str(meta.get("name") or ""), spec)
    elif kind == "Service":
        _service(c, spec)
    elif kind in ("Secret", "ConfigMap"):
        _data(c, obj)
    elif kind in ("PersistentVolume", "PersistentVolumeClaim"):
        _storage(c, kind, spec)
    elif kind == "NetworkPolicy":
        _network_policy(c, spec)
    elif kind == "PodDisruptionBudget":
        _pdb(c, spec)
    else:
        # A custom resource's pod templates reach the API server later, as pods its operator
        # creates (V core ValidatePodCreate): refused then, after `pulumi up` has returned.
        for ref in pod_templates(kind, obj):
            pod_template(c, ref.path, ref.template, ("Always",))
    return c.found
