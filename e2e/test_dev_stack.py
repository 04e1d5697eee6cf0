"""The dev stack through the real Pulumi CLI, engine, Kubernetes provider and API server.

In order, as a platform engineer runs it: stack init, secrets, a preview with the policy pack, `pulumi
up` to completion, a second preview that must find nothing to change, and `pulumi destroy`. Each step
depends on the one before (pytest -x stops at the first failure).
"""

from __future__ import annotations

import base64
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



def test_a_consumer_added_with_the_cli_gets_its_own_token_and_its_limit(dev: Pulumi):
    """Issue 21 as a platform engineer adds a team: `pulumi config set --path` for the consumer,
    `--secret --path` for its key (from standard input), one `pulumi up` with the policy pack. The
    route's policy carries the team's limit; the team's own stack reads its token through a real
    StackReference and writes it into a Secret in its namespace: the public prefix and the secret."""
    secret = secrets.token_hex(16)
    for path, value, kind in (("consumers[0].name", "search", "string"), ("consumers[0].namespace", "team-search", "string"),
                              ("consumers[0].requestsPerMinute", "600", "int")):
        dev.run("config", "set", "--path", f"llm-serving:{path}", value, "--type", kind, stack=STACK)
    dev.run("config", "set", "--secret", "--path", "llm-serving:consumerKeys.search", stack=STACK, stdin=secret)
    assert secret not in (dev.project / f"Pulumi.{STACK}.yaml").read_text()
    up = dev.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=900)
    log(f"consumer up: {up.seconds:.1f} s")
    assert secret not in up.output
    assert "$(LLM_SERVING_CONSUMER_KEY_SEARCH)" in engine_template()   # the engine takes the token, by reference
    # Beside the routes, in the gateway's namespace (components/gateway.py), labelled with ours.
    policies = json.loads(kubectl("get", "backendtrafficpolicies.gateway.envoyproxy.io", "-n", "aibrix-system",
                                  "-l", f"llm-serving.io/namespace={NAMESPACE}", "-o", "json").stdout)["items"]
    assert policies and all([(r["clientSelectors"][0]["headers"][0]["value"], r["limit"]["requests"])
                             for r in p["spec"]["rateLimit"]["local"]["rules"]] == [(r"^(?i:bearer) search\..*$", 600)]
                            for p in policies), policies
    # And the strategy path's routes (components/strategy_limits.py), one EnvoyPatchPolicy of v1.2.8's CRD.
    (patch,) = json.loads(kubectl("get", "envoypatchpolicies.gateway.envoyproxy.io", "-n", "aibrix-system",
                                  "-l", f"llm-serving.io/namespace={NAMESPACE}", "-o", "json").stdout)["items"]
    routes = [j["operation"]["value"] for j in patch["spec"]["jsonPatches"]]
    assert [(r["name"], r["typed_per_filter_config"]["envoy.filters.http.local_ratelimit"]["token_bucket"]["max_tokens"])
            for r in routes] == [(f"llm-serving/{NAMESPACE}/consumer/search", 600)], routes
    team, consumer = "team-search", dev.project / "examples" / "consumer"
    kubectl("create", "namespace", team)
    dev.run("stack", "init", "search", "--secrets-provider", "passphrase", cwd=consumer)
    for key, value in (("servingStack", f"organization/llm-serving/{STACK}"), ("consumer", "search"),
                       ("appNamespace", team)):
        dev.run("config", "set", key, value, stack="search", cwd=consumer)
    dev.run("up", "--yes", "--skip-preview", stack="search", cwd=consumer)
    data = json.loads(kubectl("get", "secret", "llm-serving-client", "-n", team, "-o", "json").stdout)["data"]
    assert base64.b64decode(data["OPENAI_API_KEY"]).decode() == f"search.{secret}"
    assert dev.outputs("search", cwd=consumer)["apiKey"] == "[secret]"
    for path in dev.state.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), f"the consumer's key in state file {path.name}"
    dev.run("destroy", "--yes", "--skip-preview", stack="search", cwd=consumer)
    # Revoked in one `pulumi up`: the consumer and its key removed, the engine rolls without its token.
    dev.run("config", "rm", "llm-serving:consumers", stack=STACK)
    dev.run("config", "rm", "llm-serving:consumerKeys", stack=STACK)
    dev.run("up", "--yes", "--skip-preview", *POLICY, stack=STACK, timeout=900)
    assert kubectl("get", "secret", "llm-serving-consumer-keys", "-n", NAMESPACE, check=False).returncode != 0
    assert json.loads(kubectl("get", "envoypatchpolicies.gateway.envoyproxy.io", "-n", "aibrix-system", "-l",
                              f"llm-serving.io/namespace={NAMESPACE}", "-o", "json").stdout)["items"] == []
    template = engine_template()
    assert "LLM_SERVING_CONSUMER_KEY" not in template and "llm-serving-consumer-keys" not in template


def engine_template() -> str:
    deployment = json.loads(kubectl("get", "deployment", "deepseek-v4-flash", "-n", NAMESPACE, "-o", "json").stdout)
    return json.dumps(deployment["spec"]["template"])


def test_destroy(dev: Pulumi):
    result = dev.run("destroy", "--yes", "--skip-preview", stack=STACK, timeout=900)
    log(f"destroy: {result.seconds:.1f} s")
    left = kubectl("get", "namespace", NAMESPACE, check=False)
    assert left.returncode != 0 or "Terminating" in left.stdout, left.stdout
