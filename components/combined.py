"""Combined serving: one engine pod does prefill and decode (field report 5, 7, 11.1, 12).

One typed switch picks the orchestrator: a Deployment, an AIBrix StormService or an RBG
RoleBasedGroup. Each embeds the same pod template from pod_template.engine_pod_template, so probes,
mounts and GPUs are decided in one place. The AIBrix model labels go on the pods only: on the
workload itself they would make AIBrix create its own route (see components/gateway.py). The
Service and route of each served model come from the gateway component.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.autoscaling import IGNORE_REPLICAS, workload_annotations
from components.base import AIBRIX_ORCHESTRATION_API, Component, labels, metadata
from components.engines import (
    consumer_key_fields,
    engine_command,
    engine_of,
    offload_memory_gib,
    offload_shm_gib,
    parallel_size,
    startup_budget_seconds,
)
from components.gateway import RouteBackend, service_name
from components.pod_template import (
    ENGINE_SCANNER_EXCEPTIONS,
    PRE_START_ALLOWANCE_SECONDS,
    EngineContainer,
    EnginePodSpec,
    ModelMount,
    engine_pod_template,
    scanner_exceptions,
)
from components.routing import ANN_MODEL_CONFIG, metric_port_labels, model_config, routing_strategy
from components.secrets import ConsumerKeys, secret_tag_annotation
from components.topologies import gpus_per_pod, peak_replicas, pod_resources
from config_model import CompileCache, GpuPool, ServedModel
from policy.gpu_accounting import rollout_waves

ANN_AB_BASELINE = "llm-serving.io/ab-baseline"
ANN_TOPOLOGY = "llm-serving.io/topology"
ROLE_NAME = "server"
WAIT_FOR = "pulumi.com/waitFor"


def stormservice_wait_for() -> str:
    """Ready, and the one RoleSet counted in updatedReadyReplicas: of the update revision with every
    role's pods updated AND ready (aibrix v0.7.0 pkg/controller/stormservice/sync.go updateStatus,
    utils.go isAllRoleUpdatedAndReady); Ready alone counts a RoleSet whose updated pods are not ready
    yet. Both are written with observedGeneration, which the provider compares with the generation
    before it believes either (pulumi-kubernetes v4.32.0 provider/pkg/await/condition/kubectl.go,
    jsonpath.go). A list is an AND (provider/pkg/metadata/overrides.go ReadyCondition)."""
    return json.dumps(["condition=Ready", "jsonpath={.status.updatedReadyReplicas}=1"])


def stormservice_replica_wait_for() -> str:
    """Ready alone, in replica mode: the autoscaler moves spec.replicas, so no fixed count of
    updatedReadyReplicas can be written here. Ready needs status.replicas and updatedReplicas equal to
    spec.replicas and readyReplicas at least that (aibrix v0.7.0 stormservice/sync.go updateStatus): every
    RoleSet of the update revision and RoleSet-Ready. Replica mode never updates a RoleSet in place
    (rollingUpdate deletes and creates; only inPlaceUpdate calls updateRoleSet), so a RoleSet of the
    update revision was created at it and its Ready (roleset/sync.go calculateStatus: every role's
    readyReplicas reaches its replicas) speaks of that revision's pods only."""
    return "condition=Ready"


def rolebasedgroup_wait_for() -> str:
    """Ready. Known limit: right after a spec change the controller writes Ready (with the new
    observedGeneration) from the previous revision's role status until the role workload observes
    the change (rbg v0.7.0 pkg/reconciler/common.go ConstructWorkloadRoleStatus keeps the last known
    status; internal/controller/workloads/rolebasedgroup_controller.go updateRBGStatus copies a role
    status only when replicas or readyReplicas change). No field of the RBG status tells the new
    revision apart, so the day-2 Jobs must wait for the endpoint themselves."""
    return "condition=Ready"


def served_model_selector(model: ServedModel) -> dict[str, str]:
    """Every engine pod of a served model, whatever its topology: what its Service selects."""
    return {"llm-serving.io/model": model.name, "app.kubernetes.io/component": "engine"}


def aibrix_labels(model: ServedModel) -> dict[str, str]:
    """AIBrix v0.7.0 discovery labels: the name must equal the request body's `model`; the metric
    port where it is not the plugin's default 8000 (SGLang, same-pod P/D)."""
    return {"model.aibrix.ai/name": model.served_model_name,
            "model.aibrix.ai/port": str(engine_of(model).PORT),
            "model.aibrix.ai/engine": model.engine, **metric_port_labels(model)}


