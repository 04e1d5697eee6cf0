"""NGINX Gateway Fabric v2.6.0's ProxySettingsPolicy as its API server and its controller check it, ported
for the objects components/gateway_implementations/nginx_gateway_fabric.py renders: NGF's Go module is not
served by the module proxy and ../shared/crds holds none of its CRDs, so the render cannot check the
object against the CRD (apivalidation/module_crds.py SOURCE_CHECKED) and this port does instead.

Read with `git show v2.6.0:<path>` of nginx/nginx-gateway-fabric (a mirror fetched here):
- apis/v1alpha1/proxysettingspolicy_types.go: the spec's fields, targetRefs MinItems 1, MaxItems 16, and
  its four XValidation rules; apis/v1alpha1/shared_types.go Duration's pattern;
- config/crd/bases/gateway.nginx.org_proxysettingspolicies.yaml: v1alpha1, the only version, served and
  stored; sigs.k8s.io/gateway-api LocalPolicyTargetReference (group, kind, name, all required);
- internal/controller/nginx/config/policies/proxysettings/validator.go validateTimeouts with
  internal/controller/nginx/config/validation/generic.go ValidateNginxDuration (the same pattern, anchored).
"""

from __future__ import annotations

import re

TAG = "v2.6.0"
PORTED_FROM = {
    "repo": "nginx/nginx-gateway-fabric", "release": TAG,
    "not_deployed": "the stacks do not install NGINX Gateway Fabric: it is the operator's Gateway, named by "
                    "gateway.implementation nginxGatewayFabric",
    "files": ("apis/v1alpha1/proxysettingspolicy_types.go", "apis/v1alpha1/shared_types.go",
              "config/crd/bases/gateway.nginx.org_proxysettingspolicies.yaml",
              "internal/controller/nginx/config/policies/proxysettings/validator.go",
              "internal/controller/nginx/config/validation/generic.go",
              "internal/controller/state/graph/httproute.go", "internal/controller/provisioner/objects.go",
              "internal/framework/controller/resource.go", "apis/v1alpha1/ratelimitpolicy_types.go",
              "internal/controller/nginx/config/policies/ratelimit/generator.go"),
}

API_VERSION = "gateway.nginx.org/v1alpha1"
KIND = "ProxySettingsPolicy"
SPEC_FIELDS = {"buffering", "timeout", "targetRefs"}
TIMEOUT_FIELDS = {"connect", "read", "send"}
TARGET_REF_FIELDS = {"group", "kind", "name"}
DURATION = re.compile(r"^[0-9]{1,4}(ms|s|m|h)?$")
MAX_TARGET_REFS = 16


def errors(obj: dict) -> list[str]:
    """What the API server (schema and CEL) or NGF's validator would refuse in the object."""
    out = []
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        out.append(f"{obj.get('apiVersion')} {obj.get('kind')} is not served")
    spec = obj.get("spec") or {}
    out += [f"spec.{k}: unknown field" for k in sorted(set(spec) - SPEC_FIELDS)]
    refs = spec.get("targetRefs")
    if not isinstance(refs, list) or not 1 <= len(refs) <= MAX_TARGET_REFS:
        out.append("spec.targetRefs: 1 to 16 items required")
        refs = []
    for i, ref in enumerate(refs):
        out += [f"spec.targetRefs[{i}].{k}: unknown field" for k in sorted(set(ref) - TARGET_REF_FIELDS)]
        out += [f"spec.targetRefs[{i}].{k}: required" for k in sorted(TARGET_REF_FIELDS - set(ref))]
    if not all(r.get("kind") in {"Gateway", "HTTPRoute", "GRPCRoute"} for r in refs):
        out.append("TargetRef Kind must be one of: Gateway, HTTPRoute, or GRPCRoute")
    if not all(r.get("group") == "gateway.networking.k8s.io" for r in refs):
        out.append("TargetRef Group must be gateway.networking.k8s.io")
    keys = [(r.get("group"), r.get("kind"), r.get("name")) for r in refs]
    if len(keys) != len(set(keys)):
        out.append("TargetRef Kind and Name combination must be unique")
    kinds = {r.get("kind") for r in refs}
    if "Gateway" in kinds and kinds & {"HTTPRoute", "GRPCRoute"}:
        out.append("Cannot mix Gateway kind with HTTPRoute or GRPCRoute kinds in targetRefs")
    timeout = spec.get("timeout") or {}
    out += [f"spec.timeout.{k}: unknown field" for k in sorted(set(timeout) - TIMEOUT_FIELDS)]
    out += [f"spec.timeout.{k}: {v!r} must contain an, at most, four digit number followed by 'ms', 's', 'm', or 'h'"
            for k, v in sorted(timeout.items()) if not (isinstance(v, str) and DURATION.match(v))]
    return out


def attaches_to(policy: dict, route: dict) -> bool:
    """Objects must be in the same namespace as the policy (the targetRefs field's contract)."""
    return (policy["metadata"]["namespace"] == route["metadata"]["namespace"]
            and {"group": "gateway.networking.k8s.io", "kind": route["kind"], "name": route["metadata"]["name"]}
            in policy["spec"]["targetRefs"])
