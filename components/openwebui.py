"""OpenWebUI for people (field report 10), pointed at the stable endpoint, never a Pod IP, with the
API key from the Secret. Its admin settings persist in its database and then override later
changes to these environment variables (see README)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, labels, metadata
from components.ops_commands import checked_endpoint
from components.pod_template import container_security, secret_env
from components.retention import kept, kept_annotations
from components.scanner_exceptions import scanner_exceptions, vendor_image
from components.secrets import secret_tag_annotation
from config_model import OpenWebUi
from policy.ephemeral_storage import OPENWEBUI_WRITABLE, with_ephemeral_storage

NAME = "open-webui"
PORT = 8080
SCANNER_EXCEPTIONS = {
    **vendor_image("the OpenWebUI image runs as root and is not validated as another user",
                   "OpenWebUI writes its static build and caches under /app at start"),
    "CKV_K8S_35": "OpenWebUI reads connection keys only from OPENAI_API_KEYS; a secretKeyRef env is the narrower exposure",
    # OpenWebUI serves GET /health/db beside /health (a SELECT 1 on its database), the readiness a UI wants;
    # it is in main.py both before and after v0.7.2 (open-webui PR #22507 added /ready on 2026-03-09), but
    # the source at the pinned tag could not be read here (the repository is too large to fetch), so the
    # probes stay on /health until it is.
    "pod-probes-identical": "both probes GET /health, the one route of the OpenWebUI image checked here; a "
                            "readiness path of its own is unverified at the pinned tag",
}


@dataclass(frozen=True)
class OpenWebUiArgs:
    namespace: str
    settings: OpenWebUi
    image: Any                       # pulumi.Input[str]
    endpoint: str                    # OpenAI-compatible base URL (gateway or Service), /v1
    api_key_secret: str
    api_key_tag: str                 # content_tag of that Secret: a rotation restarts the UI (issue 18 case 3)
    retained: k8s.Provider | None      # outside dev: the data claim is kept (components/retention.py)
    image_pull_secrets: tuple[str, ...] = ()


def deployment_spec(args: OpenWebUiArgs) -> dict:
    selector = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "ui"}
    pod: dict = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": NAME,
            "image": args.image,
            "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
            "env": [{"name": "OPENAI_API_BASE_URLS", "value": checked_endpoint(args.endpoint)},
                    secret_env("OPENAI_API_KEYS", args.api_key_secret),
                    {"name": "ENABLE_OLLAMA_API", "value": "false"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
            "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10},
            "livenessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 30, "failureThreshold": 5},
            "securityContext": container_security(),
            "volumeMounts": [{"name": "data", "mountPath": "/app/backend/data"}],
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": NAME}}],
    }
    if args.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in args.image_pull_secrets]
    with_ephemeral_storage(pod, {NAME: OPENWEBUI_WRITABLE})
    # One writer of a ReadWriteOnce claim: replace, never overlap.
    return {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {**labels(NAME, "ui")},
                                      "annotations": {secret_tag_annotation(args.api_key_secret): args.api_key_tag}},
                         "spec": pod}}


class OpenWebUiApp(Component):
    def __init__(self, name: str, args: OpenWebUiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:openwebui:OpenWebUI", name, opts)
        ns, s = args.namespace, args.settings
        claim: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{s.storage_gib}Gi"}}}
        if s.storage_class:
            claim["storageClassName"] = s.storage_class
        data = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-data", metadata={**metadata(NAME, ns, "ui"),
                                      "annotations": {"pulumi.com/skipAwait": "true", **kept_annotations(args.retained)}},
            spec=claim, opts=self.child_opts(**kept(args.retained)))
        k8s.apps.v1.Deployment(f"{name}-deployment",
                               metadata={**metadata(NAME, ns, "ui"), "annotations": scanner_exceptions(SCANNER_EXCEPTIONS)},
                               spec=deployment_spec(args),
                               opts=self.child_opts(depends_on=[data]))
        k8s.core.v1.Service(
            f"{name}-service", metadata=metadata(NAME, ns, "ui"),
            spec={"type": "ClusterIP", "selector": {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "ui"},
                  "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]},
            opts=self.child_opts())
        # Users reach the UI through an Ingress or port-forward; the namespace denies ingress by default.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-ingress", metadata=metadata("llm-serving-open-webui-ingress", ns, "network-policy"),
            spec={"podSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}}, "policyTypes": ["Ingress"],
                  "ingress": [{"ports": [{"protocol": "TCP", "port": PORT}]}]},
            opts=self.child_opts())
        self.register_outputs({"service": f"http://{NAME}.{ns}.svc.cluster.local"})