@dataclass(frozen=True)
class EngineImage:
    """An engine image reference twice: as the pods pull it, and as far as the stack file decides it.
    They are the same text unless the mirror's reference is an Output (an ECR repository URL is unknown
    in the preview of its creation); the rollout key reads `known`, so it is known in every preview."""

    reference: Any                # pulumi.Input[str]
    known: str

    def as_known(self) -> EngineImage:
        return EngineImage(self.known, self.known)


@dataclass(frozen=True)
class CombinedEngineArgs:
    namespace: str
    model: ServedModel
    gpu_pool: GpuPool
    compile_cache: CompileCache
    image: EngineImage
    image_digest: str
    image_cuda_version: str | None
    model_claim_name: str
    model_mount_path: str
    api_key_secret: str
    api_key_tag: str              # content_tag of that Secret: a rotation rolls the pods (issue 18 case 3)
    scripts_config_map: str
    image_pull_secrets: tuple[str, ...] = ()
    ab_baseline: str | None = None   # name of the target-only workload this one is the DSpark arm of
    # Hybrid routing: roleset labels and model config that make these the combined fallback pods.
    extra_pod_labels: tuple[tuple[str, str], ...] = ()
    extra_pod_annotations: tuple[tuple[str, str], ...] = ()
    drain_timeout_seconds: int = 120   # the gateway's request timeout
    consumer_keys: ConsumerKeys | None = None   # every consumer's token, besides the shared key (issue 21)


def rollout_deadline_seconds(model: ServedModel) -> int:
    """Progress deadline and Pulumi await timeout: the startup budget plus image pull and model
    gate. Pulumi's 10-minute default would fail every 12-minute cold start."""
    return startup_budget_seconds(model) + PRE_START_ALLOWANCE_SECONDS


def rollout_timeouts(model: ServedModel, waves: int | None = None) -> pulumi.CustomTimeouts:
    """Pulumi's await covers the whole rollout, not one pod: a create starts every pod at once (one
    deadline), an update waits for every wave. Kubernetes' progressDeadlineSeconds stays one cold
    start, since each pod that becomes available resets its timer. The waves are policy/gpu_accounting.py's,
    which the pack counts from the manifest too."""
    if waves is None:
        # An autoscaler may have grown the workload to maxReplicas by the time an update rolls it.
        waves = rollout_waves(peak_replicas(model), model.rollout.max_unavailable, rollout_strategy(model) == "Recreate")
    deadline = rollout_deadline_seconds(model)
    return pulumi.CustomTimeouts(create=f"{deadline}s", update=f"{deadline * waves}s")


def rollout_strategy(model: ServedModel) -> str:
    """The stack file's models[].rollout.strategy, else: StormService and RoleBasedGroup have no Recreate;
    a Deployment that never runs more than one pod recreates it, since Recreate creates the new pod only
    once the old one has stopped (kubernetes pkg/controller/deployment/recreate.go rolloutRecreate waits
    for oldPodsRunning to be false), so its GPUs are free for it; a RollingUpdate would create the new
    pod beside the terminating old one, Pending for the GPUs the old pod still holds through its drain.
    With more pods, or a surge pod, it rolls: one pod at a time (maxUnavailable) while the others serve,
    where Recreate would take the model fully down."""
    if model.rollout.strategy is not None:
        return model.rollout.strategy
    if model.orchestrator != "deployment":
        return "RollingUpdate"
    return "RollingUpdate" if model.rollout.max_surge or peak_replicas(model) > 1 else "Recreate"


def model_mount(args: CombinedEngineArgs) -> ModelMount:
    m = args.model
    return ModelMount(claim_name=args.model_claim_name, mount_path=args.model_mount_path,
                      directory=m.directory, revision=m.revision, expected_shard_count=m.expected_shard_count,
                      manifest_sha256=m.manifest_sha256)


