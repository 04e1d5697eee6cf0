"""prod's Kubernetes half through the real CLI, and `pulumi destroy`, which keeps its retained Namespace.

prod's AWS half (the S3 bucket, its read-only IAM user, the ECR pull-through caches) needs the
pulumi-aws provider, which cannot be built from the module proxy (README): it keeps the render and
policy-server path. Here prod adopts an existing bucket (keys from secret config) and pulls from
upstream; every other setting, the prod policy config included, is prod's.
"""

from __future__ import annotations

import secrets

import pytest
import yaml
from harness import POLICY_LAUNCHER, Pulumi, kubectl

STACK = "prod-k8s"
POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.prod.json")


@pytest.fixture(scope="module")
def prod(pulumi: Pulumi) -> tuple[Pulumi, str]:
    stack_file = yaml.safe_load((pulumi.project / "Pulumi.prod.yaml").read_text())
    config = stack_file["config"]
    config["llm-serving:objectStore"].update(create=False, createCredentials=False)
    config["llm-serving:images"].pop("mirror")
    # An existing claim of the cluster's in prod; the e2e cluster has none to adopt.
    config["llm-serving:compileCache"] = {"kind": "emptyDir"}
    (pulumi.project / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(stack_file, sort_keys=False))
    pulumi.run("stack", "init", STACK, "--secrets-provider", "passphrase")
    for key in ("apiKey", "cephUserKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey"):
        pulumi.set_secret(f"llm-serving:{key}", secrets.token_hex(16), stack=STACK)
    return pulumi, config["llm-serving:namespace"]


def test_prod_up_and_no_changes(prod):
    pulumi, _ = prod
    pulumi.run("preview", *POLICY, stack=STACK)
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=1200)
    again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=STACK, check=False)
    assert again.returncode == 0, again


def test_prod_open_webui_off_and_on_again_keeps_its_data_claim(prod):
    """Issue 18 case 6: an optional feature switched off outside dev drops its data claim from the state
    and keeps the object (retainOnDelete, not protect: the engine refuses to delete a protected one);
    switched on again, the kept claim is adopted, not refused as AlreadyExists (components/retention.py)."""
    pulumi, namespace = prod
    dev = yaml.safe_load((pulumi.project / "Pulumi.dev.yaml").read_text())["config"]
    image = dev["llm-serving:operations"]["openWebUI"]["image"]
    for key, value in image.items():
        pulumi.run("config", "set", "--path", f"llm-serving:operations.openWebUI.image.{key}", value, stack=STACK)
    pulumi.run("config", "set", "--path", "llm-serving:operations.openWebUI.enabled", "true", stack=STACK)
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=1200)
    claim = kubectl("get", "pvc", "-n", namespace, "open-webui", "-o", "jsonpath={.metadata.uid}").stdout
    assert claim
    pulumi.run("config", "set", "--path", "llm-serving:operations.openWebUI.enabled", "false", stack=STACK)
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=1200)
    assert kubectl("get", "pvc", "-n", namespace, "open-webui", "-o", "jsonpath={.metadata.uid}").stdout == claim
    pulumi.run("config", "set", "--path", "llm-serving:operations.openWebUI.enabled", "true", stack=STACK)
    pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=1200)
    assert kubectl("get", "pvc", "-n", namespace, "open-webui", "-o", "jsonpath={.metadata.uid}").stdout == claim
    again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=STACK, check=False)
    assert again.returncode == 0, again


def test_prod_destroy_keeps_the_retained_namespace(prod):
    # Outside dev the Namespace is retained, not protected (components/retention.py): with the bucket
    # adopted here nothing is protected, so destroy completes and removes the Namespace from the state
    # only (pulumi/pulumi step.go DeleteStep.Apply, RetainOnDelete).
    pulumi, namespace = prod
    result = pulumi.run("destroy", "--yes", "--skip-preview", stack=STACK, check=False)
    assert result.returncode == 0, result
    assert kubectl("get", "namespace", namespace).returncode == 0
