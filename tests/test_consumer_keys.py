"""Issue 21, the consumers and their keys: each consumer's own key, taken by every engine beside the
shared one without any key in a Kubernetes object, revoked on every engine by one update, delivered as
a secret output; bad consumers and bad keys refused with the field named and no value shown; a fake
engine that checks keys as vLLM's middleware does takes each key and refuses a revoked one."""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import upstream_vllm
import yaml
from conftest import PROJECT_DIR, k8s_objects, render_stack, shared_dir
from engine_containers import engine_containers, rendered_variants
from fake_openai import FakeEngine
from netpol import Pod, allowed
from test_exports import read_with
from test_ops_topologies import running_proxy
from variants import CONSUMERS, consumers_file, dev_config, model, render, sglang_stack, variant_file

from components import strategy_limits
from components.secrets import CONSUMER_KEYS_SECRET, secret_tag_annotation
from config_model import StackConfig
from config_model.consumers import TOKENS_REFUSED, key_env_name
from policy.consumers import consumer_token, key_prefix
from policy.engines import sglang, vllm
from render.output import kubernetes_yaml, outputs_json, plan_md, resources_json
from stacks import consumer_keys
from stacks.loader import ConfigError

NS = "llm-serving-dev"
# What the variant hands the program as each secret (variants.py consumers_file, SECRETS).
SECRETS = {"search": "[secret search-key]", "notebooks": "[secret notebooks-key]"}
SHARED = "[secret]"


def refusal(sf) -> str:
    with pytest.raises(ConfigError) as err:
        render(sf)
    return str(err.value)


def engine_container(r) -> dict:
    (deployment,) = [o for o in k8s_objects(r) if o["kind"] == "Deployment" and o["metadata"]["name"] == "deepseek-v4-flash"]
    return deployment["spec"]["template"]



def test_what_the_gateway_cannot_hold_is_refused_with_the_field_named():
    """Envoy Gateway v1.2.8: at most 16 local rules a route, one per consumer plus the default, and a
    uint32 bucket (components/gateway_policies.py MAX_LOCAL_RULES, MAX_REQUESTS)."""
    many = [base(name=f"team-{i}", namespace=f"team-{i}") for i in range(16)]
    keys = {c["name"]: f"[secret {i}]" for i, c in enumerate(many)}
    render(consumers_file(many, keys))   # 16 rules without a default
    message = refusal(consumers_file(many, keys, gateway={"defaultRequestsPerMinute": 10}))
    assert message == ("Pulumi.variant.yaml: llm-serving:consumers = '16 consumers': are more than a route's local rate "
                       "limit can tell apart: Envoy Gateway v1.2.8 takes at most 16 rules, one per consumer plus the "
                       "default (gateway.defaultRequestsPerMinute) (components/gateway_policies.py)"), message
    message = refusal(consumers_file([base(requestsPerMinute=2**32)]))
    assert message.startswith("Pulumi.variant.yaml: llm-serving:consumers[0].requestsPerMinute = 4294967296: is more "
                              "than 4294967295"), message

# ---- the token ----

def test_a_token_is_the_public_prefix_then_the_secret():
    assert key_prefix("search") == "search."
    assert consumer_token("search", "s3cret") == "search.s3cret"


@pytest.mark.parametrize("a,b", [("a", "a-b"), ("ab", "a"), ("team", "team-2"), ("x1", "x")])
def test_no_consumer_prefix_starts_another(a, b):
    """A DNS label has no '.', so a prefix ends where the name does: one token, one consumer."""
    assert not consumer_token(b, "x").startswith(key_prefix(a))
    assert not consumer_token(a, "x").startswith(key_prefix(b))


# ---- bad consumers ----

def base(**changes) -> dict:
    return {**CONSUMERS[0], **changes}


