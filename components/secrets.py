"""Kubernetes Secrets made from Pulumi secret config. Values stay secret Outputs end to end and
reach pods only through secretKeyRef (field report 3.2: never in YAML, images or Git)."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.base import Component, metadata
from components.pod_template import API_KEY_ENTRY
from config_model.consumers import key_env_name

API_KEY_SECRET = "llm-serving-api-key"
OBJECT_STORE_SECRET = "llm-serving-object-store"
CEPH_SECRET = "llm-serving-ceph"
REGISTRY_SECRET = "llm-serving-registry"
# Every consumer's token by consumer name (issue 21): the engines read them, nothing else does.
CONSUMER_KEYS_SECRET = "llm-serving-consumer-keys"


# The pod-template annotation that names the content of a Secret the pod reads, as a tag: a rotated
# Secret changes every such template, so its controller rolls the pods (an env from secretKeyRef is
# read only at container start) and the rollout key names new smoke and warm-up Jobs (issue 18 case 3).
ANN_SECRET_TAG = "llm-serving.io/secret-tag-"


# On the Secret itself: the same tag as its readers carry.
ANN_CONTENT_TAG = "llm-serving.io/content-tag"


def secret_tag_annotation(secret_name: str) -> str:
    return f"{ANN_SECRET_TAG}{secret_name}"


def content_tag(stack: str, secret_name: str, data: dict[str, str]) -> str:
    """A short check value of a Secret's content, like a key check value: the first 32 bits of
    HMAC-SHA256 keyed with the content itself, over the stack and Secret name. Safe in plain text (pod
    annotations, plan.md, state) for the values these Secrets hold (`openssl rand -hex 32`, cloud
    access keys): 32 bits of a PRF of a 256-bit value leave 2^224 candidates, and the stack name in
    the message keeps one value's tags in two stacks or Secrets apart, so nobody can tell that dev and
    prod share a key. What it does give away: whether the content changed, and, for a guessable
    value, a way to confirm a guess offline, which the gateway's 401 already gives online. A new tag
    on a rotation is certain but for a 2^-32 chance."""
    content = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    message = f"llm-serving/{stack}/{secret_name}".encode()
    return hmac.new(content, message, hashlib.sha256).hexdigest()[:8]


@dataclass(frozen=True)
class ConsumerKeys:
    """What an engine pod needs to accept every consumer's token: the Secret, its content tag (a new,
    rotated or removed token rolls the pods, which read their env only at start), the consumer names."""

    secret: str
    tag: str
    consumers: tuple[str, ...]

    def env_refs(self) -> list[tuple[str, str]]:
        """(engine variable, Secret data key) per consumer, in stack-file order."""
        return [(key_env_name(name), name) for name in self.consumers]


def aws_credentials_file(access_key_id: str, secret_access_key: str) -> str:
    """The AWS CLI shared-credentials format (AWS_SHARED_CREDENTIALS_FILE)."""
    return f"[default]\naws_access_key_id = {access_key_id}\naws_secret_access_key = {secret_access_key}\n"


@dataclass(frozen=True)
class SecretsArgs:
    namespace: str
    stack: str
    api_key: pulumi.Output[str]
    api_key_tag: str               # content_tag of the API-key Secret: known in preview (secret config)
    # None with objectStore.workloadIdentity: the sync Job assumes a role, no key exists.
    object_store_access_key_id: pulumi.Output[str] | None
    object_store_secret_access_key: pulumi.Output[str] | None
    # (ceph user, key, driver) when the model volume is CephFS.
    ceph: tuple[str, pulumi.Output[str], str] | None = None
    # Docker config JSON for the internal registry mirror.
    registry_docker_config: pulumi.Output[str] | None = None
    # Consumer name -> its full token (policy/consumers.py consumer_token), and their content tag.
    consumer_tokens: dict[str, pulumi.Output[str]] | None = None
    consumer_keys_tag: str | None = None


class ServingSecrets(Component):
    api_key_secret_name: str = API_KEY_SECRET
    object_store_secret_name: str | None = None
    api_key_tag: str
    object_store_tag: pulumi.Output[str] | None = None  # unknown in preview while the stack's IAM access key is created
    ceph_secret_name: str | None = None
    registry_secret_name: str | None = None
    consumer_keys: ConsumerKeys | None = None

    def __init__(self, name: str, args: SecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llm-serving:secrets:ServingSecrets", name, opts)
        ns = args.namespace
        self.api_key_tag = args.api_key_tag
        self.api_key = self._secret(f"{name}-api-key", API_KEY_SECRET, ns, {API_KEY_ENTRY: args.api_key}, tag=args.api_key_tag)
        if args.object_store_access_key_id is not None and args.object_store_secret_access_key is not None:
            # An AWS shared-credentials file: the sync Job mounts it instead of taking keys as env vars.
            credentials = pulumi.Output.all(args.object_store_access_key_id, args.object_store_secret_access_key).apply(
                lambda keys: aws_credentials_file(*keys))
            # Not secret: a check value (content_tag), which must show in preview and plan.md to be of use.
            self.object_store_tag = pulumi.Output.unsecret(credentials.apply(
                lambda text: content_tag(args.stack, OBJECT_STORE_SECRET, {"credentials": text})))
            self.object_store_secret_name = OBJECT_STORE_SECRET
            self.object_store = self._secret(f"{name}-object-store", OBJECT_STORE_SECRET, ns,
                                             {"credentials": credentials}, tag=self.object_store_tag)
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
        if args.consumer_tokens:
            assert args.consumer_keys_tag is not None
            self.consumer_keys = ConsumerKeys(CONSUMER_KEYS_SECRET, args.consumer_keys_tag, tuple(args.consumer_tokens))
            self.consumer_keys_secret = self._secret(f"{name}-consumer-keys", CONSUMER_KEYS_SECRET, ns,
                                                     dict(args.consumer_tokens), tag=args.consumer_keys_tag)
        self.register_outputs({"apiKeySecretName": API_KEY_SECRET, "objectStoreSecretName": self.object_store_secret_name})

    def _secret(self, logical: str, name: str, namespace: str, data: dict[str, pulumi.Output[str]],
                type_: str = "Opaque", tag: pulumi.Input[str] | None = None) -> k8s.core.v1.Secret:
        meta: dict = metadata(name, namespace, "credentials")
        if tag is not None:
            # The Secret's own tag: a rotation shows as a changed Secret in preview and the offline render,
            # where the data itself is masked.
            meta["annotations"] = {ANN_CONTENT_TAG: tag}
        return k8s.core.v1.Secret(
            logical,
            metadata=meta,
            type=type_,
            string_data={k: pulumi.Output.secret(v) for k, v in data.items()},
            opts=self.child_opts(),
        )
