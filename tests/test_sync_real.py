"""The sync Job and the GPU pods' gate run for real (issue 12): the shipped scripts with the command,
args and env the dev stack renders, the pinned `aws` CLI (requirements-s3.txt), and a local
S3-compatible server on loopback that refuses path-style requests as COS does (tests/s3_server.py).

Only what cannot exist here is mapped: the pod's mount paths become tmp directories, the endpoint's
scheme becomes http (no TLS on loopback) and HTTP_PROXY stands in for the cluster's DNS for
`<bucket>.<endpoint host>`; RETRY_DELAY_SECONDS=0 because the script's 15 s backoff would only
slow the retry test down (the number of attempts is the rendered one).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import upstream_aws_cli
from conftest import IN_CI, render_stack
from s3_server import AWS, LocalS3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "components" / "scripts"))
import verify_model  # noqa: E402

# make test runs --dist loadgroup: one worker takes the whole file, so the local S3 server and the rendered pipeline, once.
pytestmark = pytest.mark.xdist_group("sync-real")


PROJECT_DIR = Path(__file__).resolve().parent.parent
SCRIPTS = PROJECT_DIR / "components" / "scripts"
SHARDS = 48
SHARD_BYTES = 4096

if not AWS.exists():
    # The Makefile builds .venv-s3 before the tests; without it this file proves nothing, so it
    # must not pass quietly in CI.
    if IN_CI:
        raise RuntimeError(f"{AWS} is missing: `make test` builds it from requirements-s3.txt")
    pytest.skip(f"{AWS} is missing (make test builds it)", allow_module_level=True)


# ---- the fake model ----

def fake_model(root: Path, shards: int = SHARDS, seed: str = "a", shard_bytes: int = SHARD_BYTES,
               single: bool = False) -> Path:
    """48 small shards, their index, config, tokenizer and a SHA256SUMS over every other file; or
    (single) one model.safetensors and no index, as a checkpoint under ~10 GB ships."""
    root.mkdir(parents=True, exist_ok=True)
    names = ["model.safetensors"] if single else [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for n in names:
        (root / n).write_bytes(hashlib.sha256(f"{seed}/{n}".encode()).digest() * (shard_bytes // 32))
    if not single:
        (root / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": shards * shard_bytes},
             "weight_map": {f"model.layers.{i}.weight": n for i, n in enumerate(names)}}, sort_keys=True))
    for f in ("config.json", "generation_config.json", "tokenizer_config.json"):
        (root / f).write_text(json.dumps({"seed": seed}))
    (root / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}, "seed": seed}))
    write_sums(root)
    return root


def write_sums(root: Path, skip: str = "") -> None:
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(root.iterdir())
             if p.is_file() and p.name != "SHA256SUMS" and not p.name.startswith(".") and p.name != skip]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def digest_tree(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())
            if p.is_file() and not p.name.startswith(".")}


# ---- the rendered Job ----

@dataclass
class Container:
    command: list[str]
    args: list[str]
    env: dict[str, str]
    mounts: list[str]


def _containers(rendered, kind: str, predicate) -> list[dict]:
    found = []

    def walk(o):
        if isinstance(o, dict):
            if "command" in o and predicate(o):
                found.append(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for r in rendered.resources:
        if r.type == kind:
            walk(r.inputs)
    return found


def rendered_scripts(rendered) -> dict[str, str]:
    """The scripts ConfigMap's data, what the Jobs and the gate find at /opt/llm-serving."""
    maps = [r for r in rendered.resources if r.type == "kubernetes:core/v1:ConfigMap"
            and r.inputs["metadata"]["name"] == "llm-serving-model-scripts"]
    assert len(maps) == 1, "the stack renders no scripts ConfigMap"
    return dict(maps[0].inputs["data"])


