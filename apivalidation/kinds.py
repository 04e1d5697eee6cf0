"""The per-kind checks of pkg/apis/{core,apps,batch,networking,policy}/validation/validation.go (V in
apivalidation/apiserver.py's legend) for the kinds we render, and check_object, which runs the ones
that apply. Each check names the function of V it mirrors. Only create-time rules: no update or
status rules (apivalidation/updates.py has those)."""

from __future__ import annotations

import ipaddress
import re

from apivalidation.apiserver import (
    MAX_DATA_SIZE,
    config_map_key,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    parse_quantity,
    percent,
    port_number,
)
from apivalidation.objectmeta import (
    Check,
    int_or_percent,
    label_selector,
    labels,
    non_negative,
    object_meta,
    selector_matches,
)
from apivalidation.podspec import pod_template, port_ref

CLUSTER_SCOPED = {"Namespace", "PersistentVolume"}


def _selects_template(c: Check, sel: dict, tmpl_labels: dict, kind: str, where: str) -> None:
    """The apps validations' shared selector rules: valid, non-empty, and matching the template's labels."""
    label_selector(c, "spec.selector", sel)
    if not sel.get("matchLabels") and not sel.get("matchExpressions"):
        c.add("spec.selector", sel, [f"empty selector is invalid for {kind}"], where)
    elif not selector_matches(sel, tmpl_labels):
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
        port_ref(c, f"{p}.targetPort", port.get("targetPort"), "V core validateServicePort")
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
                port_ref(c, f"{p}.port", port.get("port"), "V networking ValidateNetworkPolicyPort")
                end = port.get("endPort")
                if end is not None and (not isinstance(port.get("port"), int) or end < port["port"]):
                    c.add(f"{p}.endPort", end, ["must be greater than or equal to `port` and `port` must be a number"],
                          "V networking ValidateNetworkPolicyPort")
            for j, peer in enumerate(rule.get(peers_key) or []):
                p = f"spec.{direction}[{i}].{peers_key}[{j}]"
                label_selector(c, f"{p}.podSelector", peer.get("podSelector"))
                label_selector(c, f"{p}.namespaceSelector", peer.get("namespaceSelector"))
                _peer(c, p, peer)
    types = spec.get("policyTypes") or []
    if len(types) > 2:
        c.add("spec.policyTypes", types, ["may not specify more than two policyTypes"], "V networking ValidateNetworkPolicySpec")
    for i, t in enumerate(types if len(types) <= 2 else []):
        if t not in ("Ingress", "Egress"):
            c.add(f"spec.policyTypes[{i}]", t, ['Unsupported value: supported values: "Ingress", "Egress"'],
                  "V networking ValidateNetworkPolicySpec")


def _peer(c: Check, path: str, peer: dict) -> None:
    """V networking ValidateNetworkPolicyPeer: at least one of podSelector, namespaceSelector, ipBlock, and
    ipBlock alone; ValidateIPBlock: cidr and each except valid CIDRs, each except a strict subset of cidr."""
    rule = "V networking ValidateNetworkPolicyPeer"
    present = [k for k in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(k) is not None]
    if not present:
        c.add(path, peer, ["Required value: must specify a peer"], rule)
    elif len(present) > 1 and "ipBlock" in present:
        c.add(path, peer, ["Forbidden: may not specify both ipBlock and another peer"], rule)
    block = peer.get("ipBlock")
    if block is None:
        return
    rule = "V networking ValidateIPBlock"
    cidr = block.get("cidr") or ""
    if not cidr:
        c.add(f"{path}.ipBlock.cidr", cidr, ["Required value"], rule)
        return
    c.add(f"{path}.ipBlock.cidr", cidr, cidr_errors(cidr), rule)
    outer = _network(cidr)
    for k, e in enumerate(block.get("except") or []):
        at = f"{path}.ipBlock.except[{k}]"
        c.add(at, e, cidr_errors(e), rule)
        inner = _network(e)
        if outer is not None and inner is not None and not (
                inner.version == outer.version and inner.network_address in outer and outer.prefixlen < inner.prefixlen):
            c.add(at, e, ["must be a strict subset of `cidr`"], rule)


def _network(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """k8s.io/utils/net ParseCIDRSloppy's network: leading zeros and host bits tolerated."""
    if "/" not in value:
        return None
    addr, _, length = value.partition("/")
    addr = re.sub(r"(?<![0-9])0+(?=[0-9])", "", addr) if "." in addr and ":" not in addr else addr
    try:
        return ipaddress.ip_network(f"{addr}/{int(length)}", strict=False)
    except ValueError:
        return None


def cidr_errors(value: str) -> list[str]:
    """A apimachinery pkg/util/validation/ip.go parseCIDR with strict validation (StrictIPCIDRValidation,
    on in 1.37): IsValidCIDRForLegacyField as ValidateIPBlock calls it."""
    net = _network(value)
    if net is None:
        return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
    addr, _, length = value.partition("/")
    if (length.startswith("0") and length != "0") or re.search(r"(^|\.)0[0-9]", addr if ":" not in addr else ""):
        return ["must not have leading 0s in IP or prefix length"]
    if isinstance(net, ipaddress.IPv6Network) and ipaddress.ip_address(addr).ipv4_mapped is not None:
        return ["must not have an IPv4-mapped IPv6 address"]
    if ipaddress.ip_address(addr) != net.network_address:
        return ["must not have bits set beyond the prefix length"]
    return []


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
            pod_template(c, ref.path, ref.template, ("Always",), ref.injected_env)
    return c.found
