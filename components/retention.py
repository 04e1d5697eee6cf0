"""Objects kept outside dev: Pulumi never deletes them, so switching their feature off, dropping
them from the program or `pulumi destroy` leaves them and their data, and switching the feature on
again adopts what is there.

retainOnDelete, not protect: the engine refuses to delete a protected resource that the program no
longer registers, failing the `pulumi up` that switches its feature off, while a retained resource is
only removed from the state (pulumi/pulumi v3.259.0, pkg/resource/deploy/step.go DeleteStep.Apply:
`!s.replacing && s.old.Protect` returns deleteProtectedError; `s.old.RetainOnDelete` deletes nothing).
Both checks read the old state, so a stack deployed while these were protected needs one `pulumi up`
with this program (it writes the options to the state) before the feature goes off
(docs/day-2/optional-features-and-destroy.md)."""

from __future__ import annotations

import pulumi_kubernetes as k8s

# A kept object is adopted again by a later create through components/providers.py's retained provider,
# a server-side apply under this resource's new field manager (await.go Creation). The fields it sets
# are still owned by the manager that created them (a client-side create is "pulumi-kubernetes",
# Update); where a value changed meanwhile (a larger claim) that apply would stop on the conflict, so
# it forces (await.go patchForce: the annotation wins). Nobody else writes the fields we set on a claim
# (the PV controller writes volumeName, annotations and status).
PATCH_FORCE = {"pulumi.com/patchForce": "true"}


def kept(retained: k8s.Provider | None) -> dict:
    """Resource options for an object kept outside dev (retained is the retained provider there, None in
    dev, where the object goes with its feature and with the stack)."""
    if retained is None:
        return {}
    return {"retain_on_delete": True, "provider": retained}


def kept_annotations(retained: k8s.Provider | None) -> dict[str, str]:
    return dict(PATCH_FORCE) if retained is not None else {}

