#!/usr/bin/env bash
# Writes this wrapper's go.mod and go.sum from sigs.k8s.io/scheduler-plugins's own go.mod.
#
# scheduler-plugins requires k8s.io/kubernetes (its cmd/scheduler is kube-scheduler's app with the plugins
# registered), which requires its staging modules at v0.0.0: upstream's go.mod replaces each with its
# published v0.<minor>.<patch>, and replace lines bind only the main module, so this wrapper carries the
# same lines, copied from the release's go.mod, never written by hand. `e2e/build-tools.sh` checks that the
# committed go.mod still carries exactly them, but for the ones OVERRIDES changes because the proxy refuses
# the version upstream names (check_replaces). Run it to move to another release (and check OVERRIDES):
#   e2e/tools/scheduler-plugins/generate-go-mod.sh v0.31.8
set -euo pipefail
cd "$(dirname "$0")"
VERSION="${1:-$(cat VERSION)}"
MODULE=sigs.k8s.io/scheduler-plugins

upstream_go_mod=$(go mod download -json "${MODULE}@${VERSION}" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')

rm -f go.mod go.sum
go mod init llm-serving.local/e2e/scheduler-plugins >/dev/null 2>&1
go mod edit -json "$upstream_go_mod" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    old, new = r["Old"], r["New"]
    print(old["Path"] + ("@" + old["Version"] if old.get("Version") else "") + "=" +
          new["Path"] + ("@" + new["Version"] if new.get("Version") else ""))' |
	while read -r replace; do go mod edit -replace="$replace"; done
grep -v -e '^#' -e '^$' OVERRIDES | while read -r replace; do go mod edit -replace="$replace"; done
go get -tool "${MODULE}/cmd/scheduler@${VERSION}"
echo "${VERSION}" >VERSION
