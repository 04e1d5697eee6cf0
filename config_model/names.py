"""String types that are valid Kubernetes names, label keys and values, and paths by construction.

Each type refuses, at load time and under the stack-file field that holds it, what the API server,
the kubelet or a CRD's CEL rule would refuse once the value lands in an object; names the program
derives from several fields (a model name plus '-prefill', a namespace inside the IAM user name)
are checked in config_model/derived.py, next to the functions that derive them.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any, Callable

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from config_model import k8s

# The error type of these refusals; stacks/loader.py prints the message as what is allowed.
NAME_ERROR = "kubernetes_rule"


def checked(*rules: Callable[[str], list[str]], base: Any = str) -> Any:
    """A str type (or `base`, itself a str type) whose value must pass every rule; the refusal lists
    what each rule says."""
    def check(value: str) -> str:
        errs = [e for rule in rules for e in rule(value)]
        if errs:
            raise PydanticCustomError(NAME_ERROR, "; ".join(dict.fromkeys(errs)))
        return value
    return Annotated[base, AfterValidator(check)]


def _non_empty(value: str) -> list[str]:
    return [] if value else ["must not be empty"]


def _not_on_every_node(key: str) -> list[str]:
    # pod_template.py off_gpu_affinity keeps CPU Jobs off GPU nodes by requiring each GPU selector
    # key to be absent: a key every node carries leaves no node for any CPU Job.
    return [f"must not be a label every node carries ({key}): the CPU Jobs require the GPU pool's selector keys "
            "to be absent from their node, so no node would take the sync, smoke or warm-up Jobs"] \
        if key in k8s.EVERY_NODE_LABELS else []


LabelKey = checked(k8s.label_key)
LabelValue = checked(k8s.label_value)
NonEmptyLabelValue = checked(_non_empty, k8s.label_value)
GpuNodeLabelKey = checked(k8s.label_key, _not_on_every_node)
ExtendedResourceName = checked(k8s.extended_resource_name)
StorageClassName = checked(k8s.dns1123_subdomain)
# A model name is the Deployment, StormService or RoleBasedGroup name, and the StormService
# controller names a headless Service after it; with '-api' it is our Service: Service names are
# DNS-1035 labels, so the first character is a letter.
ModelName = checked(k8s.dns1035_label)
# Text that reaches container command, args or env values as it is.
ContainerText = checked(k8s.kubelet_expansions)


def _mount_path(value: str) -> list[str]:
    errs = []
    if not value.startswith("/") or value == "/":
        errs.append("must be an absolute path below '/'")
    if ":" in value:
        errs.append("must not contain ':' (VolumeMount.mountPath, k8s.io/api core/v1)")
    if re.search(r"\s", value):
        errs.append("must not contain whitespace")
    # The API server compares mount paths as text ("must be unique"): '/models/../dev/shm' passes
    # that and lands on the shm mount; the program appends '/<directory>', so no trailing '/'.
    if value != posixpath.normpath(value) or value.startswith("//"):
        errs.append("must be a normalized path: no '..' or '.' segments, no '//', no trailing '/'")
    return errs + k8s.kubelet_expansions(value)


MountPath = checked(_mount_path)

# Gateway API v1.2.1 HTTPRoute spec.rules[].matches[].path (config/crd/standard/
# gateway.networking.k8s.io_httproutes.yaml): the x-kubernetes-validations for PathPrefix values.
HTTP_PATH_MAX = 1024
_HTTP_PATH_CHARS = re.compile(r"(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+")


def _gateway_path(value: str) -> list[str]:
    errs = [] if value.startswith("/") else ["must be an absolute path and start with '/'"]
    errs += [f"must not contain '{s}'" for s in ("//", "/./", "/../", "%2f", "%2F", "#") if s in value]
    errs += [f"must not end with '{s}'" for s in ("/..", "/.") if value.endswith(s)]
    if not _HTTP_PATH_CHARS.fullmatch(value):
        errs.append("must only contain characters of [-A-Za-z0-9/._~!$&'()*+,;=:@] or %XX escapes")
    if len(value) > HTTP_PATH_MAX:
        errs.append(f"must be no more than {HTTP_PATH_MAX} characters")
    return errs


GatewayPath = checked(_gateway_path)
