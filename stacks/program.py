"""Compose one stack: validated config -> components -> outputs. Called by __main__.py under
`pulumi up` and by the offline render under the mock runtime, so both build the same thing."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pulumi
import pulumi_kubernetes as k8s

from components.autoscaling import AutoscalerArgs, ModelAutoscaler, autoscaling_switch, can_autoscale
from components.base import labels
from components.combined import CombinedEngine, CombinedEngineArgs, TemplateSource
from components.dashboards import DashboardArgs, DashboardModel, GrafanaDashboards
from components.disaggregated import (
    ANN_MODEL_CONFIG,
    DisaggregatedArgs,
    DisaggregatedEngine,
    SamePodPdEngine,
    model_config,
)
from components.engines import profile_of, with_speculative_decoding
from components.gateway import ModelRoutes, ModelRoutesArgs, RouteBackend
from components.gateway_policies import ConsumerLimit, RateLimits
from components.group import spans_nodes
from components.images import ImageMirror, ImageMirrorArgs
from components.monitoring import EngineMonitoring, MonitoringArgs
from components.network import ClientTarget, NetworkArgs, NetworkPolicies, model_groups
from components.network_egress import egress_args
from components.network_exceptions import policy_exceptions
from components.openwebui import OpenWebUiApp, OpenWebUiArgs
from components.operations import BenchResults, ModelOperations, OperationsArgs
from components.ops_commands import gateway_endpoint
from components.platform import ClusterPrerequisites
from components.pod_template import API_KEY_ENTRY
from components.prepull import ImagePrePull, ImagePrePullArgs, prepull_pools
from components.prepull import engine_image_keys as prepull_image_keys
from components.providers import make_providers
from components.retention import kept
from components.rollout import engine_templates, rollout_key
from components.routing_layers import routing_layer, through_known_proxies
from components.routing_layers.inference_pool import EPP_IMAGE_KEY, pool_name
from components.scripts import ModelScripts
from components.secrets import API_KEY_SECRET, CONSUMER_KEYS_SECRET, SecretsArgs, ServingSecrets, content_tag
from components.storage import ModelStore, ModelStoreArgs
from components.sync_job import ModelSyncArgs, ModelSyncJob, ObjectStoreCa
from components.sync_job import job_name as sync_job_name
from components.topologies import roleset_name, topology_of
from components.topologies.base import FLEET_IMAGE_KEY
from components.volume import CompileCacheClaim, ModelVolumeArgs, ModelVolumeClaims
from config_model import Environment, ServedModel, StackConfig, derived
from config_model.resources import model_node_label_keys
from policy.consumers import consumer_token, key_prefix
from policy.engines import engine_named, vllm
from stacks import exports, loader, rules, transitions


def engine_models(cfg: StackConfig) -> list[ServedModel]:
    """The models as the engines are built. The DSpark arm of an A/B pair is the target-only arm
    with DSpark switched on and its own name: both arms come from the same arguments, so they can
    differ in nothing else (field report 5, 8.1, 12.5). The config rules have already refused a
    declared arm that differs in more."""
    by_name = {m.name: m for m in cfg.models}
    return [m if m.dspark_of is None else with_speculative_decoding(by_name[m.dspark_of], on=True).model_copy(
        update={"name": m.name, "served_model_name": m.served_model_name, "dspark_of": m.dspark_of})
        for m in cfg.models]


STACK_FACTS = "llm-serving:stack:Facts"
CONTRACT_VERSION = exports.CONTRACT_VERSION  # docs/exports.md; stacks/exports.py says what each version changed


@dataclass(frozen=True)
class StackSecrets:
    api_key: pulumi.Output[str]
    # content_tag of the API-key Secret, from the plain config value: known in preview (the CLI hands
    # the program its secret config decrypted), so the Job names it reaches are known too.
    api_key_tag: str
    kubeconfig: pulumi.Output[str] | None = None
    object_store_access_key_id: pulumi.Output[str] | None = None
    object_store_secret_access_key: pulumi.Output[str] | None = None
    ceph_user_key: pulumi.Output[str] | None = None
    registry_docker_config: pulumi.Output[str] | None = None
    # Consumer name -> its token (policy/consumers.py), and the content tag of their Secret (issue 21).
    consumer_tokens: dict[str, pulumi.Output[str]] | None = None
    consumer_keys_tag: str | None = None


def read_secrets(cfg: StackConfig) -> StackSecrets:
    c = pulumi.Config(loader.NAMESPACE)
    # Only the declared consumers' keys: a key left in config for a removed consumer is revoked.
    secrets = (c.get_object("consumerKeys") or {}) if cfg.consumers else {}
    tokens = {x.name: consumer_token(x.name, secrets[x.name]) for x in cfg.consumers}
    return StackSecrets(
        api_key=c.require_secret("apiKey"),
        api_key_tag=content_tag(pulumi.get_stack(), API_KEY_SECRET, {API_KEY_ENTRY: c.require("apiKey")}),
        kubeconfig=c.get_secret("kubeconfig"),
        object_store_access_key_id=c.get_secret("objectStoreAccessKeyId"),
        object_store_secret_access_key=c.get_secret("objectStoreSecretAccessKey"),
        ceph_user_key=c.get_secret("cephUserKey"),
        registry_docker_config=c.get_secret("registryDockerConfigJson"),
        consumer_tokens={n: pulumi.Output.secret(t) for n, t in tokens.items()} or None,
        consumer_keys_tag=content_tag(pulumi.get_stack(), CONSUMER_KEYS_SECRET, tokens) if tokens else None,
    )


def _engines_of(m: ServedModel, base: CombinedEngineArgs, cfg: StackConfig, images: ImageMirror,
                opts: pulumi.ResourceOptions, workload_images: dict
                ) -> tuple[RouteBackend, list[pulumi.Resource], list[TemplateSource]]:
    """Register the workloads of one served model as its topology says (components/topologies);
    return what its route points at, the components that must be ready before the day-2 Jobs run,
    and their pod templates' sources."""
    t = topology_of(m)
    refs = images.references
    ready: list[pulumi.Resource] = []
    sources: list[TemplateSource] = []
    if t.fleets:
        ray = cfg.images.vllm_ray
        assert ray is not None
        pd_base = replace(base, image=images.engine_image(FLEET_IMAGE_KEY), image_digest=ray.digest,
                          image_cuda_version=ray.cuda_version)
        # Beside the model's own workload, a '.' keeps the name apart: it cannot occur in a model name (a
        # DNS label), so no other model's components can take it (`X-pd` collided with the pd model `X-pd`).
        fleets = DisaggregatedEngine(f"{m.name}.pd" if t.model_workload else m.name, DisaggregatedArgs(base=pd_base),
                                     ray.ray_version, opts)
        for side in derived.FLEET_SIDES:
            workload_images[derived.fleet_name(m.name, side)] = {"engine": refs[FLEET_IMAGE_KEY],
                                                                 "model-gate": refs[FLEET_IMAGE_KEY]}
        if not t.model_workload:
            return fleets.route_backend, [fleets], [fleets.template_source]
        ready.append(fleets)
        sources.append(fleets.template_source)
    if t.same_pod:
        same_pod = SamePodPdEngine(m.name, base, opts)
        workload_images[m.name] = {c: refs[m.engine] for c in ("prefill", "decode", "proxy", "model-gate")}
        return same_pod.route_backend, [same_pod], [same_pod.template_source]
    routing_config = t.combined_routing_config(m)
    if routing_config is not None:
        # The combined pods of a P/D roleset's model: strategy pd, marked as the fallback (11.5).
        base = replace(base, extra_pod_labels=t.combined_pod_labels(m),
                       extra_pod_annotations=((ANN_MODEL_CONFIG, model_config(routing_config)),))
    switch = None
    if can_autoscale(m):
        # Before the workload, on or off: flipping it deletes the PodAutoscaler before the workload's
        # update (components/autoscaling.py). A '.' keeps the name apart from every model's components.
        switch = autoscaling_switch(f"{m.name}.autoscaling-switch", base.namespace, m, opts)
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[switch]))
    engine = CombinedEngine(m.name, base, opts)
    # The engine image also runs the model gate init container.
    image_key = engine_named(m.engine).IMAGE_KEY
    workload_images[m.name] = {"engine": refs[image_key], "model-gate": refs[image_key]}
    if m.autoscaling.enabled:
        assert switch is not None
        # After its target: a Deployment, or a StormService in replica mode (stacks/rules/capacity.py autoscaling_bounds).
        ModelAutoscaler(f"{m.name}.autoscaler", AutoscalerArgs(namespace=base.namespace, model=m, target=engine.workload,
                                                              switch=switch), opts)
    return engine.route_backend, ready + [engine], sources + [engine.template_source]


