"""What the engine, pulumi-kubernetes, server-side apply and the garbage collector do with the day-2
switches of docs/day-2/optional-features-and-destroy.md, ported function by function so the tests
can judge a before/after pair of renders. Each port names its repository, tag and file:

- pulumi/pulumi v3.259.0 (the newest tag in the mirror; the SDK pin is 3.272.0): pkg/resource/deploy
- pulumi/pulumi-kubernetes v4.32.0 (the newest tag in the mirror; the SDK pin is 4.34.2): provider/pkg
- kubernetes-sigs/structured-merge-diff v6.4.2 (the one k8s.io/kubernetes v1.37.2 requires): merge/update.go
- kubernetes/kubernetes v1.37.2: pkg/controller/garbagecollector
- hashicorp/terraform-provider-aws internal/service/ecr/repository.go, which pulumi_aws bridges (two
  stored copies agree; the exact version pulumi_aws 7.51.1 embeds was not checked)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from render.update_rules import PULUMI_ENGINE, PULUMI_KUBERNETES_PROVIDER

# Each port below, machine-readable; tests/test_upstream_releases.py compares them with what the stacks run.
PORTED_FROM = (
    {**PULUMI_ENGINE, "files": ("pkg/resource/deploy/step.go", "pkg/resource/deploy/step_generator.go")},
    {**PULUMI_KUBERNETES_PROVIDER, "files": ("provider/pkg/await/await.go", "provider/pkg/provider/provider.go",
                                             "provider/pkg/metadata/overrides.go")},
    {"repo": "kubernetes-sigs/structured-merge-diff", "release": "v6.4.2", "component": "kubernetes",
     "files": ("merge/update.go",),
     "deployed_as": "v1.37.2", "note": "the release k8s.io/kubernetes v1.37.2 requires: compared as that Kubernetes"},
    {"repo": "kubernetes/kubernetes", "release": "v1.37.2", "component": "kubernetes",
     "files": ("pkg/controller/garbagecollector/garbagecollector.go", "pkg/controller/garbagecollector/graph.go")},
    {"repo": "hashicorp/terraform-provider-aws", "release": None, "component": "pulumi-aws",
     "untagged": "two stored copies agree", "files": ("internal/service/ecr/repository.go",),
     "not_read": {"7.51.1": "which terraform-provider-aws version pulumi_aws 7.51.1 embeds was not checked"}},
)

# --- pulumi/pulumi v3.259.0 pkg/resource/deploy/step.go DeleteStep.Apply ------------------------------

def delete_step(old_options: dict, replacing: bool = False) -> str:
    """What the engine does with a resource of the old state that the program no longer registers
    (or with `pulumi destroy`): "refused" is deleteProtectedError (`!s.replacing && s.old.Protect`),
    which fails the update; "kept" is the RetainOnDelete no-op (removed from the state only);
    "deleted" calls the provider's Delete."""
    if not replacing and old_options.get("protect"):
        return "refused"
    if old_options.get("retainOnDelete"):
        return "kept"
    return "deleted"


# --- pulumi-kubernetes v4.32.0 provider/pkg/await/await.go Creation --------------------------------

def create(exists: bool, upsert_existing_objects: bool, server_side_apply: bool = True,
           patch_resource: bool = False) -> str:
    """A create of an object by name: with server-side apply and UpsertExistingObjects (or a Patch
    resource) a PATCH of type apply, which adopts an existing object ("applied"); otherwise a POST
    (client.Create), which the API server refuses with AlreadyExists when the object exists ("The
    resource already exists in the cluster" error)."""
    if server_side_apply and (upsert_existing_objects or patch_resource):
        return "applied"
    return "AlreadyExists" if exists else "created"


def provider_flag(inputs: dict, key: str) -> bool:
    """provider.go Configure reads `kubernetes:config:<key>` == "true" (the SDK sends provider inputs
    as strings): upsertExistingObjects, enablePatchForce."""
    return str(inputs.get(key, "false")).lower() == "true"


# --- pulumi-kubernetes v4.32.0 provider/pkg/provider/provider.go DiffConfig ------------------------

CLUSTER_KEYS = ("kubeconfig", "context", "cluster")


def diff_config_replaces(olds: dict, news: dict) -> bool:
    """Whether a provider change (a resource moved from the provider with `olds` to the one with
    `news`) replaces the resource (pulumi/pulumi step_generator.go providerChanged asks the new
    provider's DiffConfig). With clusterIdentifier set and unchanged the deferred function drops every
    replacement; a changed identifier replaces; otherwise a changed active cluster (kubeconfig,
    context, cluster) does. Inputs here are known values (no unknowns: the computed-key branch)."""
    if olds == news:
        return False
    ident = "clusterIdentifier"
    if ident in news and olds.get(ident) == news.get(ident):
        return False
    if ident in olds and ident in news and olds[ident] != news[ident]:
        return True
    return any(olds.get(k) != news.get(k) for k in CLUSTER_KEYS)


