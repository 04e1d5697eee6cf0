"""NVIDIA dcgm-exporter behaviour the GPU-memory alert depends on. The stacks do not install it
(the GPU operator or its Helm chart does) and pin no version: read at the newest tag,
4.5.3-4.8.2, with `git -C <mirror of NVIDIA/dcgm-exporter> show 4.5.3-4.8.2:<path>`."""

from __future__ import annotations

TAG = "4.5.3-4.8.2"

PORTED_FROM = {
    "repo": "NVIDIA/dcgm-exporter", "release": TAG,
    "files": ("etc/default-counters.csv", "internal/pkg/rendermetrics/render_metrics.go",
              "internal/pkg/transformation/kubernetes.go", "internal/pkg/transformation/const.go",
              "deployment/values.yaml"),
    "not_deployed": "the stacks do not install dcgm-exporter and pin no version (the GPU operator or its Helm "
                    "chart does): read at the newest tag",
}

# etc/default-counters.csv: "DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB)."
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # internal/pkg/rendermetrics/render_metrics.go: every GPU sample carries gpu, UUID, pci_bus_id,
    # device, modelName, Hostname; internal/pkg/transformation/kubernetes.go adds the workload's
    # pod, namespace, container (const.go podAttribute, namespaceAttribute, containerAttribute)
    # for GPUs allocated to a pod.
    "DCGM_FI_DEV_FB_FREE": ("gauge", ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                                      "pod", "namespace", "container"), "etc/default-counters.csv"),
}
FB_UNIT_MIB = True

# deployment/values.yaml serviceMonitor.honorLabels: false (its ServiceMonitor template passes it
# through): scraped this way, the workload's namespace/pod/container arrive as exported_namespace,
# exported_pod, exported_container and namespace/pod name the exporter's own pod
# (tests/upstream_prometheus_operator.py EXPORTED_PREFIX). With honorLabels true they arrive as is.
HELM_HONOR_LABELS_DEFAULT = False
