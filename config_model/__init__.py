"""The typed stack configuration: one pydantic model of everything a stack file may say.

Nearly a leaf: of the program's own it imports only the policy pack's stdlib-only rule modules (the
name and label rules, policy/k8s_names.py, which the pack and the render share), so components
take their argument types from here and stacks/ (loading, rules, composition) depends on both
without a cycle.
"""

from config_model.infra import (
    CephFsVolume,
    Cluster,
    CompileCache,
    EcrMirror,
    Environment,
    ExistingClaim,
    GpuPool,
    ImageRef,
    Images,
    Mirror,
    ModelSync,
    ModelVolume,
    NfsVolume,
    RayImageRef,
    RegistryMirror,
    Toleration,
)
from config_model.object_store import AWS_REGION, ObjectStore, WorkloadIdentity
from config_model.operations import (
    AIBRIX_PATHS,
    Dashboards,
    Gateway,
    LoadScenario,
    LoadTest,
    Monitoring,
    NetworkPolicy,
    OpenWebUi,
    Operations,
    Platform,
    Smoke,
    Warmup,
)
from config_model.serving import (
    AUTOSCALING_METRICS,
    ROUTING_STRATEGIES,
    Autoscaling,
    KvCacheOffload,
    Pd,
    Rdma,
    Rollout,
    SamePodPd,
    ServedModel,
    Sglang,
    Vllm,
)
from config_model.stack import SECRET_KEYS, StackConfig, required_secret_keys, secret_command
from config_model.types import CREDENTIAL_ERROR, PATTERN_MEANING, is_ip_host, stack_key

__all__ = [
    "AIBRIX_PATHS", "AUTOSCALING_METRICS", "AWS_REGION", "Autoscaling", "CREDENTIAL_ERROR", "PATTERN_MEANING",
    "ROUTING_STRATEGIES", "SECRET_KEYS", "CephFsVolume", "Cluster", "CompileCache", "Dashboards",
    "EcrMirror", "Environment", "ExistingClaim", "Gateway", "GpuPool", "ImageRef", "Images",
    "KvCacheOffload", "LoadScenario", "LoadTest", "Mirror", "ModelSync", "ModelVolume", "Monitoring",
    "NetworkPolicy",
    "NfsVolume", "ObjectStore", "OpenWebUi", "Operations", "Pd", "Platform", "RayImageRef", "Rdma",
    "RegistryMirror", "Rollout", "SamePodPd", "ServedModel", "Sglang", "Smoke", "StackConfig", "Toleration",
    "Vllm", "Warmup", "WorkloadIdentity", "is_ip_host", "required_secret_keys", "secret_command", "stack_key",
]
