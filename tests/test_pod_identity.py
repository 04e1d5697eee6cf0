"""objectStore.workloadIdentity kind podIdentity (EKS Pod Identity): the sync Job's ServiceAccount is
associated with a read-only IAM role that only EKS Pod Identity, for that cluster, namespace and
ServiceAccount, can assume; no IAM user, key, OIDC provider, projected token or IRSA annotation. Rendered
from prod's stack file with the identity set, checked resource by resource and through the policy pack's
server; the pinned AWS CLI gets its credentials the way the Pod Identity Agent hands them out (its container
provider, from a credentials endpoint on loopback) and reads the bucket of the local S3 server with them;
refused where it cannot work."""

from __future__ import annotations

import functools
import json
import subprocess
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import upstream_aws_cli
from s3_server import AWS
from variants import prod_with_identity, stack_project

from components.storage import read_only_policy
from render import output, runtime, stackfile
from render.__main__ import main as render_main

CLUSTER = "llm-prod"
IDENTITY = f"    workloadIdentity:\n      kind: podIdentity\n      clusterName: {CLUSTER}\n"
OIDC = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
ROLE = "llm-serving-llm-serving-podid-model-reader"


def podid_text(*edits: tuple[str, str]) -> str:
    return prod_with_identity(IDENTITY, *edits)


def project(root: Path, text: str) -> Path:
    return stack_project(root, "podid", text)


@functools.lru_cache(maxsize=None)
def podid(root: str, *edits: tuple[str, str]) -> tuple[runtime.Rendered, stackfile.StackFile]:
    sf = stackfile.read(project(Path(root), podid_text(*edits)), "podid")
    return runtime.render(sf), sf


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("podid"))


def of_type(rendered, type_: str) -> list[dict]:
    return [r for r in json.loads(output.resources_json(rendered)) if r["type"] == type_]


def sync_pod(rendered) -> dict:
    (job,) = [r["inputs"] for r in of_type(rendered, "kubernetes:batch/v1:Job")
              if r["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"] == "model-sync"]
    return job["spec"]["template"]


def test_only_eks_pod_identity_for_this_cluster_namespace_and_service_account_assumes_the_role(root):
    rendered, _ = podid(root)
    (role,) = of_type(rendered, "aws:iam/role:Role")
    assert role["inputs"]["name"] == ROLE
    assert json.loads(role["inputs"]["assumeRolePolicy"]) == {"Version": "2012-10-17", "Statement": [{
        "Sid": "AllowEksAuthToAssumeRoleForPodIdentity", "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {"aws:RequestTag/eks-cluster-name": CLUSTER,
                                       "aws:RequestTag/kubernetes-namespace": "llm-serving",
                                       "aws:RequestTag/kubernetes-service-account": "llm-serving-model-sync"}}}]}
    (policy,) = of_type(rendered, "aws:iam/rolePolicy:RolePolicy")
    assert policy["inputs"]["role"] == ROLE
    assert policy["inputs"]["policy"] == read_only_policy("example-llm-weights-prod", ["models/DeepSeek-V4-Flash-0731"])