def engine_pod_spec(args: CombinedEngineArgs, name: str, engines: list[EngineContainer], extra_labels: dict,
                    extra_annotations: dict, sidecars: list[dict] | None = None) -> EnginePodSpec:
    """The pod of any engine workload of a served model: one or more engine containers (and
    sidecars), with the model's mount, cache, budget, secrets and identity labels."""
    m = args.model
    # Every engine pod names its routing strategy: without one the gateway answers 503 (components/routing.py).
    annotations = {"llm-serving.io/model-revision": m.revision, ANN_TOPOLOGY: m.topology,
                   ANN_MODEL_CONFIG: model_config(routing_strategy(m)),
                   secret_tag_annotation(args.api_key_secret): args.api_key_tag, **extra_annotations}
    if args.consumer_keys is not None:
        annotations[secret_tag_annotation(args.consumer_keys.secret)] = args.consumer_keys.tag
    if args.ab_baseline:
        annotations[ANN_AB_BASELINE] = args.ab_baseline
    return EnginePodSpec(
        name=name, labels={**labels(name, "engine"), **served_model_selector(m), **extra_labels},
        image=args.image.reference, image_digest=args.image_digest, cuda_version=args.image_cuda_version,
        engines=engines, parallel_size=parallel_size(m), gpu_pool=args.gpu_pool,
        resources=pod_resources(args.gpu_pool, m), model=model_mount(args),
        compile_cache=args.compile_cache, startup_budget_seconds=startup_budget_seconds(m),
        termination_grace_seconds=m.termination_grace_seconds, api_key_secret=args.api_key_secret,
        scripts_config_map=args.scripts_config_map, annotations=annotations,
        image_pull_secrets=list(args.image_pull_secrets), sidecars=sidecars or [],
        drain_timeout_seconds=args.drain_timeout_seconds,
        consumer_keys_secret=args.consumer_keys.secret if args.consumer_keys else None)


def pod_spec(args: CombinedEngineArgs) -> EnginePodSpec:
    """The combined pod: one engine container doing prefill and decode."""
    m = args.model
    cmd = engine_command(model_mount(args).model_path, m)
    engine = EngineContainer(name="engine", command=cmd.command, args=cmd.args, env=cmd.env,
                             port=engine_of(m).PORT, gpus=gpus_per_pod(m), api_key_env=engine_of(m).API_KEY_ENV,
                             offload_memory_gib=offload_memory_gib(m), offload_shm_gib=offload_shm_gib(m),
                             **consumer_key_fields(m, args.consumer_keys))
    return engine_pod_spec(args, m.name, [engine], {**aibrix_labels(m), **dict(args.extra_pod_labels)},
                           dict(args.extra_pod_annotations))


def combined_pod_templates(args: CombinedEngineArgs) -> dict[str, dict]:
    """The pod template of each workload CombinedEngine registers, by workload name."""
    return {args.model.name: engine_pod_template(pod_spec(args))}


def selector(model: ServedModel) -> dict[str, str]:
    return {"app.kubernetes.io/name": model.name, "app.kubernetes.io/component": "engine"}


def deployment_spec(model: ServedModel, template: dict) -> dict:
    if rollout_strategy(model) == "Recreate":
        strategy: dict = {"type": "Recreate"}
    else:
        # maxSurge 0 (the default): a pod goes down before its replacement starts, so the GPU count never
        # rises. maxSurge 1 only where the stack file asks and gpuBudget counts it (stacks/rules/capacity.py).
        strategy = {"type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": model.rollout.max_surge, "maxUnavailable": model.rollout.max_unavailable}}
    return {"replicas": model.replicas, "selector": {"matchLabels": selector(model)}, "strategy": strategy,
            "progressDeadlineSeconds": rollout_deadline_seconds(model), "revisionHistoryLimit": 5,
            "template": template}


def replica_mode(model: ServedModel) -> bool:
    """An autoscaled StormService runs in replica mode: one RoleSet per pod, counted by the top-level
    spec.replicas that AIBrix v0.7.0's PodAutoscaler scales (components/autoscaling.py)."""
    return model.orchestrator == "stormservice" and model.autoscaling.enabled


