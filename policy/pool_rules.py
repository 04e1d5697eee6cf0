"""The routing rules of gateway.routingLayer inferencePool (issue 31), registered with the AIBrix gateway's
(policy/routing_rules.py): each InferencePool selects its model's serving pods on the port they serve, names a
Service of the stack in front of the endpoint picker of that very pool, the picker is probed the way it answers,
and an HTTPRoute reaches a pool of the stack only where a ReferenceGrant allows it. Standard library only."""

from __future__ import annotations

from policy import endpoint_picker as epp
from policy.engines import engine_of_argv
from policy.manifests import (
    argv_of,
    each_container,
    engine_containers,
    flag_value,
    is_engine,
    kind_of,
    name_of,
    templates,
)
from policy.unknowns import UnknownTouched, decide, is_unknown, items_of, mapping
from policy.workloads import POD_KINDS, PodTemplateRef, PodView, containers, pod_views

# ---- gateway.routingLayer inferencePool (issue 31): each InferencePool, its endpoint picker, the routes to it ----
# The picker is GIE v1.5.0's (policy/endpoint_picker.py); its flags (pkg/epp/server/options.go) name the pool it
# serves and its ports. Without --pool-namespace it reads NAMESPACE, else "default" (cmd/epp/runner/runner.go
# resolvePoolNamespace, server DefaultPoolNamespace).
POOL_NAME_FLAG, POOL_NAMESPACE_FLAG = "--pool-name", "--pool-namespace"
GRPC_PORT_FLAG, HEALTH_PORT_FLAG = "--grpc-port", "--grpc-health-port"
DEFAULT_POOL_NAMESPACE = "default"
ROUTE_GROUP = "gateway.networking.k8s.io"
PICKER_PROBES = ("readinessProbe", "livenessProbe")


def _meta(props: dict) -> dict:
    return mapping(props.get("metadata"))


def _key(props: dict) -> list[tuple[str, str]]:
    """[(namespace, name)] of an object; raises UnknownTouched when either is unknown."""
    return [(str(_meta(props).get("namespace") or ""), str(_meta(props).get("name")))]


class _Keyed:
    """Objects by (namespace, name); `undecided` when some key is unknown (preview): then "not declared" decides nothing."""

    def __init__(self, objects: list[dict]) -> None:
        self.by_key: dict[tuple[str, str], dict] = {}
        self.undecided = False
        for o in objects:
            found = decide(_key, o)
            self.by_key.update((k, o) for k in found)
            self.undecided |= not found


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _picker(template: dict) -> dict | None:
    """The endpoint picker container of a pod (the one that names a pool), or None."""
    return next((c for _, c in containers(template) if flag_value(argv_of(c), POOL_NAME_FLAG) is not None), None)


class _Pods:
    """Every pod view (policy/workloads.py pod_views) of the stack's workloads, by namespace; `undecided` when some
    workload could not be read (preview): then "selects no pod" decides nothing."""

    def __init__(self, resources: list) -> None:
        self.views: list[tuple[str, str, PodView]] = []   # (namespace, workload, view)
        self.undecided = False
        for r in resources:
            if not r.type.startswith("kubernetes:") or kind_of(r.type) not in POD_KINDS:
                continue
            found = decide(lambda r=r: [[(str(_meta(r.props).get("namespace") or ""), name_of(r.props), v)
                                         for v in pod_views(kind_of(r.type), r.props)]])
            self.views += found[0] if found else []
            # pod_templates leaves out a template it cannot find for an unknown (a role, the list of roles).
            self.undecided |= not found or _unknown_outside_pods(r.props, templates(r.type, r.props))

    def selected(self, namespace: str, selector: dict) -> list[tuple[str, PodView]]:
        return [(w, v) for ns, w, v in self.views if ns == namespace and _selects(selector, v.labels)]