@pytest.mark.parametrize("consumers,line", [
    ([{"name": "search", "requestsPerMinute": 600}],
     "llm-serving:consumers[0] = '{\"name\": \"search\", \"requestsPerMinute\": 600}': must give exactly one of namespace "
     "(a name) or namespaceSelector (labels)"),
    ([base(namespaceSelector={"matchLabels": {"team": "a"}})], "llm-serving:consumers[0] = "),
    ([base(namespaces=["team-a"])], "llm-serving:consumers[0].namespaces = (value not shown): is not a known setting; "
     "did you mean namespace?"),
    ([base(namespace="Team_A")], "llm-serving:consumers[0].namespace = 'Team_A': must be a DNS label"),
    ([base(namespace={"name": "team-a"})], "llm-serving:consumers[0].namespace = '{\"name\": \"team-a\"}': Input should be a valid string"),
    ([{**base(), "namespace": None, "namespaceSelector": {}}],
     "llm-serving:consumers[0].namespaceSelector = '{}': must have matchLabels or matchExpressions"),
    ([{"name": "nb", "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]},
       "requestsPerMinute": 1}],
     "llm-serving:consumers[0].namespaceSelector.matchExpressions[0].values = []: must be set when operator is 'In'"),
    ([base(), base(namespace="team-b")], "llm-serving:consumers[1].name = 'search': is taken by consumers[0]"),
    ([base(requestsPerMinute=0)], "llm-serving:consumers[0].requestsPerMinute = 0: Input should be greater than 0"),
    ([base(requestsPerMinute=-5)], "llm-serving:consumers[0].requestsPerMinute = -5: Input should be greater than 0"),
    ([base(requestsPerMinute="600")], "llm-serving:consumers[0].requestsPerMinute = '600': Input should be a valid integer"),
    ([{"name": "search", "namespace": "team-search"}], "llm-serving:consumers[0].requestsPerMinute = (unset): is required"),
    ([base(name="Search")], "llm-serving:consumers[0].name = 'Search': must be a DNS label"),
])
def test_bad_consumers_are_refused_with_the_field_named(consumers, line):
    keys = {c["name"]: f"[secret {i}]" for i, c in enumerate(consumers) if isinstance(c.get("name"), str)}
    message = refusal(consumers_file(consumers, keys))
    assert line in message, message
    assert all(x.startswith("Pulumi.variant.yaml: llm-serving:consumers[") for x in message.splitlines()), message


def test_token_limits_are_refused_since_the_pinned_gateway_counts_requests_only():
    message = refusal(consumers_file([base(tokensPerMinute=100000)]))
    assert message == f"Pulumi.variant.yaml: llm-serving:consumers[0].tokensPerMinute = 100000: {TOKENS_REFUSED}"
    # The fact, from the Envoy Gateway v1.2.8 CRD the stacks validate against: a local or global rule is
    # client selectors and a request limit, nothing that counts tokens (`cost` is v1.3.0's).
    crd = yaml.safe_load((shared_dir("crds", "envoy-gateway") / "gateway.envoyproxy.io_backendtrafficpolicies.yaml")
                         .read_text())
    (version,) = crd["spec"]["versions"]
    rate_limit = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["rateLimit"]["properties"]
    for kind in ("local", "global"):
        rule = rate_limit[kind]["properties"]["rules"]["items"]["properties"]
        assert set(rule) == {"clientSelectors", "limit"} and set(rule["limit"]["properties"]) == {"requests", "unit"}


# ---- bad keys: never a value in the message ----

def test_a_consumer_without_a_key_is_refused_by_pulumi_up_and_listed_by_the_render():
    """`pulumi up` runs the checks with require_secrets (stacks/loader.py from_pulumi); the offline render
    lists the missing key with a stand-in, as it does every missing secret (--strict refuses it, below)."""
    sf = consumers_file(keys={"search": "[secret a]"})
    assert render(sf).missing_secrets == ["consumerKeys.notebooks"]
    cfg = StackConfig.model_validate({k.removeprefix("llm-serving:"): json.loads(v) for k, v in sf.config.items()
                                      if k in ("llm-serving:consumers", "llm-serving:models", "llm-serving:images")}
                                     | {k: v for k, v in dev_config().items() if k not in ("consumers",)})
    (problem,) = consumer_keys.problems(cfg, sf.config, lambda: None, require_secrets=True)
    assert problem.render("Pulumi.variant.yaml") == (
        "Pulumi.variant.yaml: llm-serving:consumerKeys.notebooks = (unset): is required: consumers[1] (notebooks) "
        "has no key; set it with pulumi config set --secret --path 'llm-serving:consumerKeys.notebooks' <secret>")
    assert consumer_keys.problems(cfg, sf.config, lambda: None, require_secrets=False) == []


