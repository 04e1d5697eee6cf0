"""Verify a synced model directory and write its ready marker (sync Job, beside the download).

Checks, in order: required files and the weights (every shard the weight index names, as many as
expected when the stack gives a count, or the single model.safetensors), then
the sha256 of every file in the checksum manifest stored with the model. Only a directory that
passes all of them gets the marker naming the revision; serving pods gate on that marker.
Exit code 1 with one line per problem otherwise.

With --download-status the verifier runs beside the download container and hashes each manifest
file as it lands, on --workers threads, so verification adds only the tail to the download. The
marker is still written only after the download exited 0 and a final pass found every file
verified under the key (size, mtime, ctime, inode) it had when it was hashed. --keep-revisions
prunes older revision directories of the same model once the download reports that the bucket lists
the new revision (and, without a download beside it, after the marker).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_files import (  # noqa: E402
    CHECKSUM_FILE,
    file_sha256,
    missing_files,
    model_arguments,
    report_problems,
    weight_files,
)

# The download container's side of the handshake (components/scripts/sync_model.sh): a FIFO it
# holds open while it lives, and its exit status, written on exit.
RUNNING_FIFO = "running"
EXIT_CODE_FILE = "exit-code"
# Written by the download once the listing shows the new revision (sync_model.sh).
LISTED_FILE = "listed"
POLL_SECONDS = 0.2
STILL_POLLS = 5


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
            name = os.path.normpath(name)
            # A file that fails is removed: never one outside this revision's directory.
            if os.path.isabs(name) or name.split(os.sep)[0] == os.pardir:
                raise ValueError(f"{CHECKSUM_FILE} line {number} names {name}, outside the model directory")
            entries[name] = digest.lower()
    return entries


def file_key(path: str) -> list[int] | None:
    """What changes when a file's bytes may have; None if there is no file.

    - `aws s3 sync` writes every object to a temporary name beside the target and renames it into
      place once complete (s3transfer 0.19.3 download.py DownloadFilenameOutputManager,
      IORenameFileTask; utils.py OSUtils.get_temp_filename; compat.py rename_file = os.rename;
      tests/upstream_aws_cli.py), then sets the mtime to the object's (awscli 1.46.2
      customizations/s3/utils.py ProvideLastModifiedTimeSubscriber); AWS CLI v2, which the pod runs,
      does the same with either transfer client (tests/upstream_aws_cli.py V2_READ). So a replaced file is a new
      inode that existed beside the old one: its inode number differs on any file system, CephFS
      and NFS included, and its ctime is the rename's and utime's, even when size and mtime match.
    - Taken from the open file: on NFS, open() revalidates the attributes with the server
      (close-to-open consistency) where a bare stat() may answer from the client's attribute and
      directory-entry caches for up to acregmax seconds (nfs(5); Linux fs/nfs/dir.c
      nfs_lookup_verify_inode; tests/upstream_nfs.py); the rendered volumes set no nocto. CephFS
      attributes are coherent across clients through the MDS's capabilities (tests/upstream_ceph.py)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, IsADirectoryError):
        return None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def hashed(path: str) -> tuple[list[int], str] | None:
    """(key, sha256) of a file that did not change while it was read; None if it did or is gone."""
    before = file_key(path)
    if before is None:
        return None
    try:
        digest = file_sha256(path)
    except FileNotFoundError:
        return None
    return (before, digest) if file_key(path) == before else None


def load_cache(path: str) -> dict:
    """Digests of files hashed by an earlier attempt, so a Job retry re-hashes only what changed;
    an unreadable cache only costs hashing again."""
    try:
        with open(path, encoding="utf-8") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(cache, dict):
        return {}
    return {n: e for n, e in cache.items() if isinstance(e, dict) and isinstance(e.get("key"), list)
            and isinstance(e.get("sha256"), str)}


