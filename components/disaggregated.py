"""Prefill/decode disaggregation, built so that the field report's "looked like P/D but was not"
mistakes cannot be configured (sections 9, 11.2-11.5).

Dual-fleet P/D: two AIBrix RayClusterFleets, prefill and decode, each one head-only 8-GPU pod.
- Both sides come from one vLLM argument set: same model, TP, KV dtype, block size, backend.
- `--distributed-executor-backend mp`: the Ray executor produced garbage tokens (11.3); KubeRay only
  runs the pods. Ray still starts in the head (the image brings it, 11.3) for KubeRay's sake.
- NixlConnector, `kv_role` kv_both, `kv_load_failure_policy` explicit; side channel on 0.0.0.0
  (the loopback default failed every handshake, 11.3).
- Pod labels: model, `roleset-name`, `role-name`, `model.aibrix.ai/kv-connector-type: shfs` (the GPU
  path; `nixl` is AIBrix's Neuron agent). Pod annotation `model.aibrix.ai/config` in the profiles
  schema. No model label on the fleets, so AIBrix makes no shared route (11.2).

Same-pod 4P+4D: one pod, a 4-GPU prefill container, a 4-GPU decode container and the image's
proxy, as validated in 9.2. Functional validation only (9.4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import AIBRIX_ORCHESTRATION_API, Component, metadata
from components.combined import (
    CombinedEngineArgs,
    TemplateSource,
    aibrix_labels,
    engine_pod_spec,
    model_mount,
    rollout_deadline_seconds,
    rollout_timeouts,
    served_model_selector,
    service_exceptions,
)
from components.engines import (
    OFFLINE_ENV,
    consumer_key_fields,
    parallel_size,
    profile_of,
    reasoning_kwarg,
    startup_budget_seconds,
)
from components.gateway import RouteBackend, service_name
from components.orchestrators import orchestrator_of
from components.orchestrators.base import WAIT_FOR
from components.pod_template import (
    SCRIPTS_MOUNT,
    EngineContainer,
    container_security,
    engine_pod_template,
    secret_env,
    startup_failure_threshold,
    tcp_probe,
)
from components.routing import ANN_MODEL_CONFIG
from components.routing import model_config as routing_model_config
from components.scanner_exceptions import ENGINE_SCANNER_EXCEPTIONS, scanner_exceptions
from components.topologies import roleset_name, topology_of
from components.topologies.pd import PD_STRATEGY
from components.topologies.pd_same_pod import PROXY_CPU, PROXY_MEMORY_GIB
from config_model import ServedModel, derived
from policy.engines import vllm
from policy.gpu_accounting import rollout_waves

ANN_OVERSHOOT = "llm-serving.io/rollout-overshoot-pods"
# One value for both sides so block hashes agree across engines (as AIBrix's P/D samples set it).
PYTHONHASHSEED = "1047"
# KubeRay, told not to touch the command, hands its `ray start` line over in this variable. It
# blocks, so it runs in the background and the engine becomes the container's main process.
RAY_HEAD_WRAPPER = ["/bin/sh", "-c", 'eval "$KUBERAY_GEN_RAY_START_CMD" & exec "$@"', "ray-head"]


def model_config(routing_config: dict | None = None) -> str:
    """The P/D pods' AIBrix model config: strategy pd, in the profiles schema (11.3). Every pod of
    a P/D or hybrid model says pd: the plugin takes the profile of the first pod it lists that has
    one (aibrix v0.7.0 pkg/plugins/gateway/configprofiles ResolveProfile), in no fixed order."""
    return routing_model_config(PD_STRATEGY, routing_config)


# What `pulumi up` waits for on a fleet: the Deployment-style Progressing condition with reason
# NewReplicaSetAvailable, which the fleet controller writes only when the new RayClusterReplicaSet
# holds every replica, all available, at the current generation (aibrix v0.7.0
# pkg/controller/rayclusterfleet/progress.go syncRolloutStatus, util/fleet.go DeploymentComplete;
# sync.go marks a new replica set NewReplicaSetCreated first). readyReplicas counts the old
# revision's clusters too and is omitted at 0, so a fleet of 0 never matched `readyReplicas=0`. The
# condition exists only with progressDeadlineSeconds set; the provider checks observedGeneration
# before the path (pulumi-kubernetes v4.32.0 provider/pkg/await/condition/jsonpath.go).
FLEET_WAIT_FOR = "jsonpath={.status.conditions[?@.type=='Progressing'].reason}=NewReplicaSetAvailable"


def kv_transfer_config(role: str, failure_policy: str) -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role, "kv_buffer_device": "cuda",
                       "kv_load_failure_policy": failure_policy}, separators=(",", ":"))


def fleet_engine_args(model_path: str, model: ServedModel) -> list[str]:
    """The one argument set of both fleet sides: the combined vLLM argv plus mp and NIXL."""
    return vllm.serve_args(model_path, model.served_model_name, vllm.PORT, model.vllm) + [
        "--distributed-executor-backend", "mp",
        "--kv-transfer-config", kv_transfer_config("kv_both", model.pd.kv_load_failure_policy),
    ] + list(model.vllm.extra_args)


def fleet_env(model: ServedModel) -> dict[str, str]:
    return {**OFFLINE_ENV, "VLLM_NIXL_SIDE_CHANNEL_HOST": "0.0.0.0",
            "VLLM_NIXL_SIDE_CHANNEL_PORT": str(model.pd.side_channel_port), "PYTHONHASHSEED": PYTHONHASHSEED,
            **model.env}


def same_pod_env(model: ServedModel, vllm_port: str, side_channel: int) -> dict[str, str]:
    return {**OFFLINE_ENV, "VLLM_PORT": vllm_port, "UCX_NET_DEVICES": "all",
            # Same pod: loopback is right here, unlike across pods.
            "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1", "VLLM_NIXL_SIDE_CHANNEL_PORT": str(side_channel),
            "PYTHONHASHSEED": PYTHONHASHSEED, **model.env}


def same_pod_engine_args(model_path: str, model: ServedModel, port: int, role: str) -> list[str]:
    """Section 9.2's PD_COMMON_ARGS for one side: the same common arguments on both engines."""
    settings = model.vllm.model_copy(update={"enforce_eager": model.same_pod.enforce_eager})
    args = vllm.serve_args(model_path, model.served_model_name, port, settings) + ["--dtype", "auto"]
    tags, kwarg = profile_of(model).REASONING_TAGS, reasoning_kwarg(model)
    if settings.reasoning_parser is not None and tags is not None:
        args += ["--reasoning-config", json.dumps({"reasoning_parser": settings.reasoning_parser, "reasoning_start_str": tags[0],
                                                   "reasoning_end_str": tags[1]}, separators=(",", ":"))]
    if kwarg is not None:
        # Reasoning on unless a request says otherwise, as 9.2 ran it.
        args += ["--default-chat-template-kwargs", json.dumps({kwarg: True}, separators=(",", ":"))]
    return args + [
        "--enable-prompt-tokens-details",
        "--kv-transfer-config", kv_transfer_config(role, model.pd.kv_load_failure_policy),
    ] + list(model.vllm.extra_args)


