"""Names the program derives from config values, and the check that every one of them is valid.

The components build these names with the functions here, and `problems` checks the same
functions' results, so a refusal always matches what would have been created. A name that may
outgrow its limit is never cut short blindly (two long names would share a prefix and one object
would silently replace the other): `bounded` keeps it readable and unique with a hash of the whole.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterator

from config_model import k8s
from config_model.stack import StackConfig

FLEET_SIDES = ("prefill", "decode")
_HASH = 8


def bounded(name: str, limit: int = k8s.DNS1123_LABEL_MAX) -> str:
    """`name` if it fits, else its head and 8 hex of sha256(name): distinct names stay distinct."""
    if len(name) <= limit:
        return name
    return f"{name[:limit - _HASH - 1]}-{hashlib.sha256(name.encode()).hexdigest()[:_HASH]}"


def fleet_name(model_name: str, side: str) -> str:
    """A P/D side: the RayClusterFleet and its pods' app.kubernetes.io/name label."""
    return f"{model_name}-{side}"


def default_roleset(model_name: str) -> str:
    """The roleset-name label pairing a model's P/D sides when pd.rolesetName is unset."""
    return f"{model_name}-pd"


def combined_roleset(model_name: str) -> str:
    """The roleset-name label of a hybrid model's combined pods (AIBrix skips pods without one)."""
    return f"{model_name}-combined"


def pd_policy_name(roleset: str) -> str:
    """The NetworkPolicy opening KV transfer within one roleset."""
    return bounded(f"llm-serving-pd-{roleset}")


# The claims of a static model volume, and their PersistentVolumes: cluster-scoped, so named after
# the namespace to keep stacks apart, and labelled with their own name. Both carry a tag of the
# volume source: pulumi-kubernetes v4.32.0 replaces a PV for any change of its source
# (provider/pkg/provider/diff.go forceNew lists every PV volume source) and deletes it first when the
# name stays (provider.go Diff, DeleteBeforeReplace), which pv-protection holds while the PV is Bound.
# Under a new name the new PV and claim are created first, the pods roll onto them, and the engine
# deletes the old pair only at the end (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go
# GenerateDeletes). docs/day-2/storage.md.
SERVING_CLAIM = "model-store"
SYNC_CLAIM = "model-store-sync"
_SOURCE_TAG = 8


def source_tag(source: dict) -> str:
    """8 hex of sha256 over a PV volume source as the PV carries it (components/volume.py
    volume_source): every field of it, so any change the provider would replace the PV for renames it."""
    return hashlib.sha256(json.dumps(source, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:_SOURCE_TAG]


def claim_name(base: str, tag: str) -> str:
    """A claim of the model volume: at most 25 characters, a DNS label whatever the tag."""
    return f"{base}-{tag}"


def volume_name(namespace: str, claim: str) -> str:
    """The claim's PV: `<namespace>-<claim>`, kept within a label value (it is also the PV's
    app.kubernetes.io/name label) by `bounded`, so every valid namespace gives a valid, distinct name."""
    return bounded(f"{namespace}-{claim}")


def iam_user_name(namespace: str, stack: str) -> str:
    """The IAM user (objectStore.createCredentials) or role (objectStore.workloadIdentity) that reads the
    model prefixes; IAM's user and role names share one rule (k8s.IAM_NAME, at most 64 characters)."""
    return f"llm-serving-{namespace}-{stack}-model-reader"


def _iam_user(name: str) -> list[str]:
    errs = [] if k8s.IAM_NAME.fullmatch(name) else ["may hold only letters, digits and +=,.@_-"]
    if len(name) > k8s.IAM_USER_NAME_MAX:
        errs.append(f"must be no more than {k8s.IAM_USER_NAME_MAX} characters")
    return errs


# A derived name's rule and its length limit.
LABEL = (k8s.label_value, k8s.LABEL_VALUE_MAX)
IAM_USER = (_iam_user, k8s.IAM_USER_NAME_MAX)
# (stack-file path, value, derived name, what it names, (rule, limit)) for every derived name.
Derived = tuple[str, str, str, str, tuple[Callable[[str], list[str]], int]]


def derived_names(cfg: StackConfig, stack: str | None) -> Iterator[Derived]:
    for i, m in enumerate(cfg.models):
        if m.topology in ("pd", "hybrid"):
            for side in FLEET_SIDES:
                yield (f"models[{i}].name", m.name, fleet_name(m.name, side),
                       "RayClusterFleet name and app.kubernetes.io/name label value", LABEL)
            if m.pd.roleset_name is None:
                yield (f"models[{i}].name", m.name, default_roleset(m.name),
                       "roleset-name label value (set pd.rolesetName to choose another)", LABEL)
        if m.topology == "hybrid":
            yield (f"models[{i}].name", m.name, combined_roleset(m.name), "roleset-name label value of the combined pods",
                   LABEL)
    store = cfg.object_store
    if stack is not None and (store.create_credentials or store.workload_identity) and store.on_aws:
        what = "IAM role name" if store.workload_identity else "IAM user name"
        yield ("namespace", cfg.namespace, iam_user_name(cfg.namespace, stack), f"{what} (stack {stack!r})", IAM_USER)


def problems(cfg: StackConfig, stack: str | None = None) -> Iterator[tuple[str, str, str]]:
    """(path, value, what is wrong) for each derived name its rule refuses."""
    for path, value, name, what, (rule, limit) in derived_names(cfg, stack):
        errs = rule(name)
        if errs:
            room = limit - (len(name) - len(value))
            fits = f"; this field may have at most {room} characters" if len(name) > limit else ""
            yield path, value, f"derives the {what} {name!r} ({len(name)} characters), which {'; '.join(errs)}{fits}"