class Digests:
    """sha256 of the model's files, each with the key the file had when it was hashed, kept in the
    digest cache beside the marker (the sync excludes that file from --delete)."""

    def __init__(self, model_dir: str, workers: int, cache_file: str = ""):
        self.model_dir, self.cache_file = model_dir, cache_file
        self.known: dict[str, dict] = load_cache(os.path.join(model_dir, cache_file)) if cache_file else {}
        # hashlib releases the GIL, so threads hash files in parallel.
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers))
        self.running: dict[str, Future] = {}
        self.dirty = False

    def path(self, name: str) -> str:
        return os.path.join(self.model_dir, name)

    def current(self, name: str, key: list[int] | None) -> str | None:
        entry = self.known.get(name)
        return entry["sha256"] if entry and key is not None and entry["key"] == key else None

    def start(self, name: str) -> None:
        if name not in self.running:
            self.running[name] = self.pool.submit(hashed, self.path(name))

    def collect(self, wait: bool = False) -> None:
        for name, future in list(self.running.items()):
            if wait or future.done():
                del self.running[name]
                result = future.result()
                if result is not None:
                    self.known[name] = {"key": result[0], "sha256": result[1]}
                    self.dirty = True

    def save(self, drop: tuple[str, ...] = ()) -> None:
        for name in drop:
            self.known.pop(name, None)
            self.dirty = True
        if self.cache_file and self.dirty:
            write_json(self.model_dir, self.cache_file, self.known)
            self.dirty = False

    def verified(self, names: list[str]) -> dict[str, str]:
        """The sha256 of each file as it is now: a digest whose key still matches, else hashed again."""
        self.collect(wait=True)
        keys = {n: file_key(self.path(n)) for n in names}
        for n in names:
            if self.current(n, keys[n]) is None:
                self.start(n)
        self.collect(wait=True)
        return {n: d for n in names if (d := self.current(n, file_key(self.path(n)))) is not None}


def manifest_problems(model_dir: str, pinned: str) -> tuple[dict[str, str], list[str]]:
    manifest_path = os.path.join(model_dir, CHECKSUM_FILE)
    if not os.path.isfile(manifest_path):
        return {}, [f"missing checksum manifest {CHECKSUM_FILE}"]
    if pinned and (found := file_sha256(manifest_path)) != pinned:
        # Same revision, other content: the bucket holds something the stack did not pin.
        return {}, [f"{CHECKSUM_FILE} has sha256 {found}, the stack pins models[].manifestSha256 {pinned}"]
    try:
        return read_manifest(manifest_path), []
    except ValueError as err:
        return {}, [str(err)]


def checksum_problems(model_dir: str, workers: int, pinned: str = "", cache_file: str = "",
                      digests: Digests | None = None, removed: list[str] | None = None) -> list[str]:
    """What fails the manifest; every file that failed its digest is removed (and named in `removed`)."""
    manifest, problems = manifest_problems(model_dir, pinned)
    if problems:
        return problems
    # Every weight file, the shards the index names or the single model.safetensors, is hashed.
    for shard in weight_files(model_dir, None)[0]:
        if os.path.normpath(shard) not in manifest:
            problems.append(f"shard {shard} has no entry in {CHECKSUM_FILE}")
    present = sorted(n for n in manifest if os.path.isfile(os.path.join(model_dir, n)))
    problems += [f"missing {n} (listed in {CHECKSUM_FILE})" for n in sorted(set(manifest) - set(present))]
    digests = digests or Digests(model_dir, workers, cache_file)
    actual = digests.verified(present)
    bad = [n for n in present if actual.get(n) != manifest[n]]
    # The cache forgets a file before it goes: its inode number may be reused by the next download.
    digests.save(drop=tuple(bad))
    for n in bad:
        # `aws s3 sync` skips a local file of the object's size, so a same-size corrupt copy would
        # fail every retry; removed, the next attempt downloads it again.
        os.remove(os.path.join(model_dir, n))
        if removed is not None:
            removed.append(n)
        problems.append(f"sha256 mismatch for {n}: removed, so the next sync downloads it again"
                        if n in actual else f"{n} changed while it was verified: removed, so the next sync "
                        "downloads it again")
    return problems


class Download:
    """The download container, seen through the directory both containers mount (an emptyDir)."""

    def __init__(self, status_dir: str):
        self.status_dir = status_dir
        self.fifo = -1

    def exit_code(self) -> int | None:
        try:
            with open(os.path.join(self.status_dir, EXIT_CODE_FILE), encoding="utf-8") as f:
                return int(f.read().strip())
        except (FileNotFoundError, ValueError):
            return None

    def state(self) -> tuple[bool, int | None]:
        """(running, exit code). A FIFO read with O_NONBLOCK answers EAGAIN while any process holds
        it open for writing and end-of-file once none does (pipe(7), fifo(7)): the kernel closes the
        download's descriptor however it ends, SIGKILL and OOM kill included."""
        code = self.exit_code()
        if code is not None:
            return False, code
        if self.fifo < 0:
            try:
                self.fifo = os.open(os.path.join(self.status_dir, RUNNING_FIFO), os.O_RDONLY | os.O_NONBLOCK)
            except FileNotFoundError:
                return True, None          # not started yet
        try:
            if os.read(self.fifo, 64):
                return True, None
        except BlockingIOError:
            return True, None
        # No writer left: the exit status is written before the FIFO closes, or never (killed).
        return False, self.exit_code()

    def listed(self) -> bool:
        return os.path.exists(os.path.join(self.status_dir, LISTED_FILE))

    def wait(self, seconds: float) -> None:
        """Sleep, but wake as soon as the download ends: its FIFO then reports hang-up."""
        if self.fifo < 0:
            time.sleep(seconds)
        else:
            select.select([self.fifo], [], [], seconds)


