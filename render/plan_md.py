"""plan.md: the reviewer's page for a rendered stack, section by section (GPUs, topology, routes,
network, autoscaling, memory, time to serving, sync, A/B pairs, dashboards, resources, secrets,
outputs)."""

from __future__ import annotations

import json

from components.topologies import TOPOLOGIES
from config_model.stack import secret_command
from policy.engines import ENGINES
from policy.manifests import flag_value
from policy.workloads import gpu_count
from render import consumers_md, gpu_budget_md, model_families_md, multinode_md, node_loss_md, routes_md
from render.manifest_facts import (
    ab_pairs,
    autoscalers,
    engine_memory_rows,
    namespaces_in_words,
    served_model_gpus,
    workload_rows,
)
from render.plan_estimates import inherited_section, rollout_rows, rollout_section, time_to_serving_section
from render.runtime import Rendered
from render.serialize import is_kubernetes_object, kubernetes_objects, outputs_json
from stacks.loader import NAMESPACE


def _ab_section(rendered: Rendered) -> list[str]:
    pairs = ab_pairs(rendered)
    if not pairs:
        return []
    lines = ["", "## DSpark A/B pairs", "",
             "Both arms are built from the same arguments; the argv rows show every difference.", ""]
    for p in pairs:
        b, c = p["base"], p["cand"]
        rows = [
            ("Workload", f"{p['kind']} {p['baseline']}", f"{p['kind']} {p['candidate']}"),
            ("Served model name", b["labels"].get("model.aibrix.ai/name"), c["labels"].get("model.aibrix.ai/name")),
            ("Replicas", b["replicas"], c["replicas"]),
            ("GPUs per pod", max(gpu_count(b["container"])), max(gpu_count(c["container"]))),
            ("Image", f"`{b['container'].get('image')}`", f"`{c['container'].get('image')}`"),
            ("Argv only here", ", ".join(f"`{u}`" for u in p["onlyBaseline"]) or "-",
             ", ".join(f"`{u}`" for u in p["onlyCandidate"]) or "-"),
        ]
        lines += ["| | target-only | DSpark |", "|---|---|---|"]
        lines += [f"| {label} | {x} | {y} |" for label, x, y in rows]
        lines.append("")
    return lines


def _network_section(rendered: Rendered) -> list[str]:
    """Who may reach the engines, read from the rendered NetworkPolicies (not from the config)."""
    lines: list[str] = []
    for obj in kubernetes_objects(rendered):
        if obj.get("kind") != "NetworkPolicy":
            continue
        for rule in (obj.get("spec") or {}).get("ingress") or []:
            ports = ", ".join(str(p.get("port")) for p in rule.get("ports") or []) or "all ports"
            for peer in rule.get("from") or []:
                pods = ", ".join(f"{k}={v}" for k, v in sorted(((peer.get("podSelector") or {}).get("matchLabels") or {}).items()))
                lines.append(f"| {obj['metadata']['name']} | {namespaces_in_words(peer.get('namespaceSelector'))} | "
                             f"{pods or 'any pod'} | {ports} |")
    if not lines:
        return ["", "## Network policies", "", "None rendered (networkPolicy.enabled is false): every pod may reach the engines."]
    out = (["", "## Network policies", "", "Everything else is denied by default. Ingress allowed:", "",
            "| Policy | From | Pods | Ports |", "|---|---|---|---|"] + lines)
    egress = _egress_lines(rendered)
    if not egress:
        return out + ["", "Egress is not restricted (networkPolicy.egress.enabled is false): every pod may connect anywhere."]
    return out + ["", "Egress of every pod in the namespace is denied by default. Egress allowed:", "",
                  "| Policy | Pods | To | Ports |", "|---|---|---|---|"] + egress


def _selector_in_words(selector: dict | None) -> str:
    if not selector:
        return "any pod"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())] + [
        f"{e['key']} {e['operator']}" + (f" ({', '.join(e['values'])})" if e.get("values") else "")
        for e in selector.get("matchExpressions") or []]
    return ", ".join(parts)


def _egress_lines(rendered: Rendered) -> list[str]:
    """What each pod may connect to, read from the rendered NetworkPolicies' egress rules."""
    lines: list[str] = []
    for obj in kubernetes_objects(rendered):
        spec = obj.get("spec") or {} if obj.get("kind") == "NetworkPolicy" else {}
        if "Egress" not in (spec.get("policyTypes") or []) or not spec.get("egress"):
            continue
        for rule in spec["egress"]:
            ports = ", ".join(f"{p.get('port', 'all')}/{p.get('protocol', 'TCP')}" for p in rule.get("ports") or []) or "all ports"
            for peer in rule.get("to") or [{}]:
                if "ipBlock" in peer:
                    block = peer["ipBlock"]
                    to = f"`{block['cidr']}`" + (f" except {', '.join(f'`{e}`' for e in block['except'])}" if block.get("except") else "")
                else:
                    to = f"{namespaces_in_words(peer.get('namespaceSelector'))}: {_selector_in_words(peer.get('podSelector'))}"
                lines.append(f"| {obj['metadata']['name']} | {_selector_in_words(spec.get('podSelector'))} | {to} | {ports} |")
    return lines