def _has_unknown(value: object, skip: frozenset[int] = frozenset()) -> bool:
    """Whether an unknown is anywhere in value, outside the objects whose id() is in skip."""
    if is_unknown(value):
        return True
    if id(value) in skip or not isinstance(value, (dict, list)):
        return False
    return any(_has_unknown(v, skip) for v in (value.values() if isinstance(value, dict) else value))


def _unknown_outside_pods(props: dict, refs: list[PodTemplateRef]) -> bool:
    """Whether a workload holds an unknown anywhere but in the pod specs of the templates found (which say nothing
    of where pods are or how they are labelled)."""
    return _has_unknown(props, frozenset(id(r.template.get("spec")) for r in refs if isinstance(r.template, dict)))


def _known_containers(template: dict) -> None:
    """Before concluding a pod runs no engine or no picker: raises UnknownTouched when its containers are unknown."""
    if _has_unknown(mapping(template.get("spec")).get("containers")):
        raise UnknownTouched()


def _of_kind(resources: list, kind: str) -> list[dict]:
    return [r.props for r in resources if r.type.startswith("kubernetes:") and kind_of(r.type) == kind]


def inference_pools_select_serving_pods(resources: list) -> list[str]:
    """An InferencePool's selector selects the serving pods of one model's workload of the stack (a group's leaders
    only: its workers serve no OpenAI API; never the picker's own pods), and each of its targetPorts is the port
    those pods' engine serves on and declares."""
    pods = _Pods(resources)
    return [m for pool in _of_kind(resources, epp.POOL_KIND) for m in decide(_pool_pods, pool, pods)]


def _pool_pods(pool: dict, pods: _Pods) -> list[str]:
    name, ns, spec = name_of(pool), str(_meta(pool).get("namespace") or ""), mapping(pool.get("spec"))
    selector = mapping(mapping(spec.get("selector")).get("matchLabels"))
    chosen = pods.selected(ns, selector)
    if not chosen:
        return [] if pods.undecided else [
            f"{name}: selector {selector} selects no pod of this stack in {ns}; the gateway would find no endpoint "
            "for the model."]
    ports = [int(mapping(t).get("number")) for t in items_of(spec.get("targetPorts"))]
    out: list[str] = []
    served: set[str] = set()
    for workload, view in chosen:
        out += decide(_serving_pod, name, f"{workload} pods at {view.where}", view, ports, served)
    if len(served) > 1:
        out.append(f"{name}: selects pods serving different models ({', '.join(sorted(served))}); a pool is one "
                   "model's endpoints, its route matches one model name.")
    return out


def _serving_pod(pool: str, what: str, view: PodView, ports: list[int], served: set[str]) -> list[str]:
    if _picker(view.template) is not None:
        return [f"{pool}: selects the endpoint picker's own pods ({what}); the gateway would send requests to the picker."]
    if view.worker:
        return [f"{pool}: selects a group's worker pods ({what}); only the leader serves the model, so the selector must "
                "name the controller's leader label too."]
    engines = engine_containers(view.template) if is_engine(view.template) else []
    if not engines:
        _known_containers(view.template)
        return [f"{pool}: selects {what}, which run no engine; only the model's serving pods may be its endpoints."]
    out = []
    for c in engines:
        argv = argv_of(c)
        engine = engine_of_argv(argv)
        if engine is None or not engine.serves_http(argv):
            out.append(f"{pool}: selects {what}, whose container {c.get('name')} serves no OpenAI API.")
            continue
        served.add(str(flag_value(argv, "--served-model-name") or flag_value(argv, "--model-path", "serve") or "?"))
        port = int(flag_value(argv, "--port") or engine.PORT)
        declared = sorted(int(p.get("containerPort")) for p in items_of(c.get("ports")))
        out += [f"{pool}: targetPorts {n} is not a port {what} serve on: container {c.get('name')} serves on {port} "
                f"(--port) and declares containerPorts {declared}." for n in ports if n != port or n not in declared]
    return out


