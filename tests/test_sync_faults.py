"""The object store fails during the sync (issue 30, scenario 5; and scenario 4's sync Job whose node is
lost mid-download, its script half): the shipped download, verify and gate scripts with the command,
args and env the dev stack renders, the pinned `aws` CLI (requirements-s3.txt), the local S3 server
(tests/s3_server.py) and, in front of it, the fault proxy (tests/s3_faults.py) that answers 503
SlowDown, resets connections and returns truncated objects.

Each test asserts what the issue asks afterwards: the CLI retried within the retry settings the Job
renders (components/sync_job.py RETRY_ENV), a file that never verifies fails the Job naming it and
leaves no marker, the revision being served keeps its marker and files, a resumed sync downloads
nothing that already verified, the bucket is exactly what it was (the proxy saw only GET and HEAD),
and no output holds the Job's secret. Objects are 4 KiB, so a test costs the CLI's starts, not bytes;
RETRY_DELAY_SECONDS=0 as in tests/test_sync_real.py (the attempts are the rendered ones).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import test_sync_real as real
from conftest import render_stack
from s3_faults import FaultProxy
from s3_server import LocalS3

from components.sync_job import RETRY_ENV

pytestmark = pytest.mark.xdist_group("sync-faults")

SECRET = "job-reader-secret"   # the Job's secret access key (test_sync_real.new_pod writes it)
SHARD = "model-{:05d}-of-00048.safetensors".format


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The local S3 server and the fault proxy in front of it, once for the module."""
    s3 = LocalS3(tmp_path_factory.mktemp("s3-faults"))
    proxy = FaultProxy(s3.front.url)
    yield s3, proxy
    proxy.stop()
    s3.stop()


class FaultPod(real.Pod):
    """The rendered pod, its CLI reaching the store through the fault proxy."""

    proxy: FaultProxy

    def env(self, container, **extra: str) -> dict[str, str]:
        env = super().env(container, **extra)
        if "HTTP_PROXY" in env and "HTTP_PROXY" not in extra:
            env["HTTP_PROXY"] = env["http_proxy"] = self.proxy.url
        return env

    def new_pod(self) -> None:
        """The Job's next pod: the same volume and credentials, a fresh emptyDir (/work, /tmp)."""
        for d in ("work", "tmp"):
            shutil.rmtree(self.root / d)
            (self.root / d).mkdir()

    def run_job_pod(self) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
        """One pod of the Job as Kubernetes starts it: verify beside the download."""
        self.new_pod()
        verify = self.start_verify()
        sync = self.start_sync(RETRY_DELAY_SECONDS="0")
        return finished(sync, 120), finished(verify, 60)


