"""Kubernetes Secrets made from Pulumi secret config. Values stay secret Outputs end to end and
reach pods only through secretKeyRef (field report 3.2: never in YAML, images or Git)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, metadata

API_KEY_SECRET = "llm-serving-api-key"
OBJECT_STORE_SECRET = "llm-serving-object-store"
CEPH_SECRET = "llm-serving-ceph"
REGISTRY_SECRET = "llm-serving-registry"


def aws_credentials_file(access_key_id: str, secret_access_key: str) -> str:
    """The AWS CLI shared-credentials format (AWS_SHARED_CREDENTIALS_FILE)."""
    return f"[default]\naws_access_key_id = {access_key_id}\naws_secret_access_key = {secret_access_key}\n"


@dataclass(frozen=True)
class SecretsArgs:
    namespace: str
    api_key: pulumi.Output[str]
    object_store_access_key_id: pulumi.Output[str]
    object_store_secret_access_key: pulumi.Output[str]
    # (ceph user, key, driver) when the model volume is CephFS.
    ceph: tuple[str, pulumi.Output[str], str] | None = None
    # Docker config JSON for the internal registry mirror.
    registry_docker_config: pulumi.Output[str] | None = None


class ServingSecrets(Component):
    api_key_secret_name: str = API_KEY_SECRET
    object_store_secret_name: str = OBJECT_STORE_SECRET
    ceph_secret_name: str | None = None
    registry_secret_name: str | None = None

    def __init__(self, name: str, args: SecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:secrets:ServingSecrets", name, opts)
        ns = args.namespace
        self.api_key = self._secret(f"{name}-api-key", API_KEY_SECRET, ns, {"api-key": args.api_key})
        # An AWS shared-credentials file: the sync Job mounts it instead of taking keys as env vars.
        credentials = pulumi.Output.all(args.object_store_access_key_id, args.object_store_secret_access_key).apply(
            lambda keys: aws_credentials_file(*keys))
        self.object_store = self._secret(f"{name}-object-store", OBJECT_STORE_SECRET, ns, {"credentials": credentials})
        if args.ceph is not None:
            user, key, driver = args.ceph
            self.ceph_secret_name = CEPH_SECRET
            # ceph-csi reads userID/userKey; the in-tree plugin reads `key`.
            data = {"userID": pulumi.Output.secret(user), "userKey": key} if driver == "csi" else {"key": key}
            self.ceph = self._secret(f"{name}-ceph", CEPH_SECRET, ns, data)
        if args.registry_docker_config is not None:
            self.registry_secret_name = REGISTRY_SECRET
            self.registry = self._secret(f"{name}-registry", REGISTRY_SECRET, ns,
                                         {".dockerconfigjson": args.registry_docker_config},
                                         type_="kubernetes.io/dockerconfigjson")
        self.register_outputs({"apiKeySecretName": API_KEY_SECRET, "objectStoreSecretName": OBJECT_STORE_SECRET})

    def _secret(self, logical: str, name: str, namespace: str, data: dict[str, pulumi.Output[str]],
                type_: str = "Opaque") -> k8s.core.v1.Secret:
        return k8s.core.v1.Secret(
            logical,
            metadata=metadata(name, namespace, "credentials"),
            type=type_,
            string_data={k: pulumi.Output.secret(v) for k, v in data.items()},
            opts=self.child_opts(),
        )