def inference_pools_have_their_picker(resources: list) -> list[str]:
    """An InferencePool's endpointPickerRef names a Service of the stack in its namespace that has the port it names,
    reaching the picker's ext_proc port, and selects only pods running the picker for this pool (--pool-name,
    --pool-namespace): a picker of another pool would pick that pool's endpoints."""
    pods = _Pods(resources)
    services = _Keyed(_of_kind(resources, "Service"))
    return [m for pool in _of_kind(resources, epp.POOL_KIND) for m in decide(_pool_picker, pool, services, pods)]


def _pool_picker(pool: dict, services: "_Keyed", pods: _Pods) -> list[str]:
    name, ns = name_of(pool), str(_meta(pool).get("namespace") or "")
    ref = mapping(mapping(pool.get("spec")).get("endpointPickerRef"))
    group, kind, port = ref.get("group") or "", ref.get("kind") or "Service", mapping(ref.get("port")).get("number")
    if (group, kind) != ("", "Service"):
        return [f"{name}: endpointPickerRef names a {kind} of group {group!r}; the picker is reached through a Service."]
    service = services.by_key.get((ns, str(ref.get("name"))))
    if service is None:
        return [] if services.undecided else [
            f"{name}: endpointPickerRef names Service {ns}/{ref.get('name')}, which this stack does not declare; the "
            "gateway cannot reach the pool's endpoint picker."]
    svc, spec = name_of(service), mapping(service.get("spec"))
    service_port = next((p for p in items_of(spec.get("ports")) if p.get("port") == port), None)
    if service_port is None:
        return [f"{name}: endpointPickerRef port {port} is not a port of {svc} (its ports: "
                f"{[p.get('port') for p in items_of(spec.get('ports'))]})."]
    chosen = pods.selected(ns, mapping(spec.get("selector"))) if mapping(spec.get("selector")) else []
    if not chosen:
        return [] if pods.undecided else [f"{name}: {svc} selects no pod of this stack; no endpoint picker answers "
                                          "for the pool."]
    pool_key = (str(_meta(pool).get("name")), ns)
    return [m for workload, view in chosen
            for m in decide(_picks_for, name, f"{svc} selects {workload} pods at {view.where}", view, ns, pool_key,
                            service_port)]


def _picks_for(pool: str, what: str, view: PodView, ns: str, pool_key: tuple[str, str], service_port: dict) -> list[str]:
    c = _picker(view.template)
    if c is None:
        _known_containers(view.template)
        return [f"{pool}: {what}, which run no endpoint picker (no {POOL_NAME_FLAG})."]
    argv = argv_of(c)
    picked = (str(flag_value(argv, POOL_NAME_FLAG)), flag_value(argv, POOL_NAMESPACE_FLAG) or _namespace_env(c, ns))
    if picked != pool_key:
        return [f"{pool}: {what}, whose picker serves pool {picked[1]}/{picked[0]} ({POOL_NAMESPACE_FLAG}/"
                f"{POOL_NAME_FLAG}); it would pick the endpoints of another pool."]
    grpc = int(flag_value(argv, GRPC_PORT_FLAG) or epp.GRPC_PORT)
    target = service_port.get("targetPort", service_port.get("port"))
    number = (int(target) if str(target).isdigit() else
              next((p.get("containerPort") for p in items_of(c.get("ports")) if p.get("name") == target), None))
    if number != grpc:
        return [f"{pool}: {what} on targetPort {target!r}, not the picker's ext_proc port {grpc} ({GRPC_PORT_FLAG})."]
    return []


def _namespace_env(c: dict, pod_namespace: str) -> str:
    env = next((e for e in items_of(c.get("env")) if e.get("name") == "NAMESPACE"), None)
    if env is None:
        return DEFAULT_POOL_NAMESPACE
    field = mapping(mapping(mapping(env.get("valueFrom")).get("fieldRef"))).get("fieldPath")
    return pod_namespace if field == "metadata.namespace" else str(env.get("value") or DEFAULT_POOL_NAMESPACE)