def test_without_any_key_plan_md_and_strict_name_each_consumers_command(tmp_path, capsys):
    """No consumerKeys at all: plan.md's Secrets section and --strict give one `--path` command per
    consumer, with its name (never `consumerKeys.<name>`), in stack-file order."""
    from render.__main__ import missing_secrets_report

    sf = consumers_file()
    del sf.config["llm-serving:consumerKeys"]
    sf.secret_keys.remove("llm-serving:consumerKeys")
    rendered = render(sf)
    names = [c["name"] for c in CONSUMERS]
    assert len(names) > 1
    assert [k for k in rendered.missing_secrets if k.startswith("consumerKeys")] == [f"consumerKeys.{n}" for n in names]
    secrets = plan_md(rendered).split("## Secrets\n", 1)[1].split("\n## ", 1)[0]
    for n in names:
        assert f"- `pulumi config set --secret --path 'llm-serving:consumerKeys.{n}' <secret>`" in secrets, secrets
    assert "<name>" not in secrets and "consumerKeys <value>" not in secrets, secrets
    report = missing_secrets_report("Pulumi.variant.yaml", rendered.missing_secrets)
    for n in names:
        assert (f"Pulumi.variant.yaml: llm-serving:consumerKeys.{n}: is a required secret and is not set; set it "
                f"with `pulumi config set --secret --path 'llm-serving:consumerKeys.{n}' <secret>`") in report
    assert "<name>" not in report


@pytest.mark.parametrize("keys,line", [
    ({"search": "same-secret-123", "notebooks": "same-secret-123"},
     "llm-serving:consumerKeys.notebooks = (value not shown): is the same secret as consumerKeys.search"),
    ({"search": SHARED, "notebooks": "[secret b]"}, "llm-serving:consumerKeys.search = (value not shown): is the "
     "shared apiKey"),
    ({"search": "", "notebooks": "[secret b]"}, "llm-serving:consumerKeys.search = (value not shown): must be a "
     "non-empty text"),
    ({"search": " padded-secret ", "notebooks": "[secret b]"}, "llm-serving:consumerKeys.search = (value not shown): "
     "must not start or end with whitespace"),
    ({"search": "two\nlines", "notebooks": "[secret b]"}, "llm-serving:consumerKeys.search = (value not shown): must "
     "not hold control characters"),
    ({"search": 12345, "notebooks": "[secret b]"}, "llm-serving:consumerKeys.search = (value not shown): must be a "
     "non-empty text"),
])
def test_bad_keys_are_refused_without_showing_them(keys, line):
    message = refusal(consumers_file(keys=keys))
    assert line in message, message
    for value in keys.values():
        if str(value).strip():
            assert str(value).strip() not in message.replace("consumerKeys.search", "")


def test_a_key_map_that_is_no_map_is_refused():
    sf = consumers_file()
    sf.config["llm-serving:consumerKeys"] = "not-a-map"
    assert "llm-serving:consumerKeys = (value not shown): must be a map of consumer name to secret" in refusal(sf)


def test_a_key_map_stored_in_plaintext_is_refused_with_the_path_command():
    sf = consumers_file()
    sf.secret_keys.remove("llm-serving:consumerKeys")
    message = refusal(sf)
    assert ("Pulumi.variant.yaml: llm-serving:consumerKeys = '(plaintext)': must be stored encrypted: pulumi config set "
            "--secret --path 'llm-serving:consumerKeys.<name>' <secret>") in message
    assert all(v not in message for v in SECRETS.values())