def _dashboards_section(rendered: Rendered) -> list[str]:
    """The Grafana dashboards, read from the rendered ConfigMaps (components/dashboards.py)."""
    lines: list[str] = []
    for obj in kubernetes_objects(rendered):
        meta = obj.get("metadata") or {}
        if obj.get("kind") != "ConfigMap" or (meta.get("labels") or {}).get("app.kubernetes.io/component") != "dashboards":
            continue
        sidecar = ", ".join(f"`{k}: {v}`" for k, v in sorted((meta.get("labels") or {}).items())
                            if not k.startswith("app.kubernetes.io/"))
        folder = ", ".join(f"`{k}: {v}`" for k, v in sorted((meta.get("annotations") or {}).items())) or "-"
        size = sum(len(str(v).encode()) for v in (obj.get("data") or {}).values())
        for key, text in sorted((obj.get("data") or {}).items()):
            dash = json.loads(text)
            panels = [p["title"] for p in dash.get("panels") or [] if p.get("type") != "row"]
            lines.append(f"| {meta.get('namespace')}/{meta.get('name')} | {sidecar} | {folder} | `{key}` | "
                         f"{dash.get('title')} (`{dash.get('uid')}`) | {', '.join(panels)} | {size} |")
    if not lines:
        return ["", "## Grafana dashboards", "", "None rendered (operations.monitoring or its dashboards are off)."]
    return (["", "## Grafana dashboards", "",
             "ConfigMaps the Grafana sidecar loads by label; the sidecar must watch their namespace. Size counts "
             "against the API server's 1 MiB (1048576 bytes) per ConfigMap.", "",
             "| ConfigMap | Sidecar label | Folder annotation | Key | Dashboard (uid) | Panels | Bytes |",
             "|---|---|---|---|---|---|---|"] + lines)


# What each AIBrix metric reads on each engine (components/autoscaling.py, tests/upstream_aibrix.py).
PA_METRIC_TEXT = {"kv_cache_usage_perc": f"KV-cache usage ({', '.join(e.KV_CACHE_GAUGE for e in ENGINES)}; 0-1)",
                  "num_requests_waiting": f"queue length ({', '.join(e.QUEUE_GAUGE for e in ENGINES)})"}


def _autoscaling_section(rendered: Rendered) -> list[str]:
    """Per autoscaled model: bounds, metric and target, windows, the GPUs the budget counts, and
    what scale to zero means for the first request."""
    scaled = autoscalers(rendered)
    if not scaled:
        return []
    lines = ["", "## Autoscaling", "",
             "AIBrix PodAutoscaler (APA): reads the metric from every engine pod, averages it over 180 s and scales "
             "the workload's spec.replicas; `pulumi up` leaves those replicas to it (ignoreChanges).", "",
             "| Workload | Min-max pods | Metric | Target per pod | Cooldown windows (up / down) | GPUs the budget counts |",
             "|---|---|---|---|---|---|"]
    rows = {(r["kind"], r["name"]): r for r in workload_rows(rendered)}
    cold_starts = {tuple(r["workload"].split(" ", 1)): r["cold"] for r in rollout_rows(rendered)}
    notes = []
    for (kind, namespace, name), pa in sorted(scaled.items()):
        spec, ann = pa["spec"], pa["metadata"].get("annotations") or {}
        source = spec["metricsSources"][0]
        row = rows.get((kind, name))
        windows = (f"{ann.get('autoscaling.aibrix.ai/scale-up-cooldown-window', '0s (default)')} / "
                   f"{ann.get('autoscaling.aibrix.ai/scale-down-cooldown-window', '300s (default)')}")
        lines.append(f"| {kind} {name} | {spec.get('minReplicas', 1)}-{spec['maxReplicas']} | "
                     f"{PA_METRIC_TEXT.get(source['targetMetric'], source['targetMetric'])} | {source['targetValue']} | "
                     f"{windows} | {row['peakGpus'] if row else '?'} |")
        if spec.get("minReplicas", 1) == 0:
            wait = cold_starts.get((kind, name), "its cold start")
            ns = pa["metadata"]["namespace"]
            # A starting pod reads 0, so with minReplicas 0 AIBrix v0.7.0 scales a bare `kubectl scale`
            # away within a resync; at 0 pods with minReplicas 1 it does not scale by itself.
            notes.append(f"- **{name} scales to zero.** With no pod the gateway refuses its requests, and the "
                         "autoscaler has no pod to read a metric from, so nothing scales it up again by itself. A "
                         "starting pod reads 0, so the autoscaler removes a pod scaled up by hand unless its floor "
                         f"is raised first: an operator runs `kubectl -n {ns} patch "
                         f"podautoscalers.autoscaling.aibrix.ai/{pa['metadata']['name']} --type merge -p "
                         """'{"spec":{"minReplicas":1}}'`, then """
                         f"`kubectl -n {ns} scale {kind.lower()}/{name} --replicas=1` (the same patch with minReplicas 0 "
                         "lets it scale to zero again), and the first request then waits a full cold start "
                         f"({wait}).")
    if any(kind == "StormService" for kind, _, _ in scaled):
        lines += ["", "An autoscaled StormService runs in replica mode: its spec.replicas counts RoleSets of one engine "
                  "pod each, and an update replaces them RollingUpdate with maxSurge 0, so the GPU count never rises."]
    lines += ["", "The windows never delay a decision in AIBrix v0.7.0 (the scale-up window takes the highest, the "
              "scale-down window the lowest recommendation in it), so they are 0 s. A new pod reads 0 until its cold "
              "start ends; on KV-cache usage that holds the autoscaler to at most ceil(serving pods / target) pods. "
              "Cold start per workload: " + "; ".join(f"{kind} {name}: {cold_starts.get((kind, name), 'unknown')}"
                                                      for kind, _, name in sorted(scaled)) + "."]
    return lines + ([""] + notes if notes else [])


