"""GPU accounting, each rule once: rollout waves, the pods a rollout or an autoscaler adds, and the
GPUs a workload holds at peak.

The components count from the config (components/topologies, components/combined.py rollout_timeouts),
the policy pack and the render count from manifests (policy/workloads.py, policy/stack_rules.py); both
ask these functions, so a workload's count cannot differ between the plan, the budget check and the
pack. Standard library only and no import of ours: the pack publishes this module as it is.

Counts may be the pack's UNKNOWN (policy/unknowns.py): arithmetic on it stays unknown, a decision
(max, comparison) raises UnknownTouched, which the pack's callers turn into "not decided yet".
"""

from __future__ import annotations

from typing import Any


def surge_pods(max_surge: Any, replicas: Any) -> Any:
    """maxSurge as pods: an int, or a percentage of replicas rounded up, as Kubernetes rounds it
    (kubernetes v1.37.2 pkg/controller/deployment/util/deployment_util.go ResolveFenceposts: roundUp
    true for maxSurge, false for maxUnavailable)."""
    if isinstance(max_surge, str):
        percent = int(max_surge.rstrip("%"))
        return -(-replicas * percent // 100)
    return int(max_surge)


def unavailable_pods(max_unavailable: Any, replicas: Any) -> int:
    """maxUnavailable as pods: a percentage rounds down, as Kubernetes does (ResolveFenceposts); at
    least one pod, as ResolveFenceposts sets it when both fenceposts resolve to zero (maxSurge is 0
    here), and as the slowest case for the controllers that state no rule."""
    if isinstance(max_unavailable, str):
        return max(1, replicas * int(max_unavailable.rstrip("%")) // 100)
    return max(1, int(max_unavailable))


def rollout_waves(pods: Any, max_unavailable: Any, recreate: bool = False) -> int:
    """Cold starts in a row during an update: a RollingUpdate replaces N pods k at a time (k =
    maxUnavailable as pods, at least one), ceil(N / k) waves, each a full cold start; Recreate restarts
    them all at once, one wave. A surge pod (maxSurge 1, maxUnavailable 0) also replaces one pod a wave;
    a surge beside maxUnavailable makes fewer waves than counted here, an upper bound."""
    if recreate:
        return 1
    return max(1, -(-pods // unavailable_pods(max_unavailable, pods)))


def scaled_pods(replicas: Any, max_replicas: Any = None) -> Any:
    """Pods a workload may run at steady state: its replicas, or as many as its autoscaler may make
    (maxReplicas), whichever is more."""
    if max_replicas is None:
        return replicas
    return max(replicas, max_replicas)


def peak_pods(pods: Any, extra_pods: Any) -> Any:
    """Pods at once at peak: the steady ones plus what a rollout's surge or a known controller
    overshoot adds beside them."""
    return pods + extra_pods


def peak_gpus(pods: Any, extra_pods: Any, gpus_per_pod: Any) -> Any:
    """GPUs a workload holds at peak: every pod at peak holds a pod's GPUs."""
    return peak_pods(pods, extra_pods) * gpus_per_pod