def finished(proc: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{proc.args} ran over {timeout}s: {out}{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def fault_pod(store, pipeline, root: Path) -> FaultPod:
    s3, proxy = store
    plain = real.new_pod(s3, pipeline, root)
    pod = FaultPod(plain.root, s3, *pipeline)
    pod.proxy = proxy
    proxy.clear()
    return pod


def bucket_state(s3: LocalS3, bucket: str) -> dict[str, tuple[str, str]]:
    """Every object of the bucket: key -> (ETag, size), read from moto directly."""
    data = real._moto(s3, "GET", f"/{bucket}?list-type=2")
    ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
    return {c.findtext("s3:Key", namespaces=ns): (c.findtext("s3:ETag", namespaces=ns), c.findtext("s3:Size", namespaces=ns))
            for c in ET.fromstring(data).findall("s3:Contents", ns)}


def assert_bucket_untouched(pod: FaultPod, before: dict) -> None:
    assert bucket_state(pod.s3, pod.download.env["BUCKET"]) == before, "the sync changed the bucket"
    assert {r.method for r in pod.proxy.log()} <= {"GET", "HEAD"}, "the sync sent more than reads to the store"


def assert_no_secret(*runs: subprocess.CompletedProcess) -> None:
    for run in runs:
        assert SECRET not in run.stdout + run.stderr, "a secret appeared in the Job's output"


def revision_of(pod: FaultPod) -> str:
    return pod.verify.args[pod.verify.args.index("--revision") + 1]


@pytest.fixture(scope="module")
def pipeline():
    return real.rendered_model_pipeline(render_stack("dev"))


def test_the_job_says_its_retry_settings(pipeline):
    """What the CLI retries is said in the Job, not left to the CLI's defaults (legacy mode with 5
    attempts in the v1 these tests run, standard with 3 in the v2 the pod runs); the tests below run
    the CLI with them and count its tries."""
    download, verify, _, _ = pipeline
    assert {k: download.env[k] for k in RETRY_ENV} == RETRY_ENV == {"AWS_RETRY_MODE": "standard", "AWS_MAX_ATTEMPTS": "3"}
    assert not RETRY_ENV.keys() & verify.env.keys(), "the verifier talks to no store"


def test_throttling_and_resets_within_the_cli_retries_cost_nothing_but_time(store, pipeline, tmp_path):
    """503 SlowDown twice on one object (AWS_MAX_ATTEMPTS 3: the third try passes), a reset and a cut
    connection twice each in the middle of other objects (the transfer layer's 5 attempts): the first
    sync attempt completes, the model verifies and the gate passes."""
    pod = fault_pod(store, pipeline, tmp_path / "pod")
    real.put_model(pod.s3, *real.bucket_of(pod), real.fake_model(tmp_path / "upload"))
    before = bucket_state(pod.s3, pod.download.env["BUCKET"])
    retries = int(RETRY_ENV["AWS_MAX_ATTEMPTS"]) - 1
    pod.proxy.inject("slowdown", SHARD(3), retries)
    pod.proxy.inject("reset", SHARD(7), 2)
    pod.proxy.inject("cut", SHARD(9), 2)
    sync, verify = pod.run_job_pod()
    assert sync.returncode == 0 and verify.returncode == 0, sync.stderr + verify.stderr
    assert re.findall(r"^sync attempt \d+/\d+", sync.stdout, re.M) == ["sync attempt 1/3"], sync.stdout + sync.stderr
    assert pod.proxy.gets(SHARD(3)) == ["slowdown"] * retries + ["200"]
    assert pod.proxy.gets(SHARD(7)) == ["reset", "reset", "200"]
    assert pod.proxy.gets(SHARD(9)) == ["cut", "cut", "200"]
    assert json.loads(real.marker(pod).read_text())["revision"] == revision_of(pod)
    gate = pod.run_gate()
    assert gate.returncode == 0, gate.stderr
    assert_bucket_untouched(pod, before)
    assert_no_secret(sync, verify, gate)


def test_faults_beyond_the_cli_retries_fail_the_attempt_naming_the_file_and_the_next_pod_resumes(
        store, pipeline, tmp_path):
    """Beyond the CLI's retries the script's attempts take over (modelSync.syncAttempts, 3): a listing
    throttled 3 times fails attempt 1 (nothing is touched), an object throttled 3 times fails attempt
    2, and an object whose connection resets on every try fails all three, each time named. No
    marker; the verifier says the download failed. The Job's next pod, the store healed, downloads
    that one object and nothing that already landed."""
    pod = fault_pod(store, pipeline, tmp_path / "pod")
    real.put_model(pod.s3, *real.bucket_of(pod), real.fake_model(tmp_path / "upload"))
    bucket, prefix = real.bucket_of(pod)
    before = bucket_state(pod.s3, bucket)
    attempts = int(RETRY_ENV["AWS_MAX_ATTEMPTS"])
    pod.proxy.inject("slowdown", "", attempts)
    pod.proxy.inject("slowdown", SHARD(3), attempts)
    pod.proxy.inject("reset", SHARD(7), 1000)
    sync, verify = pod.run_job_pod()
    assert sync.returncode == 1 and verify.returncode == 1, sync.stdout + sync.stderr
    tries = int(pod.download.env["SYNC_ATTEMPTS"])
    assert f"sync failed after {tries} attempts" in sync.stderr
    # 254 (v2) or 255 (v1) for a service error; 1 would be a listing of nothing.
    assert (re.search(rf"^listing s3://{bucket}/{prefix}/ failed \(aws exit status 25[45], its error above\)$", sync.stderr, re.M)
            and "when calling the ListObjectsV2 operation (reached max retries: 2): Please reduce your request rate." in sync.stderr
            and "lists no objects" not in sync.stderr), sync.stderr
    failed = re.findall(r"^download failed: s3://\S+/(\S+) to \S+ (.*)$", sync.stderr, re.M)
    assert (SHARD(3), "An error occurred (SlowDown) when calling the GetObject operation (reached max retries: 2): "
            "Please reduce your request rate.") in failed
    assert failed.count((SHARD(7), "Max Retries Exceeded")) == tries - 1
    assert pod.proxy.gets(SHARD(7)) == ["reset"] * 5 * (tries - 1)   # s3transfer: 5 attempts a GET
    # The CLI read AWS_MAX_ATTEMPTS: 3 tries of each request (v1's own default would be 5).
    assert pod.proxy.gets("")[:attempts + 1] == ["slowdown"] * attempts + ["200"]
    assert pod.proxy.gets(SHARD(3))[:attempts + 1] == ["slowdown"] * attempts + ["200"]
    assert "the download exited 1; nothing verified" in verify.stderr
    assert not real.marker(pod).exists()
    gate = pod.run_gate()
    assert gate.returncode == 1 and "no ready marker" in gate.stderr
    landed = pod.proxy.downloaded()

    pod.proxy.clear()   # the store heals; Kubernetes starts the Job's next pod (backoffLimit)
    retry, verify2 = pod.run_job_pod()
    assert retry.returncode == 0 and verify2.returncode == 0, retry.stderr + verify2.stderr
    assert pod.proxy.requested() == {SHARD(7)} and SHARD(7) not in landed
    gate2 = pod.run_gate()
    assert gate2.returncode == 0, gate2.stderr
    assert_bucket_untouched(pod, before)
    assert_no_secret(sync, verify, gate, retry, verify2, gate2)


def test_a_truncated_object_never_verifies_fails_the_job_naming_it_while_the_served_revision_keeps_serving(
        store, pipeline, tmp_path):
    """The store returns one object of the next revision cut short, with a Content-Length to match
    (a broken gateway: the CLI cannot tell). The pod fails, its verifier naming the file and removing
    it; no marker is written; the revision being served keeps its marker, its files and its gate.
    Once the store heals, the next pod (a Job retry, or the Job the next `pulumi up` creates)
    downloads that one file, nothing that verified, and the new revision verifies."""
    served = fault_pod(store, pipeline, tmp_path / "pod")
    bucket, _ = real.bucket_of(served)
    real.put_model(served.s3, *real.bucket_of(served), real.fake_model(tmp_path / "old", seed="old"))
    sync, verify = served.run_job_pod()
    assert sync.returncode == 0 and verify.returncode == 0, sync.stderr + verify.stderr
    served_marker, served_files = real.marker(served).read_bytes(), real.digest_tree(served.model_dir())

    # The next revision, uploaded to the same prefix; the Job of the stack that pins it.
    real.put_model(served.s3, *real.bucket_of(served), real.fake_model(tmp_path / "new", seed="new"))
    before = bucket_state(served.s3, bucket)
    bumped = FaultPod(served.root, served.s3, *real.render_variant(revision="0801"))
    bumped.proxy = served.proxy
    assert bumped.model_dir() != served.model_dir()
    served.proxy.clear()
    served.proxy.inject("truncate", SHARD(5), 1000)   # every GET of it, in every pod
    sync, verify = bumped.run_job_pod()
    assert sync.returncode == 0, sync.stderr   # the CLI took the short body for the whole object
    assert verify.returncode == 1
    assert (f"model at {bumped.model_dir()} is NOT ready:\n"
            f"  - sha256 mismatch for {SHARD(5)}: removed, so the next sync downloads it again") in verify.stderr
    assert not real.marker(bumped).exists() and not (bumped.model_dir() / SHARD(5)).exists()
    gate = bumped.run_gate()
    assert gate.returncode == 1 and "no ready marker" in gate.stderr
    served_gate = served.run_gate()
    assert served_gate.returncode == 0, served_gate.stderr
    assert real.marker(served).read_bytes() == served_marker
    assert real.digest_tree(served.model_dir()) == served_files
    runs = [sync, verify, gate, served_gate]
    # Every next pod fails the same way until backoffLimit; then Kubernetes marks the Job Failed.

    served.proxy.clear()   # the store heals
    sync, verify = bumped.run_job_pod()
    assert sync.returncode == 0 and verify.returncode == 0, sync.stderr + verify.stderr
    assert served.proxy.requested() == served.proxy.downloaded() == {SHARD(5)}
    gate = bumped.run_gate()
    assert gate.returncode == 0, gate.stderr
    # keepRevisions 2 (dev): the revision served before stays, verified, beside the new one.
    assert served.run_gate().returncode == 0 and real.marker(served).read_bytes() == served_marker
    assert_bucket_untouched(bumped, before)
    assert_no_secret(*runs, sync, verify, gate)


def test_a_pod_killed_mid_download_leaves_no_marker_and_the_next_resumes_without_fetching_what_verified(
        store, pipeline, tmp_path):
    """The sync Job's node is lost mid-download (issue 30 scenario 4): both containers die by SIGKILL
    while the last shard is half-transferred and the others are already hashed. No marker, the gate
    refuses. The Job's next pod (fresh emptyDirs, the same volume) re-verifies every file (the final
    pass checks each one's key) but GETs only the shard that never landed, and writes the marker."""
    pod = fault_pod(store, pipeline, tmp_path / "pod")
    model = real.fake_model(tmp_path / "upload")
    last = SHARD(48)
    (model / last).write_bytes(os.urandom(1 << 20))   # over s3transfer's 256 KiB chunk: half lands first
    real.write_sums(model)
    real.put_model(pod.s3, *real.bucket_of(pod), model)
    before = bucket_state(pod.s3, pod.download.env["BUCKET"])
    others = {p.name for p in model.iterdir() if p.name not in ("SHA256SUMS", last)}

    pod.s3.front.hold(last)
    pod.new_pod()
    verify = pod.start_verify()
    sync = pod.start_sync(RETRY_DELAY_SECONDS="0")
    try:
        deadline = time.monotonic() + 60   # only a bound for failing
        while not (others <= real.hashed(pod) and pod.s3.front.held.is_set()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert others <= real.hashed(pod) and pod.s3.front.held.is_set(), sorted(others - real.hashed(pod))
        for proc in (sync, verify):   # the node is gone: no trap, no cleanup runs
            os.killpg(proc.pid, signal.SIGKILL)
        killed = [finished(sync, 10), finished(verify, 10)]
    finally:
        pod.s3.front.release()
    assert not real.marker(pod).exists() and not (pod.model_dir() / last).exists()
    gate = pod.run_gate()
    assert gate.returncode == 1 and "no ready marker" in gate.stderr
    landed = pod.proxy.downloaded()
    assert others <= landed and last not in landed

    pod.proxy.clear()
    resumed, verified = pod.run_job_pod()
    assert resumed.returncode == 0 and verified.returncode == 0, resumed.stderr + verified.stderr
    assert pod.proxy.requested() == {last}, "the next pod downloaded files that had verified"
    assert real.hashed(pod) == others | {last}
    assert json.loads(real.marker(pod).read_text())["sizes"].keys() == others | {last}
    # What the killed download left half-written under a temporary name went with `sync --delete`.
    assert sorted(p.name for p in pod.model_dir().iterdir() if p.name.startswith(last)) == [last]
    gate2 = pod.run_gate()
    assert gate2.returncode == 0, gate2.stderr
    assert_bucket_untouched(pod, before)
    assert_no_secret(*killed, gate, resumed, verified, gate2)