@dataclass(frozen=True)
class DisaggregatedArgs:
    base: CombinedEngineArgs          # namespace, model, pool, cache, image, claims ... as for combined


def fleet_pod_template(base: CombinedEngineArgs, side: str) -> dict:
    m = base.model
    model_path = model_mount(base).model_path
    rdma = m.pd.rdma
    engine = EngineContainer(
        name="engine", command=list(RAY_HEAD_WRAPPER), args=[vllm.COMMAND, *fleet_engine_args(model_path, m)],
        env=fleet_env(m), port=vllm.PORT, gpus=parallel_size(m), api_key_env=vllm.API_KEY_ENV,
        extra_ports={"nixl": m.pd.side_channel_port},
        extra_resources={rdma.resource_name: str(rdma.count)} if rdma else {},
        # RDMA needs locked memory, and nothing more: the pod stays unprivileged.
        add_capabilities=("IPC_LOCK",) if rdma else (),
        # The gateway sends the client's own headers to both sides (tests/upstream_aibrix.py), so both
        # take every consumer's token; `exec "$@"` hands the expanded words on unchanged.
        **consumer_key_fields(m, base.consumer_keys))
    routing = topology_of(m).fleet_routing_config(m)
    pod_labels = {**aibrix_labels(m), "roleset-name": roleset_name(m), "role-name": side,
                  "model.aibrix.ai/kv-connector-type": "shfs"}
    return engine_pod_template(engine_pod_spec(base, derived.fleet_name(m.name, side), [engine], pod_labels,
                                         {ANN_MODEL_CONFIG: model_config(routing)}))