def _topology_section(rendered: Rendered) -> list[str]:
    rows = served_model_gpus(rendered)
    lines = ["", "## GPUs per served model", "",
             "Compare topologies at fixed GPU totals (field report 7): these are the totals to hold equal.", "",
             "| Served model | Topology | Workloads | GPUs | Peak GPUs |", "|---|---|---|---|---|"]
    lines += [f"| {r['served']} | {r['topology']} | {', '.join(sorted(set(r['workloads'])))} | {r['gpus']} | {r['peakGpus']} |"
              for r in rows]
    # The topology of each row is the llm-serving.io/topology annotation of its workloads.
    shown = sorted({r["topology"] for r in rows} & set(TOPOLOGIES))
    notes = [t for t in shown if TOPOLOGIES[t].plan_note is not None]
    if notes:
        lines += [""] + [f"- **{t}**: {TOPOLOGIES[t].plan_note}" for t in notes]
    if shown and any(r.type == "kubernetes:batch/v1:Job" and r.name.endswith("-smoke") for r in rendered.resources):
        # Through the gateway the way users reach the model (components/scripts/smoke.py, route_evidence.py).
        lines += ["", "What the smoke Job proves after each rollout:", ""]
        lines += [f"- **{t}**: {TOPOLOGIES[t].smoke_proves}" for t in shown]
    return lines


def _memory_section(rendered: Rendered) -> list[str]:
    lines = ["", "## Engine memory and KV-cache offload", "",
             "Per engine pod. KV offload (`models[].kvCacheOffload`) adds its host memory to the request and the limit, "
             "and vLLM's native offload also to /dev/shm (vLLM 0.33.0 maps it there). The Memory /dev/shm emptyDir is "
             "charged within the pod's memory limit.", "",
             "| Workload | KV-cache offload | Memory request | Memory limit | /dev/shm |", "|---|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['offload']} | {r['request']:g}Gi | {r['limit']:g}Gi | {r['shm']} |"
              for r in engine_memory_rows(rendered)]
    return lines


def _sync_section(rendered: Rendered) -> list[str]:
    """Per sync Job (components/sync_job.py): where it writes, whether the content is pinned, what it prunes."""
    lines = ["", "## Model sync", "",
             "| Job | Revision directory | Manifest (models[].manifestSha256) | Kept revisions (this one included) | Never pruned | Hashing threads |",
             "|---|---|---|---|---|---|"]
    unpinned = False
    for obj in kubernetes_objects(rendered):
        if obj.get("kind") != "Job" or not obj["metadata"]["name"].startswith("sync-"):
            continue
        verify = next(c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == "verify")
        args = [str(a) for a in verify.get("args") or []]
        pin = flag_value(args, "--manifest-sha256")
        unpinned = unpinned or pin is None
        in_use = [args[i + 1] for i, a in enumerate(args) if a == "--in-use"]
        lines.append(f"| {obj['metadata']['name']} | `{flag_value(args, '--model-dir')}` | "
                     + (f"pinned `{pin}`" if pin else "**unset: any SHA256SUMS the bucket holds is accepted**")
                     + f" | {flag_value(args, '--keep-revisions')} | {', '.join(f'`{r}`' for r in in_use)} | {flag_value(args, '--workers')} |")
    if unpinned:
        lines += ["", "A model without `manifestSha256` serves whatever the bucket holds under its revision: "
                  "the same revision with other content passes. Pin it (README, \"Pinning the manifest\")."]
    return lines