def client_namespaces(cfg: StackConfig) -> list[dict]:
    """networkPolicy.clients and every consumer's namespaces, each selector once, in stack-file order."""
    out: list[dict] = []
    for sel in cfg.network_policy.clients.namespace_selectors_of_all() + [c.namespace_selector_of() for c in cfg.consumers]:
        if sel not in out:
            out.append(sel)
    return out


def engine_image_keys(cfg: StackConfig) -> list[str]:
    """The stack-file keys of every image an engine pod of the stack runs, one per distinct reference."""
    return prepull_image_keys(engine_models(cfg), cfg.images.named())


def _operations(cfg: StackConfig, ns: str, routes: ModelRoutes, rolled_out: list, images: ImageMirror,
                secrets: ServingSecrets, scripts: ModelScripts, volume: ModelVolumeClaims,
                retained: k8s.Provider | None, opts: pulumi.ResourceOptions) -> None:
    """Smoke, warm-up and load-test Jobs per served model after its rollout; monitoring; OpenWebUI."""
    ops = cfg.operations
    refs = images.references
    results = None
    if ops.load_test.enabled:
        results = BenchResults("bench-results", ns, ops.load_test.results_size_gib, ops.load_test.storage_class,
                               retained, opts)
    for m, ready, key in rolled_out:
        ModelOperations(f"ops-{m.name}", OperationsArgs(
            namespace=ns, model=m, endpoint=routes.endpoints[m.served_model_name], operations=ops,
            gpu_pool=cfg.gpu_pool, model_label_keys=model_node_label_keys(cfg.models),
            python_image=refs["modelVerify"], bench_image=refs.get(vllm.IMAGE_KEY), revision_key=key,
            api_key_secret=secrets.api_key_secret_name, scripts_config_map=scripts.config_map_name,
            model_claim_name=volume.serving_claim_name, model_mount_path=cfg.model_volume.mount_path,
            image_pull_secrets=tuple(images.pull_secrets), results_claim=results.claim_name if results else None,
            gateway_endpoint=gateway_endpoint(cfg.gateway.namespace, cfg.gateway.name, cfg.gateway.proxy_namespace)
            if through_known_proxies(cfg.gateway) else None),
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                depends_on=[*ready, routes, *([results] if results else [])])))
    if ops.monitoring.enabled:
        EngineMonitoring("monitoring", MonitoringArgs(namespace=ns, monitoring=ops.monitoring,
                                                      endpoint_pickers=cfg.gateway.inference_pools), opts)
        if ops.monitoring.dashboards.enabled:
            GrafanaDashboards("dashboards", DashboardArgs(namespace=ns, monitoring=ops.monitoring, models=tuple(
                DashboardModel(m.served_model_name, nixl=topology_of(m).transfers_kv)
                for m in cfg.models)), opts)
    if ops.open_webui.enabled:
        primary = cfg.models[0].served_model_name
        OpenWebUiApp("open-webui", OpenWebUiArgs(
            namespace=ns, settings=ops.open_webui, image=refs["openWebUI"],
            endpoint=routes.external_endpoint or routes.endpoints[primary],
            api_key_secret=secrets.api_key_secret_name, api_key_tag=secrets.api_key_tag, retained=retained,
            image_pull_secrets=tuple(images.pull_secrets)), opts)