def endpoint_picker_probes_grpc(resource_type: str, props: dict) -> list[str]:
    """The endpoint picker's readiness and liveness probes ask its grpc health service on its health port: it serves
    no HTTP health, and its health service answers NOT_SERVING until the pool has synced (cmd/epp/runner/health.go),
    which a TCP probe would not wait for."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        argv = argv_of(c)
        if flag_value(argv, POOL_NAME_FLAG) is None:
            return []
        health = int(flag_value(argv, HEALTH_PORT_FLAG) or epp.HEALTH_PORT)
        where, out = f"{name_of(props)}: endpoint picker container {c.get('name')}", []
        for probe in (*PICKER_PROBES, "startupProbe"):
            p = c.get(probe)
            if p is None:
                if probe in PICKER_PROBES:
                    out.append(f"{where} has no {probe}; probe grpc port {health} ({HEALTH_PORT_FLAG}).")
                continue
            p = mapping(p)
            if "httpGet" in p:
                out.append(f"{where} {probe} is httpGet; the picker serves no HTTP health, only grpc on {health} "
                           f"({HEALTH_PORT_FLAG}), so the probe never passes.")
            elif mapping(p.get("grpc")).get("port") != health:
                out.append(f"{where} {probe} is not grpc on the health port {health} ({HEALTH_PORT_FLAG}); a TCP or "
                           "other port probe passes before the picker has synced its pool.")
        return out
    return each_container(resource_type, props, check)


def routes_reach_inference_pools(resources: list) -> list[str]:
    """An HTTPRoute backendRef of kind InferencePool names a pool of the stack (group inference.networking.k8s.io, the
    v1 pool the picker reads) in a namespace that a ReferenceGrant of the stack opens to the route's namespace."""
    pools = _Keyed(_of_kind(resources, epp.POOL_KIND))
    grants = [g for g in _of_kind(resources, "ReferenceGrant")]
    out = []
    for route in _of_kind(resources, "HTTPRoute"):
        refs = decide(lambda route=route: [(str(_meta(route).get("namespace") or ""), b)
                                           for rule in items_of(mapping(route.get("spec")).get("rules"))
                                           for b in items_of(mapping(rule).get("backendRefs"))
                                           if mapping(b).get("kind") == epp.POOL_KIND])
        for route_ns, b in refs:
            out += decide(_route_pool, name_of(route), route_ns, b, pools, grants)
    return out


def _route_pool(route: str, route_ns: str, b: dict, pools: _Keyed, grants: list[dict]) -> list[str]:
    ns, name, group = str(b.get("namespace") or route_ns), str(b.get("name")), b.get("group") or ""
    where = f"{route}: backendRef InferencePool {ns}/{name}"
    if group != epp.POOL_GROUP:
        return [f"{where} has group {group!r}; the stack's pools and their pickers are {epp.POOL_GROUP}."]
    if (ns, name) not in pools.by_key:
        return [] if pools.undecided else [f"{where} is not a pool of this stack; the gateway cannot resolve it and "
                                           "answers 500."]
    allowed = [decide(_grants, g, route_ns, ns, name) for g in grants]
    if ns != route_ns and [True] not in allowed and [] not in allowed:   # [] : a grant unknown in preview
        return [f"{where}: no ReferenceGrant of this stack in {ns} allows HTTPRoutes from {route_ns} to it; the gateway "
                "refuses the reference (RefNotPermitted) and the model is unreachable."]
    return []


def _grants(grant: dict, route_ns: str, ns: str, name: str) -> list[bool]:
    """[whether the grant opens pool ns/name to HTTPRoutes of route_ns]; raises UnknownTouched when a field it reads is
    unknown."""
    spec = mapping(grant.get("spec"))
    return [bool(_meta(grant).get("namespace") == ns
                 and any(f.get("group") == ROUTE_GROUP and f.get("kind") == "HTTPRoute" and f.get("namespace") == route_ns
                         for f in items_of(spec.get("from")))
                 and any(t.get("group") == epp.POOL_GROUP and t.get("kind") == epp.POOL_KIND
                         and t.get("name", name) == name for t in items_of(spec.get("to"))))]
