#!/usr/bin/env bash
# Writes this wrapper's go.mod and go.sum from k8s.io/kubernetes's own go.mod.
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and
# replaces them with ./staging/src/..., which a module outside its repository cannot use. Each staging
# module is published on its own at v0.<minor>.<patch>; the replace lines here are read from the release's
# go.mod, never written by hand (precedent: kubernetes/kubernetes#79384). Run it to move to another
# release; `e2e/build-tools.sh` checks that the committed go.mod still matches what it would write.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION="${1:-$(cat VERSION)}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"

upstream_go_mod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')

rm -f go.mod go.sum
go mod init llm-serving.local/e2e/kubernetes >/dev/null 2>&1
for module in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$upstream_go_mod" | sort -u); do
	go mod edit -replace="${module}=${module}@${STAGING_VERSION}"
done
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	go get -tool "k8s.io/kubernetes/cmd/${cmd}@${K8S_VERSION}"
done
echo "${K8S_VERSION}" >VERSION