def build(cfg: StackConfig, secrets: StackSecrets) -> dict[str, pulumi.Input]:
    """Register every resource of the stack and return the stack outputs (flat camelCase keys)."""
    # What the policy pack needs and cannot see in any one resource. Registered first: the engine
    # analyzes resources in registration order, so the pack knows the budget and the environment
    # before the first GPU workload or bucket (policy/pack.py Operation). Per-resource analysis sees
    # these inputs; stack analysis sees a component's outputs, hence register_outputs with the same.
    stack_facts = {"gpuBudget": cfg.gpu_budget, "environment": cfg.environment.value}
    facts = pulumi.ComponentResource(STACK_FACTS, "stack-facts", stack_facts)
    facts.register_outputs(stack_facts)
    providers = make_providers(cfg, secrets.kubeconfig, secrets.object_store_access_key_id,
                               secrets.object_store_secret_access_key)
    opts = providers.opts()
    ns = cfg.namespace
    protect_data = cfg.environment != Environment.dev

    # Outside dev, the objects whose data outlives a feature or the stack are kept and adopted again
    # (components/retention.py): the Namespace, the bench-results, OpenWebUI and compile-cache claims.
    retained = providers.retained() if protect_data and (
        cfg.cluster.create_namespace or cfg.operations.load_test.enabled or cfg.operations.open_webui.enabled
        or cfg.compile_cache.kind == "claim") else None

    depends: list[pulumi.Resource] = []
    if cfg.cluster.create_namespace:
        # Retained, not protected: deleting a Namespace deletes every object in it, the claims Pulumi no
        # longer manages (a switched-off load test's results) and those it never did. `pulumi destroy`
        # then removes what it manages and leaves the Namespace with whatever else is in it.
        depends.append(k8s.core.v1.Namespace(
            "namespace", metadata={"name": ns, "labels": labels(ns, "namespace")},
            opts=pulumi.ResourceOptions(**kept(retained)) if retained else opts))
    if cfg.platform.install:
        # Custom resources of the stack need the CRDs these bring.
        depends.append(ClusterPrerequisites("platform", cfg.platform, opts, inference_pool=cfg.gateway.inference_pools))
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))

    store = ModelStore("model-store", ModelStoreArgs(
        store=cfg.object_store, model_prefixes=[m.object_prefix for m in cfg.models],
        protect_data=protect_data, user_name=derived.iam_user_name(ns, pulumi.get_stack()), namespace=ns), opts)

    ceph = None
    if cfg.model_volume.kind == "cephfs":
        assert cfg.model_volume.cephfs is not None and secrets.ceph_user_key is not None
        ceph = (cfg.model_volume.cephfs.user, secrets.ceph_user_key, cfg.model_volume.cephfs.driver)
    # A key: the stack's IAM user's, or from secret config; none with a workload identity.
    keyed = store.service_account is None
    access_key_id = (store.access_key_id or secrets.object_store_access_key_id) if keyed else None
    secret_access_key = (store.secret_access_key or secrets.object_store_secret_access_key) if keyed else None
    serving_secrets = ServingSecrets("secrets", SecretsArgs(
        namespace=ns, stack=pulumi.get_stack(), api_key=secrets.api_key, api_key_tag=secrets.api_key_tag, object_store_access_key_id=access_key_id,
        object_store_secret_access_key=secret_access_key, ceph=ceph,
        registry_docker_config=secrets.registry_docker_config if cfg.images.mirror.kind == "registry" else None,
        consumer_tokens=secrets.consumer_tokens, consumer_keys_tag=secrets.consumer_keys_tag), opts)

    volume = ModelVolumeClaims("model-volume", ModelVolumeArgs(
        volume=cfg.model_volume, namespace=ns, ceph_secret_name=serving_secrets.ceph_secret_name),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[serving_secrets])))
    scripts = ModelScripts("model-scripts", ns, {m.directory: profile_of(m).REQUIRED_FILES for m in cfg.models}, opts)
    images = ImageMirror("images", ImageMirrorArgs(
        images=cfg.images, namespace=ns, gpu_pool=cfg.gpu_pool, model_label_keys=model_node_label_keys(cfg.models),
        pull_secret_name=serving_secrets.registry_secret_name, scripts_config_map=scripts.config_map_name,
        named=cfg.all_images(), aws_region=cfg.object_store.region),
        pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[serving_secrets, scripts])))
    pull_secrets = images.pull_secrets

    if cfg.operations.image_pre_pull.enabled:
        # Beside the sync Jobs, not after them: both wait only for the images (a registry mirror is
        # filled first) and the pull secrets; the engines wait for the sync, never for this.
        ImagePrePull("image-prepull", ImagePrePullArgs(
            namespace=ns, gpu_pool=cfg.gpu_pool,
            images={key: images.references[key] for key in engine_image_keys(cfg)},
            pools=prepull_pools(engine_models(cfg), cfg.images.named(), cfg.gpu_pool),
            image_pull_secrets=pull_secrets),
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[serving_secrets, images])))

    # The compile cache's claim, when the stack makes it: before the engine pods that mount it.
    engines_after: list[pulumi.Resource] = [images]
    if cfg.compile_cache.kind == "claim":
        engines_after.append(CompileCacheClaim("compile-cache", ns, cfg.compile_cache, retained, opts))

    backends: list[RouteBackend] = []
    rolled_out: list[tuple[ServedModel, list[pulumi.Resource], str]] = []
    syncs: dict[str, ModelSyncJob] = {}
    ca = (ObjectStoreCa("object-store-ca", ns, cfg.object_store.ca_bundle, opts)
          if cfg.object_store.ca_bundle is not None else None)
    sync_opts = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(depends_on=[volume, scripts, serving_secrets, store, images, *([ca] if ca else [])]))
    workload_images: dict[str, dict[str, pulumi.Input[str]]] = {}
    for m in engine_models(cfg):
        if m.directory not in syncs:
            # Named after what it syncs (directory, prefix, revision: its Job name), not after the
            # first model that uses the directory: reordering models must not rename it.
            syncs[m.directory] = ModelSyncJob(sync_job_name(m), ModelSyncArgs(
                namespace=ns, model=m, store=cfg.object_store, sync=cfg.model_sync, gpu_pool=cfg.gpu_pool,
                model_label_keys=model_node_label_keys(cfg.models),
                bucket_name=cfg.object_store.bucket_name, sync_claim_name=volume.sync_claim_name,
                credentials_secret=serving_secrets.object_store_secret_name,
                credentials_tag=serving_secrets.object_store_tag,
                scripts_config_map=scripts.config_map_name,
                sync_image=images.references["modelSync"], verify_image=images.references["modelVerify"],
                image_pull_secrets=pull_secrets, service_account=store.service_account, role_arn=store.role_arn,
                pod_identity=store.pod_identity, ca_config_map=ca.config_map_name if ca else None,
                revisions_in_use=tuple(sorted({o.revision for o in engine_models(cfg) if o.directory == m.directory}))),
                sync_opts)
            workload_images[exports.sync_workload_key(m.directory)] = {
                "download": images.references["modelSync"], "verify": images.references["modelVerify"]}
        # P/D fleets need Ray in the image; every other engine pod runs the engine's own image.
        image_key = topology_of(m).engine_image_key(m)
        image_ref = cfg.images.named()[image_key]
        base = CombinedEngineArgs(
            namespace=ns, model=m, gpu_pool=cfg.gpu_pool, compile_cache=cfg.compile_cache,
            image=images.engine_image(image_key), image_digest=image_ref.digest,
            image_cuda_version=image_ref.cuda_version, model_claim_name=volume.serving_claim_name,
            model_mount_path=cfg.model_volume.mount_path,
            api_key_secret=serving_secrets.api_key_secret_name, api_key_tag=serving_secrets.api_key_tag,
            scripts_config_map=scripts.config_map_name, image_pull_secrets=tuple(pull_secrets),
            ab_baseline=m.dspark_of, drain_timeout_seconds=cfg.gateway.longest_request_seconds,
            consumer_keys=serving_secrets.consumer_keys)
        # GPU pods are created only after the weights are verified: no GPU idles through a download
        # (field report 3.2, optimization 3).
        engine_opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[syncs[m.directory],
                                                                                          *engines_after]))
        backend, ready, sources = _engines_of(m, base, cfg, images, engine_opts, workload_images)
        backends.append(backend)
        # From the pod templates as built (components/rollout.py): whatever reaches one re-runs the
        # day-2 Jobs, and nothing else does (sizeGiB, replicas, the autoscaler, the update strategy).
        rolled_out.append((m, ready, rollout_key(ns, engine_templates(sources))))

    # Each consumer's limit, selected at the gateway by its token's public prefix (issue 21).
    rate_limits = RateLimits(consumers=tuple(ConsumerLimit(c.name, key_prefix(c.name), c.requests_per_minute)
                                             for c in cfg.consumers),
                             default_requests_per_minute=cfg.gateway.default_requests_per_minute)
    routes = ModelRoutes("routes", ModelRoutesArgs(namespace=ns, gateway=cfg.gateway, backends=backends,
                                                   rate_limits=rate_limits,
                                                   endpoint_picker_image=images.references.get(EPP_IMAGE_KEY),
                                                   image_pull_secrets=tuple(pull_secrets)), opts)
    if cfg.network_policy.enabled:
        ops_monitoring = cfg.operations.monitoring
        # Peers by namespace and upstream pod labels, ports by container port name (network.py).
        # The Gateway's proxies as the layer knows them; without the gateway no rule admits them (and
        # gateway.implementation may be unset).
        layer, gw_on = routing_layer(cfg.gateway.routing_layer), cfg.gateway.enabled
        proxy_namespace = layer.proxy_namespace(cfg.gateway) if gw_on else cfg.gateway.proxy_namespace
        proxy_labels = layer.proxy_labels(cfg.gateway) if gw_on else {}
        network = NetworkArgs(
            namespace=ns, gateway_namespace=cfg.gateway.namespace if cfg.gateway.enabled else None,
            gateway_name=cfg.gateway.name, gateway_proxy_namespace=proxy_namespace,
            prometheus_namespace=ops_monitoring.prometheus_namespace if ops_monitoring.enabled else None,
            rolesets=[roleset_name(m) for m in cfg.models if topology_of(m).fleets],
            aibrix_namespace=cfg.gateway.namespace,
            autoscaled_models=[m.name for m in cfg.models if m.autoscaling.enabled],
            client_namespaces=client_namespaces(cfg),
            groups=[model_groups(m) for m in cfg.models if spans_nodes(m)],
            egress=egress_args(cfg, engine_models(cfg), backends),
            routing_layer=cfg.gateway.routing_layer, gateway_proxy_labels=proxy_labels,
            pools=tuple(pool_name(b) for b in backends) if cfg.gateway.inference_pools else (),
            client_targets=[] if through_known_proxies(cfg.gateway) else [
                ClientTarget(b.service_name, b.selector, b.target_port) for b in backends])
        clients = {b.service_name: m.name for m, b in zip(engine_models(cfg), backends)}
        NetworkPolicies("network", replace(network, annotations=policy_exceptions(network, engine_models(cfg), clients)), opts)

    _operations(cfg, ns, routes, rolled_out, images, serving_secrets, scripts, volume, retained, opts)

    return exports.outputs(cfg, engine_models(cfg), routes, images.references, bucket_name=store.bucket_name,
                           model_claim_name=volume.serving_claim_name, workload_images=workload_images,
                           api_key=secrets.api_key, consumer_tokens=secrets.consumer_tokens or {})


def run() -> dict[str, pulumi.Input]:
    """Validate the running stack's config (raising loader.ConfigError before any resource is
    registered), then build it."""
    cfg = loader.from_pulumi()
    transition = plan_transition(cfg)
    secrets = read_secrets(cfg)
    for note in transition.notes():
        pulumi.log.warn(note)
    transitions.install(transition)
    return build(cfg, secrets)


def plan_transition(cfg: StackConfig) -> transitions.Transition:
    """How this update's GPU workloads take over from the last deployment's (stacks/transitions.py).
    Raises loader.ConfigError, before any resource is registered, when one update cannot do it."""
    stack_file = loader.stack_file_name(pulumi.get_stack())
    transition = transitions.plan(
        transitions.gpu_workloads_of(transitions.read_previous()),
        transitions.planned_workloads(cfg, engine_models(cfg)), cfg.gpu_budget, rules.gpu_total(cfg))
    if transition.refusals:
        raise loader.ConfigError(stack_file, [loader.FileProblem(path=f"{loader.NAMESPACE}:models", value=None,
                                                                 allowed=r) for r in transition.refusals])
    return transition