# --- pulumi-kubernetes v4.32.0 provider/pkg/await/await.go patchForce -------------------------------

def patch_force(annotations: dict, enable_patch_force: bool = False) -> bool:
    """Outside preview: the pulumi.com/patchForce annotation "true" (metadata.IsAnnotationTrue), else
    the provider's enablePatchForce (PULUMI_K8S_ENABLE_PATCH_FORCE)."""
    return annotations.get("pulumi.com/patchForce") == "true" or enable_patch_force


# --- pulumi-kubernetes v4.32.0 provider/pkg/metadata/overrides.go DeletionPropagation --------------

def deletion_propagation(annotations: dict) -> str:
    policy = annotations.get("pulumi.com/deletionPropagationPolicy", "").lower()
    return {"orphan": "Orphan", "background": "Background"}.get(policy, "Foreground")


# --- server-side apply: structured-merge-diff v6.4.2 merge/update.go --------------------------------
# Objects are flat {field path: value}; managed fields {manager: set of paths}.

class Conflict(Exception):
    pass


@dataclass
class Live:
    fields: dict[str, object]
    managers: dict[str, set[str]] = field(default_factory=dict)


def _changed(live: dict, new: dict) -> set[str]:
    """compare.Modified.Union(compare.Added)."""
    return {p for p, v in new.items() if p not in live or live[p] != v}


def _update(obj: Live, new: dict, workflow: str, force: bool) -> None:
    """Updater.update: every other manager whose fields the change modifies or adds conflicts; without
    force that is an error, with force those fields leave that manager."""
    changed = _changed(obj.fields, new)
    conflicts = {m: owned & changed for m, owned in obj.managers.items() if m != workflow and owned & changed}
    if conflicts and not force:
        raise Conflict(sorted((m, sorted(f)) for m, f in conflicts.items()))
    for m, fields in conflicts.items():
        obj.managers[m] -= fields
    obj.managers = {m: f for m, f in obj.managers.items() if f}


def update(obj: Live, new_fields: dict, manager: str) -> None:
    """Updater.Update (PUT/PATCH that is not apply): always forced, the manager takes the fields it
    changed. AIBrix v0.7.0 writes spec.replicas this way (workload_scale.go s.client.Update)."""
    new = {**obj.fields, **new_fields}
    _update(obj, new, manager, force=True)
    obj.managers[manager] = obj.managers.get(manager, set()) | _changed(obj.fields, new)
    obj.fields = new


def apply(obj: Live, config: dict, manager: str, force: bool) -> None:
    """Updater.Apply: the applied configuration merged over the live object; the manager then owns
    exactly the fields it applied."""
    new = {**obj.fields, **config}
    _update(obj, new, manager, force)
    obj.fields = new
    obj.managers[manager] = set(config)


# --- pulumi-kubernetes v4.32.0 provider/pkg/await/await.go handleSSAIgnoreFields --------------------

def ssa_ignore_fields(config: dict, obj: Live, manager: str, ignore_changes: list[str]) -> dict:
    """For each ignoreChanges path: dropped from the apply when another manager owns it and ours does
    not; else sent with the live value."""
    out = dict(config)
    theirs = set().union(*[f for m, f in obj.managers.items() if m != manager]) if obj.managers else set()
    ours = obj.managers.get(manager, set())
    for path in ignore_changes:
        if path in theirs and path not in ours:
            out.pop(path, None)
        elif path in obj.fields:
            out[path] = obj.fields[path]
    return out


# --- kubernetes v1.37.2 pkg/controller/garbagecollector -------------------------------------------

def foreground_delete_waits_for(owner_uid: str, objects: list[dict]) -> list[str]:
    """Deleting an owner with propagationPolicy Foreground: the owner keeps the foregroundDeletion
    finalizer until no blocking dependent is left (garbagecollector.go processDeletingDependentsItem:
    blockingDependents; graph.go blockingDependents: an ownerReference to the owner with
    blockOwnerDeletion true), and the GC deletes those dependents first. The names it waits for."""
    return [o["metadata"]["name"] for o in objects
            for ref in (o.get("metadata") or {}).get("ownerReferences") or []
            if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion") is True]


# --- hashicorp/terraform-provider-aws internal/service/ecr/repository.go ---------------------------

def ecr_delete(state: dict, holds_images: bool) -> str:
    """resourceRepositoryDelete: DeleteRepository with Force = force_delete read from the state (d.Get);
    ECR answers RepositoryNotEmptyException for a repository with images unless forced. force_delete
    is Optional and not ForceNew, and resourceRepositoryUpdate sends no API call for it: setting it
    on an existing repository is an update of the state alone."""
    if holds_images and not state.get("forceDelete"):
        return "RepositoryNotEmptyException"
    return "deleted"
