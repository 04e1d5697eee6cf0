"""ObjectMeta, labels and label selectors, and the collector every per-kind check writes into
(apimachinery pkg/api/validation/objectmeta.go and apis/meta/v1/validation; the letters are
apivalidation/apiserver.py's legend: M, V)."""

from __future__ import annotations

from apivalidation.apiserver import (
    annotations,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    label_key,
    label_value,
    path_segment_name,
    percent,
)


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


def selector_matches(sel: dict, template_labels: dict) -> bool:
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
