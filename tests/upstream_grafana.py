"""Grafana, its Helm charts' dashboard sidecar (kiwigrid/k8s-sidecar) and kube-prometheus-stack, as
the dashboard ConfigMaps depend on them. None runs here (Grafana is Go and TypeScript; the sidecar
needs an API server): everything below is READ, with the file, and re-read on a bump.

Read with `git -C <mirror> show <tag>:<path>` (mirrors of grafana/helm-charts,
prometheus-community/helm-charts and kiwigrid/k8s-sidecar); grafana/grafana itself (3.2 GB) could not
be mirrored, so its files were read through the code index at the commits named below.
"""

from __future__ import annotations

import re

# None of these is deployed or pinned by the stacks (the cluster's Grafana and charts are the operator's).
_NOT_DEPLOYED = "the stacks install no Grafana, chart or sidecar and pin none; the dashboards' ConfigMaps target them"
PORTED_FROM = (
    {"repo": "grafana/helm-charts", "release": "grafana-10.5.15", "files": ("charts/grafana/values.yaml",
     "charts/grafana/templates/_pod.tpl"), "not_deployed": _NOT_DEPLOYED},
    {"repo": "prometheus-community/helm-charts", "release": "kube-prometheus-stack-88.5.3",
     "files": ("charts/kube-prometheus-stack/values.yaml",
               "charts/kube-prometheus-stack/templates/grafana/dashboards-1.14/"), "not_deployed": _NOT_DEPLOYED},
    {"repo": "kiwigrid/k8s-sidecar", "release": "2.5.0", "files": ("src/sidecar.py", "README.md"),
     "not_deployed": _NOT_DEPLOYED},
    {"repo": "grafana/grafana", "release": None, "commit": "01ec8e3a4aa74ae730281876031a2a97f85bf2cb",
     "files": ("apps/dashboard/pkg/migration/schemaversion/migrations.go",), "not_deployed": _NOT_DEPLOYED},
    {"repo": "grafana/grafana", "release": None, "commit": "00139e84396be1600192135b87b8607f3f7b79d0",
     "files": ("kinds/dashboard/dashboard_kind.cue",), "not_deployed": _NOT_DEPLOYED},
    {"repo": "grafana/grafana", "release": None,
     "untagged": "pkg/util/shortid_generator.go and the Prometheus data source's regex escaping, read in every "
                 "version the code index holds, none named",
     "files": ("pkg/util/shortid_generator.go", "packages/grafana-prometheus/"), "not_deployed": _NOT_DEPLOYED},
)

# ---- the charts ----

# grafana/helm-charts tag grafana-10.5.15 (appVersion 12.3.1), charts/grafana/values.yaml
# sidecar.dashboards: label "grafana_dashboard", labelValue "" (templates/_pod.tpl sets LABEL_VALUE
# only `with` a value, so the sidecar matches any value of the key), searchNamespace null (the
# sidecar's own namespace only), folderAnnotation null (FOLDER_ANNOTATION unset: the sidecar's
# default below), provider.foldersFromFilesStructure false (sub-folders do not become Grafana
# folders unless set); sidecar image kiwigrid/k8s-sidecar 2.5.0.
GRAFANA_CHART_TAG = "grafana-10.5.15"
GRAFANA_CHART_LABEL = "grafana_dashboard"
GRAFANA_CHART_LABEL_VALUE = ""
GRAFANA_CHART_SIDECAR_TAG = "2.5.0"

# prometheus-community/helm-charts tag kube-prometheus-stack-88.5.3 (operator v0.93.1),
# charts/kube-prometheus-stack/values.yaml grafana.sidecar.dashboards: label grafana_dashboard,
# labelValue "1", searchNamespace ALL; its own dashboards (templates/grafana/dashboards-1.14/*.yaml)
# carry `grafana_dashboard: "1"` and keep one dashboard JSON per data key.
KUBE_PROMETHEUS_STACK_TAG = "kube-prometheus-stack-88.5.3"
KUBE_PROMETHEUS_STACK_LABEL = "grafana_dashboard"
KUBE_PROMETHEUS_STACK_LABEL_VALUE = "1"
KUBE_PROMETHEUS_STACK_SEARCH_NAMESPACE = "ALL"


# ---- the sidecar ----

# kiwigrid/k8s-sidecar 2.5.0 src/sidecar.py: FOLDER_ANNOTATION unset -> "k8s-sidecar-target-directory";
# README.md: LABEL required, LABEL_VALUE "Don't set a value to filter by any value", NAMESPACE defaults
# to the sidecar's namespace ("ALL" for every namespace). Each data key becomes a file of that name in
# one folder, so keys of different ConfigMaps must differ (or the later one overwrites the earlier),
# and Grafana's file provider loads only *.json.
SIDECAR_TAG = "2.5.0"
SIDECAR_FOLDER_ANNOTATION_DEFAULT = "k8s-sidecar-target-directory"


def sidecar_selects(labels: dict[str, str], label: str, label_value: str) -> bool:
    """Whether the sidecar started with LABEL=label (and LABEL_VALUE=label_value unless empty) loads
    a ConfigMap with these labels."""
    return label in labels and (not label_value or labels[label] == label_value)


# ---- Grafana's dashboard model ----

# pkg/util/shortid_generator.go, in each of the versions the code index holds (read 2026-12; the
# pattern and the limit are the same in all): validUIDPattern `^[a-zA-Z0-9\-\_]*$`, IsShortUIDTooLong len(uid) > 40; the dashboard service refuses
# such a uid (ErrDashboardInvalidUid, ErrDashboardUidTooLong "uid too long, max 40 characters").
UID_PATTERN = re.compile(r"^[a-zA-Z0-9\-_]*$")
UID_MAX = 40

# apps/dashboard/pkg/migration/schemaversion/migrations.go (commit 01ec8e3a4aa74ae730281876031a2a97f85bf2cb):
# MIN_VERSION 9, LATEST_VERSION 42; a dashboard below the latest is migrated forward on load.
SCHEMA_VERSION_MIN = 9
SCHEMA_VERSION_LATEST = 42

# kinds/dashboard/dashboard_kind.cue (commit 00139e84396be1600192135b87b8607f3f7b79d0) #GridPos:
# h uint32 > 0, w uint32 > 0 and <= 24, x uint32 >= 0 and < 24, y uint32 >= 0; #VariableType;
# #DataSourceRef {type?, uid?}; #RowPanel type "row"; a panel's `type` non-empty.
GRID_WIDTH = 24
VARIABLE_TYPES = frozenset({"query", "adhoc", "constant", "datasource", "interval", "textbox", "custom", "system"})


# The Prometheus data source's interpolation of a multi-value or include-all variable used in a
# regex matcher: prometheusSpecialRegexEscape (classic behaviour; packages/grafana-prometheus, earlier
# public/app/plugins/datasource/prometheus/datasource.ts) doubles a backslash twice and puts two
# backslashes before each of $^*{}[]+?.()| (one survives the PromQL string, escaping the regex
# metacharacter); interpolateQueryExpr joins several values as (a|b).
def prometheus_regex_values(values: list[str]) -> str:
    escaped = [re.sub(r"([$^*{}\[\]+?.()|])", r"\\\\\1", v.replace("\\", "\\\\\\\\")) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
