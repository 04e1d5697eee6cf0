"""Helpers shared by the components: child options and standard labels."""

from __future__ import annotations

import pulumi

from components.scanner_exceptions import DIGEST_PINNED, scanner_exceptions

# The API group/version of AIBrix's StormService and RayClusterFleet (CRDs in ../shared/crds/aibrix).
AIBRIX_ORCHESTRATION_API = "orchestration.aibrix.ai/v1alpha1"

PART_OF = "llm-serving"


class Component(pulumi.ComponentResource):
    """A component whose children also carry the component's own depends_on.

    Pulumi does not pass a component's depends_on to its children; repeating it on each child
    makes the order explicit (a Deployment after its model sync Job) and visible in the plan.
    """

    def __init__(self, type_: str, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, None, opts)
        depends = (opts.depends_on if opts else None) or []
        self._depends_on = list(depends) if isinstance(depends, list) else [depends]

    def child_opts(self, depends_on: list[pulumi.Resource] | None = None, **kwargs) -> pulumi.ResourceOptions:
        """Options for a child: parented (so providers flow down), the component's dependencies, extras."""
        return pulumi.ResourceOptions(parent=self, depends_on=self._depends_on + (depends_on or []), **kwargs)


def labels(name: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }


def metadata(name: str, namespace: str, component: str, extra_labels: dict[str, str] | None = None) -> dict:
    return {"name": name, "namespace": namespace, "labels": {**labels(name, component), **(extra_labels or {})}}


# pulumi-kubernetes keeps a failed Job in state as failed: the next `pulumi up` sees no diff and its
# awaiter fails again at once on the Failed condition, so fixing the cause never reruns the Job.
# With this annotation the provider's Diff replaces a Job that is not ready (pulumi/pulumi-kubernetes
# v4.32.0, provider/pkg/provider/provider.go Diff: metadata.ReplaceUnready + checkjob Ready; our pin
# is pulumi_kubernetes 4.34.2). Every Job also sets delete_before_replace: its name is fixed.
RERUN_UNREADY = {"pulumi.com/replaceUnready": "true"}


# A Job `pulumi up` starts and never waits for (pulumi-kubernetes v4.32.0, provider/pkg/metadata/
# overrides.go ReadyCondition: skipAwait is an immediate condition, await.go Creation then skips the Job
# awaiter). Its failure is no error of the `pulumi up` that created it, so the engine records no init
# error and no later `pulumi up` updates it again (pulumi/pulumi v3.259.0 step_generator.go
# applyReplaceOnChanges: only an old init error forces a diff). It must not carry RERUN_UNREADY: Diff
# would replace it at every later `pulumi up` while it still runs (not Complete is unready).
NOT_AWAITED = {"pulumi.com/skipAwait": "true"}


def job_metadata(name: str, namespace: str, component: str, awaited: bool = True) -> dict:
    return {**metadata(name, namespace, component),
            "annotations": {**(RERUN_UNREADY if awaited else NOT_AWAITED), **scanner_exceptions(DIGEST_PINNED)}}
