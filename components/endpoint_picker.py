"""One endpoint picker (EPP) per InferencePool: the Gateway API Inference Extension's picker that a
conformant gateway asks over ext_proc which pod of the pool serves a request.

The picker is GIE v1.5.0's (policy/endpoint_picker.py says why that release and cites every fact):
one replica with the Recreate strategy, as the release's chart deploys it (config/charts/epplib
templates/_deployment.yaml: its prefix-cache scorer keeps its index in memory, so two replicas would
each hold half of it and a rolling update would keep the old leader), reading the pool and its pods
through the API server with the namespaced Role below, and the engines' own metrics at podIP:port
/metrics. Its config (an EndpointPickerConfig) is a ConfigMap mounted read-only; a change of it rolls
the picker, never an engine.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.base import Component, labels, metadata
from components.pod_template import NON_ROOT_UID, container_security
from components.scanner_exceptions import DIGEST_PINNED, scanner_exceptions
from config_model import derived
from policy import endpoint_picker as epp
from policy.ephemeral_storage import SIDECAR_WRITABLE, with_ephemeral_storage

COMPONENT = "endpoint-picker"
CONTAINER = "epp"
SCANNER_EXCEPTIONS = {
    **DIGEST_PINNED,
    # The picker reads InferencePools and Pods through the API server (its Role, namespaced).
    "CKV_K8S_38": "the endpoint picker watches its InferencePool and the pool's pods through the API server",
}


def picker_name(pool: str) -> str:
    return derived.bounded(f"{pool}-epp")


def selector(pool: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": picker_name(pool), "app.kubernetes.io/component": COMPONENT}


@dataclass(frozen=True)
class EndpointPickerArgs:
    namespace: str
    pool: str                        # the InferencePool this picker serves (its own namespace)
    engine: str                      # vllm | sglang: which metric names it scores on
    image: Any                       # pulumi.Input[str], digest-pinned through the mirror
    image_pull_secrets: tuple[str, ...] = ()


def config_document(engine: str) -> str:
    return yaml.safe_dump(epp.picker_config(engine), sort_keys=False)


def deployment_spec(args: EndpointPickerArgs, config_map: str) -> dict:
    name = picker_name(args.pool)
    pod: dict = {
        "serviceAccountName": name,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                            "runAsUser": NON_ROOT_UID, "runAsGroup": NON_ROOT_UID},
        "terminationGracePeriodSeconds": epp.TERMINATION_GRACE_PERIOD_SECONDS,
        "containers": [{
            "name": CONTAINER,
            "image": args.image,
            "args": epp.picker_args(args.engine, args.pool, args.namespace, f"{epp.CONFIG_MOUNT}/{epp.CONFIG_FILE}"),
            "ports": [{"name": "grpc", "containerPort": epp.GRPC_PORT, "protocol": "TCP"},
                      {"name": "grpc-health", "containerPort": epp.HEALTH_PORT, "protocol": "TCP"},
                      {"name": "metrics", "containerPort": epp.METRICS_PORT, "protocol": "TCP"}],
            "env": copy.deepcopy(epp.ENV),
            "resources": copy.deepcopy(epp.CONTAINER_RESOURCES),
            "livenessProbe": copy.deepcopy(epp.LIVENESS_PROBE),
            "readinessProbe": copy.deepcopy(epp.READINESS_PROBE),
            "securityContext": container_security(non_root=True),
            "volumeMounts": [{"name": "config", "mountPath": epp.CONFIG_MOUNT, "readOnly": True}],
        }],
        "volumes": [{"name": "config", "configMap": {"name": config_map}}],
    }
    if args.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in args.image_pull_secrets]
    with_ephemeral_storage(pod, {CONTAINER: SIDECAR_WRITABLE})
    return {"replicas": epp.REPLICAS, "strategy": dict(epp.STRATEGY), "selector": {"matchLabels": selector(args.pool)},
            "template": {"metadata": {"labels": {**labels(name, COMPONENT)}}, "spec": pod}}


class EndpointPicker(Component):
    service_name: str
    grpc_port: int

    def __init__(self, name: str, args: EndpointPickerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:gateway:EndpointPicker", name, opts)
        ns, picker = args.namespace, picker_name(args.pool)
        account = k8s.core.v1.ServiceAccount(f"{name}-account", metadata=metadata(picker, ns, COMPONENT),
                                             automount_service_account_token=True, opts=self.child_opts())
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=metadata(picker, ns, COMPONENT),
                                rules=[dict(r) for r in epp.ROLE_RULES], opts=self.child_opts())
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-binding", metadata=metadata(picker, ns, COMPONENT),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": picker},
            subjects=[{"kind": "ServiceAccount", "name": picker, "namespace": ns}],
            opts=self.child_opts(depends_on=[role, account]))
        config = k8s.core.v1.ConfigMap(f"{name}-config", metadata=metadata(picker, ns, COMPONENT),
                                       data={epp.CONFIG_FILE: config_document(args.engine)}, opts=self.child_opts())
        k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata={**metadata(picker, ns, COMPONENT),
                                            "annotations": scanner_exceptions(SCANNER_EXCEPTIONS)},
            spec=deployment_spec(args, picker), opts=self.child_opts(depends_on=[binding, config]))
        k8s.core.v1.Service(
            f"{name}-service", metadata=metadata(picker, ns, COMPONENT),
            spec={"type": "ClusterIP", "selector": selector(args.pool),
                  # The chart's port names (epplib _service.yaml): Istio reads the protocol from the prefix.
                  "ports": [{"name": "grpc-ext-proc", "port": epp.GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                            {"name": "http-metrics", "port": epp.METRICS_PORT, "targetPort": "metrics",
                             "protocol": "TCP"}]},
            opts=self.child_opts())
        self.service_name = picker
        self.grpc_port = epp.GRPC_PORT
        self.register_outputs({"service": picker})
