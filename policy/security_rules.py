"""Rules over what a container may reach: no host access without a reason, images by digest, no
privilege, credentials only by reference, capabilities kept to IPC_LOCK with RDMA."""

from __future__ import annotations

import re

from policy.engines import engine_of_argv
from policy.manifests import (
    DIGEST,
    SECRET_NAME,
    annotations_of,
    each_container,
    name_of,
    templates,
)
from policy.unknowns import UnknownTouched, decide, is_unknown, items_of
from policy.workloads import PodTemplateRef

HOST_ACCESS_REASON = "llm-serving.io/host-access-reason"


def no_host_access(resource_type: str, props: dict) -> list[str]:
    """No host network, PID or IPC namespace and no hostPath volume, unless the pod template documents
    why (an RDMA setup that needs it) in the llm-serving.io/host-access-reason annotation."""
    def documented(ref: PodTemplateRef) -> list[bool]:
        return [bool(annotations_of(ref.template).get(HOST_ACCESS_REASON))]

    def namespace_check(ref: PodTemplateRef, field: str) -> list[str]:
        if (ref.template.get("spec") or {}).get(field):
            return [f"{name_of(props)}: {field} is on; remove it, or document the RDMA need in {HOST_ACCESS_REASON}."]
        return []

    def volume_check(v: dict) -> list[str]:
        if "hostPath" in v:
            return [f"{name_of(props)}: volume {v.get('name')} is a hostPath; use a claim, or document the need "
                    f"in {HOST_ACCESS_REASON}."]
        return []

    out = []
    for ref in templates(resource_type, props):
        if decide(documented, ref) != [False]:
            continue  # documented, or undecided during preview
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            out += decide(namespace_check, ref, field)
        for v in decide(lambda r: items_of((r.template.get("spec") or {}).get("volumes")), ref):
            out += decide(volume_check, v)
    return out


def images_pinned_by_digest(resource_type: str, props: dict) -> list[str]:
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        if not DIGEST.search(str(c.get("image", ""))):
            return [f"{name_of(props)}: container {c.get('name')} image {c.get('image')!r} is not pinned by digest."]
        return []
    return each_container(resource_type, props, check)


def no_privileged_containers(resource_type: str, props: dict) -> list[str]:
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True):
            return [f"{name_of(props)}: container {c.get('name')} must set privileged false and allowPrivilegeEscalation false."]
        return []
    return each_container(resource_type, props, check)


def _points_to_a_file(env: dict) -> bool:
    """`*_FILE` / `*_PATH` variables holding an absolute path name a mounted Secret file, not a secret."""
    name, value = str(env.get("name", "")), env.get("value")
    if is_unknown(value):
        raise UnknownTouched()
    return name.endswith(("_FILE", "_PATH")) and isinstance(value, str) and value.startswith("/")


# `$(VAR)`, which Kubernetes expands from the container's env at start (k8s.io/kubernetes
# third_party/forked/golang/expansion/expand.go): the manifest holds the name only.
_VAR_REF = re.compile(r"\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def engine_key_values(argv: list[str]) -> list[str]:
    """The words an engine's API-key flag takes in `argv` (several: vLLM's list), `--flag=value` too."""
    engine = engine_of_argv(argv)
    if engine is None:
        return []
    flag, out, taking = engine.API_KEY_FLAG, [], False
    for word in argv:
        if word.startswith(flag + "="):
            out.append(word.split("=", 1)[1])
            taking = False
        elif word == flag:
            taking = True
        elif taking and not word.startswith("-"):
            out.append(word)
        else:
            taking = False
    return out


def secrets_only_by_reference(resource_type: str, props: dict) -> list[str]:
    """Credentials reach containers only through secretKeyRef or mounted Secret files, never as
    literal env values; an engine's API keys in its argv only as `$(VAR)` of such a variable."""
    def env_check(c: dict, e: dict) -> list[str]:
        if (SECRET_NAME.search(str(e.get("name", ""))) and "secretKeyRef" not in (e.get("valueFrom") or {})
                and not _points_to_a_file(e)):
            return [f"{name_of(props)}: container {c.get('name')} env {e.get('name')} looks like a credential but is not a secretKeyRef."]
        return []

    def argv_check(c: dict) -> list[str]:
        argv = items_of(c.get("command")) + items_of(c.get("args"))
        if any(is_unknown(a) for a in argv):
            raise UnknownTouched()
        refs = {e.get("name") for e in items_of(c.get("env")) if "secretKeyRef" in (e.get("valueFrom") or {})}
        bad = [i for i, v in enumerate(engine_key_values([str(a) for a in argv]))
               if not ((m := _VAR_REF.fullmatch(v)) and m.group(1) in refs)]
        return [f"{name_of(props)}: container {c.get('name')} passes API key {i + 1} in its argv as a value, not as "
                f"$(VAR) of a secretKeyRef variable." for i in bad]

    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        out = []
        for e in items_of(c.get("env")):
            out += decide(env_check, c, e)
        return out + decide(argv_check, c)
    return each_container(resource_type, props, check)


def capabilities_minimal(resource_type: str, props: dict) -> list[str]:
    """The only capability ever added is IPC_LOCK, and only for a container that requests RDMA devices."""
    def check(ref: PodTemplateRef, c: dict) -> list[str]:
        added = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
        limits = (c.get("resources") or {}).get("limits") or {}
        rdma = any(str(k).startswith("rdma/") or "rdma" in str(k) for k in limits)
        if added - {"IPC_LOCK"} or (added and not rdma):
            return [f"{name_of(props)}: container {c.get('name')} adds {sorted(added)}; only IPC_LOCK, only with RDMA devices."]
        return []
    return each_container(resource_type, props, check)
