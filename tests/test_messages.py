"""The messages of a refused stack file (issue 20): each case is a real render of an edited copy of a
shipped stack file, through the render CLI, and its exact message."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import PROJECT_DIR, render_stack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from s3_server import AWS
from test_bad_input import _paths, broken_configs
from test_config import SECRETS

from config_model import AWS_REGION
from render import output
from render.__main__ import main as render_main
from stacks import loader
from stacks.rules.problem import Problem


def render_edited(tmp_path, capsys, stack: str, *edits: tuple[str, str], strict: bool = False):
    """(exit code, stderr lines after the count, output dir) of rendering Pulumi.<stack>.yaml with each
    (old, new) edit applied, as the stack `edited` in a project of its own."""
    text = (PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.edited.yaml").write_text(text)
    out = tmp_path / "out"
    code = render_main(["--stack", "edited", "--project-dir", str(tmp_path), "--out", str(out),
                        *(["--strict"] if strict else [])])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.startswith("Pulumi.edited.yaml")], out


def test_a_digit_string_given_unquoted_is_quoted_back_as_written(tmp_path, capsys):
    code, lines, out = render_edited(tmp_path, capsys, "dev", ('revision: "0731"', "revision: 0731"),
                                     ('kubernetesVersion: "1.33"', "kubernetesVersion: 1.30"),
                                     ("servedModelName: DeepSeek-V4-Flash", "servedModelName: true"))
    assert code == 2 and not out.exists()
    assert lines == [
        'Pulumi.edited.yaml: llm-serving:cluster.kubernetesVersion = 1.3: must be text, and the Pulumi CLI reads the '
        'unquoted 1.30 as a number, 1.3 (YAML as the CLI reads it); write it quoted: "1.30"',
        'Pulumi.edited.yaml: llm-serving:models[0].servedModelName = true: must be text, and the Pulumi CLI reads an '
        'unquoted true as a boolean (YAML as the CLI reads it); write it quoted: "true"',
        'Pulumi.edited.yaml: llm-serving:models[0].revision = 473: must be text, and the Pulumi CLI reads the unquoted '
        '0731 as a number, 473 (YAML as the CLI reads it); write it quoted: "0731"',
    ]


def test_without_the_stack_file_the_quote_hint_names_the_octal_reading():
    """Under `pulumi up` in another directory the file may not be at hand: the hint still names 0731."""
    raw = json.loads(json.dumps(__import__("test_config").raw_config()))
    raw["models"][0]["revision"] = 473
    raw["cluster"]["kubernetesVersion"] = 1.3
    with pytest.raises(loader.ConfigError) as err:
        loader.validate(raw, "dev", {k: True for k in loader.SECRET_KEYS})
    text = str(err.value)
    assert 'write it quoted as meant: "0731" if the file has 0731 (unquoted, a leading 0 makes it octal), else "473"' in text
    assert 'write it quoted with the digits meant: "1.3", or "1.30" if the file has 1.30' in text
    # The file's text, when given, decides.
    source = (PROJECT_DIR / "Pulumi.dev.yaml").read_text().replace('revision: "0731"', "revision: 0731")
    assert 'write it quoted: "0731"' in str(loader.spelled(err.value, source))
    assert loader.written(source, "models[0].revision", 473) == "0731"
    assert loader.written(source, "models[0].revision", 731) is None  # the program got it from elsewhere
    assert loader.written(source, "models[0].servedModelName", "DeepSeek-V4-Flash") == "DeepSeek-V4-Flash"
    assert loader.written(source, "cluster.kubernetesVersion", 1.33) is None  # quoted in the file


def test_an_object_url_as_prefix_is_refused(tmp_path, capsys):
    code, lines, _ = render_edited(tmp_path, capsys, "prod", ("objectPrefix: models/", "objectPrefix: s3://bucket/models/"))
    assert code == 2
    assert lines == ["Pulumi.edited.yaml: llm-serving:models[0].objectPrefix = 's3://bucket/models/DeepSeek-V4-Flash-0731': "
                     "must be the key prefix inside the bucket, not a URL (s3://...): write "
                     "'models/DeepSeek-V4-Flash-0731'; the bucket is objectStore.bucketName"]


def test_an_aws_endpoint_is_aws(tmp_path, capsys):
    """A FIPS, dual-stack or regional endpoint of AWS S3 keeps the IAM reader and a real AWS provider."""
    code, lines, out = render_edited(tmp_path, capsys, "prod", (
        "    region: us-west-2\n", "    region: us-west-2\n    endpoint: https://s3.us-west-2.amazonaws.com\n"))
    assert code == 0, lines
    resources = json.loads((out / "resources.json").read_text())
    provider = next(r for r in resources if r["type"] == "pulumi:providers:aws")
    assert json.loads(provider["inputs"]["endpoints"]) == [{"s3": "https://s3.us-west-2.amazonaws.com"}]
    # Otherwise the provider of prod itself: no skipped credential checks, no static key.
    shipped = next(r for r in json.loads(output.resources_json(render_stack("prod"))) if r["type"] == "pulumi:providers:aws")
    assert {k: v for k, v in provider["inputs"].items() if k != "endpoints"} == shipped["inputs"]
    assert [r for r in resources if r["type"] == "aws:iam/user:User"]


def test_an_aws_endpoint_of_another_region_is_refused(tmp_path, capsys):
    code, lines, _ = render_edited(tmp_path, capsys, "prod", (
        "    region: us-west-2\n", "    region: eu-west-1\n    endpoint: https://s3-fips.us-west-2.amazonaws.com\n"))
    assert code == 2
    assert lines == ["Pulumi.edited.yaml: llm-serving:objectStore.region = 'eu-west-1': must be 'us-west-2', the region "
                     "of the AWS endpoint https://s3-fips.us-west-2.amazonaws.com: requests are signed for "
                     "objectStore.region"]


def test_a_non_aws_endpoint_cannot_have_iam_and_says_so_in_stack_file_spelling(tmp_path, capsys):
    code, lines, _ = render_edited(tmp_path, capsys, "dev", ("createCredentials: false", "createCredentials: true"))
    assert code == 2
    assert lines == ["Pulumi.edited.yaml: llm-serving:objectStore.createCredentials = true: must be false with the "
                     "non-AWS endpoint https://cos.ap-shanghai.myqcloud.com: it has no IAM to create a user in; set "
                     "llm-serving:objectStoreAccessKeyId and llm-serving:objectStoreSecretAccessKey with --secret"]


@pytest.mark.parametrize("value, shown", [(True, "true"), (False, "false"), (None, "(unset)"),
                                          ({"a": [1, None]}, '{"a": [1, null]}')])
def test_no_python_spelling_in_a_value(value, shown):
    assert Problem("x", value, "why").render("Pulumi.s.yaml") == f"Pulumi.s.yaml: llm-serving:x = {shown}: why"


def test_unknown_keys_at_every_depth_get_did_you_mean(tmp_path, capsys):
    code, lines, _ = render_edited(
        tmp_path, capsys, "dev", ("    bucketName:", "    bucketNme:"), ("tensorParallelSize: 8", "tensorParalelSize: 8"),
        ("      driver: csi", "      drivr: csi"),
        ("config:\n", "config:\n  llm-serving:gpuBudgt: 8\n  llm-serving:apikey:\n    secure: v1:AAAAcanary\n"
                      "  llm-serving:zzzz:\n    secure: v1:AAAAcanary\n"))
    assert code == 2
    assert "canary" not in "\n".join(lines)
    stored = "holds a value stored with --secret (directly or with --path inside it), but is not a known setting"
    assert sorted(lines) == sorted([
        f"Pulumi.edited.yaml: llm-serving:apikey = (value not shown): {stored}; did you mean the secret apiKey? Set it "
        "with pulumi config set --secret llm-serving:apiKey <value> and remove this key (pulumi config rm "
        "llm-serving:apikey)",
        f"Pulumi.edited.yaml: llm-serving:zzzz = (value not shown): {stored}: remove it (pulumi config rm "
        "llm-serving:zzzz); secret settings: apiKey, consumerKeys, kubeconfig, objectStoreAccessKeyId, objectStoreSecretAccessKey, "
        "cephUserKey, registryDockerConfigJson",
        "Pulumi.edited.yaml: llm-serving:gpuBudgt = (value not shown): is not a known setting; did you mean gpuBudget?",
        "Pulumi.edited.yaml: llm-serving:objectStore.bucketName = (unset): is required",
        "Pulumi.edited.yaml: llm-serving:objectStore.bucketNme = (value not shown): is not a known setting; did you "
        "mean bucketName?",
        "Pulumi.edited.yaml: llm-serving:modelVolume.cephfs.drivr = (value not shown): is not a known setting; did you "
        "mean driver?",
        "Pulumi.edited.yaml: llm-serving:models[0].vllm.tensorParalelSize = (value not shown): is not a known setting; "
        "did you mean tensorParallelSize?",
    ])
    assert not any("without --secret" in line for line in lines)


def test_known_keys_follow_lists_maps_and_optional_sections():
    assert "tensorParallelSize" in loader.known_keys(("models", 0, "vllm"))
    assert "upstream" in loader.known_keys(("images", "vllm"))
    assert "effect" in loader.known_keys(("gpuPool", "tolerations", 3))
    assert loader.known_keys(("gpuPool", "nodeSelector")) == []


def test_an_aws_region_that_is_no_region_is_refused(tmp_path, capsys):
    code, lines, _ = render_edited(tmp_path, capsys, "prod", ("region: us-west-2", "region: eu-west-l"))
    assert code == 2
    assert lines == ["Pulumi.edited.yaml: llm-serving:objectStore.region = 'eu-west-l': must be an AWS region name such "
                     "as us-east-1 or eu-west-1 (<area>-<direction>-<number>, e.g. cn-north-1, us-gov-west-1), as the "
                     "bucket is on AWS S3"]


def test_an_s3_compatible_store_keeps_its_own_region_names(tmp_path, capsys):
    """COS names regions ap-shanghai, a Ceph RGW zonegroup may be `default`: not AWS names, accepted."""
    code, lines, _ = render_edited(tmp_path, capsys, "dev", ("region: ap-shanghai", "region: default"))
    assert code == 0, lines


def test_the_aws_region_pattern_is_botocores_partitions():
    """AWS_REGION accepts exactly what one of the partitions' regionRegex of the pinned botocore accepts,
    on every region botocore lists and on near misses of them."""
    found = sorted(AWS.parent.parent.glob("lib/python*/site-packages/botocore/data/partitions.json"))
    if not found:
        pytest.skip(f"{AWS.parent.parent} has no botocore (make test builds .venv-s3)")
    partitions = json.loads(found[0].read_text())["partitions"]
    regions = [r for p in partitions for r in p["regions"] if not r.endswith("-global")]
    near = [variant for r in regions for variant in (r.replace("1", "l"), r + "a", r.replace("-", "_"), r.upper(),
                                                      r.split("-", 1)[1], "xx-" + r.split("-", 1)[1])]
    for name in regions + near + ["ap-shanghai", "default", "eusc-fr-east-1", "us-isoz-east-1"]:
        theirs = any(re.fullmatch(p["regionRegex"], name) for p in partitions)
        assert bool(re.fullmatch(AWS_REGION, name)) == theirs, name
    assert all(re.fullmatch(AWS_REGION, r) for r in regions)


def test_missing_secrets_list_by_default_and_fail_strict(tmp_path, capsys):
    code, lines, out = render_edited(tmp_path, capsys, "dev")
    assert code == 0 and "pulumi config set --secret llm-serving:apiKey" in (out / "plan.md").read_text()
    code, lines, out = render_edited(tmp_path, capsys, "dev", strict=True)
    assert code == 2 and not out.exists()
    assert lines[0] == ("Pulumi.edited.yaml: llm-serving:apiKey: is a required secret and is not set; set it with "
                        "`pulumi config set --secret llm-serving:apiKey <value>`")


PYTHON_SPELLING = re.compile(r"(?<![\w'\"])(True|False|None)(?![\w'\"])")


def test_the_spelling_check_sees_python_values():
    assert PYTHON_SPELLING.search("x = True: y") and PYTHON_SPELLING.search("must be None")
    assert not PYTHON_SPELLING.search("x = 'True': y") and not PYTHON_SPELLING.search("x = true: Nonesuch")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(broken_configs(), st.sampled_from([True, False, None]), st.data())
def test_no_message_of_a_broken_config_spells_a_value_as_python(cfg, planted, data):
    """Any field set to a boolean or null, on top of the bad-input fuzzer's breakage: every message
    shows values as the stack file spells them."""
    path = data.draw(st.sampled_from(sorted(_paths(cfg), key=str)))
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = planted
    try:
        loader.validate(cfg, "fuzz", SECRETS)
    except loader.ConfigError as err:
        assert not PYTHON_SPELLING.search(str(err)), str(err)


def test_a_top_level_text_setting_that_lost_its_spelling_is_refused(tmp_path, capsys):
    """`namespace: 0731` reaches the program as the text "473", a valid name: only the file shows it."""
    code, lines, _ = render_edited(tmp_path, capsys, "dev", ("llm-serving:namespace: llm-serving-dev",
                                                             "llm-serving:namespace: 0731"))
    assert code == 2
    assert lines == ['Pulumi.edited.yaml: llm-serving:namespace = 473: must be text, and the Pulumi CLI reads the '
                     'unquoted 0731 as a number, 473 (YAML as the CLI reads it); write it quoted: "0731"']
    # Written as it arrives, the value is what the file says: no refusal for that.
    code, lines, _ = render_edited(tmp_path, capsys, "dev", ("llm-serving:namespace: llm-serving-dev",
                                                             "llm-serving:namespace: 473"))
    assert not any("llm-serving:namespace" in line for line in lines)


# ---- S3 bucket names (issue 28): each name S3 refuses is refused naming the rule ----

RULES = "(S3 general purpose bucket naming rules)"


@pytest.mark.parametrize("name, says", [
    ("192.168.1.10", f"must not be formatted as an IP address {RULES}"),
    ("xn--weights", f"must not start with 'xn--': reserved for internationalized (punycode) host names {RULES}"),
    ("sthree-weights", f"must not start with 'sthree-': reserved by S3 (sthree- and sthree-configurator) {RULES}"),
    ("sthree-configurator", f"must not start with 'sthree-': reserved by S3 (sthree- and sthree-configurator) {RULES}"),
    ("amzn-s3-demo-weights", f"must not start with 'amzn-s3-demo-': reserved by S3 for its documentation's examples {RULES}"),
    ("acme..weights", f"must not contain two adjacent periods '..' {RULES}"),
    ("weights-s3alias", f"must not end with '-s3alias': reserved for access point aliases {RULES}"),
    ("weights--ol-s3", f"must not end with '--ol-s3': reserved for Object Lambda Access Point aliases {RULES}"),
    ("weights--x-s3", f"must not end with '--x-s3': reserved for directory buckets {RULES}"),
    ("weights--table-s3", f"must not end with '--table-s3': reserved for S3 Tables buckets {RULES}"),
    ("weights.mrap", f"must not end with '.mrap': reserved for Multi-Region Access Points {RULES}"),
    ("xn--weights-s3alias", f"must not start with 'xn--': reserved for internationalized (punycode) host names {RULES}; "
                            f"must not end with '-s3alias': reserved for access point aliases {RULES}"),
])
def test_a_bucket_name_s3_refuses_is_refused_naming_the_rule(name, says):
    from test_config import problems, raw_config
    raw = raw_config("prod")
    raw["objectStore"]["bucketName"] = name
    assert problems(raw, stack="prod") == [f"Pulumi.prod.yaml: llm-serving:objectStore.bucketName = {name!r}: {says}"]


@pytest.mark.parametrize("name", ["weights.s3alias.example", "1.2.3.4.5", "xn-weights", "my-sthree-bucket", "weights-x-s3"])
def test_names_that_only_look_like_a_rule_pass(name):
    from test_config import raw_config
    raw = raw_config("prod")
    raw["objectStore"]["bucketName"] = name
    assert loader.validate(raw, "prod", SECRETS).object_store.bucket_name == name


def test_a_refused_bucket_name_stops_the_render(tmp_path, capsys):
    code, lines, out = render_edited(tmp_path, capsys, "prod", ("bucketName: example-llm-weights-prod", "bucketName: 192.168.1.10"))
    assert code == 2 and not out.exists()
    assert lines == [f"Pulumi.edited.yaml: llm-serving:objectStore.bucketName = '192.168.1.10': must not be formatted as "
                     f"an IP address {RULES}"]


# ---- objectStore.caBundle (issue 28) ----

@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory) -> str:
    """A real CA certificate (tests/tls_certs.py), as objectStore.caBundle holds one."""
    from tls_certs import make_certificates
    return make_certificates(tmp_path_factory.mktemp("ca"), "minio.example.internal").ca.read_text()


def test_a_ca_bundle_is_for_a_store_off_aws_and_must_be_certificates(ca_pem):
    from test_config import problems, raw_config
    raw = raw_config("prod")   # AWS S3
    raw["objectStore"]["caBundle"] = ca_pem
    assert problems(raw, stack="prod") == [
        "Pulumi.prod.yaml: llm-serving:objectStore.caBundle = '(set)': is for an S3-compatible store behind a private CA "
        "(objectStore.endpoint off AWS); AWS S3's certificates chain to public CAs the sync image already trusts"]
    raw = raw_config("dev")    # COS, an endpoint off AWS
    raw["objectStore"]["caBundle"] = ca_pem
    assert loader.validate(raw, "dev", SECRETS).object_store.ca_bundle == ca_pem
    for bad, says in (
            ("ca.pem", "must be PEM CA certificates: one or more CERTIFICATE blocks, each between its BEGIN "
                       "CERTIFICATE and END CERTIFICATE lines (the CA that signed the store's certificate)"),
            (ca_pem.replace("\n", "\n*", 2), "has a CERTIFICATE block that is not base64 (a PEM file's body lines "
                                             "were changed or cut)"),
            (ca_pem + "-----BEGIN PRIVATE KEY-----\nMC4CAQA=\n-----END PRIVATE KEY-----\n",
             "must hold only CA certificates, never a private key: plain config reaches the stack file and the "
             "state unencrypted")):
        raw["objectStore"]["caBundle"] = bad
        [line] = problems(raw)
        shown = "'ca.pem'" if bad == "ca.pem" else "(value not shown)"
        assert line == f"Pulumi.dev.yaml: llm-serving:objectStore.caBundle = {shown}: {says}"

