#!/bin/sh
# Download one model directory from object storage into the writable model volume.
# Runs in the sync Job only (CPU node); serving pods never download (field report 3.2).
# Environment: BUCKET, PREFIX, DEST, ADDRESSING_STYLE, MAX_CONCURRENT_REQUESTS, SYNC_ATTEMPTS,
# MARKER, AWS_CONFIG_FILE, optional DIGEST_CACHE, STATUS_DIR and ENDPOINT_URL; credentials come from
# a Secret as AWS_* variables.
set -eu

# The verify container hashes files while this one downloads (verify_model.py --download-status):
# it learns that this container is alive from a FIFO held open for writing (the kernel closes it
# however this container ends, SIGKILL included) and how it ended from exit-code, written on exit.
if [ -n "${STATUS_DIR:-}" ]; then
  mkdir -p "$STATUS_DIR"
  rm -f "$STATUS_DIR/exit-code" "$STATUS_DIR/running" "$STATUS_DIR/running.new" "$STATUS_DIR/listed"
  mkfifo -m 644 "$STATUS_DIR/running.new"
  exec 3<>"$STATUS_DIR/running.new"
  mv "$STATUS_DIR/running.new" "$STATUS_DIR/running"
  trap 'echo $? > "$STATUS_DIR/exit-code.new" && mv "$STATUS_DIR/exit-code.new" "$STATUS_DIR/exit-code"' EXIT
fi

: "${BUCKET:?}" "${PREFIX:?}" "${DEST:?}" "${MARKER:?}"
ADDRESSING_STYLE="${ADDRESSING_STYLE:-virtual}"
MAX_CONCURRENT_REQUESTS="${MAX_CONCURRENT_REQUESTS:-20}"
SYNC_ATTEMPTS="${SYNC_ATTEMPTS:-3}"
RETRY_DELAY_SECONDS="${RETRY_DELAY_SECONDS:-15}"

mkdir -p "$DEST"

# COS and similar stores refuse path-style requests (PathStyleDomainForbidden, field report 11.1).
# Written as `aws configure set default.s3.<key>` writes it, without two CLI starts.
: "${AWS_CONFIG_FILE:?}"
mkdir -p "$(dirname "$AWS_CONFIG_FILE")"
printf '[default]\ns3 =\n    addressing_style = %s\n    max_concurrent_requests = %s\n' \
  "$ADDRESSING_STYLE" "$MAX_CONCURRENT_REQUESTS" > "$AWS_CONFIG_FILE"

# Every call to the store goes to the same endpoint.
store() {
  if [ -n "${ENDPOINT_URL:-}" ]; then
    aws --endpoint-url "$ENDPOINT_URL" "$@"
  else
    aws "$@"
  fi
}

# `--delete` mirrors whatever the prefix lists: a typo'd or emptied prefix would wipe a verified
# model (155 GiB to fetch again). So the prefix must first list what every model has, with the
# same endpoint and addressing as the sync; otherwise nothing is deleted.
# A listing that failed (the store throttled, reset or refused it: the CLI's error is on stderr just
# above) is told apart from one that lists nothing: `aws s3 ls` exits 1 for an empty listing and
# 254/255 for an error (awscli customizations/s3/subcommands.py ListCommand, errorhandler.py; v1 and v2).
listing_problems() {
  status=0
  listing=$(store s3 ls "s3://$BUCKET/$PREFIX/") || status=$?
  if [ "$status" -gt 1 ]; then
    echo "listing s3://$BUCKET/$PREFIX/ failed (aws exit status $status, its error above)"
    return
  fi
  names=$(printf '%s\n' "$listing" | awk '$1 != "PRE" && NF >= 4 {print $4}')
  if [ -z "$names" ]; then
    echo "s3://$BUCKET/$PREFIX/ lists no objects (wrong prefix, empty bucket or no access)"
    return
  fi
  for required in config.json SHA256SUMS; do
    printf '%s\n' "$names" | grep -qxF "$required" || echo "s3://$BUCKET/$PREFIX/ has no $required"
  done
  # Weights: a sharded checkpoint's index, or a small one's single file (model_files.py weight_files).
  printf '%s\n' "$names" | grep -qxF -e model.safetensors.index.json -e model.safetensors ||
    echo "s3://$BUCKET/$PREFIX/ has no weights (model.safetensors.index.json or model.safetensors)"
}

