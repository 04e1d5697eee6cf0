"""Combined serving: one engine pod does prefill and decode (field report 5 and 7), as a
Deployment plus a ClusterIP Service carrying the AIBrix discovery labels."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels, metadata
from components.engines import ENGINE_PORT, gpus_per_pod, parallel_size, vllm_command
from components.pod_template import PRE_START_ALLOWANCE_SECONDS, EnginePodSpec, ModelMount, engine_pod_template
from stacks.config import CompileCache, GpuPool, ServedModel


def aibrix_labels(model: ServedModel) -> dict[str, str]:
    """AIBrix v0.7.0 discovery labels: the name must equal the request body's `model`."""
    return {"model.aibrix.ai/name": model.served_model_name,
            "model.aibrix.ai/port": str(ENGINE_PORT[model.engine]),
            "model.aibrix.ai/engine": model.engine}


@dataclass(frozen=True)
class CombinedEngineArgs:
    namespace: str
    model: ServedModel
    gpu_pool: GpuPool
    compile_cache: CompileCache
    image: str
    model_claim_name: str
    model_mount_path: str
    api_key_secret: str
    scripts_config_map: str


def rollout_deadline_seconds(model: ServedModel) -> int:
    """Deployment progress deadline and Pulumi await timeout: the startup budget plus image pull
    and model gate. Pulumi's 10-minute default would fail every 12-minute cold start."""
    return model.startup_budget_seconds + PRE_START_ALLOWANCE_SECONDS


def strategy(model: ServedModel) -> dict:
    if model.rollout.strategy == "Recreate":
        return {"type": "Recreate"}
    # maxSurge 0: a rollout takes a pod down before it starts one, so the GPU count never rises.
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": model.rollout.max_unavailable}}


def pod_spec(args: CombinedEngineArgs) -> EnginePodSpec:
    m = args.model
    mount = ModelMount(claim_name=args.model_claim_name, mount_path=args.model_mount_path,
                       directory=m.directory, revision=m.revision, expected_shard_count=m.expected_shard_count)
    cmd = vllm_command(mount.model_path, m)
    return EnginePodSpec(
        name=m.name,
        labels={**labels(m.name, "engine"), **aibrix_labels(m)},
        image=args.image, command=cmd.command, args=cmd.args, env=cmd.env,
        port=ENGINE_PORT[m.engine], gpus=gpus_per_pod(m), parallel_size=parallel_size(m),
        gpu_pool=args.gpu_pool, model=mount, compile_cache=args.compile_cache,
        startup_budget_seconds=m.startup_budget_seconds,
        termination_grace_seconds=m.termination_grace_seconds,
        api_key_secret=args.api_key_secret, api_key_env="VLLM_API_KEY",
        scripts_config_map=args.scripts_config_map,
        annotations={"llm-serving.io/model-revision": m.revision},
    )


class CombinedEngine(Component):
    service_name: str
    endpoint: str

    def __init__(self, name: str, args: CombinedEngineArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:combined:CombinedEngine", name, opts)
        m, ns = args.model, args.namespace
        selector = {"app.kubernetes.io/name": m.name, "app.kubernetes.io/component": "engine"}
        deadline = rollout_deadline_seconds(m)
        timeout = f"{deadline}s"
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=metadata(m.name, ns, "engine", aibrix_labels(m)),
            spec={
                "replicas": m.replicas,
                "selector": {"matchLabels": selector},
                "strategy": strategy(m),
                "progressDeadlineSeconds": deadline,
                "revisionHistoryLimit": 5,
                "template": engine_pod_template(pod_spec(args)),
            },
            opts=self.child_opts(custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout)),
        )
        self.service_name = m.name
        port = ENGINE_PORT[m.engine]
        self.service = k8s.core.v1.Service(
            f"{name}-service",
            metadata=metadata(m.name, ns, "engine", aibrix_labels(m)),
            spec={"type": "ClusterIP", "selector": selector,
                  "ports": [{"name": "http", "port": port, "targetPort": "engine", "protocol": "TCP",
                             "appProtocol": "http"}]},
            opts=self.child_opts(),
        )
        self.endpoint = f"http://{m.name}.{ns}.svc.cluster.local:{port}/v1"
        self.register_outputs({"endpoint": self.endpoint, "serviceName": self.service_name})