def hash_while_downloading(download: Download, digests: Digests,
                          on_listed: Callable[[], None] | None = None) -> int | None:
    """Hash every manifest file as it lands, until the download ends; returns its exit code (None if
    it ended without one). A file under its final name is complete (the CLI renames it into place).
    Right after the rename the CLI sets its mtime to the object's LastModified in whole seconds
    (awscli customizations/s3/utils.py ProvideLastModifiedTimeSubscriber: int(mod_timestamp)), which
    changes the key: a file is hashed once its mtime is a whole second, or else (a file system with
    coarse timestamps) once its key held still for STILL_POLLS polls. Whatever changes after it was
    hashed is hashed again by the final pass. `on_listed` runs once, when the download reports that
    the bucket's listing holds the new revision."""
    seen: dict[str, list[int] | None] = {}
    still: dict[str, int] = {}
    manifest_key: list[int] | None = None
    names: list[str] = []
    while True:
        running, code = download.state()
        if on_listed and download.listed():
            on_listed()
            on_listed = None
        key = file_key(digests.path(CHECKSUM_FILE))
        if key != manifest_key:
            manifest_key = key
            try:
                names = sorted(read_manifest(digests.path(CHECKSUM_FILE))) if key else []
            except (OSError, ValueError):
                names = []
        for n in names:
            # A plain stat while watching (cheap on a network file system); what counts is the key
            # hashed() takes from the open file and the final pass compares.
            try:
                st = os.stat(digests.path(n))
                key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
            except FileNotFoundError:
                key = None
            still[n] = still.get(n, 0) + 1 if seen.get(n) == key else 0
            seen[n] = key
            if key is not None and digests.current(n, key) is None and (
                    key[1] % 1_000_000_000 == 0 or still[n] >= STILL_POLLS):
                digests.start(n)
        digests.collect()
        digests.save()
        if not running:
            return code
        download.wait(POLL_SECONDS)


def marker_payload(model_dir: str, revision: str, shards: int) -> dict:
    """What the gate checks without hashing: the revision, the manifest's digest (a small file) and
    the size of every file the manifest lists."""
    manifest_path = os.path.join(model_dir, CHECKSUM_FILE)
    sizes = {n: os.path.getsize(os.path.join(model_dir, n)) for n in sorted(read_manifest(manifest_path))}
    return {"revision": revision, "shards": shards, "manifest_sha256": file_sha256(manifest_path), "sizes": sizes}


def write_marker(model_dir: str, marker: str, revision: str, shards: int) -> None:
    write_json(model_dir, marker, marker_payload(model_dir, revision, shards))


def temp_prefix(name: str) -> str:
    """The name's own prefix: the sync excludes `<name>*` from --delete (sync_model.sh), so it never
    deletes a temporary file under the verifier's rename."""
    return f"{name}."