def test_the_association_binds_the_sync_service_account_to_the_role(root):
    rendered, _ = podid(root)
    (assoc,) = of_type(rendered, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    inputs = assoc["inputs"]
    assert {k: inputs[k] for k in ("clusterName", "namespace", "serviceAccount", "disableSessionTags")} == {
        "clusterName": CLUSTER, "namespace": "llm-serving", "serviceAccount": "llm-serving-model-sync",
        "disableSessionTags": False}   # the trust policy's conditions read the session tags
    assert inputs["roleArn"] == f"arn:aws:iam::000000000000:role/{ROLE}" and "region" not in inputs
    assert "kubernetes:core/v1:ServiceAccount::model-store-sync-service-account" in assoc["options"]["dependsOn"]
    # EKS injects the credentials' variables when a pod is created: the Job's pods only after the association.
    (job,) = [j for j in of_type(rendered, "kubernetes:batch/v1:Job")
              if j["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"] == "model-sync"]
    assert "aws:eks/podIdentityAssociation:PodIdentityAssociation::model-store-sync-pod-identity" in job["options"]["dependsOn"]
    (again,) = of_type(podid(root, ("      clusterName: llm-prod\n",
                                    "      clusterName: llm-prod\n      clusterRegion: eu-west-1\n"))[0],
                       "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert again["inputs"]["region"] == "eu-west-1"


def test_no_key_no_oidc_token_no_irsa_annotation(root):
    rendered, _ = podid(root)
    types = {r["type"] for r in json.loads(output.resources_json(rendered))}
    assert not types & {"aws:iam/user:User", "aws:iam/accessKey:AccessKey", "aws:iam/userPolicy:UserPolicy"}
    assert "llm-serving-object-store" not in [r["inputs"]["metadata"]["name"]
                                              for r in of_type(rendered, "kubernetes:core/v1:Secret")]
    (sa,) = of_type(rendered, "kubernetes:core/v1:ServiceAccount")
    assert "annotations" not in sa["inputs"]["metadata"] and sa["inputs"]["automountServiceAccountToken"] is False
    template = sync_pod(rendered)
    pod = template["spec"]
    assert pod["serviceAccountName"] == "llm-serving-model-sync" and pod["automountServiceAccountToken"] is False
    assert not [v for v in pod["volumes"] if "secret" in v or "projected" in v]
    assert "annotations" not in template["metadata"]
    download = pod["containers"][0]
    env = {e["name"] for e in download["env"]}
    # Nothing ahead of the container provider in the CLI's chain: no key, profile, role or token file.
    assert not env & {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_ROLE_ARN",
                      "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI"}


def test_the_installed_cli_reads_what_eks_injects():
    site = sorted(AWS.parent.parent.glob("lib/python*/site-packages"))
    if not site:
        pytest.skip(f"{AWS.parent.parent} is missing (make test builds it)")
    for path, line in upstream_aws_cli.CONTAINER_PROVIDER:
        # awscli imports the botocore it carries inside itself (awscli/botocore), not the one beside it.
        assert line in (site[0] / "awscli" / "botocore" / path).read_text(), (path, line)


class _Agent(BaseHTTPRequestHandler):
    """The Pod Identity Agent's side of the exchange: credentials for the pod's token, else 401."""

    def do_GET(self):
        srv = self.server
        srv.seen.append((self.path, self.headers.get("Authorization")))
        if self.path != "/v1/credentials" or self.headers.get("Authorization") != srv.token:
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps(srv.credentials).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_real_aws_cli_reads_the_bucket_with_the_agents_credentials(root, tmp_path):
    """The download container's AWS_* variables plus the two EKS injects (the agent's URI moved to
    loopback, the token file under tmp_path): the pinned CLI fetches credentials from the endpoint with
    the token and uses them. The endpoint serves credentials moto's STS issued for the rendered role
    (AssumeRole, what EKS Auth does for the agent), so `sts get-caller-identity` answers with that role's
    session; then the CLI lists the model prefix in a bucket of the local S3 server."""
    if not AWS.exists():
        pytest.skip(f"{AWS} is missing (make test builds it)")
    from s3_server import LocalS3

    rendered, _ = podid(root)
    download = sync_pod(rendered)["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in download["env"] if e["name"].startswith("AWS_")}
    (role,) = of_type(rendered, "aws:iam/role:Role")
    role_arn = f"arn:aws:iam::000000000000:role/{role['inputs']['name']}"
    s3 = LocalS3(tmp_path)
    agent = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    try:
        moto = f"http://127.0.0.1:{s3.port}"
        bucket, prefix = "example-llm-weights-prod", "models/DeepSeek-V4-Flash-0731"
        s3.admin("s3api", "create-bucket", "--bucket", bucket)
        (tmp_path / "shard").write_bytes(b"weights")
        s3.admin("s3", "cp", str(tmp_path / "shard"), f"s3://{bucket}/{prefix}/model-00001.safetensors")
        issued = json.loads(subprocess.run(
            [str(AWS), "--endpoint-url", moto, "sts", "assume-role", "--role-arn", role_arn,
             "--role-session-name", "eks-llm-prod-sync", "--output", "json"],
            env=s3.admin_env, check=True, capture_output=True, text=True).stdout)["Credentials"]
        token = "eyJhbGciOiJSUzI1NiJ9.pod-identity.c2ln"
        agent.token, agent.seen = token, []
        agent.credentials = {"AccessKeyId": issued["AccessKeyId"], "SecretAccessKey": issued["SecretAccessKey"],
                             "Token": issued["SessionToken"], "AccountId": "000000000000",
                             "Expiration": (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        threading.Thread(target=agent.serve_forever, daemon=True).start()
        (tmp_path / "eks-pod-identity-token").write_text(token)
        agent_uri = upstream_aws_cli.POD_IDENTITY_AGENT_URI.replace("169.254.170.23", f"127.0.0.1:{agent.server_port}")
        env.update(AWS_CONFIG_FILE=str(tmp_path / "config"), AWS_CONTAINER_CREDENTIALS_FULL_URI=agent_uri,
                   AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(tmp_path / "eks-pod-identity-token"))
        run_env = {**env, "PATH": f"{AWS.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}

        def aws(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(AWS), "--endpoint-url", moto, *args, "--output", "json"], env=run_env,
                                  capture_output=True, text=True, timeout=120)

        who = aws("sts", "get-caller-identity")
        listed = aws("s3api", "list-objects-v2", "--bucket", bucket, "--prefix", f"{prefix}/")
        # Without the token the agent refuses, and so does the CLI.
        (tmp_path / "eks-pod-identity-token").write_text("not-the-token")
        refused = aws("sts", "get-caller-identity")
    finally:
        agent.shutdown()
        agent.server_close()
        s3.stop()
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["Arn"].startswith(f"arn:aws:sts::000000000000:assumed-role/{ROLE}/")
    assert listed.returncode == 0, listed.stderr
    assert [o["Key"] for o in json.loads(listed.stdout)["Contents"]] == [f"{prefix}/model-00001.safetensors"]
    assert ("/v1/credentials", token) in agent.seen
    assert refused.returncode != 0 and ("/v1/credentials", "not-the-token") in agent.seen


def test_the_pack_and_checkov_pass_the_pod_identity_stack(root, tmp_path):
    from policy_server import PackServer, operation
    from test_scan import scan

    rendered, sf = podid(root)
    server = PackServer.start()
    try:
        report = server.run(operation(rendered, server.fresh_stack("podid"), stack_file=sf, policy_config="prod"))
    finally:
        server.close()
    assert report.skipped_mandatory() == [], [(d.policy, d.message) for d in report.skipped_mandatory()]
    assert report.violations() == [], [(d.policy, d.level, d.urn, d.message) for d in report.violations()]
    results = scan(output.kubernetes_yaml(rendered), tmp_path)
    assert [f"{c['check_id']} {c['resource']}" for c in results["failed_checks"]] == []


# ---- refused, one line naming the field ----

def refused(tmp_path, capsys, text: str) -> list[str]:
    code = render_main(["--stack", "podid", "--project-dir", str(project(tmp_path, text)), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not (tmp_path / "out").exists()
    return [line for line in err.splitlines() if line.startswith("Pulumi.podid.yaml")]


AT = "Pulumi.podid.yaml: llm-serving:objectStore.workloadIdentity"


def test_without_a_cluster_name_it_is_refused(tmp_path, capsys):
    assert refused(tmp_path, capsys, podid_text((f"      clusterName: {CLUSTER}\n", ""))) == [
        f"{AT}.clusterName = (unset): is required with kind 'podIdentity': the Pod Identity association that lets "
        "the sync Job's ServiceAccount assume the role is made in that EKS cluster"]


def test_an_oidc_provider_beside_it_is_refused(tmp_path, capsys):
    text = podid_text((f"      clusterName: {CLUSTER}\n", f"      clusterName: {CLUSTER}\n      oidcProviderArn: {OIDC}\n"))
    assert refused(tmp_path, capsys, text) == [
        f"{AT}.oidcProviderArn = '{OIDC}': is for kind 'irsa' only: EKS Pod Identity needs no OIDC provider; "
        "unset it, or set kind: irsa"]


def test_a_cluster_name_with_irsa_is_refused(tmp_path, capsys):
    text = podid_text(("      kind: podIdentity\n", f"      kind: irsa\n      oidcProviderArn: {OIDC}\n"))
    assert refused(tmp_path, capsys, text) == [
        f"{AT}.clusterName = '{CLUSTER}': is for kind 'podIdentity' only: IRSA trusts the OIDC provider of whatever "
        "cluster issued the token; unset it, or set kind: podIdentity"]


@pytest.mark.parametrize("field,value,meaning", [
    ("clusterName", "-llm prod", "must be an EKS cluster name"),
    ("clusterRegion", "eu-west-l", "must be an AWS region name such as us-east-1 or eu-west-1"),
])
def test_a_malformed_cluster_is_refused(tmp_path, capsys, field, value, meaning):
    text = podid_text((f"      clusterName: {CLUSTER}\n",
                       f"      clusterName: {CLUSTER}\n      {field}: {json.dumps(value)}\n"
                       if field != "clusterName" else f"      clusterName: {json.dumps(value)}\n"))
    (line,) = refused(tmp_path, capsys, text)
    assert line.startswith(f"{AT}.{field} = {value!r}: {meaning}"), line