def write_project(tmp_path, extra: str, stack: str = "dev"):
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (project / f"Pulumi.{stack}.yaml").write_text((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text() + extra)
    return project


def run_render(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "render", *args], cwd=PROJECT_DIR, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONHASHSEED": "0"})


CONSUMERS_YAML = """  llm-serving:consumers:
    - name: search
      namespace: team-search
      requestsPerMinute: 600
    - name: notebooks
      namespaceSelector:
        matchLabels:
          team: data
      requestsPerMinute: 60
"""


def test_a_plaintext_key_in_the_stack_file_exits_2_and_is_not_shown(tmp_path):
    """The CLI marks consumerKeys secret when any member is, so only the file tells a plaintext member."""
    project = write_project(tmp_path, CONSUMERS_YAML + "  llm-serving:consumerKeys:\n    search:\n"
                            "      secure: v1:c2VhcmNo\n    notebooks: plain-notebooks-secret\n")
    proc = run_render("--stack", "dev", "--project-dir", str(project), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    assert ("Pulumi.dev.yaml: llm-serving:consumerKeys.notebooks = '(plaintext)': must be stored encrypted: "
            "pulumi config set --secret --path 'llm-serving:consumerKeys.notebooks' <secret>") in proc.stderr
    assert "plain-notebooks-secret" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_strict_render_names_each_missing_key_with_its_command(tmp_path):
    project = write_project(tmp_path, CONSUMERS_YAML + "  llm-serving:consumerKeys:\n    search:\n"
                            "      secure: v1:c2VhcmNo\n")
    proc = run_render("--stack", "dev", "--project-dir", str(project), "--out", str(tmp_path / "out"), "--strict")
    assert proc.returncode == 2
    assert ("Pulumi.dev.yaml: llm-serving:consumerKeys.notebooks: is a required secret and is not set; set it with "
            "`pulumi config set --secret --path 'llm-serving:consumerKeys.notebooks' <secret>`") in proc.stderr


# ---- engines that cannot take a key per consumer ----

def test_sglang_is_refused_with_its_upstream_reason():
    sf = sglang_stack()
    with_consumers = consumers_file(models=json.loads(sf.config["llm-serving:models"]),
                                    images=json.loads(sf.config["llm-serving:images"]),
                                    compileCache={"kind": "existingClaim", "claimName": "jit-cache"})
    message = refusal(with_consumers)
    assert message == (f"Pulumi.variant.yaml: llm-serving:models[0].engine = 'sglang': cannot serve the stack's "
                       f"consumers: SGLang {sglang.MULTI_KEY_REFUSED}")
    assert "sglang/srt/utils/auth.py" in message
    render(sf)   # the same stack without consumers renders


def test_the_same_pod_proxy_takes_every_token_and_its_engines_the_shared_key():
    """Same-pod P/D: the proxy is the pod's entry point. The rendered proxy runs here with the
    variables Kubernetes would give it (each from its Secret) in front of two fake engines that
    require the shared key: each consumer's token and the shared key pass, a revoked token, a bare
    secret and no key get vLLM's 401; the engines behind it keep the shared key alone."""
    m = {k: v for k, v in model(topology="pd-same-pod").items()}
    m["vllm"] = {**m["vllm"], "tensorParallelSize": 4}
    secrets = {"search": "k-search-1", "notebooks": "k-notebooks-1"}
    r = render(consumers_file(models=[m], keys=copy.deepcopy(secrets)))
    (dep,) = [o for o in k8s_objects(r) if o["kind"] == "Deployment" and o["metadata"]["name"] == "deepseek-v4-flash"]
    pod = dep["spec"]["template"]
    assert secret_tag_annotation(CONSUMER_KEYS_SECRET) in pod["metadata"]["annotations"]
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    for engine in ("prefill", "decode"):
        assert "$(LLM_SERVING_CONSUMER_KEY_SEARCH)" not in containers[engine]["args"]
    proxy = containers["proxy"]
    env = secret_env(proxy, secrets, "shared-1")
    assert set(env) == {"OPENAI_API_KEY", key_env_name("search"), key_env_name("notebooks")}
    with FakeEngine(api_key="shared-1", kv_role="kv_producer") as prefill, \
            FakeEngine(api_key="shared-1", kv_role="kv_consumer") as decode, \
            running_proxy(proxy, prefill.port, decode.port, env, timeout=30) as base:
        for token in ("shared-1", consumer_token("search", "k-search-1"), consumer_token("notebooks", "k-notebooks-1")):
            assert status(base + "/v1/models", token) == 200, token
        for token in (consumer_token("search", "revoked"), "k-search-1", None):
            assert status(base + "/v1/models", token) == 401, token


def status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.parametrize("topology", ["pd", "hybrid"])
def test_every_p_d_fleet_takes_every_key(topology):
    """The gateway sends the client's headers to the prefill and the decode side alike, so each fleet's
    engine takes the shared key and every consumer's token, by reference, and rolls with the Secret."""
    containers = [c for c in engine_containers() if c.where.startswith(f"{topology}-consumers/")]
    assert len(containers) == (2 if topology == "pd" else 3)
    for c in containers:
        assert c.argv[-4:] == ("--api-key", f"$({vllm.API_KEY_ENV})", "$(LLM_SERVING_CONSUMER_KEY_SEARCH)",
                               "$(LLM_SERVING_CONSUMER_KEY_NOTEBOOKS)"), c.where
        assert secret_tag_annotation(CONSUMER_KEYS_SECRET) in c.annotations, c.where
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in c.container["env"] if "valueFrom" in e}
        assert refs["LLM_SERVING_CONSUMER_KEY_NOTEBOOKS"] == CONSUMER_KEYS_SECRET, c.where


def test_the_program_owns_the_vllm_log_level_when_keys_are_in_the_argv():
    message = refusal(consumers_file(models=[model(env={"VLLM_LOGGING_LEVEL": "INFO"})]))
    assert message == ("Pulumi.variant.yaml: llm-serving:models[0].env.VLLM_LOGGING_LEVEL = 'INFO': is set by the "
                       "program while the stack has consumers: vLLM is given the keys in its argv and would log them "
                       "below WARNING (policy/engines/vllm.py MULTI_KEY_ENV)")
    render(variant_file(models=[model(env={"VLLM_LOGGING_LEVEL": "INFO"})]))   # without consumers: the user's


# ---- the render ----

@pytest.fixture(scope="module")
def rendered():
    return render(consumers_file())


def test_every_key_reaches_the_engine_by_reference_only(rendered):
    template = engine_container(rendered)
    (c,) = template["spec"]["containers"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert refs == {vllm.API_KEY_ENV: {"name": "llm-serving-api-key", "key": "api-key"},
                    **{key_env_name(n): {"name": CONSUMER_KEYS_SECRET, "key": n} for n in ("search", "notebooks")}}
    assert c["args"][-4:] == ["--api-key", f"$({vllm.API_KEY_ENV})", "$(LLM_SERVING_CONSUMER_KEY_SEARCH)",
                              "$(LLM_SERVING_CONSUMER_KEY_NOTEBOOKS)"]
    plain = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert plain[upstream_vllm.LOGGING_LEVEL_ENV] == "WARNING"
    # The Secret holds one entry per consumer; its tag is on the Secret and on the pod template.
    (secret,) = [o for o in k8s_objects(rendered) if o["kind"] == "Secret" and o["metadata"]["name"] == CONSUMER_KEYS_SECRET]
    assert secret["stringData"] == {"search": "[secret]", "notebooks": "[secret]"}
    tag = secret["metadata"]["annotations"]["llm-serving.io/content-tag"]
    assert template["metadata"]["annotations"][secret_tag_annotation(CONSUMER_KEYS_SECRET)] == tag


def test_no_secret_value_is_in_any_rendered_file(rendered):
    text = kubernetes_yaml(rendered) + resources_json(rendered) + outputs_json(rendered) + plan_md(rendered) + repr(rendered.outputs)
    for secret in SECRETS.values():
        assert secret not in text
        for name in SECRETS:
            assert consumer_token(name, secret) not in text


def test_the_compile_cache_and_everything_but_the_engine_and_its_jobs_stay(rendered):
    """The keys stay out of the JIT cache key: adding or removing a consumer keeps the cache. What changes
    is the engine's template, its smoke and warm-up Jobs (named by the rollout key) and the new Secret."""
    dev = render(variant_file())
    before = {(o["kind"], o["metadata"]["name"]): o for o in k8s_objects(dev)}
    after = {(o["kind"], o["metadata"]["name"]): o for o in k8s_objects(rendered)}
    cache = "llm-serving.io/compile-cache-key-engine"
    assert (engine_container(rendered)["metadata"]["annotations"][cache]
            == engine_container(dev)["metadata"]["annotations"][cache])
    changed = {k for k in before.keys() & after.keys() if before[k] != after[k]}
    # ... and the route's BackendTrafficPolicy, which gains each consumer's limit (components/gateway_policies.py).
    policy = ("BackendTrafficPolicy", "deepseek-v4-flash-api-llm-serving-dev")
    assert changed == {("Deployment", "deepseek-v4-flash"), policy}
    rules = after[policy]["spec"]["rateLimit"]["local"]["rules"]
    assert [(r["clientSelectors"][0]["headers"][0]["value"], r["limit"]) for r in rules] == [
        (f"^(?i:bearer) {re.escape(key_prefix(c['name']))}.*$", {"requests": c["requestsPerMinute"], "unit": "Minute"})
        for c in CONSUMERS]
    # New: the Secret, and the EnvoyPatchPolicy carrying the limits on AIBrix's strategy path (strategy_limits.py).
    assert {k for k in after.keys() - before.keys() if k[0] != "Job"} == {
        ("Secret", CONSUMER_KEYS_SECRET), ("EnvoyPatchPolicy", strategy_limits.policy_name("llm-serving-dev"))}
    assert {k[0] for k in before.keys() ^ after.keys()} == {"Job", "Secret", "EnvoyPatchPolicy"}


def test_the_ops_jobs_and_openwebui_keep_the_shared_key(rendered):
    for o in k8s_objects(rendered):
        if o["kind"] == "Job" or (o["kind"] == "Deployment" and o["metadata"]["name"] != "deepseek-v4-flash"):
            assert CONSUMER_KEYS_SECRET not in json.dumps(o), o["metadata"]["name"]


def test_each_consumer_gets_a_secret_output_and_its_entry(rendered):
    assert rendered.outputs["consumers"] == {
        "search": {"tokenOutput": "consumerToken/search", "requestsPerMinute": 600,
                   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-search"}}},
        "notebooks": {"tokenOutput": "consumerToken/notebooks", "requestsPerMinute": 60,
                      "namespaceSelector": {"matchLabels": {"team": "data"}}}}
    assert {"apiKey", "consumerToken/search", "consumerToken/notebooks"} <= rendered.secret_outputs
    assert rendered.outputs["consumerToken/search"] == "[secret]"
    assert render_stack("dev").outputs["consumers"] == {}


def test_the_example_consumer_reads_its_own_token(rendered):
    outputs = {**rendered.outputs, "apiKey": "shared-key", "consumerToken/search": consumer_token("search", "s1"),
               "consumerToken/notebooks": consumer_token("notebooks", "s2")}
    secret = {"apiKey", "consumerToken/search", "consumerToken/notebooks"}

    def program():
        import consumer
        import pulumi
        settings = consumer.client_settings("acme/llm-serving/dev", consumer="search")
        return {**settings, "revealed": pulumi.Output.unsecret(settings["apiKey"])}
    r = read_with(outputs, secret, program=program)
    assert r.outputs["revealed"] == "search.s1" and r.outputs["apiKey"] == "[secret]" and "apiKey" in r.secret_outputs

    def unknown():
        import consumer
        return consumer.client_settings("acme/llm-serving/dev", consumer="search-2")
    with pytest.raises(Exception, match="declares no consumer 'search-2'"):
        read_with(outputs, secret, program=unknown)


# ---- the NetworkPolicies: each consumer's namespaces, like networkPolicy.clients ----

def test_without_the_gateway_each_consumer_namespace_reaches_the_model_service():
    r = render(consumers_file(gateway={"enabled": False}))
    policies = [o for o in k8s_objects(r) if o["kind"] == "NetworkPolicy"]
    template = engine_container(r)
    port = template["spec"]["containers"][0]["ports"][0]["containerPort"]
    engine = Pod(NS, template["metadata"]["labels"], {"engine": port})
    assert allowed(policies, Pod("team-search", {"app": "a"}), engine, port)
    assert allowed(policies, Pod("nb", {"app": "j"}, namespace_labels={"team": "data"}), engine, port)
    assert not allowed(policies, Pod("team-other", {"app": "a"}), engine, port)
    assert not allowed(policies, Pod("team-search", {"app": "a"}), engine, 45678)


# ---- revoking: one update, every engine, and the change document shows it ----

def test_removing_a_consumer_revokes_its_token_in_one_update(tmp_path):
    keys = "  llm-serving:consumerKeys:\n    search:\n      secure: v1:c2VhcmNo\n    notebooks:\n      secure: v1:bm90ZQ==\n"
    one = CONSUMERS_YAML.split("    - name: notebooks")[0]
    before = write_project(tmp_path / "a", CONSUMERS_YAML + keys)
    after = write_project(tmp_path / "b", one + keys)
    assert run_render("--stack", "dev", "--project-dir", str(before), "--out", str(tmp_path / "o1")).returncode == 0
    proc = run_render("--stack", "dev", "--project-dir", str(after), "--out", str(tmp_path / "o2"),
                      "--previous", str(tmp_path / "o1"))
    assert proc.returncode == 0, proc.stderr
    changes = (tmp_path / "o2" / "changes.md").read_text()
    secret_row = next(line for line in changes.splitlines() if line.startswith(f"| Secret {NS}/{CONSUMER_KEYS_SECRET} |"))
    assert "replace" in secret_row and "`stringData.notebooks`" in secret_row
    engine_row = next(line for line in changes.splitlines() if line.startswith(f"| Deployment {NS}/deepseek-v4-flash |"))
    assert secret_tag_annotation(CONSUMER_KEYS_SECRET) in engine_row
    assert f"Pods restart in: Deployment {NS}/deepseek-v4-flash (rollout)." in changes
    outputs = json.loads((tmp_path / "o2" / "outputs.json").read_text())
    assert "consumerToken/notebooks" not in outputs and set(outputs["consumers"]) == {"search"}
    assert ("- Revoked: notebooks. The tokens leave the Secret `llm-serving-consumer-keys` and every engine's argv; "
            f"each engine refuses them once its pods have restarted in this update (Deployment {NS}/deepseek-v4-flash)"
            ) in changes
    plan = (tmp_path / "o1" / "plan.md").read_text()
    assert "| notebooks | namespaces with `team=data` | 60 | `consumerToken/notebooks` (secret) |" in plan
    assert "content tag `" in plan and "): Deployment deepseek-v4-flash" in plan


def test_rotating_one_key_rolls_every_engine_and_changes_md_says_so(tmp_path):
    keys = "  llm-serving:consumerKeys:\n    search:\n      secure: v1:{}\n    notebooks:\n      secure: v1:bm90ZQ==\n"
    before = write_project(tmp_path / "a", CONSUMERS_YAML + keys.format("c2VhcmNo"))
    after = write_project(tmp_path / "b", CONSUMERS_YAML + keys.format("bmV3LXNlYXJjaA=="))
    assert run_render("--stack", "dev", "--project-dir", str(before), "--out", str(tmp_path / "o1")).returncode == 0
    proc = run_render("--stack", "dev", "--project-dir", str(after), "--out", str(tmp_path / "o2"),
                      "--previous", str(tmp_path / "o1"))
    assert proc.returncode == 0, proc.stderr
    changes = (tmp_path / "o2" / "changes.md").read_text()
    assert "- A key was rotated (the Secret `llm-serving-consumer-keys` changed, its consumers did not)" in changes
    assert f"Pods restart in: Deployment {NS}/deepseek-v4-flash (rollout)." in changes
    # The engine's argv and variables are the same: only the Secret's tag on the template changes.
    engine_row = next(line for line in changes.splitlines() if line.startswith(f"| Deployment {NS}/deepseek-v4-flash |"))
    assert "args" not in engine_row and "env" not in engine_row and secret_tag_annotation(CONSUMER_KEYS_SECRET) in engine_row


def test_the_plan_says_where_each_limit_holds(rendered):
    """Read off the rendered policies: the per-route BackendTrafficPolicies and the strategy-path routes,
    each consumer's bucket and timeout."""
    text = plan_md(rendered)
    line = next(x for x in text.splitlines() if x.startswith("Gateway limits"))
    (patch,) = [o for o in k8s_objects(rendered) if o["kind"] == "EnvoyPatchPolicy"]
    assert f"EnvoyPatchPolicy `{patch['metadata']['name']}`" in line
    for c in CONSUMERS:
        assert f"`llm-serving/{NS}/consumer/{c['name']}` {c['requestsPerMinute']} (timeout 120s)" in line
    assert "(BackendTrafficPolicies: 1)" in line and "/default" not in line


def test_the_shipped_stacks_change_no_consumer_line(tmp_path):
    assert "## Consumers" not in plan_md(render_stack("dev"))


# ---- the keys at work: a fake engine that checks them as vLLM does ----

def secret_env(container: dict, secrets: dict[str, str], api_key: str) -> dict[str, str]:
    """The container's Secret-backed variables as Kubernetes sets them, from the Secrets' data as the
    program writes them (the shared key, each consumer's token)."""
    data = {("llm-serving-api-key", "api-key"): api_key,
            **{(CONSUMER_KEYS_SECRET, n): consumer_token(n, s) for n, s in secrets.items()}}
    return {e["name"]: data[(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])]
            for e in container["env"] if "valueFrom" in e}


def expanded_tokens(r, secrets: dict[str, str], api_key: str) -> list[str]:
    """--api-key's list as the engine receives it: the rendered argv with each $(VAR) expanded by
    Kubernetes from the variable's Secret (the Secrets' data as the program writes them)."""
    (c,) = engine_container(r)["spec"]["containers"]
    env = secret_env(c, secrets, api_key)
    argv = [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in c["args"]]
    # The values of --api-key up to the next flag: what vLLM's list option takes (its own parser accepts
    # these argvs: tests/test_engine_flags.py test_vllm_argv_parses_with_full_names).
    return list(itertools.takewhile(lambda a: not a.startswith("--"), argv[argv.index("--api-key") + 1:]))


def call(engine: FakeEngine, path: str, token: str | None) -> int:
    return status(engine.base + path, token)


@pytest.mark.parametrize("release", upstream_vllm.RELEASES)
def test_each_key_is_taken_a_revoked_one_and_none_are_refused(release):
    secrets = {"search": "k-search-1", "notebooks": "k-notebooks-1"}
    both = expanded_tokens(render(consumers_file(keys=copy.deepcopy(secrets))), secrets, "shared-1")
    only_search = expanded_tokens(render(consumers_file(CONSUMERS[:1], keys={"search": "k-search-1"})),
                                  {"search": "k-search-1"}, "shared-1")
    assert both == ["shared-1", "search.k-search-1", "notebooks.k-notebooks-1"]
    with FakeEngine(api_key=both, release=release) as engine:
        for token in both:
            assert call(engine, "/v1/models", token) == 200
        assert call(engine, "/v1/models", None) == 401
        assert call(engine, "/v1/models", "k-search-1") == 401          # the secret without its prefix
        assert call(engine, "/v1/models", "search.k-notebooks-1") == 401
        assert call(engine, "/health", None) == 200 and call(engine, "/metrics", None) == 200
    with FakeEngine(api_key=only_search, release=release) as engine:
        assert call(engine, "/v1/models", "notebooks.k-notebooks-1") == 401   # revoked
        assert call(engine, "/v1/models", "search.k-search-1") == 200
        assert call(engine, "/v1/models", "shared-1") == 200


def test_the_pack_takes_every_variant_s_keys_by_reference():
    """policy secret-refs over every engine variant (consumers' included): each key in an argv is $(VAR)
    of a secretKeyRef variable, SGLang's single one too."""
    from policy import resource_rules

    (policy,) = [p for p in resource_rules.RESOURCE_POLICIES if p.name == "secret-refs"]
    for where, r in rendered_variants().items():
        for res in r.resources:
            assert policy.check(res.type, res.inputs) == [], (where, res.name)
