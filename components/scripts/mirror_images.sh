#!/bin/sh
# Copy images by digest into the internal registry mirror (field report 11.3), on a CPU node.
# IMAGE_LIST: one "source@digest destination:tag digest" per line. AUTHFILE: registry credentials.
# --all keeps every platform of a manifest list; --preserve-digests refuses any rewrite that would
# change the digest. Afterwards each digest is looked up at the destination.
set -eu
: "${IMAGE_LIST:?}" "${AUTHFILE:?}"

printf '%s\n' "$IMAGE_LIST" | while read -r source destination digest; do
  [ -n "$source" ] || continue
  echo "copy $source -> $destination"
  skopeo copy --all --preserve-digests --retry-times 3 --dest-authfile "$AUTHFILE" \
    "docker://$source" "docker://$destination"
  if ! skopeo inspect --raw --authfile "$AUTHFILE" "docker://${destination%:*}@$digest" > /dev/null; then
    echo "digest $digest is not at ${destination%:*} after the copy" >&2
    exit 1
  fi
done
echo "mirror complete"