def stormservice_spec(model: ServedModel, template: dict) -> dict:
    """Pooled mode: one RoleSet (replicas 1) with one role serving the whole model per pod. Pooled
    mode updates that one RoleSet in place, which then rolls its role pods by the role's strategy:
    RollingUpdate at this level would replace the only RoleSet, every pod at once (aibrix v0.7.0
    pkg/controller/stormservice/sync.go rollingUpdate "for replica mode", inPlaceUpdate "in pooled
    mode").

    Replica mode (autoscaled): spec.replicas RoleSets of one pod each. Top-level RollingUpdate deletes
    outdated RoleSets down to spec.replicas - maxUnavailable ready ones, then creates new ones up to
    spec.replicas + maxSurge (sync.go rollingUpdate, utils.go MinAvailable/MaxSurge); with maxSurge 0 the
    pod, and GPU, count never rises. InPlaceUpdate here would update every RoleSet at once, each rolling
    its only pod: all pods down together. The role keeps maxSurge 0 too, which the budget reads.

    Switching modes changes spec.replicas, and v0.7.0 scales before it rolls out (sync.go scaling):
    at replicas 1 one RoleSet replaces one; at N, pooled -> replica starts N-1 RoleSets beside the
    pooled N pods (README: switch at replicas 1)."""
    no_surge = {"maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}
    replicas = replica_mode(model)
    return {
        "replicas": model.replicas if replicas else 1,
        "selector": {"matchLabels": selector(model)},
        # maxSurge 0 in both modes: scaling() creates RoleSets up to spec.replicas + maxSurge (stormservice/sync.go).
        "updateStrategy": {"type": "RollingUpdate" if replicas else "InPlaceUpdate", **no_surge},
        "template": {"metadata": {"labels": selector(model)}, "spec": {"roles": [{
            "name": ROLE_NAME, "replicas": 1 if replicas else model.replicas, "stateful": False,
            "updateStrategy": no_surge, "template": template}]}},
    }


def rolebasedgroup_spec(model: ServedModel, template: dict) -> dict:
    """The storage version v1alpha2: one `server` role, standalone pattern (field report 12)."""
    return {"roles": [{
        "name": ROLE_NAME, "replicas": model.replicas,
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}},
        "standalonePattern": {"template": template}}]}


@dataclass(frozen=True)
class TemplateSource:
    """The pod templates of one engine component as a pure function of its args, so the rollout key
    can rebuild them with every Output replaced by what is known in preview."""

    build: Callable[[Any], dict[str, dict]]
    args: Any

    def known_templates(self) -> dict[str, dict]:
        return self.build(known_args(self.args))


def known_args(args: Any) -> Any:
    """The args with each engine image as the stack file decides it (EngineImage.known)."""
    if isinstance(args, CombinedEngineArgs):
        return replace(args, image=args.image.as_known())
    base = getattr(args, "base", None)
    if isinstance(base, CombinedEngineArgs):
        return replace(args, base=known_args(base))
    raise TypeError(f"no engine args: {type(args).__name__}")


class CombinedEngine(Component):
    workload: pulumi.CustomResource
    route_backend: RouteBackend

    def __init__(self, name: str, args: CombinedEngineArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:combined:CombinedEngine", name, opts)
        m, ns = args.model, args.namespace
        # What the rollout key is derived from (components/rollout.py): the same builder, the same args.
        self.template_source = TemplateSource(combined_pod_templates, args)
        template = combined_pod_templates(args)[m.name]
        wait = rollout_timeouts(m)
        meta = metadata(m.name, ns, "engine")
        if m.orchestrator == "deployment":
            self.workload = k8s.apps.v1.Deployment(
                f"{name}-deployment", metadata={**meta, "annotations": {**scanner_exceptions(ENGINE_SCANNER_EXCEPTIONS),
                                                                        **workload_annotations(m)}},
                spec=deployment_spec(m, template),
                opts=self.child_opts(custom_timeouts=wait,
                                     ignore_changes=IGNORE_REPLICAS if m.autoscaling.enabled else None))
        else:
            api, kind, spec = ((AIBRIX_ORCHESTRATION_API, "StormService", stormservice_spec(m, template))
                               if m.orchestrator == "stormservice" else
                               ("workloads.x-k8s.io/v1alpha2", "RoleBasedGroup", rolebasedgroup_spec(m, template)))
            wait_for = ((stormservice_replica_wait_for() if replica_mode(m) else stormservice_wait_for())
                        if m.orchestrator == "stormservice" else rolebasedgroup_wait_for())
            # As for the Deployment: after creation the autoscaler owns the StormService's spec.replicas.
            self.workload = k8s.apiextensions.CustomResource(
                f"{name}-{m.orchestrator}", api_version=api, kind=kind,
                metadata={**meta, "annotations": {WAIT_FOR: wait_for, **workload_annotations(m)}}, spec=spec,
                opts=self.child_opts(custom_timeouts=wait,
                                     ignore_changes=IGNORE_REPLICAS if replica_mode(m) else None))
        self.route_backend = RouteBackend(
            served_model_name=m.served_model_name, service_name=service_name(m), selector=served_model_selector(m),
            port=engine_of(m).PORT, target_port="engine", service_labels=aibrix_labels(m), timeouts=wait)
        self.register_outputs({"workload": m.name})