def fleet_manifest_spec(base: CombinedEngineArgs, side: str, ray_version: str) -> dict:
    m = base.model
    name = derived.fleet_name(m.name, side)
    return {
        "replicas": topology_of(m).fleet_replicas(m),
        "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        # One cold start: each cluster that becomes available resets the timer, as for a Deployment.
        "progressDeadlineSeconds": rollout_deadline_seconds(m),
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": name},
                         "annotations": {"ray.io/overwrite-container-cmd": "true"}},
            "spec": {
                "rayVersion": ray_version,
                # Head only: each side is one single-node engine; mp runs its 8 TP ranks.
                "headGroupSpec": {"rayStartParams": {}, "template": fleet_pod_template(base, side)},
            },
        },
    }


def fleet_pod_templates(args: DisaggregatedArgs, ray_version: str) -> dict[str, dict]:
    """What each fleet stamps onto its RayClusters, by fleet name: the whole RayCluster template (head
    group pod template, rayVersion and all), which the fleet hashes to tell revisions apart and rolls
    new RayClusters on any change of (aibrix v0.7.0 pkg/controller/rayclusterfleet/sync.go,
    util/fleet.go ComputeHash)."""
    return {derived.fleet_name(args.base.model.name, side): fleet_manifest_spec(args.base, side, ray_version)["template"]
            for side in ("prefill", "decode")}


