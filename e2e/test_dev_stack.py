"""The dev stack through the real Pulumi CLI, engine, Kubernetes provider and API server.

In order, as a platform engineer runs it: stack init, secrets, a preview with the policy pack, `pulumi
up` to completion, a second preview that must find nothing to change, and `pulumi destroy`. Each step
depends on the one before (pytest -x stops at the first failure).
"""

from __future__ import annotations

import json
import secrets

import pytest
from dryrun import Api
from harness import KUBECONFIG, POLICY_LAUNCHER, Pulumi, kubectl, log

STACK = "dev"
NAMESPACE = "llm-serving-dev"
POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")
# Every secret the dev stack reads (Pulumi.dev.yaml's header), with a value made for this run.
SECRET_VALUES = {key: secrets.token_hex(16) for key in
                 ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey")}


def _no_plaintext_secret(text: str, where: str) -> None:
    for key, value in SECRET_VALUES.items():
        assert value not in text, f"the value of llm-serving:{key} appears in plaintext in {where}"


@pytest.fixture(scope="module")
def dev(pulumi: Pulumi) -> Pulumi:
    pulumi.run("stack", "init", STACK, "--secrets-provider", "passphrase")
    for key, value in SECRET_VALUES.items():
        pulumi.set_secret(f"llm-serving:{key}", value, stack=STACK)
    return pulumi


def test_secrets_are_stored_encrypted(dev: Pulumi):
    stack_file = (dev.project / f"Pulumi.{STACK}.yaml").read_text()
    _no_plaintext_secret(stack_file, f"Pulumi.{STACK}.yaml")
    for key in SECRET_VALUES:
        assert f"llm-serving:{key}:\n    secure: " in stack_file, key


def test_a_broken_program_is_blocked_in_preview(dev: Pulumi):
    # The engine's liveness probe made an HTTP generation check (e2e/breakers.py): engine-probes-tcp
    # is mandatory, so the real CLI must fail the preview, before anything is created.
    result = dev.run("preview", *POLICY, stack=STACK, check=False, env={"E2E_BREAK": "engine-probes-tcp"})
    assert result.returncode != 0, result
    assert "engine-probes-tcp" in result.output and "mandatory" in result.output, result
    assert kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0, "preview created the namespace"


def test_preview_with_the_policy_pack(dev: Pulumi):
    result = dev.run("preview", *POLICY, stack=STACK)
    log(f"preview: {result.seconds:.1f} s")
    assert "Loading policy packs...: done" in result.output, result
    assert "mandatory" not in result.output, result


def test_up_completes(dev: Pulumi):
    result = dev.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=1200)
    log(f"up: {result.seconds:.1f} s")
    deployment = json.loads(kubectl("get", "deployment", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    engines = [d for d in deployment if d["metadata"]["name"].startswith("deepseek-v4-flash")]
    assert engines and all(d["status"].get("readyReplicas") == d["spec"]["replicas"] for d in engines), engines
    jobs = json.loads(kubectl("get", "jobs", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    assert jobs and all(j["status"].get("succeeded") == 1 for j in jobs), [j["metadata"]["name"] for j in jobs]
    outputs = dev.outputs(STACK)
    assert outputs, "the stack exports nothing"
    _no_plaintext_secret(json.dumps(outputs), "the stack outputs")


def test_the_gateway_policies_are_accepted_by_the_api_server(dev: Pulumi):
    # Each model route's BackendTrafficPolicy was created by `up` (Envoy Gateway v1.2.8's CRD, its
    # schema and CEL rules, as ../shared/crds/envoy-gateway holds it) and names its route.
    objs = json.loads(kubectl("get", "httproutes.gateway.networking.k8s.io,backendtrafficpolicies.gateway.envoyproxy.io",
                              "-n", "aibrix-system", "-l", f"llm-serving.io/namespace={NAMESPACE}", "-o", "json").stdout)["items"]
    routes = {o["metadata"]["name"] for o in objs if o["kind"] == "HTTPRoute"}
    policies = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "BackendTrafficPolicy"}
    assert routes and set(policies) == routes, (routes, set(policies))
    for name, spec in policies.items():
        assert [r["name"] for r in spec["targetRefs"]] == [name]
        assert set(spec["retry"]["retryOn"]["triggers"]) <= {"connect-failure", "refused-stream"}, spec
    # The rate-limit form the consumers add (the dev stack declares none), server-side dry run; and
    # the CRD's CEL rules are enforced by this server (a policy with targetRef and targetRefs).
    from components import gateway_policies as gp
    api = Api(KUBECONFIG)
    try:
        limits = gp.RateLimits(consumers=(gp.ConsumerLimit("search", "search.", 600),
                                          gp.ConsumerLimit("notebooks", "notebooks.", 60)),
                               default_requests_per_minute=30)
        route = sorted(routes)[0]
        obj = {"apiVersion": gp.API_VERSION, "kind": gp.KIND, "metadata": {"name": route, "namespace": "aibrix-system"},
               "spec": gp.backend_traffic_policy_spec(route, limits)}
        verdict = api.dry_run(obj)
        assert verdict.accepted, verdict
        hostile = {**obj, "spec": {**obj["spec"], "targetRef": obj["spec"]["targetRefs"][0]}}
        verdict = api.dry_run(hostile)
        assert not verdict.accepted and "either targetRef or targetRefs must be used" in verdict.message, verdict
    finally:
        api.close()


def test_secrets_never_in_plaintext_in_state_or_cli_output(dev: Pulumi):
    for path in dev.state.rglob("*"):
        if path.is_file():
            _no_plaintext_secret(path.read_text(errors="replace"), f"state file {path.name}")
    for path in dev.logs.glob("*.log"):
        _no_plaintext_secret(path.read_text(errors="replace"), f"CLI output {path.name}")


def test_second_preview_changes_nothing(dev: Pulumi):
    result = dev.run("preview", "--expect-no-changes", *POLICY, stack=STACK, check=False)
    assert result.returncode == 0, result


def test_the_consumer_reads_the_outputs_through_a_stack_reference(dev: Pulumi):
    # examples/consumer as another team runs it: its own project and stack, the contract read from
    # this stack's state through a real StackReference (the file backend's org is "organization").
    consumer = dev.project / "examples" / "consumer"
    dev.run("stack", "init", "consumer", "--secrets-provider", "passphrase", cwd=consumer)
    dev.run("config", "set", "servingStack", f"organization/llm-serving/{STACK}", stack="consumer", cwd=consumer)
    dev.run("up", "--yes", "--skip-preview", stack="consumer", cwd=consumer)
    got, serving = dev.outputs("consumer", cwd=consumer), dev.outputs(STACK)
    (entry,) = serving["models"].values()
    assert got["openaiBaseUrl"] == (entry["externalUrl"] or entry["url"])
    assert got["model"] == entry["servedModelName"] and got["gpuTotal"] == serving["gpuTotal"]
    # The key crossed the StackReference and stayed secret in the consumer's outputs and state.
    assert got["apiKey"] == serving["apiKey"] == "[secret]"
    for path in dev.state.rglob("*"):
        if path.is_file():
            _no_plaintext_secret(path.read_text(errors="replace"), f"state file {path.name} (consumer)")
    dev.run("destroy", "--yes", "--skip-preview", stack="consumer", cwd=consumer)


def test_destroy(dev: Pulumi):
    result = dev.run("destroy", "--yes", "--skip-preview", stack=STACK, timeout=900)
    log(f"destroy: {result.seconds:.1f} s")
    left = kubectl("get", "namespace", NAMESPACE, check=False)
    assert left.returncode != 0 or "Terminating" in left.stdout, left.stdout