def rendered_model_pipeline(rendered) -> tuple[Container, Container, Container, dict[str, str]]:
    """download (init container) and verify of the sync-* Job, the engine pods' gate, and the scripts
    ConfigMap they all mount."""
    jobs = [r for r in rendered.resources if r.type == "kubernetes:batch/v1:Job"
            and r.inputs["metadata"]["name"].startswith("sync-")]
    assert jobs, "the stack renders no sync-* Job"
    spec = jobs[0].inputs["spec"]["template"]["spec"]

    def as_container(c: dict) -> Container:
        return Container(list(c["command"]), list(c.get("args", [])),
                         {e["name"]: e["value"] for e in c.get("env", [])},
                         [m["mountPath"] for m in c.get("volumeMounts", [])])

    download = next(c for c in spec["containers"] if c["name"] == "download")
    verify = next(c for c in spec["containers"] if c["name"] == "verify")
    gates = [c for kind in ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet")
             for c in _containers(rendered, kind, lambda o: any("model_gate.py" in str(x) for x in o["command"]))]
    assert gates, "no engine pod runs model_gate.py"
    return as_container(download), as_container(verify), as_container(gates[0]), rendered_scripts(rendered)


@dataclass
class Pod:
    """The mount paths of the rendered pods mapped to directories of this test."""
    root: Path
    s3: LocalS3
    download: Container
    verify: Container
    gate: Container
    scripts: dict[str, str]

    def __post_init__(self) -> None:
        """The ConfigMap's files as the pod mounts them (a later render's replace an earlier one's)."""
        (self.root / "scripts").mkdir(parents=True, exist_ok=True)
        for name, text in self.scripts.items():
            (self.root / "scripts" / name).write_text(text, encoding="utf-8")

    def mapping(self) -> dict[str, str]:
        return {"/opt/llm-serving": str(self.root / "scripts"), "/models": str(self.root / "models"),
                "/work": str(self.root / "work"), "/tmp": str(self.root / "tmp"),
                "/var/run/secrets/object-store": str(self.root / "credentials")}

    def local(self, value: str) -> str:
        for mount, local in sorted(self.mapping().items(), key=lambda kv: -len(kv[0])):
            if value == mount or value.startswith(mount + "/"):
                return local + value[len(mount):]
        return value

    def env(self, container: Container, **extra: str) -> dict[str, str]:
        env = {k: self.local(v) for k, v in container.env.items()}
        if "ENDPOINT_URL" in env:
            env["ENDPOINT_URL"] = "http://" + urlsplit(env["ENDPOINT_URL"]).netloc
            env["HTTP_PROXY"] = env["http_proxy"] = self.s3.front.url
        env["PATH"] = f"{AWS.parent}:/usr/bin:/bin"
        env.setdefault("HOME", str(self.root / "work"))
        env.update(extra)
        return env

    def argv(self, container: Container) -> list[str]:
        return [self.local(x) for x in container.command + container.args]

    def model_dir(self) -> Path:
        return Path(self.local(self.download.env["DEST"]))

    def start_sync(self, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(self.download), env=self.env(self.download, **extra),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def sync(self, **extra: str) -> subprocess.CompletedProcess:
        extra.setdefault("RETRY_DELAY_SECONDS", "0")
        return subprocess.run(self.argv(self.download), env=self.env(self.download, **extra),
                              capture_output=True, text=True, timeout=120)

    def run_verify(self) -> subprocess.CompletedProcess:
        """The verify container after the download container ended (it reads how it ended)."""
        return subprocess.run(self.argv(self.verify), env=self.env(self.verify), capture_output=True,
                              text=True, timeout=60)

    def start_verify(self) -> subprocess.Popen:
        """The verify container as the pod starts it: beside the download, before it."""
        return subprocess.Popen(self.argv(self.verify), env=self.env(self.verify), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def run_gate(self) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(self.gate), env=self.env(self.gate), capture_output=True,
                              text=True, timeout=60)


# ---- the bucket ----

def _moto(s3: LocalS3, method: str, path: str, body: bytes | None = None) -> bytes:
    # Setup talks to moto directly on loopback: fast, and not the Job's path. moto checks no
    # signature but routes a request to S3 by the credential scope of its Authorization header.
    auth = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"
    conn = http.client.HTTPConnection("127.0.0.1", s3.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Authorization": auth})
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status < 300, (method, path, resp.status, data[:300])
        return data
    finally:
        conn.close()


def put_model(s3: LocalS3, bucket: str, prefix: str, model: Path, extra: dict[str, bytes] | None = None) -> None:
    """Make s3://bucket/prefix/ hold exactly the files of `model` (and `extra`)."""
    listing = _moto(s3, "GET", f"/{bucket}?list-type=2&prefix={quote(prefix + '/')}")
    ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
    for key in ET.fromstring(listing).findall("s3:Contents/s3:Key", ns):
        _moto(s3, "DELETE", f"/{bucket}/{quote(key.text)}")
    files = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    for name, data in {**files, **(extra or {})}.items():
        _moto(s3, "PUT", f"/{bucket}/{quote(prefix)}/{quote(name)}", data)


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    server = LocalS3(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def rendered_pipeline():
    return rendered_model_pipeline(render_stack("dev"))


def new_pod(s3: LocalS3, pipeline: tuple[Container, Container, Container], root: Path) -> Pod:
    """The rendered pipeline on fresh directories under root, its bucket on the local store
    (tools/bench.py uses it too)."""
    download, verify, gate, scripts = pipeline
    s3.front.reset(urlsplit(download.env["ENDPOINT_URL"]).hostname)
    bucket = download.env["BUCKET"]
    try:
        _moto(s3, "PUT", f"/{bucket}")
    except AssertionError as err:   # created by an earlier test of the session
        assert "BucketAlreadyOwnedByYou" in str(err) or "409" in str(err)
    for d in ("models", "work", "tmp", "credentials"):
        (root / d).mkdir(parents=True)
    (root / "credentials" / "credentials").write_text(
        "[default]\naws_access_key_id = job-reader\naws_secret_access_key = job-reader-secret\n")
    return Pod(root, s3, download, verify, gate, scripts)


@pytest.fixture
def pod(s3, rendered_pipeline, tmp_path):
    return new_pod(s3, rendered_pipeline, tmp_path)


def bucket_of(pod: Pod) -> tuple[str, str]:
    return pod.download.env["BUCKET"], pod.download.env["PREFIX"]


def hashed(pod: Pod) -> set[str]:
    """The files the verifier's digest cache holds so far (nothing while it is absent or half-written)."""
    try:
        return set(json.loads((pod.model_dir() / pod.download.env["DIGEST_CACHE"]).read_text()))
    except (OSError, ValueError):
        return set()


def marker(pod: Pod) -> Path:
    return pod.model_dir() / pod.download.env["MARKER"]


# ---- cases that work today (keep them working) ----

def test_complete_model_syncs_verifies_and_passes_the_gate_virtual_hosted(pod, tmp_path):
    model = fake_model(tmp_path / "upload")
    put_model(pod.s3, *bucket_of(pod), model)
    assert pod.download.env["ADDRESSING_STYLE"] == "virtual"
    # The verify container beside the download rewrites its digest cache (and at the end the marker)
    # through a temporary file in the model directory: `sync --delete` must leave such a file alone,
    # or the verifier's rename into place fails (a retry pod hashes the previous pod's files and
    # writes the cache while the download lists the directory).
    pod.model_dir().mkdir(parents=True)
    in_flight = [Path(tempfile.mkstemp(dir=pod.model_dir(), prefix=verify_model.temp_prefix(pod.download.env[n]))[1])
                 for n in ("DIGEST_CACHE", "MARKER")]
    sync = pod.sync()
    assert sync.returncode == 0, sync.stderr
    assert [p.exists() for p in in_flight] == [True, True], "the sync deleted the verifier's temporary files"
    # Every object went through the front door as <bucket>.<endpoint host>: none was refused.
    assert pod.s3.front.refused_path_style == 0 and pod.s3.front.gets >= SHARDS
    assert digest_tree(pod.model_dir()) == digest_tree(model)
    verify = pod.run_verify()
    assert verify.returncode == 0, verify.stderr
    assert json.loads(marker(pod).read_text())["revision"] == pod.verify.args[pod.verify.args.index("--revision") + 1]
    gate = pod.run_gate()
    assert gate.returncode == 0, gate.stderr
    # README "Pinning the manifest": the digest to pin, read from the bucket without the weights, is the
    # one the marker records and the gate compares a pin with.
    bucket, prefix = bucket_of(pod)
    env = pod.env(pod.download)
    cp = subprocess.run(["aws", "--endpoint-url", env["ENDPOINT_URL"], "s3", "cp", f"s3://{bucket}/{prefix}/SHA256SUMS", "-"],
                        env=env, capture_output=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert hashlib.sha256(cp.stdout).hexdigest() == json.loads(marker(pod).read_text())["manifest_sha256"] == \
        hashlib.sha256((model / "SHA256SUMS").read_bytes()).hexdigest()


def test_path_style_is_refused_like_cos(pod, tmp_path):
    """The front door really refuses path-style: the same Job with addressing_style=path fails."""
    put_model(pod.s3, *bucket_of(pod), fake_model(tmp_path / "upload"))
    sync = pod.sync(ADDRESSING_STYLE="path")
    assert sync.returncode == 1
    assert "PathStyleDomainForbidden" in sync.stderr
    assert pod.s3.front.refused_path_style > 0
    assert not any(pod.model_dir().glob("*.safetensors"))


def test_missing_shard_fails_verification_and_the_gate(pod, tmp_path):
    model = fake_model(tmp_path / "upload")
    (model / "model-00017-of-00048.safetensors").unlink()
    put_model(pod.s3, *bucket_of(pod), model)
    assert pod.sync().returncode == 0
    verify = pod.run_verify()
    assert verify.returncode == 1
    assert "missing shard model-00017-of-00048.safetensors" in verify.stderr
    assert not marker(pod).exists()
    assert pod.run_gate().returncode == 1


def test_corrupted_and_unlisted_shards_and_a_marker_in_the_bucket_never_pass(pod, tmp_path):
    """One corrupted shard, one shard the manifest does not list, and a ready marker stored in the
    bucket (someone re-uploaded a verified directory): verification names both, no marker is left."""
    model = fake_model(tmp_path / "upload")
    write_sums(model, skip="model-00031-of-00048.safetensors")
    shard = model / "model-00005-of-00048.safetensors"
    shard.write_bytes(b"\0" + shard.read_bytes()[1:])
    revision = pod.verify.args[pod.verify.args.index("--revision") + 1]
    stale = json.dumps({"revision": revision, "shards": SHARDS}).encode()
    put_model(pod.s3, *bucket_of(pod), model, extra={pod.download.env["MARKER"]: stale})
    assert pod.sync().returncode == 0
    assert not marker(pod).exists(), "the sync fetched the ready marker from the bucket"
    verify = pod.run_verify()
    assert verify.returncode == 1
    assert "sha256 mismatch for model-00005-of-00048.safetensors" in verify.stderr
    assert "model-00031-of-00048.safetensors has no entry in SHA256SUMS" in verify.stderr
    assert not marker(pod).exists()
    gate = pod.run_gate()
    assert gate.returncode == 1 and "not ready" in gate.stderr


def test_an_interrupted_download_is_never_marked_ready(pod, tmp_path):
    put_model(pod.s3, *bucket_of(pod), fake_model(tmp_path / "upload"))
    pod.s3.front.delay_seconds = 0.05
    proc = pod.start_sync()
    deadline = time.monotonic() + 30
    while pod.s3.front.gets < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the sync finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)   # the node died: no cleanup runs
    proc.communicate()
    pod.s3.front.delay_seconds = 0
    assert len(list(pod.model_dir().glob("*.safetensors"))) < SHARDS
    verify = pod.run_verify()
    assert verify.returncode == 1
    # The verifier beside it learns this from the kernel (the FIFO lost its writer), not from a timeout.
    assert "the download ended without an exit status (killed)" in verify.stderr
    assert not marker(pod).exists()
    assert pod.run_gate().returncode == 1


def test_the_server_dying_mid_sync_fails_after_the_configured_attempts(pod, tmp_path):
    put_model(pod.s3, *bucket_of(pod), fake_model(tmp_path / "upload"))
    pod.s3.front.delay_seconds = 0.05
    # AWS_MAX_ATTEMPTS=1: the CLI's own retries with backoff (botocore's default, 5 tries per
    # request) would spend ~40 s on a server that is gone; the attempts under test are the script's.
    proc = pod.start_sync(RETRY_DELAY_SECONDS="0", AWS_MAX_ATTEMPTS="1")
    deadline = time.monotonic() + 30
    while pod.s3.front.gets < 8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    pod.s3.front.dead = True
    out, err = proc.communicate(timeout=120)
    attempts = int(pod.download.env["SYNC_ATTEMPTS"])
    assert proc.returncode == 1, (out, err)
    assert len(re.findall(r"^sync attempt \d+/", out, re.M)) == attempts
    assert f"sync failed after {attempts} attempts" in err
    verify = pod.run_verify()
    assert verify.returncode == 1 and not marker(pod).exists()
    assert pod.run_gate().returncode == 1


def test_files_are_hashed_while_the_download_is_still_running(pod, tmp_path):
    """The verify container starts beside the download (issue 12, speed). The front door holds the
    last shard back, so the download cannot finish until the test has looked: by then every other
    file the manifest lists is already hashed (in the digest cache), and no marker exists yet."""
    model = fake_model(tmp_path / "upload")
    last = f"model-{SHARDS:05d}-of-{SHARDS:05d}.safetensors"
    # Larger than s3transfer's 256 KiB I/O chunk, so its first half is written before the rest arrives.
    (model / last).write_bytes(os.urandom(1 << 20))
    write_sums(model)
    put_model(pod.s3, *bucket_of(pod), model)
    pod.s3.front.hold(last)
    # A leftover of a sync that never verified, beside this revision: pruned once the listing shows
    # the new revision, before the download fills the volume (keepRevisions x sizeGiB fits).
    leftover = pod.model_dir().parent / "0700"
    leftover.mkdir(parents=True)
    (leftover / pod.download.env["DIGEST_CACHE"]).write_text("{}")
    verify = pod.start_verify()
    sync = pod.start_sync(RETRY_DELAY_SECONDS="0")
    others = {p.name for p in model.iterdir() if p.name not in ("SHA256SUMS", last)}

    def partial() -> list[str]:
        return [p.name for p in pod.model_dir().iterdir() if re.fullmatch(re.escape(last) + r"\.[0-9a-fA-F]{8}", p.name)]
    try:
        deadline = time.monotonic() + 60   # only a bound for failing: the test never waits on time
        while (not others <= hashed(pod) or not partial()) and verify.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert others <= hashed(pod), f"not hashed while downloading: {sorted(others - hashed(pod))}"
        # Half of the held object is on disk under a temporary name beside it (s3transfer's
        # DownloadFilenameOutputManager, tests/upstream_aws_cli.py), none under its final name:
        # what the verifier finds under a final name is complete.
        assert pod.s3.front.held.is_set() and partial() and not (pod.model_dir() / last).exists()
        assert sync.poll() is None and verify.poll() is None and not marker(pod).exists()
        assert not leftover.exists(), "old revisions must go before the download fills the volume"
    finally:
        pod.s3.front.release()
    out, err = sync.communicate(timeout=60)
    assert sync.returncode == 0, err
    out, err = verify.communicate(timeout=60)
    assert verify.returncode == 0, err
    assert marker(pod).exists() and last in hashed(pod)
    assert pod.run_gate().returncode == 0


def test_the_installed_cli_is_the_pinned_one_and_renames_each_download_into_place():
    """What verify_model.py relies on, read from the CLI this file runs (tests/upstream_aws_cli.py)."""
    site = next((AWS.parent.parent / "lib").glob("python3*/site-packages"))
    for package, version in (("awscli", upstream_aws_cli.AWSCLI), ("s3transfer", upstream_aws_cli.S3TRANSFER)):
        assert (site / f"{package}-{version}.dist-info").is_dir(), f"{package} is not {version}: re-read tests/upstream_aws_cli.py"
        assert f"{package}=={version}" in (PROJECT_DIR / "requirements-s3.txt").read_text()
    for line in upstream_aws_cli.SOURCE:
        lines = {x.strip() for x in (site / line.package / line.path).read_text(encoding="utf-8").splitlines()}
        assert line.text in lines, f"{line.package}/{line.path} no longer has: {line.text} ({line.why})"


def test_the_fake_model_is_what_the_real_checks_accept(tmp_path):
    """The fake passes the shipped verifier when complete; a check of the fake itself, so the
    failure cases above fail for the reason they name."""
    model = fake_model(tmp_path / "m")
    assert len(list(model.glob("*.safetensors"))) == SHARDS
    required = tmp_path / "model_files.json"   # what the scripts ConfigMap holds for a DeepSeek-V4 directory
    [files] = json.loads(rendered_scripts(render_stack("dev"))["model_files.json"]).values()
    required.write_text(json.dumps({tmp_path.name: files}))
    out = subprocess.run([sys.executable, str(SCRIPTS / "verify_model.py"),
                          "--model-dir", str(model), "--revision", "r", "--expected-shards", str(SHARDS),
                          "--marker", ".m", "--workers", "2", "--required-files", str(required)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# ---- the cases (12 items 1, 3, 4): revision directories and listing checks ----

def render_variant(drop: tuple[str, ...] = (), **model_fields):
    """The dev stack with its first model's fields changed (those in `drop` left out), rendered like any stack."""
    from render import runtime, stackfile
    sf = stackfile.read(PROJECT_DIR, "dev")
    models = json.loads(sf.config["llm-serving:models"])
    models[0].update(model_fields)
    for name in drop:
        models[0].pop(name, None)
    sf.config["llm-serving:models"] = json.dumps(models)
    return rendered_model_pipeline(runtime.render(sf))


def on_variant(pod: Pod, **model_fields: str) -> Pod:
    """The same volume, bucket and credentials, with the Job and gate another render produces."""
    return Pod(pod.root, pod.s3, *render_variant(**model_fields))


def test_a_verified_model_survives_an_empty_or_mistyped_prefix_and_a_new_revision_gets_its_own_weights(
        pod, tmp_path):
    """One verified model, then what the issue found (12 items 1, 3, 4), in the order an operator
    meets them (one chain: each sync of the real CLI costs about a second and a half):
    - a prefix that lists nothing (emptied, or a typo in objectPrefix aiming at the same revision
      directory) never reaches `sync --delete`: the verified files stay;
    - the next revision with same-sized shards, index, config and manifest (`aws s3 sync` skips
      same-sized files unless the local copy is older) is verified only on its own weights, and
      the old revision's pods keep the files they read."""
    old = fake_model(tmp_path / "old", seed="old")
    put_model(pod.s3, *bucket_of(pod), old)
    assert pod.sync().returncode == 0 and pod.run_verify().returncode == 0
    before = digest_tree(pod.model_dir())

    typo = on_variant(pod, objectPrefix=pod.download.env["PREFIX"] + "-typo")
    assert typo.model_dir() == pod.model_dir(), "the typo'd prefix must aim at the verified directory"
    sync = typo.sync()
    assert sync.returncode == 1 and "refusing to sync" in sync.stderr
    assert digest_tree(pod.model_dir()) == before
    # The verify container beside it fails the Job too, and touches nothing: the marker stays.
    verify = typo.run_verify()
    assert verify.returncode == 1 and "the download exited 1" in verify.stderr
    assert marker(pod).exists() and pod.run_gate().returncode == 0

    (tmp_path / "nothing").mkdir()
    put_model(pod.s3, *bucket_of(pod), tmp_path / "nothing")
    sync = pod.sync()
    assert sync.returncode == 1 and "refusing to sync" in sync.stderr
    assert digest_tree(pod.model_dir()) == before
    # Refused before any file was touched: the verified directory keeps its marker, so a pod of this
    # revision that starts now (a scale-up, a reschedule) still passes its gate.
    assert marker(pod).exists() and pod.run_gate().returncode == 0

    new = fake_model(tmp_path / "new", seed="new")
    assert {p.name: p.stat().st_size for p in old.iterdir()} == {p.name: p.stat().st_size for p in new.iterdir()}
    put_model(pod.s3, *bucket_of(pod), new)   # the same prefix now holds the next revision
    bumped = on_variant(pod, revision="0801")
    sync = bumped.sync()
    assert sync.returncode == 0, sync.stderr
    verify = bumped.run_verify()
    if verify.returncode == 0:
        # Stamped verified: then it must be the new weights, and the gate must pass on them.
        assert digest_tree(bumped.model_dir()) == digest_tree(new)
        assert bumped.run_gate().returncode == 0
    else:
        assert not marker(bumped).exists()
        assert bumped.run_gate().returncode == 1
    # The old revision's pods still read the old, verified files, and its gate still passes.
    assert digest_tree(pod.model_dir()) == digest_tree(old)
    assert pod.run_gate().returncode == 0

    # keepRevisions (2 in dev): the revision after that, once verified, prunes the oldest verified
    # revision and keeps the previous one (rollback, and the pods that read it during the rollout).
    # A directory under <directory>/ without our marker or digest cache is never ours to remove.
    keep = int(bumped.verify.args[bumped.verify.args.index("--keep-revisions") + 1])
    assert keep == 2
    foreign = pod.model_dir().parent / "operator-notes"
    foreign.mkdir()
    (foreign / "README").write_text("not the sync Job's")
    third = fake_model(tmp_path / "third", seed="third")
    put_model(pod.s3, *bucket_of(pod), third)
    latest = on_variant(pod, revision="0802")
    assert latest.sync().returncode == 0
    verify = latest.run_verify()
    assert verify.returncode == 0, verify.stderr
    assert f"pruned revision {pod.model_dir().name}" in verify.stdout
    assert sorted(p.name for p in pod.model_dir().parent.iterdir()) == sorted(
        ["operator-notes", bumped.model_dir().name, latest.model_dir().name])
    assert digest_tree(bumped.model_dir()) == digest_tree(new) and bumped.run_gate().returncode == 0
    assert latest.run_gate().returncode == 0 and pod.run_gate().returncode == 1


# ---- checkpoints of any shape (issue 28): a generic model whose stack file gives no shard count ----

GENERIC = {"profile": "generic", "sizeGiB": 16}


@pytest.fixture(scope="module")
def generic_pipeline():
    """The dev stack's model as a generic one without expectedShardCount: the verifier and the gate
    take the count from the checkpoint."""
    pipeline = render_variant(drop=("expectedShardCount",), **GENERIC)
    assert "--expected-shards" not in pipeline[1].args and "--expected-shards" not in pipeline[2].args
    return pipeline


def synced(pod: Pod, model: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Upload `model`, run the rendered download, then the verify container and the gate."""
    put_model(pod.s3, *bucket_of(pod), model)
    sync = pod.sync()
    assert sync.returncode == 0, sync.stderr
    return pod.run_verify(), pod.run_gate()


def test_a_single_file_checkpoint_syncs_verifies_and_passes_the_gate(s3, generic_pipeline, tmp_path):
    pod = new_pod(s3, generic_pipeline, tmp_path / "pod")
    model = fake_model(tmp_path / "upload", single=True)
    assert sorted(p.name for p in model.iterdir() if "safetensors" in p.name) == ["model.safetensors"]
    verify, gate = synced(pod, model)
    assert verify.returncode == 0, verify.stderr
    assert gate.returncode == 0, gate.stderr
    assert json.loads(marker(pod).read_text())["shards"] == 1
    assert digest_tree(pod.model_dir()) == digest_tree(model)


def test_a_sharded_checkpoint_takes_its_count_from_the_index_and_names_a_missing_shard(s3, generic_pipeline, tmp_path):
    pod = new_pod(s3, generic_pipeline, tmp_path / "pod")
    verify, gate = synced(pod, fake_model(tmp_path / "complete", shards=7))
    assert verify.returncode == 0 and gate.returncode == 0, verify.stderr + gate.stderr
    assert json.loads(marker(pod).read_text())["shards"] == 7
    # The next upload's index names a shard the bucket does not hold (the manifest lists it too).
    broken = fake_model(tmp_path / "broken", shards=7, seed="b")
    (broken / "model-00004-of-00007.safetensors").unlink()
    verify, gate = synced(pod, broken)
    assert verify.returncode == 1 and "missing shard model-00004-of-00007.safetensors" in verify.stderr
    assert not marker(pod).exists() and gate.returncode == 1


def test_a_count_the_stack_file_gives_must_match_the_index(s3, tmp_path):
    pod = new_pod(s3, render_variant(expectedShardCount=6, **GENERIC), tmp_path / "pod")
    verify, gate = synced(pod, fake_model(tmp_path / "upload", shards=7))
    assert verify.returncode == 1 and "weight index names 7 shards, expected 6" in verify.stderr
    assert not marker(pod).exists() and gate.returncode == 1
