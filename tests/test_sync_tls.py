"""objectStore.caBundle for real (issue 28): the local S3-compatible server behind TLS with a private
CA this test makes (tests/tls_certs.py), the sync Job's download container as the stack renders it
(its command, env and the CA ConfigMap at its mount path), and the pinned `aws` CLI
(requirements-s3.txt). With the bundle the CLI lists, syncs, and the verifier and the gate pass; without
it, or with another CA's, the TLS handshake fails and nothing is synced. Certificate checks stay on:
never --no-verify-ssl (field report 3.2).

Loopback only: the CLI reaches `https://<bucket>.<endpoint host>` through HTTPS_PROXY, the front door
of tests/s3_server.py, which ends the CONNECT tunnel in TLS with the server certificate.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import test_sync_real as real
import upstream_aws_cli
from conftest import PROJECT_DIR
from s3_server import AWS, LocalS3
from tls_certs import make_certificates

from components.sync_job import CA_CONFIG_MAP, CA_DIR, CA_KEY

pytestmark = pytest.mark.xdist_group("sync-tls")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = LocalS3(tmp_path_factory.mktemp("s3-tls"))
    yield server
    server.stop()


def render_with_ca(pem: str):
    """The dev stack with objectStore.caBundle set: (pipeline, the CA ConfigMap's data)."""
    from render import runtime, stackfile
    sf = stackfile.read(PROJECT_DIR, "dev")
    store = json.loads(sf.config["llm-serving:objectStore"])
    sf.config["llm-serving:objectStore"] = json.dumps({**store, "caBundle": pem})
    rendered = runtime.render(sf)
    [ca_map] = [r for r in rendered.resources if r.type == "kubernetes:core/v1:ConfigMap"
                and r.inputs["metadata"]["name"] == CA_CONFIG_MAP]
    return real.rendered_model_pipeline(rendered), dict(ca_map.inputs["data"])


class TlsPod(real.Pod):
    """The rendered pod with the CA ConfigMap at its mount path, reaching the store over HTTPS."""

    ca_data: dict[str, str] = {}

    def mapping(self) -> dict[str, str]:
        return {**super().mapping(), CA_DIR: str(self.root / "object-store-ca")}

    def env(self, container, **extra: str) -> dict[str, str]:
        env = super().env(container, **extra)
        if "ENDPOINT_URL" in env:
            # The rendered https endpoint as it is; the front door is the CLI's HTTPS proxy.
            env["ENDPOINT_URL"] = container.env["ENDPOINT_URL"]
            for name in ("HTTP_PROXY", "http_proxy"):
                env.pop(name, None)
            env["HTTPS_PROXY"] = env["https_proxy"] = self.s3.front.url
        return env


def tls_pod(s3: LocalS3, pem: str, root: Path) -> TlsPod:
    pipeline, ca_data = render_with_ca(pem)
    plain = real.new_pod(s3, pipeline, root)
    pod = TlsPod(plain.root, s3, *pipeline)
    (root / "object-store-ca").mkdir()
    for name, text in ca_data.items():
        (root / "object-store-ca" / name).write_text(text)
    return pod


def dev_endpoint_host() -> str:
    from render import stackfile
    return urlsplit(json.loads(stackfile.read(PROJECT_DIR, "dev").config["llm-serving:objectStore"])["endpoint"]).hostname


@pytest.fixture(scope="module")
def certificates(tmp_path_factory, s3):
    """The store's CA and its server certificate, served by the front door for this module."""
    certs = make_certificates(tmp_path_factory.mktemp("ca"), dev_endpoint_host())
    s3.front.serve_tls(str(certs.server), str(certs.key))
    yield certs
    s3.front.stop_tls()


def test_the_job_mounts_the_bundle_read_only_and_points_the_cli_at_it(certificates):
    pem = certificates.ca.read_text()
    (download, verify, gate, _), ca_data = render_with_ca(pem)
    assert ca_data == {CA_KEY: pem}
    assert download.env["AWS_CA_BUNDLE"] == f"{CA_DIR}/{CA_KEY}" and CA_DIR in download.mounts
    # Only the container that talks to the store: the verifier and the gate never do.
    assert "AWS_CA_BUNDLE" not in verify.env and CA_DIR not in verify.mounts and CA_DIR not in gate.mounts
    assert not any("no-verify-ssl" in x for x in download.command + download.args)


def test_with_the_bundle_the_cli_lists_and_syncs_over_tls_and_the_model_passes(s3, certificates, tmp_path):
    pod = tls_pod(s3, certificates.ca.read_text(), tmp_path / "pod")
    model = real.fake_model(tmp_path / "upload")
    real.put_model(s3, *real.bucket_of(pod), model)
    sync = pod.sync()
    assert sync.returncode == 0, sync.stderr
    assert s3.front.tls_failures == [] and s3.front.gets >= real.SHARDS and s3.front.refused_path_style == 0
    assert real.digest_tree(pod.model_dir()) == real.digest_tree(model)
    verify = pod.run_verify()
    assert verify.returncode == 0, verify.stderr
    assert pod.run_gate().returncode == 0


@pytest.mark.parametrize("bundle", ["none", "another CA"])
def test_without_the_bundle_or_with_another_ca_the_handshake_fails_and_nothing_is_synced(
        s3, certificates, tmp_path, bundle):
    pod = tls_pod(s3, certificates.ca.read_text(), tmp_path / "pod")
    real.put_model(s3, *real.bucket_of(pod), real.fake_model(tmp_path / "upload", shards=2))
    s3.front.tls_failures.clear()
    if bundle == "none":
        extra = {"AWS_CA_BUNDLE": ""}      # unset below: the CLI's own trust store
    else:
        other = make_certificates(tmp_path / "other", dev_endpoint_host(), ca_name="another CA")
        extra = {"AWS_CA_BUNDLE": str(other.ca)}
    env = pod.env(pod.download, RETRY_DELAY_SECONDS="0", AWS_MAX_ATTEMPTS="1", SYNC_ATTEMPTS="1", **extra)
    if not env["AWS_CA_BUNDLE"]:
        del env["AWS_CA_BUNDLE"]
    sync = subprocess.run(pod.argv(pod.download), env=env, capture_output=True, text=True, timeout=120)
    assert sync.returncode == 1
    assert "CERTIFICATE_VERIFY_FAILED" in sync.stderr and "refusing to sync" in sync.stderr
    assert s3.front.tls_failures, "the front door saw no refused handshake"
    assert not any(pod.model_dir().glob("*.safetensors"))


def test_the_installed_cli_reads_aws_ca_bundle_as_the_verify_of_its_clients():
    """What components/sync_job.py relies on, in the CLI this file runs (tests/upstream_aws_cli.py CA_BUNDLE)."""
    site = next((AWS.parent.parent / "lib").glob("python3*/site-packages"))
    for path, text in upstream_aws_cli.CA_BUNDLE:
        lines = {x.strip() for x in (site / "awscli" / "botocore" / path).read_text(encoding="utf-8").splitlines()}
        assert text in lines, f"awscli/botocore/{path} no longer has: {text}"
