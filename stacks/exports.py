"""The stack outputs: the versioned contract of docs/exports.md, built from what the program
registered. Other teams read these with a StackReference (examples/consumer/)."""

from __future__ import annotations

import pulumi

from components.gateway import ModelRoutes
from components.ops_commands import gateway_endpoint
from components.platform import required_versions
from components.routing_layers import through_known_proxies
from components.topologies import topology_of
from config_model import ServedModel, StackConfig
from policy.engines import engine_named
from stacks import rules

# Version of the stack outputs contract (docs/exports.md): bump it when a key changes meaning or goes.
# 2: workloadImages keys a sync Job by its directory (`sync/<directory>`), no longer by its Job name,
# which changed with every revision; `models` and the secret `apiKey` are new.
# 3: `consumers` and one secret `consumerToken/<name>` per consumer (issue 21) are new.
CONTRACT_VERSION = 3


def consumer_token_key(name: str) -> str:
    """The secret output holding a consumer's token: apart from every plain key by its '/'."""
    return f"consumerToken/{name}"


def sync_workload_key(directory: str) -> str:
    """The workloadImages key of a model directory's sync Job: stable across revisions (the Job's own
    name hashes the revision in), and apart from every engine key, since neither a model name nor a
    directory holds a '/'."""
    return f"sync/{directory}"


def model_url(cfg: StackConfig, routes: ModelRoutes, m: ServedModel) -> str:
    """The in-cluster base URL a consumer calls for this model: the gateway's Envoy Service where there
    is a gateway (AIBrix reads `model` from the request body), on the inferencePool layer the Gateway's
    Service where the stack names it (gateway.inClusterEndpoint), else the model's own Service."""
    if through_known_proxies(cfg.gateway):
        return gateway_endpoint(cfg.gateway.namespace, cfg.gateway.name, cfg.gateway.proxy_namespace)
    if cfg.gateway.inference_pools and cfg.gateway.in_cluster_endpoint:
        return f"{cfg.gateway.in_cluster_endpoint}/v1"
    return routes.endpoints[m.served_model_name]


def per_model(cfg: StackConfig, models: list[ServedModel], routes: ModelRoutes,
              references: dict[str, pulumi.Input[str]]) -> dict[str, dict]:
    """Model name (never changes with a revision) -> what a consumer needs to call it; `models` as
    the engines are built (stacks/program.py engine_models: a DSpark arm as its baseline runs)."""
    return {m.name: {
        "servedModelName": m.served_model_name,
        "url": model_url(cfg, routes, m),
        "externalUrl": routes.external_endpoint or "",
        "engine": m.engine,
        "topology": m.topology,
        # The image of the model's own engine pods, or of its P/D fleets where it has no other.
        "engineImage": references[topology_of(m).engine_image_key(m)],
    } for m in models}


def outputs(cfg: StackConfig, models: list[ServedModel], routes: ModelRoutes,
            references: dict[str, pulumi.Input[str]], *,
            bucket_name: pulumi.Input[str], model_claim_name: str, workload_images: dict,
            api_key: pulumi.Output[str], consumer_tokens: dict[str, pulumi.Output[str]]) -> dict[str, pulumi.Input]:
    primary = cfg.models[0]
    tokens = {consumer_token_key(name): pulumi.Output.secret(token) for name, token in consumer_tokens.items()}
    return {**tokens,
        "contractVersion": CONTRACT_VERSION,
        "endpoint": routes.endpoints[primary.served_model_name],
        # The SDK drops an output that is None before the engine sees it (pulumi/runtime/rpc.py
        # serialize_properties: "properties that serialize to None" do not exist), so an unset
        # optional value is exported as "" and every key of docs/exports.md is always there.
        "externalEndpoint": routes.external_endpoint or "",
        "servedModelName": primary.served_model_name,
        "topology": primary.topology,
        "endpoints": routes.endpoints,
        "models": per_model(cfg, models, routes, references),
        # Secret on the wire and in the state (a StackReference reader gets it secret too); the render
        # and `pulumi stack output` show it as [secret] unless asked with --show-secrets.
        "apiKey": pulumi.Output.secret(api_key),
        "namespace": cfg.namespace,
        "bucketName": bucket_name,
        "modelClaimName": model_claim_name,
        "engineImage": references[engine_named(primary.engine).IMAGE_KEY],
        "modelSyncImage": references["modelSync"],
        "modelVerifyImage": references["modelVerify"],
        "vllmRayImage": references.get("vllmRay") or "",
        "workloadImages": workload_images,
        "prerequisites": required_versions(cfg.platform, cfg.models, inference_pool=cfg.gateway.inference_pools),
        "gpuTotal": rules.gpu_total(cfg),
        "gpuBudget": cfg.gpu_budget,
        # Per consumer: the output holding its token, its limit and its namespaces (the URLs are `models`').
        "consumers": {c.name: {"tokenOutput": consumer_token_key(c.name), "requestsPerMinute": c.requests_per_minute,
                               "namespaceSelector": c.namespace_selector_of()} for c in cfg.consumers},
    }