class DisaggregatedEngine(Component):
    """Dual RayClusterFleet P/D for one served model."""

    route_backend: RouteBackend

    def __init__(self, name: str, args: DisaggregatedArgs, ray_version: str,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:disaggregated:DisaggregatedEngine", name, opts)
        base = args.base
        m = base.model
        self.template_source = TemplateSource(lambda a: fleet_pod_templates(a, ray_version), args)
        # The fleets roll their RayClusters one at a time (maxUnavailable 1 in fleet_manifest_spec).
        wait = rollout_timeouts(m, rollout_waves(topology_of(m).fleet_replicas(m), 1))
        for side in ("prefill", "decode"):
            fleet = derived.fleet_name(m.name, side)
            annotations = {WAIT_FOR: FLEET_WAIT_FOR}
            if side == "prefill":
                annotations[ANN_OVERSHOOT] = str(m.pd.rollout_overshoot_pods)
            k8s.apiextensions.CustomResource(
                f"{name}-{side}", api_version=AIBRIX_ORCHESTRATION_API, kind="RayClusterFleet",
                # No model label here: AIBrix would make a route both fleets share (11.2).
                metadata={**metadata(fleet, base.namespace, "engine"), "annotations": annotations},
                spec=fleet_manifest_spec(base, side, ray_version),
                opts=self.child_opts(custom_timeouts=wait))
        self.route_backend = RouteBackend(
            served_model_name=m.served_model_name, service_name=service_name(m), selector=served_model_selector(m),
            port=vllm.PORT, target_port="engine", service_labels=aibrix_labels(m), timeouts=wait,
            annotations=service_exceptions(m))
        self.register_outputs({"roleset": roleset_name(m)})


def same_pod_template(base: CombinedEngineArgs) -> dict:
    m = base.model
    sp = m.same_pod
    model_path = model_mount(base).model_path
    tp = parallel_size(m)
    engines = []
    for role, port, side_channel, vllm_port, kv_role in (
            ("prefill", sp.prefill_port, sp.prefill_side_channel_port, "20000", "kv_producer"),
            ("decode", sp.decode_port, sp.decode_side_channel_port, "30000", "kv_consumer")):
        engines.append(EngineContainer(
            name=role, command=[vllm.COMMAND], args=same_pod_engine_args(model_path, m, port, kv_role),
            env=same_pod_env(m, vllm_port, side_channel),
            port=port, gpus=tp, api_key_env=vllm.API_KEY_ENV))
    consumer_refs = base.consumer_keys.env_refs() if base.consumer_keys is not None else []
    # Our proxy from the scripts ConfigMap, not the image's disagg_proxy_multiturn.py, which sends
    # the engines no key (401), serves neither /v1/models nor /metrics (smoke and load test: 404)
    # and drops reasoning and tool calls from non-streaming answers (9.5): scripts/pd_proxy.py. The
    # engines keep their key; the proxy asks clients for the same one and passes it on.
    proxy = {
        "name": "proxy",
        "image": base.image.reference,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{SCRIPTS_MOUNT}/pd_proxy.py"],
        "args": ["--host", "0.0.0.0", "--port", str(sp.proxy_port),
                 "--prefill-host", "127.0.0.1", "--prefill-port", str(sp.prefill_port),
                 "--decode-host", "127.0.0.1", "--decode-port", str(sp.decode_port),
                 "--timeout", str(base.drain_timeout_seconds),
                 *(a for var, _ in consumer_refs for a in ("--client-key-env", var))],
        "env": [secret_env("OPENAI_API_KEY", base.api_key_secret),
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                # Consumers' tokens (issue 21): the proxy is the pod's entry point, so it is the one that
                # takes them; its engines behind it keep the shared key alone.
                *(secret_env(var, base.consumer_keys.secret, key) for var, key in consumer_refs)],
        "ports": [{"name": "proxy", "containerPort": sp.proxy_port, "protocol": "TCP"}],
        "volumeMounts": [{"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True}],
        "resources": {"requests": {"cpu": str(PROXY_CPU[0]), "memory": f"{PROXY_MEMORY_GIB[0]}Gi"},
                      "limits": {"cpu": str(PROXY_CPU[1]), "memory": f"{PROXY_MEMORY_GIB[1]}Gi"}},
        "startupProbe": tcp_probe("proxy", startup_failure_threshold(startup_budget_seconds(m))),
        "readinessProbe": tcp_probe("proxy", 3),
        "livenessProbe": tcp_probe("proxy", 4, period=15, timeout=5),
        "securityContext": container_security(),
    }
    pod_labels = {**aibrix_labels(m), "model.aibrix.ai/port": str(sp.proxy_port)}
    return engine_pod_template(engine_pod_spec(base, m.name, engines, pod_labels, {}, sidecars=[proxy]))


class SamePodPdEngine(Component):
    """4P+4D in one Deployment pod (field report 9): functional validation only."""

    route_backend: RouteBackend

    def __init__(self, name: str, base: CombinedEngineArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:disaggregated:SamePodPdEngine", name, opts)
        m = base.model
        self.template_source = TemplateSource(lambda a: {a.model.name: same_pod_template(a)}, base)
        k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata={**metadata(m.name, base.namespace, "engine"),
                                            "annotations": scanner_exceptions(ENGINE_SCANNER_EXCEPTIONS)},
            spec=orchestrator_of(m).spec(m, self.template_source.build(base)[m.name]),
            opts=self.child_opts(custom_timeouts=rollout_timeouts(m)))
        self.route_backend = RouteBackend(
            served_model_name=m.served_model_name, service_name=m.name, selector=served_model_selector(m),
            port=m.same_pod.proxy_port, target_port="proxy",
            service_labels={**aibrix_labels(m), "model.aibrix.ai/port": str(m.same_pod.proxy_port)},
            timeouts=rollout_timeouts(m), annotations=service_exceptions(m))
        self.register_outputs({})
