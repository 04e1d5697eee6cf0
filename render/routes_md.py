"""plan.md's "Gateway routes": what carries a request to each model, read from the rendered objects.

With the AIBrix layer, the HTTPRoutes to the models' Services and the AIBrix strategy each model's pods
name (components/routing.py: without one the gateway answers 503). With the inferencePool layer, the
HTTPRoutes to the InferencePools, each pool's pods, port and endpoint picker, and what the picker scores
on (its EndpointPickerConfig, read from the ConfigMap it mounts)."""

from __future__ import annotations

import json

import yaml

from policy.workloads import pod_templates
from render.runtime import Rendered
from render.serialize import kubernetes_objects

AIBRIX_PREREQUISITE = "Prerequisite: AIBrix v0.7.0 with its Gateway and gateway plugin installed (see README)."
POOL_PREREQUISITE = (
    "Prerequisites: the Gateway names an implementation that routes to an InferencePool `inference.networking.k8s.io/v1` "
    "(docs/gateway-and-network.md), and the Inference Extension's CRDs are installed (the prerequisites output). "
    "`pulumi up` waits until the Gateway accepts each route and resolves its pool.")


def section(rendered: Rendered) -> list[str]:
    objects = kubernetes_objects(rendered)
    routes = [o for o in objects if o.get("kind") == "HTTPRoute"]
    if not routes:
        return ["", "## Gateway routes", "", "None: gateway.enabled is false. Clients use the in-cluster endpoints."]
    pools = [o for o in objects if o.get("kind") == "InferencePool"]
    lines = ["", "## Gateway routes", "",
             f"External endpoint: `{rendered.outputs.get('externalEndpoint')}`. "
             + (POOL_PREREQUISITE if pools else AIBRIX_PREREQUISITE), ""]
    lines += _route_rows(routes, bool(pools))
    grants = [o for o in objects if o.get("kind") == "ReferenceGrant"]
    lines += ["", "ReferenceGrants: " + (", ".join(f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in grants)
                                          or "none")]
    return lines + (_pools(objects, pools) if pools else _strategies(objects))


def _route_rows(routes: list[dict], pools: bool) -> list[str]:
    """One row per rule: the AIBrix layer's routes match the header `model` to a Service (its port shown), the
    pool routes one header per rule to an InferencePool."""
    header = "Header = served name | Paths | InferencePool" if pools else "Header `model` | Paths | Backend"
    lines = [f"| HTTPRoute | Gateway | {header} | Timeout |", "|---|---|---|---|---|---|"]
    for r in routes:
        meta, spec = r["metadata"], r["spec"]
        parent = spec["parentRefs"][0]
        for rule in spec["rules"]:
            headers = [(h["name"], h["value"]) for m in rule["matches"] for h in m.get("headers", [])]
            matched = (sorted({f"`{n}` = {v}" for n, v in headers}) if pools
                       else sorted({v for n, v in headers if n == "model"}))
            backends = ", ".join(f"{b.get('namespace')}/{b['name']}" + ("" if pools else f":{b.get('port')}")
                                 for b in rule["backendRefs"])
            lines.append(f"| {meta['namespace']}/{meta['name']} | {parent.get('namespace')}/{parent['name']} | "
                         f"{', '.join(matched)} | {len(rule['matches'])} | {backends} | "
                         f"{(rule.get('timeouts') or {}).get('request', '-')} |")
    return lines


def _strategies(objects: list[dict]) -> list[str]:
    strategies: dict[str, set[str]] = {}
    for obj in objects:
        for ref in pod_templates(obj.get("kind", ""), obj):
            meta = ref.template.get("metadata") or {}
            served = (meta.get("labels") or {}).get("model.aibrix.ai/name")
            config = (meta.get("annotations") or {}).get("model.aibrix.ai/config")
            if served and config:
                strategies.setdefault(served, set()).add(json.loads(config)["profiles"]["default"]["routingStrategy"])
    return ["", "Routing strategy per served model (AIBrix gateway; a client's `routing-strategy` header overrides): "
            + (", ".join(f"{m} `{'/'.join(sorted(v))}`" for m, v in sorted(strategies.items())) or "none")]


def _pools(objects: list[dict], pools: list[dict]) -> list[str]:
    """Each pool: the pods it selects, their port, its picker, what happens while the picker is down, and what
    the picker scores on."""
    by_name = {(o.get("kind"), o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    lines = ["", "Endpoint pickers (Gateway API Inference Extension): the Gateway asks the pool's picker which pod "
             "takes each request.", "",
             "| InferencePool | Pods | Port | Picker | While the picker is down | Scores (weight) | Engine metrics |",
             "|---|---|---|---|---|---|---|"]
    for p in pools:
        ns, spec = p["metadata"]["namespace"], p["spec"]
        ref = spec["endpointPickerRef"]
        config = _picker_config(by_name, ns, ref["name"])
        scores = ", ".join(f"{x['pluginRef']} ({x.get('weight', 1)})" for prof in config.get("schedulingProfiles", [])
                           for x in prof.get("plugins", []))
        extractor = next((x.get("parameters") or {} for x in config.get("plugins", [])
                          if x.get("type") == "core-metrics-extractor"), {})
        metrics = ", ".join(f"`{v}`" for e in extractor.get("engineConfigs", []) for k, v in sorted(e.items())
                            if k.endswith("Spec"))
        pods = ", ".join(f"{k}={v}" for k, v in sorted(spec["selector"]["matchLabels"].items()))
        down = {"FailOpen": "requests go to the pool's pods unscored",
                "FailClose": "requests fail"}.get(ref.get("failureMode", "FailClose"), ref.get("failureMode"))
        lines.append(f"| {ns}/{p['metadata']['name']} | {pods} | {', '.join(str(t['number']) for t in spec['targetPorts'])} "
                     f"| Service {ref['name']}:{ref['port']['number']} | {down} | {scores or '-'} | {metrics or '-'} |")
    return lines


def _picker_config(by_name: dict, namespace: str, service: str) -> dict:
    """The EndpointPickerConfig of the Deployment behind the picker's Service (its --config-file, from the
    ConfigMap it mounts)."""
    svc = by_name.get(("Service", namespace, service))
    if svc is None:
        return {}
    selector = svc["spec"].get("selector") or {}
    for (kind, ns, _), obj in by_name.items():
        if kind != "Deployment" or ns != namespace:
            continue
        pod = obj["spec"]["template"]
        if not all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items()):
            continue
        (container,) = pod["spec"]["containers"]
        args = container.get("args") or []
        path = args[args.index("--config-file") + 1] if "--config-file" in args else ""
        for mount in container.get("volumeMounts") or []:
            if path.startswith(mount["mountPath"] + "/"):
                volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
                cm = by_name.get(("ConfigMap", namespace, volume["configMap"]["name"]))
                if cm is not None:
                    return yaml.safe_load(cm["data"][path[len(mount["mountPath"]) + 1:]]) or {}
    return {}
