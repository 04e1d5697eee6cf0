"""Prometheus Operator and Prometheus behaviour the NetworkPolicies and alerts depend on, at the
operator version whose CRDs the tests validate against (tests/crd_sources.txt: v0.93.0). Re-check
when bumping it. Read with `git -C <mirror> show v0.93.0:<path>`."""

from __future__ import annotations

TAG = "v0.93.0"

# The stacks install no Prometheus Operator and pin none: the release compared is the one whose CRDs the
# manifests are validated against (../shared/crds/SOURCES.md), by tests/test_upstream_releases.py.
PORTED_FROM = {
    "repo": "prometheus-operator/prometheus-operator", "release": TAG, "component": "prometheus-operator",
    "files": ("pkg/prometheus/server/operator.go", "pkg/prometheus/server/statefulset.go",
              "pkg/prometheus/promcfg.go"),
}


def prometheus_pod_labels(prometheus_name: str) -> dict[str, str]:
    """pkg/prometheus/server/operator.go makeSelectorLabels: the labels of every Prometheus server
    pod; statefulset.go copies them over the user's pod labels, so they are always there."""
    return {
        "app.kubernetes.io/managed-by": "prometheus-operator",
        "app.kubernetes.io/name": "prometheus",      # server/operator.go applicationNameLabelValue
        "app.kubernetes.io/instance": prometheus_name,
        "operator.prometheus.io/name": prometheus_name,
        "prometheus": prometheus_name,
    }


# Labels a PodMonitor target carries (pkg/prometheus/promcfg.go generatePodMonitorConfig relabels
# __meta_kubernetes_namespace -> namespace, pod name -> pod, container name -> container, plus
# job, endpoint and instance). With honorLabels false (the default) a scraped label of the same
# name is kept as exported_<name> (Prometheus scrape honor_labels: "renaming conflicting labels in
# the scraped data to exported_<original-label>").
TARGET_LABELS = frozenset({"namespace", "pod", "container", "job", "endpoint", "instance"})
EXPORTED_PREFIX = "exported_"


def pod_monitor_job(namespace: str, name: str) -> str:
    """pkg/prometheus/promcfg.go generatePodMonitorConfig: the `job` label of every target is
    "<PodMonitor namespace>/<PodMonitor name>" unless spec.jobLabel names a pod label (ours sets none)."""
    return f"{namespace}/{name}"
