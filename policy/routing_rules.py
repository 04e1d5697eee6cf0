"""Rules over what the gateways read: for the AIBrix gateway, no model label on workloads its router watches, P/D
wired for pods apart, the profiles schema of the model config and retries that never resend; for the
inferencePool layer (issue 31), each InferencePool over its model's serving pods with its own endpoint picker,
the picker probed as it answers, and the routes to a pool allowed to reach it (policy/pool_rules.py, kept
apart for its size)."""

from __future__ import annotations

import json

from policy.manifests import (
    LOOPBACK,
    annotations_of,
    argv_of,
    each_engine_container,
    env_value,
    flag_value,
    kind_of,
    name_of,
    templates,
)
from policy.pool_rules import (  # noqa: F401  (the inferencePool layer's rules, registered with these)
    endpoint_picker_probes_grpc,
    inference_pools_have_their_picker,
    inference_pools_select_serving_pods,
    routes_reach_inference_pools,
)
from policy.unknowns import decide, items_of, mapping
from policy.workloads import PodTemplateRef, rbg_worker_views

# Kinds whose own labels AIBrix v0.7.0's model router watches to create a `<model>-router` route.
ROUTER_WATCHED_KINDS = {"Deployment", "RayClusterFleet", "LeaderWorkerSet", "ModelAdapter"}


MODEL_LABEL = "model.aibrix.ai/name"


def no_router_owned_routes(resource_type: str, props: dict) -> list[str]:
    """The model label belongs on pods, not on a watched workload: else AIBrix creates a route the
    workload owns, shared by every workload with that label and deleted with any of them (11.2)."""
    def top_level() -> list[str]:
        if kind_of(resource_type) in ROUTER_WATCHED_KINDS and MODEL_LABEL in ((props.get("metadata") or {}).get("labels") or {}):
            return [f"{name_of(props)}: carries {MODEL_LABEL} at its top level; AIBrix would create a shared "
                    "HTTPRoute that deleting this workload removes. Keep the label on the pod template only."]
        return []

    def worker(ref: PodTemplateRef) -> list[str]:
        # Ray workers are not engines: AIBrix must not discover them as model pods (11.2).
        if ".workerGroupSpecs[" in ref.path and MODEL_LABEL in ((ref.template.get("metadata") or {}).get("labels") or {}):
            return [f"{name_of(props)}: Ray worker pods at {ref.path} carry {MODEL_LABEL}; only the head serves."]
        # A group's workers (issue 29) serve no OpenAI API (vLLM --headless no port, SGLang ranks >= 1 a
        # placeholder /health only: policy/engines serves_http): the gateway must route to the leader only.
        if ref.group_worker and MODEL_LABEL in ((ref.template.get("metadata") or {}).get("labels") or {}):
            return [f"{name_of(props)}: the group's worker pods at {ref.path} carry {MODEL_LABEL}; only the leader "
                    "serves the model, so only it may be routed to."]
        return []

    def rbg_workers() -> list[str]:
        # RBG's template is the leader's too: its workers are the template with workerTemplatePatch.
        if kind_of(resource_type) != "RoleBasedGroup":
            return []
        return [f"{name_of(props)}: the group's worker pods ({path}) carry {MODEL_LABEL}; only the leader serves the "
                "model, so only it may be routed to."
                for path, t in rbg_worker_views(props.get("spec") or {})
                if MODEL_LABEL in ((t.get("metadata") or {}).get("labels") or {})]

    out = decide(top_level) + decide(rbg_workers)
    for ref in templates(resource_type, props):
        out += decide(worker, ref)
    return out


