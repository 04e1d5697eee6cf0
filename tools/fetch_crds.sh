#!/usr/bin/env bash
# Fetch the upstream CRDs the schema tests validate against, at the pinned tags of
# tests/crd_sources.txt, into DEST (default ../shared/crds). For pipelines outside this workplace,
# where ../shared is not laid out beside the checkout.
set -euo pipefail
DEST="${1:-../shared/crds}"
cd "$(dirname "$0")/.."
while read -r dir url; do
  case "$dir" in ''|'#'*) continue;; esac
  mkdir -p "$DEST/$dir"
  curl --fail --silent --show-error --location --retry 3 -o "$DEST/$dir/$(basename "$url")" "$url"
done < tests/crd_sources.txt
echo "CRDs in $DEST"