def plan_md(rendered: Rendered) -> str:
    out = rendered.outputs
    rows = workload_rows(rendered)
    total = sum(r["peakGpus"] for r in rows)
    budget = out.get("gpuBudget")
    lines = [
        f"# Plan: stack `{rendered.stack}`",
        "",
        "Offline render under the Pulumi mock runtime: what `pulumi up` would create. Secrets are masked.",
        "",
        f"- Namespace: `{out.get('namespace')}`",
        f"- Endpoint: `{out.get('endpoint')}` (model `{out.get('servedModelName')}`, topology {out.get('topology')})",
        f"- GPUs at peak, rollouts included: **{total} of budget {budget}**"
        + ("" if budget is None or total <= budget else "  **OVER BUDGET**"),
        f"- Resources: {len(rendered.resources)} ({sum(1 for r in rendered.resources if is_kubernetes_object(r))} Kubernetes objects)",
        "- Cluster prerequisites: " + ", ".join(f"{k} {v}" for k, v in (out.get("prerequisites") or {}).items())
        + (" (installed by this stack)" if any(r.type == "kubernetes:yaml/v2:ConfigFile" for r in rendered.resources)
           else " (installed separately; see README)"),
        "",
        "## Workloads",
        "",
        "| Kind | Name | Replicas | Rollout extra pods (surge + known overshoot) | GPUs per pod | Peak GPUs | Images (by digest) | Probes | Model mount (volume/mounts) | Node disk per pod (ephemeral-storage request / limit) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shapes = multinode_md.group_shapes(rendered.config)
    templates: dict[tuple[str, str], int] = {}
    for r in rows:
        templates[(r["kind"], r["name"])] = templates.get((r["kind"], r["name"]), 0) + 1
    for r in rows:
        images = "<br>".join(f"`{i}`" for i in r["images"])
        shape = shapes.get(r["model"])
        replicas = r["replicas"] if shape is None or shape.kind != r["kind"] else multinode_md.group_pods_words(
            shape, r["replicas"], r["groupRole"] if templates[(r["kind"], r["name"])] > 1 else None)
        lines.append(f"| {r['kind']} | {r['name']} | {replicas} | {r['surge']} | {r['gpusPerPod']} | "
                     f"{r['peakGpus']} | {images} | {r['probes']} | {r['modelMount']} | {r['nodeDisk']} |")
    lines += rollout_section(rendered)
    lines += model_families_md.plan_section(rendered)
    lines += _topology_section(rendered)
    lines += multinode_md.section(rendered)
    lines += node_loss_md.section(rendered)
    lines += _memory_section(rendered)
    lines += gpu_budget_md.section(rendered.config)
    lines += time_to_serving_section(rendered)
    lines += inherited_section(rendered)
    lines += _autoscaling_section(rendered)
    lines += _sync_section(rendered)
    lines += _ab_section(rendered)
    lines += routes_md.section(rendered)
    lines += consumers_md.plan_section(out, kubernetes_objects(rendered))
    lines += _network_section(rendered)
    lines += _dashboards_section(rendered)
    lines += ["", "## Resource options that matter on `pulumi up` and `pulumi destroy`", "",
              "| Resource | Protect | Retain on delete | Custom timeouts | Delete before replace |", "|---|---|---|---|---|"]
    for r in rendered.resources:
        o = r.options
        if o["protect"] or o["retainOnDelete"] or o["customTimeouts"] or o["deleteBeforeReplace"]:
            timeouts = ", ".join(f"{k} {v}" for k, v in sorted(o["customTimeouts"].items())) or "-"
            lines.append(f"| `{r.type}` {r.name} | {o['protect']} | {o['retainOnDelete']} | {timeouts} | {o['deleteBeforeReplace']} |")
    lines += ["", "## Resources by type", "", "| Type | Count |", "|---|---|"]
    counts: dict[str, int] = {}
    for r in rendered.resources:
        counts[r.type] = counts.get(r.type, 0) + 1
    lines += [f"| `{t}` | {n} |" for t, n in sorted(counts.items())]
    lines += ["", "## Secrets", ""]
    if rendered.missing_secrets:
        lines.append("Not in the stack file yet (masked stand-ins here; `pulumi up` refuses to run without them):")
        lines += [f"- `{secret_command(k, NAMESPACE)}`" for k in rendered.missing_secrets]
    else:
        lines.append("Every required secret is set in the stack file (encrypted; shown here as `[secret]`).")
    lines += ["", "## Outputs", "", "```json", outputs_json(rendered).rstrip(), "```", ""]
    return "\n".join(lines)