def write_json(model_dir: str, name: str, payload: dict) -> None:
    """Atomically: a reader sees the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=model_dir, prefix=temp_prefix(name))
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(model_dir, name))


def verified_revision(directory: str, marker: str) -> tuple[float, str] | None:
    """(marker mtime, revision) when the directory holds our marker naming its own revision."""
    path = os.path.join(directory, marker)
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        mtime = os.stat(path).st_mtime
    except (OSError, ValueError):
        return None
    if isinstance(record, dict) and record.get("revision") == os.path.basename(directory):
        return mtime, record["revision"]
    return None


def prune_revisions(model_dir: str, marker: str, cache_file: str, keep: int, in_use: set[str]) -> list[str]:
    """Remove revision directories of this model beyond the newest `keep` verified ones (this one
    counted), never one the stack still serves (`in_use`, e.g. the other arm of a DSpark A/B pair)
    and never a directory that lacks our layout (our marker or digest cache). Returns what went."""
    parent, current = os.path.split(os.path.normpath(model_dir))
    verified: list[tuple[float, str]] = []
    unverified: list[str] = []
    with os.scandir(parent) as entries:
        for entry in entries:
            if entry.name in in_use or entry.name == current or not entry.is_dir(follow_symlinks=False):
                continue
            found = verified_revision(entry.path, marker)
            if found:
                verified.append(found)
            elif cache_file and os.path.isfile(os.path.join(entry.path, cache_file)):
                unverified.append(entry.name)   # a sync of it never verified: no pod can use it
    verified.sort(reverse=True)
    doomed = [name for _, name in verified[max(0, keep - 1):]] + unverified
    removed = []
    for name in sorted(doomed):
        path = os.path.join(parent, name)
        try:
            # The marker first: a pod that starts on it now fails its gate instead of loading a
            # directory half deleted.
            os.remove(os.path.join(path, marker))
        except FileNotFoundError:
            pass
        except OSError as err:
            print(f"keeping {path}: {err}", file=sys.stderr)
            continue
        shutil.rmtree(path, ignore_errors=True)
        if os.path.exists(path):
            print(f"could not remove all of {path}", file=sys.stderr)
        removed.append(name)
    return removed


def drop_marker(model_dir: str, marker: str) -> None:
    try:
        os.remove(os.path.join(model_dir, marker))
    except FileNotFoundError:
        pass


def main(argv: list[str] | None = None) -> int:
    p = model_arguments(__doc__)
    p.add_argument("--workers", type=int, default=4, help="hashing threads: the container's CPU limit")
    p.add_argument("--digest-cache", default="", help="file in the model directory that keeps verified digests")
    p.add_argument("--download-status", default="",
                   help="directory shared with the download container: hash while it downloads, then verify "
                        "only if it exited 0")
    p.add_argument("--keep-revisions", type=int, default=0,
                   help="after the marker, keep this many verified revisions of the model (0: prune nothing)")
    p.add_argument("--in-use", action="append", default=[], help="a revision the stack serves: never pruned")
    a = p.parse_args(argv)
    digests = Digests(a.model_dir, a.workers, a.digest_cache)

    def prune() -> None:
        for name in prune_revisions(a.model_dir, a.marker, a.digest_cache, a.keep_revisions, set(a.in_use)):
            print(f"pruned revision {name} (keeping {a.keep_revisions} revisions, this one included)")

    if a.download_status:
        os.makedirs(a.model_dir, exist_ok=True)
        # Old revisions go once the listing shows the new one and before its download fills the
        # volume, so the volume needs room for keepRevisions revisions, not one more (stacks/rules.py).
        code = hash_while_downloading(Download(a.download_status), digests, prune if a.keep_revisions else None)
        if code != 0:
            digests.collect(wait=True)
            # Nothing is removed: the sync failed or was refused before it touched anything (then a
            # verified directory keeps its marker and keeps serving), and the next attempt resumes.
            digests.save()
            how = "ended without an exit status (killed)" if code is None else f"exited {code}"
            print(f"model at {a.model_dir} is NOT ready: the download {how}; nothing verified", file=sys.stderr)
            return 1
    # A marker here is this revision's from an earlier verification (the sync never fetches one), and
    # no file it vouches for changed since: the download drops it before it changes any (sync_model.sh).
    # It stays through this pass, so pods that start meanwhile pass their gate (issue 18, case 8), and
    # is replaced in one rename (write_json) only after the whole pass succeeded. A pass that fails
    # removes it only with a file that failed its digest: then it vouches for what is gone. Otherwise
    # the files are the ones it recorded, and the gate checks the current settings itself (revision,
    # pin, shard count, sizes, manifest digest), so it lets no pod pass that this pass would refuse.
    removed: list[str] = []
    problems = missing_files(a.model_dir, a.expected_shards, a.required_files) or checksum_problems(
        a.model_dir, a.workers, a.manifest_sha256, a.digest_cache, digests, removed)
    digests.save()
    if report_problems(f"model at {a.model_dir} is NOT ready:", problems):
        if removed:
            drop_marker(a.model_dir, a.marker)
        elif os.path.isfile(os.path.join(a.model_dir, a.marker)):
            print(f"the ready marker of {a.model_dir} stays: no file it vouches for changed", file=sys.stderr)
        return 1
    shards = len(weight_files(a.model_dir, a.expected_shards)[0])
    write_marker(a.model_dir, a.marker, a.revision, shards)
    print(f"model at {a.model_dir} verified: revision {a.revision}, {shards} shards")
    if a.keep_revisions:
        prune()   # without a concurrent download (or what appeared since): nothing older stays
    return 0


if __name__ == "__main__":
    sys.exit(main())
