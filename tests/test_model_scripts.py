"""The scripts the sync Job and the gate run, exercised on a small fake model directory."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "components" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import model_gate  # noqa: E402
import verify_model  # noqa: E402

from components.scripts import REQUIRED_FILES_DATA, script_data  # noqa: E402
from policy.profiles import deepseek_v4, generic  # noqa: E402

MARKER = ".llm-serving-ready.json"
REQUIRED: dict[str, Path] = {}


@pytest.fixture(autouse=True)
def required_files(tmp_path):
    """The scripts ConfigMap's model_files.json of a stack whose directories make_model adds."""
    REQUIRED["path"] = tmp_path / REQUIRED_FILES_DATA
    REQUIRED["path"].write_text("{}")
    yield REQUIRED["path"]


def record_required(directory: str, files: tuple[str, ...]) -> None:
    """What components/scripts.py writes for a model of that directory and profile."""
    data = json.loads(REQUIRED["path"].read_text())
    data[directory] = list(files)
    REQUIRED["path"].write_text(json.dumps(data))


def make_model(root: Path, shards: int = 3, checksums: bool = True, required: tuple[str, ...] = deepseek_v4.REQUIRED_FILES,
               single: bool = False) -> Path:
    """A checkpoint of `shards` shards and their index, or (single) one model.safetensors and no index."""
    record_required(root.parent.name, required)
    root.mkdir(parents=True, exist_ok=True)
    names = ["model.safetensors"] if single else [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for n in names:
        (root / n).write_bytes(os.urandom(64))
    if not single:
        (root / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {f"layer.{i}.w": n for i, n in enumerate(names + names)}}))
    for f in (*(f for f in required if f != "model.safetensors.index.json"), "tokenizer.json"):
        (root / f).write_text("{}")
    if checksums:
        lines = [f"{hashlib.sha256((root / n).read_bytes()).hexdigest()}  {n}" for n in sorted(os.listdir(root))]
        (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return root


def verify(model: Path, shards: int = 3, revision: str = "r1", pinned: str = "") -> int:
    return verify_model.main(["--model-dir", str(model), "--revision", revision, "--expected-shards", str(shards),
                              "--marker", MARKER, "--workers", "2", "--manifest-sha256", pinned,
                              "--required-files", str(REQUIRED["path"])])


def gate(model: Path, shards: int = 3, revision: str = "r1", pinned: str = "") -> int:
    return model_gate.main(["--model-dir", str(model), "--revision", revision,
                            "--expected-shards", str(shards), "--marker", MARKER, "--manifest-sha256", pinned,
                            "--required-files", str(REQUIRED["path"])])


def test_complete_model_is_verified_and_marked(tmp_path):
    model = make_model(tmp_path / "m")
    assert verify(model) == 0
    record = json.loads((model / MARKER).read_text())
    assert record == {"revision": "r1", "shards": 3, "manifest_sha256": sha256(model / "SHA256SUMS"),
                      "sizes": {n: (model / n).stat().st_size for n in sorted(os.listdir(model))
                                if n not in ("SHA256SUMS", MARKER)}}
    assert record["sizes"]["model-00001-of-00003.safetensors"] == 64
    assert gate(model) == 0


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_verifier_refuses_a_manifest_the_stack_did_not_pin(tmp_path, capsys):
    """Same revision, other content: models[].manifestSha256 pins what is served (issue 12)."""
    model = make_model(tmp_path / "m")
    found = sha256(model / "SHA256SUMS")
    assert verify(model, pinned="0" * 64) == 1
    assert (f"SHA256SUMS has sha256 {found}, the stack pins models[].manifestSha256 {'0' * 64}"
            in capsys.readouterr().err)
    assert not (model / MARKER).exists()
    assert verify(model, pinned=found) == 0 and gate(model, pinned=found) == 0


def test_gate_refuses_a_marker_recording_another_pinned_manifest(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert verify(model) == 0
    assert gate(model, pinned="0" * 64) == 1
    assert f"the stack pins {'0' * 64}" in capsys.readouterr().err


def test_gate_notices_a_changed_manifest_or_a_file_of_another_size(tmp_path, capsys):
    """Cheap checks, no shard hashing: the manifest's digest and every verified file's size."""
    model = make_model(tmp_path / "m")
    assert verify(model) == 0
    recorded = sha256(model / "SHA256SUMS")
    with open(model / "SHA256SUMS", "a") as f:
        f.write(f"{'1' * 64}  extra.bin\n")
    shard = model / "model-00002-of-00003.safetensors"
    shard.write_bytes(shard.read_bytes() + b"tail")
    assert gate(model) == 1
    err = capsys.readouterr().err
    assert f"SHA256SUMS has sha256 {sha256(model / 'SHA256SUMS')}, the ready marker recorded {recorded}" in err
    assert "model-00002-of-00003.safetensors is 68 bytes, the ready marker recorded 64" in err


def test_gate_refuses_a_marker_without_digest_and_sizes(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    (model / MARKER).write_text(json.dumps({"revision": "r1", "shards": 3}))
    assert gate(model) == 1
    assert "ready marker records no manifest digest or file sizes" in capsys.readouterr().err


def test_missing_shard_is_named(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    (model / "model-00002-of-00003.safetensors").unlink()
    assert verify(model) == 1
    assert "missing shard model-00002-of-00003.safetensors" in capsys.readouterr().err
    assert not (model / MARKER).exists()


def test_wrong_shard_count_is_named(tmp_path, capsys):
    model = make_model(tmp_path / "m", shards=3)
    assert verify(model, shards=48) == 1
    assert "weight index names 3 shards, expected 48" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["config.json", "generation_config.json", "tokenizer_config.json",
                                  "model.safetensors.index.json"])
def test_missing_required_file_is_named(tmp_path, capsys, name):
    model = make_model(tmp_path / "m")
    (model / name).unlink()
    assert verify(model) == 1
    assert f"missing {name}" in capsys.readouterr().err


# ---- single-file and sharded checkpoints (issue 28) ----

def verify_counting(model: Path, shards: int | None = None) -> int:
    """The verifier as the sync Job runs it for a stack file that gives no count (or `shards`)."""
    count = ["--expected-shards", str(shards)] if shards is not None else []
    return verify_model.main(["--model-dir", str(model), "--revision", "r1", *count, "--marker", MARKER,
                              "--workers", "2", "--required-files", str(REQUIRED["path"])])


def gate_counting(model: Path, shards: int | None = None) -> int:
    count = ["--expected-shards", str(shards)] if shards is not None else []
    return model_gate.main(["--model-dir", str(model), "--revision", "r1", *count, "--marker", MARKER,
                            "--required-files", str(REQUIRED["path"])])


def test_a_single_file_checkpoint_passes_the_generic_profile_without_a_count(tmp_path):
    model = make_model(tmp_path / "small" / "r1", single=True, required=generic.REQUIRED_FILES)
    assert not (model / "model.safetensors.index.json").exists()
    assert verify_counting(model) == 0 and gate_counting(model) == 0
    assert json.loads((model / MARKER).read_text())["shards"] == 1
    assert verify_counting(model, shards=1) == 0 and gate_counting(model, shards=1) == 0


def test_a_sharded_checkpoint_without_a_count_takes_the_index_s(tmp_path):
    model = make_model(tmp_path / "qwen" / "r1", shards=5, required=generic.REQUIRED_FILES)
    assert verify_counting(model) == 0 and gate_counting(model) == 0
    assert json.loads((model / MARKER).read_text())["shards"] == 5


def test_an_index_naming_a_missing_shard_fails_naming_it_with_or_without_a_count(tmp_path, capsys):
    model = make_model(tmp_path / "qwen" / "r1", shards=4, required=generic.REQUIRED_FILES)
    (model / "model-00003-of-00004.safetensors").unlink()
    for shards in (None, 4):
        assert verify_counting(model, shards) == 1
        assert "missing shard model-00003-of-00004.safetensors" in capsys.readouterr().err
    assert not (model / MARKER).exists() and gate_counting(model) == 1


@pytest.mark.parametrize("single, given, says", [
    (False, 4, "weight index names 3 shards, expected 4"),
    (True, 2, "checkpoint is a single model.safetensors without model.safetensors.index.json, expected 2 shards"),
])
def test_a_count_the_checkpoint_does_not_have_fails(tmp_path, capsys, single, given, says):
    model = make_model(tmp_path / "qwen" / "r1", shards=3, single=single, required=generic.REQUIRED_FILES)
    assert verify_counting(model, given) == 1
    assert says in capsys.readouterr().err
    assert verify_counting(model) == 0 and gate_counting(model, given) == 1
    assert says in capsys.readouterr().err


def test_deepseek_never_passes_on_a_single_file(tmp_path, capsys):
    """Its profile lists the index among the required files: a single model.safetensors is refused
    as before, by the count the profile gives and by the missing index."""
    model = make_model(tmp_path / "deepseek" / "r1", single=True)
    assert verify(model, shards=48) == 1
    err = capsys.readouterr().err
    assert "missing model.safetensors.index.json" in err
    assert "checkpoint is a single model.safetensors without model.safetensors.index.json, expected 48 shards" in err


def test_no_weights_at_all_and_a_single_file_missing_from_the_manifest_are_named(tmp_path, capsys):
    model = make_model(tmp_path / "small" / "r1", single=True, required=generic.REQUIRED_FILES)
    manifest = model / "SHA256SUMS"
    manifest.write_text("".join(l + "\n" for l in manifest.read_text().splitlines() if "model.safetensors" not in l))
    assert verify_counting(model) == 1
    assert "shard model.safetensors has no entry in SHA256SUMS" in capsys.readouterr().err
    (model / "model.safetensors").unlink()
    assert verify_counting(model) == 1
    assert ("missing weights: neither model.safetensors.index.json nor a single model.safetensors"
            in capsys.readouterr().err)


def test_an_index_of_another_shape_is_named_not_a_traceback(tmp_path, capsys):
    model = make_model(tmp_path / "qwen" / "r1", required=generic.REQUIRED_FILES)
    (model / "model.safetensors.index.json").write_text('{"weight_map": ["model-00001-of-00003.safetensors"]}')
    assert verify_counting(model) == 1
    assert "unreadable model.safetensors.index.json: its weight_map is not an object" in capsys.readouterr().err


def test_the_required_files_are_the_profile_s(tmp_path, capsys):
    """generation_config.json is DeepSeek-V4's (policy/profiles/), not every model's: a generic model's
    directory passes without it, a DeepSeek one is refused, by the verifier and the gate alike."""
    other = make_model(tmp_path / "qwen" / "r1", required=generic.REQUIRED_FILES)
    assert not (other / "generation_config.json").exists()
    assert verify(other) == 0 and gate(other) == 0
    deepseek = make_model(tmp_path / "deepseek" / "r1")
    assert verify(deepseek) == 0
    record_required("deepseek", (*deepseek_v4.REQUIRED_FILES, "chat_template.jinja"))   # the profile grows
    assert gate(deepseek) == 1 and "missing chat_template.jinja" in capsys.readouterr().err


def test_a_directory_without_recorded_files_is_refused(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    REQUIRED["path"].write_text("{}")
    assert verify(model) == 1
    assert "no required files recorded for" in capsys.readouterr().err
    REQUIRED["path"].unlink()
    assert verify(model) == 1


def test_the_configmap_records_each_directory_s_files_beside_the_scripts(tmp_path):
    """The name model_files.py reads is the key components/scripts.py writes."""
    import model_files
    assert model_files.REQUIRED_FILES_DATA == REQUIRED_FILES_DATA
    data = script_data({"Qwen2.5-72B-Instruct": generic.REQUIRED_FILES})
    assert json.loads(data[REQUIRED_FILES_DATA]) == {"Qwen2.5-72B-Instruct": list(generic.REQUIRED_FILES)}
    assert model_files.DEFAULT_REQUIRED_FILES_PATH == str(SCRIPTS / REQUIRED_FILES_DATA)


def test_missing_tokenizer_payload_is_named(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    (model / "tokenizer.json").unlink()
    assert verify(model) == 1
    assert "missing tokenizer (tokenizer.json or tokenizer.model)" in capsys.readouterr().err


def test_corrupt_shard_fails_the_checksum(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    shard = model / "model-00001-of-00003.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])   # another first byte (b"x" was it 1 time in 256)
    assert verify(model) == 1
    assert "sha256 mismatch for model-00001-of-00003.safetensors" in capsys.readouterr().err


def test_a_file_that_fails_its_checksum_is_removed_so_the_next_sync_heals_it(tmp_path, capsys):
    """`aws s3 sync` never replaces a same-size local file that is newer: removed, it is fetched again."""
    model = make_model(tmp_path / "m")
    shard = model / "model-00001-of-00003.safetensors"
    good = shard.read_bytes()
    shard.write_bytes(b"x" + good[1:])
    assert verify(model) == 1
    assert ("sha256 mismatch for model-00001-of-00003.safetensors: removed, so the next sync downloads it again"
            in capsys.readouterr().err)
    assert not shard.exists()
    assert (model / "model-00002-of-00003.safetensors").exists()   # a good file stays
    shard.write_bytes(good)                                         # what the next sync fetches
    assert verify(model) == 0


def test_a_manifest_naming_a_file_outside_the_revision_directory_is_refused_and_removes_nothing(tmp_path, capsys):
    """A file that fails its checksum is removed, so the manifest (from the bucket) must not name one
    outside the directory: `../<revision>/...` is the previous revision that running pods serve."""
    served = make_model(tmp_path / "m" / "r1")
    model = make_model(tmp_path / "m" / "r2")
    outside = served / "model-00001-of-00003.safetensors"
    with open(model / "SHA256SUMS", "a") as f:
        f.write(f"{'0' * 64}  ../r1/{outside.name}\n")
    assert verify(model, revision="r2") == 1
    assert "SHA256SUMS line" in capsys.readouterr().err
    assert outside.exists() and not (model / MARKER).exists()


def test_a_marker_already_there_does_not_survive_a_failed_verification(tmp_path, capsys):
    """A marker copied from the bucket (or left by an earlier run) must not let the gate pass a
    directory whose verification just failed (issue 12, item 2)."""
    model = make_model(tmp_path / "m")
    assert verify(model) == 0 and gate(model) == 0
    shard = model / "model-00002-of-00003.safetensors"
    # Replaced as `aws s3 sync` replaces a file (a temporary name renamed over it: a new inode). An
    # in-place rewrite within one tick of the kernel's coarse clock keeps size, mtime and ctime, and
    # the digest cache would rightly not hash it again (see the retry test below).
    tmp = shard.with_name(shard.name + ".a1B2c3D4")
    tmp.write_bytes(b"x" + shard.read_bytes()[1:])
    os.rename(tmp, shard)
    assert verify(model) == 1
    assert not (model / MARKER).exists()
    assert gate(model) == 1
    capsys.readouterr()


def test_a_retry_rehashes_only_the_files_that_changed(tmp_path, monkeypatch, capsys):
    """The digest cache beside the marker: a Job retry after one bad shard hashes that shard only."""
    model = make_model(tmp_path / "m")
    hashed = []
    real = verify_model.file_sha256
    monkeypatch.setattr(verify_model, "file_sha256", lambda p: hashed.append(os.path.basename(p)) or real(p))

    def run() -> int:
        hashed.clear()
        return verify_model.main(["--model-dir", str(model), "--revision", "r1", "--expected-shards", "3",
                                  "--marker", MARKER, "--workers", "2", "--digest-cache", ".digests.json",
                                  "--required-files", str(REQUIRED["path"])])
    shard = model / "model-00002-of-00003.safetensors"
    good = shard.read_bytes()
    shard.write_bytes(b"x" + good[1:])
    assert run() == 1 and "model-00002-of-00003.safetensors" in hashed and not shard.exists()
    assert len([n for n in hashed if n != "SHA256SUMS"]) == 8            # the first run hashes every file
    shard.write_bytes(good)                                               # the retry's download
    assert run() == 0 and [n for n in hashed if n != "SHA256SUMS"] == ["model-00002-of-00003.safetensors"]
    assert run() == 0 and [n for n in hashed if n != "SHA256SUMS"] == []  # nothing changed, nothing hashed
    # Same size and mtime but new bytes, put in place as `aws s3 sync` does (a temporary name renamed
    # over the file, then the object's mtime): a new inode, so it is hashed again. An in-place rewrite
    # is not what the CLI does, and within one tick of the coarse clock it may keep the ctime too.
    st = shard.stat()
    tmp = shard.with_name(shard.name + ".a1B2c3D4")
    tmp.write_bytes(b"y" + good[1:])
    os.rename(tmp, shard)
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert shard.stat().st_ino != st.st_ino
    assert run() == 1 and "sha256 mismatch for model-00002-of-00003.safetensors" in capsys.readouterr().err


def test_missing_checksum_manifest_fails(tmp_path, capsys):
    model = make_model(tmp_path / "m", checksums=False)
    assert verify(model) == 1
    assert "missing checksum manifest SHA256SUMS" in capsys.readouterr().err


def test_shard_without_checksum_entry_fails(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    manifest = model / "SHA256SUMS"
    manifest.write_text("".join(l + "\n" for l in manifest.read_text().splitlines() if "00003" not in l))
    assert verify(model) == 1
    assert "shard model-00003-of-00003.safetensors has no entry in SHA256SUMS" in capsys.readouterr().err


def test_gate_without_marker_explains(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert gate(model) == 1
    assert "the model sync Job has not verified this directory yet" in capsys.readouterr().err


def test_gate_refuses_another_revision(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert verify(model, revision="old") == 0
    assert gate(model, revision="new") == 1
    assert "ready marker names revision 'old', this pod expects 'new'" in capsys.readouterr().err


def test_gate_notices_a_shard_removed_after_verification(tmp_path, capsys):
    model = make_model(tmp_path / "m")
    assert verify(model) == 0
    (model / "model-00003-of-00003.safetensors").unlink()
    assert gate(model) == 1
    assert "missing shard model-00003-of-00003.safetensors" in capsys.readouterr().err


# ---- sync_model.sh with a stand-in `aws` on PATH ----

FAKE_AWS = """#!/bin/sh
echo "$*" >> "$AWS_LOG"
case "$1" in configure) exit 0;; esac
case " $* " in *" s3 ls "*) cat "$AWS_LISTING"; exit 0;; esac
case " $* " in *" --dryrun "*) cat "$AWS_DRYRUN"; exit 0;; esac
n=$(cat "$AWS_COUNT" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$AWS_COUNT"
[ "$n" -ge "$AWS_SUCCEED_ON" ] && exit 0 || exit 1
"""


FULL_LISTING = """                           PRE extra/
2026-07-31 10:00:00       1234 SHA256SUMS
2026-07-31 10:00:00        567 config.json
2026-07-31 10:00:00      89012 model.safetensors.index.json
2026-07-31 10:00:00 5368709120 model-00001-of-00048.safetensors
"""


# What `sync --dryrun` prints when the bucket differs from the local directory (a verified one, with
# its marker, is synced only then: sync_model.sh sync_once).
DIFFERS = "(dryrun) download: s3://b/models/m/config.json to models/m/config.json\n"


def run_sync(tmp_path: Path, succeed_on: int, attempts: int = 3, endpoint: str | None = None,
             listing: str = FULL_LISTING, dryrun: str = DIFFERS):
    (tmp_path / "listing").write_text(listing)
    (tmp_path / "dryrun").write_text(dryrun)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(FAKE_AWS)
    aws.chmod(aws.stat().st_mode | stat.S_IEXEC)
    dest = tmp_path / "models" / "m"
    dest.mkdir(parents=True)
    (dest / MARKER).write_text("{}")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_LOG": str(tmp_path / "log"),
           "AWS_COUNT": str(tmp_path / "count"), "AWS_SUCCEED_ON": str(succeed_on),
           "AWS_LISTING": str(tmp_path / "listing"), "AWS_DRYRUN": str(tmp_path / "dryrun"),
           "BUCKET": "b", "PREFIX": "models/m", "DEST": str(dest), "MARKER": MARKER, "DIGEST_CACHE": ".digests.json",
           "ADDRESSING_STYLE": "virtual", "MAX_CONCURRENT_REQUESTS": "32", "SYNC_ATTEMPTS": str(attempts),
           "RETRY_DELAY_SECONDS": "0", "AWS_CONFIG_FILE": str(tmp_path / "aws-config")}
    if endpoint:
        env["ENDPOINT_URL"] = endpoint
    proc = subprocess.run(["/bin/sh", str(SCRIPTS / "sync_model.sh")], env=env, capture_output=True, text=True)
    return proc, (tmp_path / "log").read_text().splitlines(), dest


def test_sync_sets_addressing_and_concurrency_and_drops_the_marker(tmp_path):
    proc, calls, dest = run_sync(tmp_path, succeed_on=1, endpoint="https://cos.example.com")
    assert proc.returncode == 0, proc.stderr
    # The config `aws configure set default.s3.<key>` would write (the real CLI reads it in
    # tests/test_sync_real.py, where path-style is refused).
    assert (tmp_path / "aws-config").read_text() == (
        "[default]\ns3 =\n    addressing_style = virtual\n    max_concurrent_requests = 32\n")
    assert calls[0] == "--endpoint-url https://cos.example.com s3 ls s3://b/models/m/"
    command = (f"--endpoint-url https://cos.example.com s3 sync s3://b/models/m/ {dest}/ --delete "
               f"--exclude {MARKER}* --only-show-errors --exclude .digests.json*")
    # The marker of a verified revision goes only once the same command's dry run names a change.
    assert calls[1:] == [f"{command} --dryrun", command]
    assert not (dest / MARKER).exists()


def test_sync_retries_with_backoff_then_succeeds(tmp_path):
    proc, calls, _ = run_sync(tmp_path, succeed_on=3, attempts=3)
    assert proc.returncode == 0
    assert sum(1 for c in calls if " sync " in f" {c} " and "--dryrun" not in c) == 3
    assert "sync attempt 2 failed" in proc.stderr


def test_sync_gives_up_after_the_configured_attempts(tmp_path):
    proc, calls, _ = run_sync(tmp_path, succeed_on=99, attempts=2)
    assert proc.returncode == 1
    assert sum(1 for c in calls if " sync " in f" {c} " and "--dryrun" not in c) == 2
    assert "sync failed after 2 attempts" in proc.stderr


@pytest.mark.parametrize("listing, says", [
    ("", ["s3://b/models/m/ lists no objects"]),
    ("                           PRE models/\n", ["s3://b/models/m/ lists no objects"]),
    ("2026-07-31 10:00:00 5368709120 model-00001-of-00048.safetensors\n2026-07-31 10:00:00 567 config.json\n",
     ["s3://b/models/m/ has no weights (model.safetensors.index.json or model.safetensors)",
      "s3://b/models/m/ has no SHA256SUMS"]),
])
def test_sync_never_deletes_for_a_listing_that_is_not_a_model(tmp_path, listing, says):
    """A typo'd or emptied prefix with --delete would wipe the verified model (issue 12)."""
    proc, calls, dest = run_sync(tmp_path, succeed_on=1, attempts=2, listing=listing)
    assert proc.returncode == 1
    assert not any(" sync " in f" {c} " for c in calls)
    assert f"refusing to sync with --delete into {dest}/" in proc.stderr
    for line in says:
        assert line in proc.stderr
    assert ("has no config.json" in proc.stderr) is False


def test_sync_takes_a_single_file_checkpoint_for_a_model(tmp_path):
    """A small model's prefix lists model.safetensors and no index: a model, synced like any other."""
    listing = ("2026-07-31 10:00:00 1234 SHA256SUMS\n2026-07-31 10:00:00 567 config.json\n"
               "2026-07-31 10:00:00 16106127360 model.safetensors\n")
    proc, calls, _ = run_sync(tmp_path, succeed_on=1, listing=listing)
    assert proc.returncode == 0, proc.stderr
    assert any(" sync " in f" {c} " and "--dryrun" not in c for c in calls)


def test_pruning_keeps_the_newest_verified_revisions_what_the_stack_serves_and_what_is_not_ours(tmp_path, capsys):
    """After a new revision verified: keep it and the newest keep-1 other verified ones, every revision
    the stack serves from this directory (--in-use), and any directory without our marker or digest
    cache; an unverified sync of ours (digest cache, no marker) cannot be served and goes."""
    root = tmp_path / "DeepSeek-V4-Flash"
    for i, rev in enumerate(("r1", "r2", "r3", "r4")):
        assert verify(make_model(root / rev), revision=rev) == 0
        os.utime(root / rev / MARKER, (1000 + i, 1000 + i))      # verified in this order
    make_model(root / "r0")                                         # a failed sync of ours
    (root / "r0" / ".digests.json").write_text("{}")
    make_model(root / "manual")                                     # someone's copy: not ours
    (root / "r9").mkdir()
    (root / "r9" / MARKER).write_text(json.dumps({"revision": "other"}))   # a marker naming another revision
    new = make_model(root / "r5")
    capsys.readouterr()
    assert verify_model.main(["--model-dir", str(new), "--revision", "r5", "--expected-shards", "3", "--marker", MARKER,
                              "--workers", "2", "--digest-cache", ".digests.json", "--keep-revisions", "2",
                              "--in-use", "r5", "--in-use", "r2", "--required-files", str(REQUIRED["path"])]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["manual", "r2", "r4", "r5", "r9"]
    out = capsys.readouterr().out
    assert [line.split()[2] for line in out.splitlines() if line.startswith("pruned")] == ["r0", "r1", "r3"]
    assert gate(root / "r4", revision="r4") == 0 and gate(root / "r2", revision="r2") == 0


def test_nothing_is_pruned_when_the_new_revision_fails(tmp_path):
    root = tmp_path / "m"
    for rev in ("r1", "r2"):
        assert verify(make_model(root / rev), revision=rev) == 0
    bad = make_model(root / "r3")
    (bad / "config.json").unlink()
    assert verify_model.main(["--model-dir", str(bad), "--revision", "r3", "--expected-shards", "3", "--marker", MARKER,
                              "--workers", "2", "--keep-revisions", "2", "--required-files", str(REQUIRED["path"])]) == 1
    assert sorted(p.name for p in root.iterdir()) == ["r1", "r2", "r3"]
