"""Pod templates as V core ValidatePodTemplateSpec -> ValidatePodSpec checks them: containers (ports,
env, kubelet expansion, mounts, probes, resources), volumes, tolerations and affinity (the letters are
apivalidation/apiserver.py's legend)."""

from __future__ import annotations

from decimal import Decimal

from apivalidation.apiserver import (
    INT32,
    annotations,
    config_map_key,
    container_resource_name,
    dns1123_label,
    dns1123_subdomain,
    env_var_name,
    is_extended_resource,
    kubelet_references,
    label_key,
    label_value,
    local_descending_path,
    parse_quantity,
    port_name,
    port_number,
)
from apivalidation.objectmeta import Check, label_selector, labels, non_negative


def port_ref(c: Check, path: str, port: object, rule: str) -> None:
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
            port_ref(c, f"{path}.{h}.port", probe[h].get("port"), f"V core validate{h[0].upper()}{h[1:]}Action")


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


def _expansions(c: Check, path: str, ctr: dict, injected: tuple[str, ...] = ()) -> None:
    """The program's uses of expansion: a whole value naming a variable the container defines
    (`--api-key $(SGLANG_API_KEY)`, the key from a Secret), and a value composed from variables the
    controller injects (`injected`: a group pod's leader address). Any other reference inside other text,
    or to a name the container does not define, is a value from the stack file that the kubelet would
    rewrite or leave dangling: refused (a stricter rule than the server's, which accepts any text)."""
    # Variables a controller puts first into the container (policy/workloads.py PodTemplateRef.injected_env).
    env = [*injected, *(e.get("name") for e in ctr.get("env") or [])]
    own = len(injected)
    opaque = bool(ctr.get("envFrom"))  # names an envFrom brings in are unknown here
    values = [(f"{path}.command[{i}]", v, env) for i, v in enumerate(ctr.get("command") or [])]
    values += [(f"{path}.args[{i}]", v, env) for i, v in enumerate(ctr.get("args") or [])]
    # An env value sees only the variables defined before it (expand.go mapping order).
    values += [(f"{path}.env[{i}].value", e.get("value"), env[:own + i]) for i, e in enumerate(ctr.get("env") or [])]
    for p, v, defined in values:
        if not isinstance(v, str):
            continue
        for ref in kubelet_references(v):
            # A controller's own variable inside a value is composed on purpose (a group's leader address,
            # components/group.py): only those, never a stack-file value's.
            if ref in injected and ref in defined:
                continue
            if v != f"$({ref})":
                c.add(p, v, [f"the kubelet expands $({ref}) inside this value; write $$({ref}) for the literal text"],
                      "expansion.Expand")
            elif ref not in defined and not opaque:
                c.add(p, v, [f"$({ref}) names no variable of the container, so the kubelet leaves it as text"],
                      "expansion.Expand")


def _container(c: Check, path: str, ctr: dict, volumes: set[str], init: bool, injected: tuple[str, ...] = ()) -> None:
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
    _expansions(c, path, ctr, injected)
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


def pod_template(c: Check, path: str, template: dict, restart_policies: tuple[str, ...],
                 injected: tuple[str, ...] = ()) -> None:
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
            _container(c, f"{sp}.{group}[{i}]", ctr, volumes, group == "initContainers", injected)
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
