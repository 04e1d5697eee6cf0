"""objectStore.workloadIdentity kind irsa (EKS Pod Identity: tests/test_pod_identity.py): the sync Job assumes a read-only IAM role through its
ServiceAccount; no IAM user, no access key, no credentials Secret. Rendered from prod's stack file with
the identity set, checked resource by resource, through the policy pack's server, against the AWS CLI's
credential chain, and refused where it cannot work."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import upstream_aws_cli
from policy_server import PackServer, operation
from s3_server import AWS
from variants import prod_with_identity, stack_project

from components.storage import read_only_policy
from render import output, runtime, stackfile
from render.__main__ import main as render_main

OIDC = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
IDENTITY = f"    workloadIdentity:\n      kind: irsa\n      oidcProviderArn: {OIDC}\n"


def irsa_text(*edits: tuple[str, str]) -> str:
    return prod_with_identity(IDENTITY, *edits)


def project(root: Path, text: str) -> Path:
    return stack_project(root, "irsa", text)


@functools.lru_cache(maxsize=None)
def irsa(preview: bool = False, root: str = "") -> tuple[runtime.Rendered, stackfile.StackFile]:
    sf = stackfile.read(project(Path(root), irsa_text()), "irsa")
    return runtime.render(sf, preview=preview), sf


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("irsa"))


def resources(rendered) -> list[dict]:
    return json.loads(output.resources_json(rendered))


def of_type(rendered, type_: str) -> list[dict]:
    return [r for r in resources(rendered) if r["type"] == type_]


def sync_job(rendered) -> dict:
    (job,) = [r["inputs"] for r in of_type(rendered, "kubernetes:batch/v1:Job")
              if r["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"] == "model-sync"]
    return job


def test_the_role_trusts_only_the_sync_service_account_through_the_oidc_provider(root):
    rendered, _ = irsa(root=root)
    (role,) = of_type(rendered, "aws:iam/role:Role")
    assert json.loads(role["inputs"]["assumeRolePolicy"]) == {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": OIDC}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{ISSUER}:sub": "system:serviceaccount:llm-serving:llm-serving-model-sync",
                                       f"{ISSUER}:aud": "sts.amazonaws.com"}}}]}
    (policy,) = of_type(rendered, "aws:iam/rolePolicy:RolePolicy")
    assert policy["inputs"]["role"] == role["inputs"]["name"] == "llm-serving-llm-serving-irsa-model-reader"
    assert policy["inputs"]["policy"] == read_only_policy("example-llm-weights-prod", ["models/DeepSeek-V4-Flash-0731"])


def test_no_static_key_exists(root):
    rendered, _ = irsa(root=root)
    types = {r["type"] for r in resources(rendered)}
    assert not types & {"aws:iam/user:User", "aws:iam/accessKey:AccessKey", "aws:iam/userPolicy:UserPolicy"}
    secrets = [r["inputs"]["metadata"]["name"] for r in of_type(rendered, "kubernetes:core/v1:Secret")]
    assert "llm-serving-object-store" not in secrets and secrets
    assert "objectStoreAccessKeyId" not in rendered.missing_secrets


def test_the_service_account_names_the_role_and_mounts_no_api_token(root):
    rendered, _ = irsa(root=root)
    (sa,) = of_type(rendered, "kubernetes:core/v1:ServiceAccount")
    role = of_type(rendered, "aws:iam/role:Role")[0]
    assert sa["inputs"]["metadata"]["name"] == "llm-serving-model-sync"
    assert sa["inputs"]["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": f"arn:aws:iam::000000000000:role/{role['inputs']['name']}"}
    assert sa["inputs"]["automountServiceAccountToken"] is False


def test_the_sync_job_assumes_the_role_with_a_projected_token(root):
    rendered, _ = irsa(root=root)
    job = sync_job(rendered)
    template = job["spec"]["template"]
    pod = template["spec"]
    assert pod["serviceAccountName"] == "llm-serving-model-sync" and pod["automountServiceAccountToken"] is False
    download, verify = pod["containers"]
    env = {e["name"]: e["value"] for e in download["env"]}
    assert env["AWS_ROLE_ARN"].startswith("arn:aws:iam::000000000000:role/llm-serving-llm-serving-irsa-model-reader")
    assert "AWS_SHARED_CREDENTIALS_FILE" not in env and env["AWS_STS_REGIONAL_ENDPOINTS"] == "regional"
    (token_volume,) = [v for v in pod["volumes"] if v["name"] == "aws-iam-token"]
    assert token_volume["projected"]["sources"] == [{"serviceAccountToken": {
        "audience": "sts.amazonaws.com", "expirationSeconds": 86400, "path": "token"}}]
    (mount,) = [m for m in download["volumeMounts"] if m["name"] == "aws-iam-token"]
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == f"{mount['mountPath']}/token" and mount["readOnly"]
    assert not [v for v in pod["volumes"] if "secret" in v]
    # The verifier gets no credentials, and the EKS webhook is told to leave it alone.
    assert not [e for e in verify.get("env", []) if e["name"].startswith("AWS_")]
    assert all(m["name"] != "aws-iam-token" for m in verify["volumeMounts"])
    assert template["metadata"]["annotations"] == {"eks.amazonaws.com/skip-containers": "verify"}


def test_the_aws_cli_reads_the_variables_the_job_sets(root):
    """The names the Job sets are the ones the CLI's web-identity provider reads, ahead of any file in
    its chain (tests/upstream_aws_cli.py: installed v1 lines checked here, the v2 image's read)."""
    env = {e["name"] for e in sync_job(irsa(root=root)[0])["spec"]["template"]["spec"]["containers"][0]["env"]}
    site = sorted(AWS.parent.parent.glob("lib/python*/site-packages"))
    if not site:
        pytest.skip(f"{AWS.parent.parent} is missing (make test builds it)")
    # awscli imports the botocore it carries inside itself (awscli/botocore), not the one beside it.
    text = (site[0] / "awscli" / "botocore" / "credentials.py").read_text()
    for line in upstream_aws_cli.CREDENTIAL_CHAIN:
        assert line in text, line
    read = set(re.findall(r"'(AWS_[A-Z_]+)'", " ".join(upstream_aws_cli.CREDENTIAL_CHAIN)))
    assert {"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} <= read & env


def test_the_real_aws_cli_assumes_the_role_with_the_jobs_variables(root, tmp_path):
    """The pinned AWS CLI, run with the download container's AWS_* variables (the token file moved
    under tmp_path), gets its credentials from STS by AssumeRoleWithWebIdentity: moto plays STS
    (AWS_ENDPOINT_URL_STS, the one variable the test adds)."""
    if not AWS.exists():
        pytest.skip(f"{AWS} is missing (make test builds it)")
    from s3_server import LocalS3

    download = sync_job(irsa(root=root)[0])["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in download["env"] if e["name"].startswith("AWS_")}
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")  # moto checks no signature
    env.update(AWS_WEB_IDENTITY_TOKEN_FILE=str(token), AWS_CONFIG_FILE=str(tmp_path / "config"))
    s3 = LocalS3(tmp_path)
    try:
        proc = subprocess.run([str(AWS), "sts", "get-caller-identity", "--output", "json"], capture_output=True, text=True,
                              timeout=120, env={**env, "PATH": f"{AWS.parent}:/usr/bin:/bin", "HOME": str(tmp_path),
                                                "AWS_ENDPOINT_URL_STS": f"http://127.0.0.1:{s3.port}"})
    finally:
        s3.stop()
    assert proc.returncode == 0, proc.stderr
    role = env["AWS_ROLE_ARN"].rsplit("/", 1)[1]
    assert json.loads(proc.stdout)["Arn"].startswith(f"arn:aws:sts::000000000000:assumed-role/{role}/")


@pytest.fixture(scope="module")
def server() -> Iterator[PackServer]:
    s = PackServer.start()
    yield s
    s.close()


@pytest.mark.parametrize("preview", [False, True])
def test_the_pack_passes_the_irsa_stack(server, root, preview):
    rendered, sf = irsa(preview, root)
    report = server.run(operation(rendered, server.fresh_stack("irsa"), stack_file=sf, policy_config="prod"))
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.violations() == [], [(d.policy, d.level, d.urn, d.message) for d in report.violations()]


def refused(tmp_path, capsys, text: str) -> list[str]:
    code = render_main(["--stack", "irsa", "--project-dir", str(project(tmp_path, text)), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not (tmp_path / "out").exists()
    return [line for line in err.splitlines() if line.startswith("Pulumi.irsa.yaml")]


def test_without_an_oidc_provider_it_is_refused(tmp_path, capsys):
    assert refused(tmp_path, capsys, irsa_text((f"      oidcProviderArn: {OIDC}\n", ""))) == [
        "Pulumi.irsa.yaml: llm-serving:objectStore.workloadIdentity.oidcProviderArn = (unset): is required with kind "
        "'irsa': the role's trust policy names the cluster's IAM OIDC provider (without one, use kind 'podIdentity' "
        "and clusterName on EKS)"]


def test_a_malformed_oidc_provider_is_refused(tmp_path, capsys):
    (line,) = refused(tmp_path, capsys, irsa_text((OIDC, "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE")))
    assert line.startswith("Pulumi.irsa.yaml: llm-serving:objectStore.workloadIdentity.oidcProviderArn = "
                           "'oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE': must be an IAM OIDC provider ARN")


def test_with_a_non_aws_endpoint_it_is_refused(tmp_path, capsys):
    text = irsa_text(("    region: us-west-2\n", "    region: ap-shanghai\n    endpoint: https://cos.ap-shanghai.myqcloud.com\n"),
                     ("    create: true\n", "    create: false\n"), ("      kind: ecr\n", "      kind: none\n"))
    text = re.sub(r"      ecr:\n(        .*\n)+", "", text)
    assert refused(tmp_path, capsys, text) == [
        "Pulumi.irsa.yaml: llm-serving:objectStore.workloadIdentity = '(set)': needs AWS S3, not the non-AWS endpoint "
        "https://cos.ap-shanghai.myqcloud.com: that store does not take AWS IAM roles; unset it and set "
        "llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey with --secret"]


def test_beside_an_iam_user_it_is_refused(tmp_path, capsys):
    assert refused(tmp_path, capsys, irsa_text(("    createCredentials: false\n", "    createCredentials: true\n"))) == [
        "Pulumi.irsa.yaml: llm-serving:objectStore.createCredentials = true: must be false with "
        "objectStore.workloadIdentity: the sync Job assumes its role through its ServiceAccount, so no IAM user or "
        "access key is created"]


def test_checkov_finds_nothing_in_the_irsa_stack(root, tmp_path):
    """The scan `make check` runs, on the ServiceAccount and the Job that runs as it."""
    from test_scan import scan

    manifests = output.kubernetes_yaml(irsa(root=root)[0])
    assert "kind: ServiceAccount" in manifests and "serviceAccountName: llm-serving-model-sync" in manifests
    results = scan(manifests, tmp_path)
    assert [f"{c['check_id']} {c['resource']}" for c in results["failed_checks"]] == []
