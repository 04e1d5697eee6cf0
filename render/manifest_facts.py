"""What plan.md reports, read back off the rendered objects rather than the config: the GPU
workloads and their probes and mounts, the A/B pairs, the autoscalers, memory, and the inputs of the
time-to-serving estimate. Reading the objects is the point: plan.md shows what the cluster would get."""

from __future__ import annotations

import json
from typing import Any

from components.orchestrators.base import GROUP_ROLE
from policy import ephemeral_storage
from policy.engines import engine_of_argv
from policy.gpu_accounting import peak_gpus
from policy.manifests import flag_value, quantity_gib
from policy.stack_rules import PODAUTOSCALER, grown_to
from policy.workloads import containers, gpu_count, pod_gpus, pod_templates
from render.runtime import Rendered
from render.serialize import kubernetes_objects


def probe_kinds(container: dict) -> str:
    kinds = []
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = container.get(probe)
        handler = next((h for h in ("tcpSocket", "httpGet", "exec", "grpc") if p and h in p), "none")
        kinds.append(f"{probe.removesuffix('Probe')}={handler}")
    return ", ".join(kinds)


def _model_mount_mode(template: dict) -> str:
    """ro/ro means read-only at the volume and at every mount of it."""
    spec = template.get("spec") or {}
    claims = {v["name"]: v["persistentVolumeClaim"] for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v}
    model = claims.get("model")
    if model is None:
        return "none"
    mounts = [m for _, c in containers(template) for m in c.get("volumeMounts") or [] if m.get("name") == "model"]
    vol = "ro" if model.get("readOnly") else "rw"
    mnt = "ro" if mounts and all(m.get("readOnly") for m in mounts) else "rw"
    return f"{vol}/{mnt} ({model.get('claimName')})"


def autoscalers(rendered: Rendered) -> dict[tuple[str, str, str], dict]:
    """(kind, namespace, name) of each autoscaled workload -> its PodAutoscaler."""
    out = {}
    for obj in kubernetes_objects(rendered):
        if obj.get("kind") == PODAUTOSCALER:
            ref, meta = obj["spec"]["scaleTargetRef"], obj["metadata"]
            out[(ref["kind"], ref.get("namespace") or meta["namespace"], ref["name"])] = obj
    return out


def as_scaled(obj: dict, scaled: dict) -> dict:
    """The workload as its autoscaler may grow it: spec.replicas at maxReplicas (what the budget counts)."""
    meta = obj.get("metadata") or {}
    pa = scaled.get((obj.get("kind"), meta.get("namespace"), meta.get("name")))
    return obj if pa is None else grown_to(obj, pa["spec"]["maxReplicas"])


def workload_rows(rendered: Rendered) -> list[dict[str, Any]]:
    rows = []
    scaled = autoscalers(rendered)
    for obj in kubernetes_objects(rendered):
        kind, name = obj.get("kind", ""), (obj.get("metadata") or {}).get("name", "")
        peak = {r.path: r for r in pod_templates(kind, as_scaled(obj, scaled))}
        for ref in pod_templates(kind, obj):
            main = [c for g, c in containers(ref.template) if g == "containers"]
            gpus = pod_gpus(ref.template)
            top = peak[ref.path]
            pa = scaled.get((kind, (obj.get("metadata") or {}).get("namespace"), name))
            labels = (ref.template.get("metadata") or {}).get("labels") or {}
            rows.append({
                # A DaemonSet's pod count is its node count, which no manifest states.
                "kind": kind, "name": name,
                "replicas": "1 per node" if kind == "DaemonSet" else ref.replicas if pa is None else
                f"{ref.replicas} (autoscaled {pa['spec'].get('minReplicas', 1)}-{pa['spec']['maxReplicas']})",
                "surge": top.extra_pods, "gpusPerPod": gpus, "peakGpus": peak_gpus(top.replicas, top.extra_pods, gpus),
                "images": sorted({c.get("image", "") for _, c in containers(ref.template)}),
                "probes": "; ".join(f"{c['name']}: {probe_kinds(c)}" for c in main),
                "modelMount": _model_mount_mode(ref.template),
                # What the scheduler reserves of the node's disk for one pod, and what the kubelet evicts it past.
                "nodeDisk": " / ".join(ephemeral_storage.text(n) for n in ephemeral_storage.pod_totals(
                    ref.template.get("spec") or {})),
                # Which model's pods, and their part in a group spanning nodes (leader, worker; None: not a group's).
                "model": labels.get("llm-serving.io/model"), "groupRole": labels.get(GROUP_ROLE),
            })
    return rows


AB_BASELINE = "llm-serving.io/ab-baseline"


def _engine_view(obj: dict) -> dict | None:
    """The engine pod of a workload: its template annotations and engine container."""
    for ref in pod_templates(obj.get("kind", ""), obj):
        for group, c in containers(ref.template):
            if group == "containers" and c.get("name") == "engine":
                return {"annotations": (ref.template.get("metadata") or {}).get("annotations") or {},
                        "labels": (ref.template.get("metadata") or {}).get("labels") or {},
                        "container": c, "replicas": ref.replicas}
    return None


