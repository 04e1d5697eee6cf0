"""The stack file as the Pulumi CLI reads it and the config as the language host hands it over.

Upstream behaviour encoded here (pulumi/pulumi v3.259.0, the newest tag mirrored; our SDK pin is
3.272.0; go-yaml v3.0.1, pinned by pulumi's sdk/go.mod):
- go-yaml v3.0.1 resolve.go: only true/false (any of 3 spellings) are booleans, ints take 0x/0o/0b
  and a leading-0 octal, underscores are dropped, an out-of-range number is text;
- go-yaml v3.0.1 decode.go: duplicate keys refused per mapping, alias expansion ratio limit;
- sdk/go/common/resource/config/plaintext.go marshalText: strings as they are, the rest JSON text;
- sdk/go/common/resource/config/map.go SecureKeys: a key is secret if any value inside it is;
- sdk/python/lib/pulumi/runtime/config.py: PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS.
"""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
from conftest import PROJECT_DIR

from render import runtime, stackfile, yaml12
from render.__main__ import main as render_main
from stacks.loader import ConfigError

DEV = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
CANARY = "canary-7f3a"


def project(tmp_path, text: str):
    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.t.yaml").write_text(text)
    return tmp_path


def render_cli(tmp_path, text: str, capsys) -> tuple[int, list[str]]:
    """render's in-process main() on a stack file; (exit code, stderr lines)."""
    out = tmp_path / "out"
    code = render_main(["--stack", "t", "--project-dir", str(project(tmp_path, text)), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert not out.exists()
    return code, err.splitlines()


def refused(tmp_path, text: str, capsys) -> list[str]:
    code, lines = render_cli(tmp_path, text, capsys)
    assert code == 2, lines
    assert lines[0].startswith("invalid stack configuration (")
    assert all(line.startswith("Pulumi.t.yaml") for line in lines[1:]), lines
    return lines[1:]


@pytest.mark.parametrize("text,tag,value", [
    ("off", "!!str", "off"), ("yes", "!!str", "yes"), ("on", "!!str", "on"), ("y", "!!str", "y"),
    ("True", "!!bool", True), ("FALSE", "!!bool", False), ("tRue", "!!str", "tRue"),
    ("~", "!!null", None), ("", "!!null", None), ("0777", "!!int", 511), ("0o17", "!!int", 15),
    ("0x1F", "!!int", 31), ("1_000", "!!int", 1000), ("08", "!!float", 8.0), ("1e3", "!!float", 1000.0),
    ("12:30", "!!str", "12:30"), ("1.2.3", "!!str", "1.2.3"), (".5e999", "!!str", ".5e999"),
    ("18446744073709551615", "!!int", 2 ** 64 - 1), ("2024-07-31", "!!timestamp", "2024-07-31 00:00:00 +0000 UTC"),
])
def test_scalars_resolve_as_go_yaml_v3(text, tag, value):
    assert yaml12.resolve(text) == (tag, value)


def test_off_is_text_and_a_quoted_number_stays_text():
    sf_text = DEV.replace('speculativeDecoding: "off"', "speculativeDecoding: off").replace(
        "namespace: llm-serving-dev", 'namespace: "2024"')
    sf = _read(sf_text)
    assert json.loads(sf.config["llm-serving:models"])[0]["vllm"]["speculativeDecoding"] == "off"
    assert sf.config["llm-serving:namespace"] == "2024"
    rendered = runtime.render(sf)
    assert rendered.outputs["namespace"] == "2024"


def _read(text: str) -> stackfile.StackFile:
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        return stackfile.read(project(Path(tmp), text), "t")


@pytest.mark.parametrize("old,new,path", [
    ("      enabled: true\n", "      enabled: yes\n", "operations.openWebUI.enabled"),
    ("    kubernetesVersion: \"1.33\"\n", "    kubernetesVersion: \"1.33\"\n    createNamespace: off\n", "cluster.createNamespace"),
])
def test_a_boolean_field_refuses_yaml_1_1_words(tmp_path, capsys, old, new, path):
    lines = refused(tmp_path, DEV.replace(old, new), capsys)
    assert any(line.startswith(f"Pulumi.t.yaml: llm-serving:{path} = ") and "must be true or false" in line
               for line in lines), lines


def test_duplicate_keys_are_refused_with_their_lines(tmp_path, capsys):
    nested = DEV.replace("    region: ap-shanghai\n", "    region: ap-shanghai\n    region: ap-beijing\n")
    line = nested.splitlines().index("    region: ap-beijing") + 1
    assert refused(tmp_path, nested, capsys) == [
        f"Pulumi.t.yaml:{line}: llm-serving:objectStore.region: is already defined at line {line - 1}; "
        "the Pulumi CLI refuses duplicate keys (go-yaml v3)"]
    top = DEV + "  llm-serving:gpuBudget: 16\n"
    first = DEV.splitlines().index("  llm-serving:gpuBudget: 8") + 1
    assert refused(tmp_path, top, capsys) == [
        f"Pulumi.t.yaml:{len(top.splitlines())}: llm-serving:gpuBudget: is already defined at line {first}; "
        "the Pulumi CLI refuses duplicate keys (go-yaml v3)"]


def test_a_key_spelled_with_and_without_namespace_is_refused(tmp_path, capsys):
    lines = refused(tmp_path, DEV + "  gpuBudget: 16\n", capsys)
    assert lines == ["Pulumi.t.yaml: llm-serving:gpuBudget: is set twice, as 'llm-serving:gpuBudget' and "
                     "'gpuBudget'; keep one"]


def test_alias_bomb_is_refused_fast_in_bounded_memory(tmp_path, capsys):
    layers = ["  a0: &a0 [" + ", ".join(['"lol"'] * 9) + "]"]
    for i in range(1, 10):
        layers.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    text = "config:\n  llm-serving:bomb:\n  " + "\n  ".join(layers) + "\n"
    assert len(text) < 3000
    tracemalloc.start()
    started = time.perf_counter()
    try:
        lines = refused(tmp_path, text, capsys)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 50 * 2 ** 20, peak
    assert len(lines) == 1 and "excessive aliasing" in lines[0]


@pytest.mark.parametrize("broken", ["config:\n  llm-serving:x: [\n", "config:\n\tllm-serving:x: 1\n",
                                    "config:\n  llm-serving:x: *undefined\n", "config: [1\n"])
def test_yaml_syntax_errors_exit_2_without_traceback(tmp_path, capsys, broken):
    lines = refused(tmp_path, broken, capsys)
    assert len(lines) == 1 and "invalid YAML" in lines[0]


def test_warmup_longer_than_the_context_is_refused_before_anything(tmp_path, capsys):
    lines = refused(tmp_path, DEV.replace("maxNumSeqs: 64", "maxNumSeqs: 64\n        maxModelLen: 4096"), capsys)
    assert lines == ["Pulumi.t.yaml: llm-serving:models[0].vllm.maxModelLen = 4096: the warm-up sends 4096 input + "
                     "32 output tokens, more than this context; lower operations.warmup.inputTokens or "
                     "nearMaxInputFraction, or disable operations.warmup"]


@pytest.mark.parametrize("old,new,key", [
    ("  llm-serving:namespace: llm-serving-dev\n", f"  llm-serving:namespace:\n    secure: v1:{CANARY}\n", "namespace"),
    ("    region: ap-shanghai\n", f"    region:\n      secure: v1:{CANARY}\n", "objectStore"),
])
def test_a_non_secret_key_stored_as_secret_is_refused(tmp_path, capsys, old, new, key):
    lines = refused(tmp_path, DEV.replace(old, new), capsys)
    assert len(lines) == 1 and lines[0].startswith(f"Pulumi.t.yaml: llm-serving:{key} = (value not shown): holds a "
                                                   "value stored with --secret"), lines
    assert CANARY not in "\n".join(lines)


def engine_config(monkeypatch, extra: dict[str, str], secret: list[str]) -> None:
    """Config exactly as the Python language host passes it: every value a string, structured
    values JSON text, secrets decrypted, secret keys listed."""
    sf = stackfile.read(PROJECT_DIR, "dev")
    config = {**sf.config, **{f"llm-serving:{k}": "x" for k in
                              ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey")}}
    config.update(extra)
    keys = [f"llm-serving:{k}" for k in ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey",
                                         "cephUserKey")] + secret
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(config))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(keys))


def load_under_engine() -> list[str]:
    from stacks import loader
    runtime._start("dev", {}, [])
    with pytest.raises(ConfigError) as err:
        loader.from_pulumi()
    return str(err.value).splitlines()


MULTILINE = f"first line\n{CANARY}\nlast line"


def test_misspelled_secret_is_refused_without_its_value(monkeypatch):
    engine_config(monkeypatch, {"llm-serving:apikey": MULTILINE}, ["llm-serving:apikey"])
    lines = load_under_engine()
    assert len(lines) == 1 and lines[0].startswith("Pulumi.dev.yaml: llm-serving:apikey = (value not shown): ")
    assert "did you mean the secret apiKey? Set it with pulumi config set --secret llm-serving:apiKey" in lines[0]
    # A misspelled secret is never advised into plaintext.
    assert "without --secret" not in lines[0]
    assert CANARY not in "\n".join(lines) and "first line" not in "\n".join(lines)


def test_a_plain_misspelled_key_is_refused_without_its_value(monkeypatch):
    engine_config(monkeypatch, {"llm-serving:apiKeys": MULTILINE}, [])
    lines = load_under_engine()
    assert lines == ["Pulumi.dev.yaml: llm-serving:apiKeys = (value not shown): is not a known setting; did you mean "
                     "the secret apiKey? Set it with pulumi config set --secret llm-serving:apiKey <value> and remove "
                     "this key (pulumi config rm llm-serving:apiKeys)"]


def test_path_secret_inside_structured_config_is_refused(monkeypatch):
    """`pulumi config set --secret --path llm-serving:objectStore.region x`: the JSON text arrives
    decrypted and the whole key is listed as secret."""
    store = json.loads(stackfile.read(PROJECT_DIR, "dev").config["llm-serving:objectStore"])
    store["region"] = CANARY
    engine_config(monkeypatch, {"llm-serving:objectStore": json.dumps(store)}, ["llm-serving:objectStore"])
    lines = load_under_engine()
    assert len(lines) == 1 and lines[0].startswith("Pulumi.dev.yaml: llm-serving:objectStore = (value not shown)")
    assert CANARY not in "\n".join(lines)


@pytest.mark.parametrize("key,field,value", [
    ("cluster", "kubeconfigPath", f"apiVersion: v1\nclusters:\n- name: {CANARY}\n"),
    ("cluster", "kubeconfigPath", '{"apiVersion":"v1","users":[{"name":"' + CANARY + '"}]}'),
    ("objectStore", "endpoint", f"https://AKIDexample:{CANARY}@cos.ap-shanghai.myqcloud.com"),
    ("objectStore", "endpoint", f"https://{CANARY}@cos.ap-shanghai.myqcloud.com/path"),
    ("gateway", "externalEndpoint", f"https://user:{CANARY}@llm.example.internal"),
])
def test_credentials_in_plain_fields_are_refused_by_field(monkeypatch, key, field, value):
    section = json.loads(stackfile.read(PROJECT_DIR, "dev").config[f"llm-serving:{key}"])
    section[field] = value
    engine_config(monkeypatch, {f"llm-serving:{key}": json.dumps(section)}, [])
    lines = load_under_engine()
    assert len(lines) == 1 and lines[0].startswith(f"Pulumi.dev.yaml: llm-serving:{key}.{field} = (value not shown): ")
    assert CANARY not in "\n".join(lines)


def test_engine_text_is_decoded_by_the_schema(monkeypatch):
    """A quoted "2024" arrives as the text 2024: a string field keeps it; gpuBudget "8.0" is no integer."""
    engine_config(monkeypatch, {"llm-serving:namespace": "2024", "llm-serving:gpuBudget": "8.0"}, [])
    assert load_under_engine() == ["Pulumi.dev.yaml: llm-serving:gpuBudget = '8.0': Input should be a valid integer"]


def test_no_refusal_prints_a_credential_shaped_value():
    from stacks.rules import Problem
    err = ConfigError("Pulumi.x.yaml", [Problem("a", "sk-live-0123456789abcdef", "x"),
                                        Problem("b", "line\nline", "x"), Problem("c", "AKIA0123456789ABCDEF", "x"),
                                        Problem("d", "plain-value", "x")])
    assert str(err).splitlines() == ["Pulumi.x.yaml: llm-serving:a = (value not shown): x",
                                     "Pulumi.x.yaml: llm-serving:b = (value not shown): x",
                                     "Pulumi.x.yaml: llm-serving:c = (value not shown): x",
                                     "Pulumi.x.yaml: llm-serving:d = 'plain-value': x"]


def test_read_refuses_with_config_error_not_an_exception(tmp_path):
    with pytest.raises(ConfigError):
        stackfile.read(project(tmp_path, "config:\n  a: 1\n  a: 2\n"), "t")
