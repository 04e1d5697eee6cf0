"""Combined serving: one engine pod does prefill and decode (field report 5, 7, 11.1, 12).

One typed switch picks the orchestrator: a Deployment, an AIBrix StormService or an RBG
RoleBasedGroup. Each embeds the same pod template from pod_template.engine_pod_template, so probes,
mounts and GPUs are decided in one place. The AIBrix model labels go on the pods only: on the
workload itself they would make AIBrix create its own route (see components/gateway.py). The
Service and route of each served model come from the gateway component.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.autoscaling import IGNORE_REPLICAS, workload_annotations
from components.base import Component, labels, metadata
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
from components.group import group_pod_templates, spans_nodes
from components.orchestrators import engine_pod_kinds, orchestrator_of, rollout_deadline_seconds, rollout_strategy
from components.orchestrators.base import WAIT_FOR
from components.pod_template import (
    EngineContainer,
    EnginePodSpec,
    ModelMount,
    engine_pod_template,
)
from components.routing import ANN_MODEL_CONFIG, metric_port_labels, model_config, routing_strategy
from components.scanner_exceptions import ENGINE_SCANNER_EXCEPTIONS, scanner_exceptions, unscanned_pods
from components.secrets import ConsumerKeys, secret_tag_annotation
from components.topologies import gpus_per_pod, peak_replicas, pod_resources
from config_model import CompileCache, GpuPool, ServedModel
from policy.gpu_accounting import rollout_waves

ANN_AB_BASELINE = "llm-serving.io/ab-baseline"
ANN_TOPOLOGY = "llm-serving.io/topology"


def served_model_selector(model: ServedModel) -> dict[str, str]:
    """Every engine pod of a served model, whatever its topology: what its Service selects."""
    return {"llm-serving.io/model": model.name, "app.kubernetes.io/component": "engine"}


def serving_selector(model: ServedModel) -> dict[str, str]:
    """The engine pods that serve the model's API: every engine pod, or a group's leaders only (a vLLM
    worker serves no port, an SGLang worker a placeholder): what the route's Service selects."""
    return group_leader_selector(model) if spans_nodes(model) else served_model_selector(model)


def group_leader_selector(model: ServedModel) -> dict[str, str]:
    """The leaders of a model's groups: its engine pods with the labels only the orchestrator's leaders carry."""
    return {**served_model_selector(model), **orchestrator_of(model).leader_selector(model)}


def service_exceptions(model: ServedModel) -> dict[str, str]:
    """A Service of the model's engine pods: kube-score's exception when custom resources own them all."""
    return scanner_exceptions(unscanned_pods("service-targets-pod", engine_pod_kinds(model)))


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
    """The pod template of each workload CombinedEngine registers, by workload name; a model spanning nodes
    has a leader's and a workers' template (components/group.py), named <model>/leader and <model>/worker."""
    m = args.model
    if not spans_nodes(m):
        return {m.name: engine_pod_template(pod_spec(args))}
    templates = group_pod_templates(pod_spec(args), m, args.gpu_pool, args.namespace, tuple(aibrix_labels(m)))
    return {f"{m.name}/{role}": t for role, t in templates.items()}


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
        templates = combined_pod_templates(args)
        wait = rollout_timeouts(m)
        meta = metadata(m.name, ns, "engine")
        orchestrator = orchestrator_of(m)
        ignore = IGNORE_REPLICAS if orchestrator.autoscaler_owns_replicas(m) else None
        if spans_nodes(m):
            gang = args.gpu_pool.gang_scheduling
            spec = orchestrator.group_spec(m, {role: templates[f"{m.name}/{role}"] for role in ("leader", "worker")},
                                           gang)
            annotations = {WAIT_FOR: orchestrator.group_wait_for(m), **orchestrator.group_annotations(m, gang)}
        else:
            template = templates[m.name]
            spec = orchestrator.spec(m, template)
            annotations = {WAIT_FOR: orchestrator.wait_for(m)} if orchestrator.custom_resource else {}
        if not orchestrator.custom_resource:
            self.workload = k8s.apps.v1.Deployment(
                f"{name}-deployment", metadata={**meta, "annotations": {**scanner_exceptions(ENGINE_SCANNER_EXCEPTIONS),
                                                                        **workload_annotations(m)}},
                spec=spec, opts=self.child_opts(custom_timeouts=wait, ignore_changes=ignore))
        else:
            # As for the Deployment: after creation the autoscaler owns a replica-mode StormService's spec.replicas.
            self.workload = k8s.apiextensions.CustomResource(
                f"{name}-{m.orchestrator}", api_version=orchestrator.api_version, kind=orchestrator.kind,
                metadata={**meta, "annotations": {**annotations, **workload_annotations(m)}},
                spec=spec, opts=self.child_opts(custom_timeouts=wait, ignore_changes=ignore))
        # A group's route reaches its leader only (the workers of vLLM serve no port, SGLang's a placeholder).
        self.route_backend = RouteBackend(
            served_model_name=m.served_model_name, service_name=service_name(m), selector=serving_selector(m),
            port=engine_of(m).PORT, target_port="engine", service_labels=aibrix_labels(m), timeouts=wait,
            annotations=service_exceptions(m), engine=m.engine)
        self.register_outputs({"workload": m.name})