def _argv_difference(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """Arguments only in a, only in b (as flag/value units)."""
    def units(argv: list[str]) -> list[str]:
        out, i = [], 0
        while i < len(argv):
            if argv[i].startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out.append(f"{argv[i]} {argv[i + 1]}")
                i += 2
            else:
                out.append(argv[i])
                i += 1
        return out
    ua, ub = units(a), units(b)
    return [u for u in ua if u not in ub], [u for u in ub if u not in ua]


def ab_pairs(rendered: Rendered) -> list[dict]:
    """DSpark A/B pairs found in the manifests: candidate workloads name their baseline."""
    objs = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in kubernetes_objects(rendered)}
    views = {key: v for key, o in objs.items() if (v := _engine_view(o)) is not None}
    pairs = []
    for (kind, name), view in sorted(views.items(), key=lambda kv: str(kv[0])):
        base_name = view["annotations"].get(AB_BASELINE)
        base = views.get((kind, base_name))
        if base is None:
            continue
        only_base, only_candidate = _argv_difference(base["container"].get("args") or [],
                                                     view["container"].get("args") or [])
        pairs.append({"kind": kind, "baseline": base_name, "candidate": name, "base": base, "cand": view,
                      "onlyBaseline": only_base, "onlyCandidate": only_candidate})
    return pairs


def served_name(rendered: Rendered, labels: dict) -> str | None:
    """The served model name of an engine pod template: its AIBrix label, else the model's servedModelName in the
    config, for a template that does not carry it (a RoleBasedGroup's leaderWorkerPattern template is the worker
    pod's; only the leader's patch adds the AIBrix labels, components/orchestrators/rolebasedgroup.py)."""
    served = labels.get("model.aibrix.ai/name")
    if served is None and rendered.config is not None:
        served = next((m.served_model_name for m in rendered.config.models
                       if m.name == labels.get("llm-serving.io/model")), None)
    return served


def served_model_gpus(rendered: Rendered) -> list[dict[str, Any]]:
    """Per served model: its topology, workloads and GPUs (steady and peak: rollouts included, and an
    autoscaled workload at its maxReplicas, as the budget counts it), from the manifests."""
    models: dict[str, dict[str, Any]] = {}
    scaled = autoscalers(rendered)
    for obj in kubernetes_objects(rendered):
        peak = {r.path: r for r in pod_templates(obj.get("kind", ""), as_scaled(obj, scaled))}
        for ref in pod_templates(obj.get("kind", ""), obj):
            meta = ref.template.get("metadata") or {}
            name = (meta.get("labels") or {}).get("llm-serving.io/model")
            if not name or (meta.get("annotations") or {}).get("llm-serving.io/role") != "engine":
                continue
            gpus = pod_gpus(ref.template)
            row = models.setdefault(name, {"model": name, "served": served_name(rendered, meta.get("labels") or {}),
                                           "topology": (meta.get("annotations") or {}).get("llm-serving.io/topology"),
                                           "workloads": [], "gpus": 0, "peakGpus": 0})
            row["workloads"].append(f"{obj['kind']} {obj['metadata']['name']}")
            row["gpus"] += ref.replicas * gpus
            row["peakGpus"] += peak_gpus(peak[ref.path].replicas, peak[ref.path].extra_pods, gpus)
    return [models[k] for k in sorted(models)]


def pod_labels_of_workload(rendered: Rendered, kind: str, namespace: str, name: str) -> dict[str, str]:
    """The labels of the workload's pod template (model.aibrix.ai/engine, llm-serving.io/model, ...)."""
    for obj in kubernetes_objects(rendered):
        meta = obj.get("metadata") or {}
        if (obj.get("kind"), meta.get("namespace"), meta.get("name")) == (kind, namespace, name):
            for ref in pod_templates(kind, obj):
                return dict((ref.template.get("metadata") or {}).get("labels") or {})
    return {}


def kv_offload_of(container: dict) -> str:
    """The KV offload an engine container runs, read back from its argv (policy/engines/)."""
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    engine = engine_of_argv(argv)
    size_flag = getattr(engine, "OFFLOAD_SIZE_FLAG", None)   # an engine whose offload the program renders
    if engine is not None and size_flag and (size := flag_value(argv, size_flag)) is not None:
        backend = flag_value(argv, engine.OFFLOAD_BACKEND_FLAG) or engine.OFFLOAD_BACKEND
        return f"{engine.DISPLAY_NAME} {backend}, {size} GiB per engine (all TP ranks)"
    return "off"