def pd_wiring(resource_type: str, props: dict) -> list[str]:
    """The field report's "looked like P/D but was not" causes (11.3), on every engine pod:
    Ray executor, loopback side channel across pods, wrong AIBrix connector type, implicit KV
    failure policy."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        argv = argv_of(c)
        if flag_value(argv, "--distributed-executor-backend") == "ray":
            out.append(f"{name_of(props)}: container {c.get('name')} uses the Ray executor for a single-node engine; "
                       "use mp (the Ray executor produced garbage tokens, field report 11.3).")
        transfer = flag_value(argv, "--kv-transfer-config")
        if transfer is None:
            return out
        try:
            kv = json.loads(transfer)
        except ValueError:
            return out + [f"{name_of(props)}: container {c.get('name')} --kv-transfer-config is not JSON."]
        if not isinstance(kv, dict):
            return out + [f"{name_of(props)}: container {c.get('name')} --kv-transfer-config is not a JSON object."]
        if "kv_load_failure_policy" not in kv:
            out.append(f"{name_of(props)}: container {c.get('name')} leaves kv_load_failure_policy implicit; set it.")
        return out + decide(_across_pods_wiring, props, ref, c, kv)
    return each_engine_container(resource_type, props, check)


def _across_pods_wiring(props: dict, ref: PodTemplateRef, c: dict, kv: dict) -> list[str]:
    pod_labels = (ref.template.get("metadata") or {}).get("labels") or {}
    if not ("roleset-name" in pod_labels and pod_labels.get("role-name") in ("prefill", "decode")):
        return []
    out = []
    host = env_value(c, "VLLM_NIXL_SIDE_CHANNEL_HOST")
    if not host or str(host).startswith(LOOPBACK):
        out.append(f"{name_of(props)}: container {c.get('name')} NIXL side channel host is {host or 'unset (loopback)'}; "
                   "the other side cannot connect across pods (set 0.0.0.0).")
    if kv.get("kv_connector") == "NixlConnector" and pod_labels.get("model.aibrix.ai/kv-connector-type") != "shfs":
        out.append(f"{name_of(props)}: vLLM NixlConnector pods need model.aibrix.ai/kv-connector-type=shfs "
                   "(AIBrix's nixl agent is for Neuron and its prefill response is not read by GPU vLLM).")
    return out


def aibrix_profiles_schema(resource_type: str, props: dict) -> list[str]:
    """model.aibrix.ai/config is the profiles schema; the old top-level routingStrategy does not route
    ordinary requests into P/D reliably (field report 11.3)."""
    def check(ref: PodTemplateRef) -> list[str]:
        raw = annotations_of(ref.template).get("model.aibrix.ai/config")
        if raw is None:
            return []
        try:
            doc = json.loads(str(raw))
        except ValueError:
            return [f"{name_of(props)}: model.aibrix.ai/config is not JSON."]
        if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), dict) or not doc["profiles"] or "routingStrategy" in doc:
            return [f"{name_of(props)}: model.aibrix.ai/config must be {{\"profiles\": {{\"default\": {{...}}}}}}, "
                    "not the top-level routingStrategy form."]
        return []
    out = []
    for ref in templates(resource_type, props):
        out += decide(check, ref)
    return out


# Envoy Gateway v1.2.8 (api/v1alpha1/retry_types.go, Envoy's x-envoy-retry-on): the two triggers that
# fire only when no request byte reached the upstream. Every other one fires on a response or on a reset
# after the request was sent, when a generation may already be running.
UNSENT_RETRY_TRIGGERS = frozenset({"connect-failure", "refused-stream"})


def gateway_never_resends_generations(resource_type: str, props: dict) -> list[str]:
    """A BackendTrafficPolicy retries only requests that cannot have reached an engine, never after a
    per-try timeout, and runs no active HTTP health check (it would call the engines on a timer; an
    engine that generates on its health path pollutes every metric, field report 12.4). The Envoy
    routes an EnvoyPatchPolicy adds (components/strategy_limits.py) are held to the same retries."""
    if kind_of(resource_type) == "EnvoyPatchPolicy":
        return decide(_patched_routes_never_resend, props)
    if kind_of(resource_type) != "BackendTrafficPolicy":
        return []
    spec = mapping(props.get("spec"))
    name = name_of(props)

    def retry() -> list[str]:
        if spec.get("retry") is None:
            return []
        r = mapping(spec.get("retry"))
        out = []
        triggers = items_of(mapping(r.get("retryOn")).get("triggers"))
        if not triggers:
            out.append(f"{name}: retry without retryOn.triggers retries 503 and gRPC unavailable/cancelled "
                       "(v1.2.8 route.go retryDefaultRetryOn), answers an engine sent; name connect-failure, refused-stream.")
        elif set(map(str, triggers)) - UNSENT_RETRY_TRIGGERS:
            out.append(f"{name}: retries on {sorted(set(map(str, triggers)) - UNSENT_RETRY_TRIGGERS)}; a request that "
                       "reached an engine may be generating, retry only connect-failure and refused-stream.")
        if mapping(r.get("perRetry")).get("timeout") is not None:
            out.append(f"{name}: perRetry.timeout re-sends a request whose generation is still running.")
        return out

    def health() -> list[str]:
        active = mapping(mapping(spec.get("healthCheck")).get("active"))
        if active and active.get("type") != "TCP":
            return [f"{name}: active {active.get('type')} health check calls the engines on a timer; use TCP "
                    "(field report 12.4)."]
        return []
    return decide(retry) + decide(health)


def _patched_routes_never_resend(props: dict) -> list[str]:
    """Envoy's own retry_policy (route.v3.RetryPolicy): retry_on is a comma-separated list of the same
    x-envoy-retry-on triggers; per_try_timeout and per_try_idle_timeout re-send a running request."""
    name, out = name_of(props), []
    for patch in items_of(mapping(props.get("spec")).get("jsonPatches")):
        route = mapping(mapping(mapping(patch).get("operation")).get("value"))
        action = mapping(route.get("route"))
        if not action or action.get("retry_policy") is None:
            continue
        policy = mapping(action.get("retry_policy"))
        triggers = {t.strip() for t in str(policy.get("retry_on") or "").split(",") if t.strip()}
        where = f"{name}: route {route.get('name')}"
        if not triggers or triggers - UNSENT_RETRY_TRIGGERS:
            out.append(f"{where} retries on {sorted(triggers - UNSENT_RETRY_TRIGGERS) or 'nothing named'}; a request "
                       "that reached an engine may be generating, retry only connect-failure and refused-stream.")
        if policy.get("per_try_timeout") is not None or policy.get("per_try_idle_timeout") is not None:
            out.append(f"{where}: a per-try timeout re-sends a request whose generation is still running.")
    return out