# The marker is never fetched: only verification writes it (a bucket may hold one when someone
# re-uploaded a verified directory; `aws s3 sync` copies dotfiles).
# `<name>*`: the verifier writes the marker and its digest cache through `<name>.<random>` beside
# them (verify_model.py write_json); `--delete` must not remove that file under its rename.
set -- s3 sync "s3://$BUCKET/$PREFIX/" "$DEST/" --delete --exclude "$MARKER*" --only-show-errors
# The verifier's digest cache is ours, not the bucket's: excluded, `--delete` keeps it.
if [ -n "${DIGEST_CACHE:-}" ]; then
  set -- "$@" --exclude "$DIGEST_CACHE*"
fi

# One attempt: 0 when the directory holds what the bucket lists.
# A verified revision (its marker is there) keeps its marker unless this sync is about to change one
# of its files: a re-run of the Job after a settings change (its template is immutable, so the Job is
# replaced: components/sync_job.py) must not take the revision away from the pods that gate on it.
# `--dryrun` reports, one "(dryrun) <operation>: ..." line on stdout each, every download and delete
# the same command would do, and does none (awscli customizations/s3/results.py DRY_RUN_FORMAT;
# OnlyShowErrorsResultPrinter keeps those lines: tests/upstream_aws_cli.py). Nothing to do: the
# download touches nothing and the verifier replaces the marker after its full pass.
sync_once() {
  if [ -f "$DEST/$MARKER" ]; then
    changes=$(store "$@" --dryrun) || return 1
    if [ -z "$changes" ]; then
      echo "verified revision in $DEST/ already matches s3://$BUCKET/$PREFIX/: nothing downloaded, its ready marker stays"
      return 0
    fi
    printf 's3://%s/%s/ differs from the verified revision in %s/ (%s changes); its ready marker goes until the new files verify:\n' \
      "$BUCKET" "$PREFIX" "$DEST" "$(printf '%s\n' "$changes" | awk 'END {print NR}')" >&2
    printf '%s\n' "$changes" | awk 'NR <= 20' >&2
  fi
  # A directory being changed is never "ready": drop the marker before touching any file, so a pod
  # that starts mid-sync fails its gate instead of loading a mix of two revisions.
  rm -f "$DEST/$MARKER"
  store "$@"
}

attempt=1
delay="$RETRY_DELAY_SECONDS"
while :; do
  echo "sync attempt $attempt/$SYNC_ATTEMPTS: s3://$BUCKET/$PREFIX/ -> $DEST/"
  # A listing that fails or is not a model's is refused, and retried like a failed sync.
  problems=$(listing_problems)
  if [ -n "$problems" ]; then
    # Refused before any file is touched: a verified directory keeps its marker and keeps serving.
    printf 'refusing to sync with --delete into %s:\n%s\n' "$DEST/" "$problems" >&2
  else
    # The bucket holds the new revision: the verify container may now prune revisions beyond
    # keepRevisions, before this download fills the volume (verify_model.py, on "listed").
    if [ -n "${STATUS_DIR:-}" ]; then : > "$STATUS_DIR/listed"; fi
    if sync_once "$@"; then
      echo "sync complete"
      exit 0
    fi
  fi
  if [ "$attempt" -ge "$SYNC_ATTEMPTS" ]; then
    echo "sync failed after $attempt attempts" >&2
    exit 1
  fi
  echo "sync attempt $attempt failed; retrying in ${delay}s" >&2
  sleep "$delay"
  attempt=$((attempt + 1))
  delay=$((delay * 2))
done
