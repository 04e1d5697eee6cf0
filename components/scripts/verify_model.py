"""Verify a synced model directory and write its ready marker (sync Job, after the download).

Checks, in order: required files and every shard the weight index names (and their count), then
the sha256 of every file in the checksum manifest stored with the model. Only a directory that
passes all of them gets the marker naming the revision; serving pods gate on that marker.
Exit code 1 with one line per problem otherwise.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_files import (  # noqa: E402
    CHECKSUM_FILE,
    INDEX_FILE,
    file_sha256,
    missing_files,
    model_arguments,
    report_problems,
    shard_names,
)


def read_manifest(path: str) -> dict[str, str]:
    """`sha256sum` output: '<64 hex>  <relative path>' per line ('*' marks binary mode)."""
    entries = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            digest, _, name = line.partition(" ")
            name = name.strip().lstrip("*")
            if len(digest) != 64 or not name:
                raise ValueError(f"{CHECKSUM_FILE} line {number} is not '<sha256>  <file>'")
            entries[os.path.normpath(name)] = digest.lower()
    return entries


def checksum_problems(model_dir: str, workers: int, pinned: str = "", cache_file: str = "") -> list[str]:
    manifest_path = os.path.join(model_dir, CHECKSUM_FILE)
    if not os.path.isfile(manifest_path):
        return [f"missing checksum manifest {CHECKSUM_FILE}"]
    if pinned and (found := file_sha256(manifest_path)) != pinned:
        # Same revision, other content: the bucket holds something the stack did not pin.
        return [f"{CHECKSUM_FILE} has sha256 {found}, the stack pins models[].manifestSha256 {pinned}"]
    try:
        manifest = read_manifest(manifest_path)
    except ValueError as err:
        return [str(err)]
    problems = []
    index_path = os.path.join(model_dir, INDEX_FILE)
    if os.path.isfile(index_path):
        for shard in shard_names(index_path):
            if os.path.normpath(shard) not in manifest:
                problems.append(f"shard {shard} has no entry in {CHECKSUM_FILE}")
    present = {n: d for n, d in manifest.items() if os.path.isfile(os.path.join(model_dir, n))}
    problems += [f"missing {n} (listed in {CHECKSUM_FILE})" for n in sorted(set(manifest) - set(present))]
    cache = load_cache(os.path.join(model_dir, cache_file)) if cache_file else {}
    keys = {n: file_key(os.path.join(model_dir, n)) for n in present}
    stale = [n for n in present if cache.get(n, {}).get("key") != keys[n]]
    # hashlib releases the GIL, so threads hash shards in parallel.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        actual = dict(zip(stale, pool.map(lambda n: file_sha256(os.path.join(model_dir, n)), stale)))
    actual.update({n: cache[n]["sha256"] for n in present if n not in actual})
    good = {}
    for n in sorted(present):
        if actual[n] == present[n]:
            good[n] = {"key": keys[n], "sha256": actual[n]}
        else:
            # `aws s3 sync` skips a local file of the object's size, so a same-size corrupt copy would
            # fail every retry; removed, the next attempt downloads it again.
            os.remove(os.path.join(model_dir, n))
            problems.append(f"sha256 mismatch for {n}: removed, so the next sync downloads it again")
    if cache_file:
        write_json(model_dir, cache_file, good)
    return problems


def file_key(path: str) -> list[int]:
    """What changes when a file's bytes may have: `aws s3 sync` sets mtime to the object's, so a
    re-downloaded file can keep its mtime, but never its ctime."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def load_cache(path: str) -> dict:
    """Digests of files that passed an earlier attempt, so a Job retry re-hashes only what changed;
    an unreadable cache only costs hashing again."""
    try:
        with open(path, encoding="utf-8") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def marker_payload(model_dir: str, revision: str, shards: int) -> dict:
    """What the gate checks without hashing: the revision, the manifest's digest (a small file) and
    the size of every file the manifest lists."""
    manifest_path = os.path.join(model_dir, CHECKSUM_FILE)
    sizes = {n: os.path.getsize(os.path.join(model_dir, n)) for n in sorted(read_manifest(manifest_path))}
    return {"revision": revision, "shards": shards, "manifest_sha256": file_sha256(manifest_path), "sizes": sizes}


def write_marker(model_dir: str, marker: str, revision: str, shards: int) -> None:
    write_json(model_dir, marker, marker_payload(model_dir, revision, shards))


def write_json(model_dir: str, name: str, payload: dict) -> None:
    """Atomically: a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=model_dir, prefix=".marker-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(model_dir, name))


def main(argv: list[str] | None = None) -> int:
    p = model_arguments(__doc__)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--digest-cache", default="", help="file in the model directory that keeps verified digests")
    a = p.parse_args(argv)
    # Verification is the only source of the marker: one already there (an earlier run's, or one
    # `aws s3 sync` copied from a bucket someone re-uploaded a verified directory to) goes first, so
    # a failed verification leaves no marker for the gate to trust.
    try:
        os.remove(os.path.join(a.model_dir, a.marker))
    except FileNotFoundError:
        pass
    problems = missing_files(a.model_dir, a.expected_shards) or checksum_problems(a.model_dir, a.workers, a.manifest_sha256, a.digest_cache)
    if report_problems(f"model at {a.model_dir} is NOT ready:", problems):
        return 1
    write_marker(a.model_dir, a.marker, a.revision, a.expected_shards)
    print(f"model at {a.model_dir} verified: revision {a.revision}, {a.expected_shards} shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