def engine_memory_rows(rendered: Rendered) -> list[dict[str, Any]]:
    """Per engine pod template: each GPU container's KV offload, the pod's memory request and limit
    (sums over its containers) and its /dev/shm sizeLimit."""
    rows = []
    for obj in kubernetes_objects(rendered):
        refs = [ref for ref in pod_templates(obj.get("kind", ""), obj)
                if ((ref.template.get("metadata") or {}).get("annotations") or {}).get("llm-serving.io/role") == "engine"]
        for ref in refs:
            # A group's leader and workers, where they have templates of their own (LeaderWorkerSet).
            role = ((ref.template.get("metadata") or {}).get("labels") or {}).get(GROUP_ROLE) if len(refs) > 1 else None
            main = [c for g, c in containers(ref.template) if g == "containers"]
            volumes = {v.get("name"): v for v in (ref.template.get("spec") or {}).get("volumes") or []}
            shm = next((volumes.get(m.get("name"), {}).get("emptyDir", {}).get("sizeLimit")
                        for c in main for m in c.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"), None)
            memory = {k: sum(quantity_gib(((c.get("resources") or {}).get(k) or {}).get("memory", 0)) for c in main)
                      for k in ("requests", "limits")}
            rows.append({"workload": f"{obj['kind']} {obj['metadata']['name']}" + (f" ({role})" if role else ""),
                         "offload": "; ".join(f"{c['name']}: {kv_offload_of(c)}" for c in main if max(gpu_count(c))),
                         "request": memory["requests"], "limit": memory["limits"], "shm": shm})
    return rows


def _engine_name(container: dict) -> str | None:
    """The engine the container's argv runs (a Ray head wraps the command), by name."""
    engine = engine_of_argv([*(container.get("command") or []), *(container.get("args") or [])])
    return engine.NAME if engine else None


def _placement(spec: dict) -> tuple:
    return (json.dumps(spec.get("nodeSelector") or {}, sort_keys=True),
            json.dumps(spec.get("tolerations") or [], sort_keys=True))


def time_to_serving_inputs(rendered: Rendered) -> list[dict[str, Any]]:
    """Per served model, from the manifests: engine, GPUs at steady state, model size (its sync Job's
    annotation, found by the directory the model gate checks) and whether a GPU-free DaemonSet on the
    same nodes holds each of its engine images."""
    objs = kubernetes_objects(rendered)
    sizes, profiles = {}, {}
    for obj in objs:
        annotations = obj["metadata"].get("annotations") or {}
        if obj.get("kind") != "Job" or "llm-serving.io/model-size-gib" not in annotations:
            continue
        for _, c in containers(obj["spec"]["template"]):
            for e in c.get("env") or []:
                if e.get("name") == "DEST":
                    sizes[e["value"]] = float(annotations["llm-serving.io/model-size-gib"])
                    profiles[e["value"]] = annotations.get("llm-serving.io/model-profile")
    held: dict[tuple, set[str]] = {}
    for obj in objs:
        if obj.get("kind") != "DaemonSet":
            continue
        for ref in pod_templates("DaemonSet", obj):
            cs = [c for _, c in containers(ref.template)]
            if all(not max(gpu_count(c)) for c in cs):
                held.setdefault(_placement(ref.template.get("spec") or {}), set()).update(c.get("image") for c in cs)
    models: dict[str, dict[str, Any]] = {}
    for obj in objs:
        for ref in pod_templates(obj.get("kind", ""), obj):
            meta = ref.template.get("metadata") or {}
            name = (meta.get("labels") or {}).get("llm-serving.io/model")
            if not name or (meta.get("annotations") or {}).get("llm-serving.io/role") != "engine":
                continue
            spec = ref.template.get("spec") or {}
            main = [c for g, c in containers(ref.template) if g == "containers"]
            engines = [c for c in main if max(gpu_count(c))]
            gate = next(c for g, c in containers(ref.template) if c.get("name") == "model-gate")
            model_dir = flag_value([str(a) for a in gate.get("args") or []], "--model-dir")
            row = models.setdefault(name, {"model": name, "served": served_name(rendered, meta.get("labels") or {}),
                                           "engine": _engine_name(engines[0]), "gpus": 0, "images": set(),
                                           "sizeGiB": sizes.get(model_dir), "profile": profiles.get(model_dir),
                                           "preloaded": True})
            row["gpus"] += ref.replicas * sum(max(gpu_count(c)) for c in main)
            images = {c.get("image") for c in engines}
            row["images"] |= images
            on_nodes = held.get(_placement(spec), set())
            row["preloaded"] = row["preloaded"] and images <= on_nodes
            row["imagesPerNode"] = len(on_nodes)
    return [models[k] for k in sorted(models)]


def namespaces_in_words(selector: dict | None) -> str:
    """A peer's namespaceSelector in words: absent is the policy's own namespace, a name is one namespace."""
    if selector is None:
        return "this namespace"
    labels, exprs = selector.get("matchLabels") or {}, selector.get("matchExpressions") or []
    if list(labels) == ["kubernetes.io/metadata.name"] and not exprs:
        return f"namespace `{labels['kubernetes.io/metadata.name']}`"
    parts = [f"{k}={v}" for k, v in sorted(labels.items())] + [
        f"{e['key']} {e['operator']}" + (f" ({', '.join(e['values'])})" if e.get("values") else "") for e in exprs]
    return "namespaces with " + " and ".join(f"`{p}`" for p in parts) if parts else "every namespace"
