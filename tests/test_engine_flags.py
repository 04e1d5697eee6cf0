"""Issue 10 item 11: every rendered engine argv, of every topology, parses under the pinned engines'
own option strings, each flag by its full declared name: SGLang's read from its source (tests/upstream_sglang.py),
vLLM's by each release's own `vllm serve` parser (tests/vllm_cli.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import sglang_cli
import upstream_sglang as sglang
import upstream_vllm as vllm
import vllm_cli
from engine_containers import VLLM_REFUSED, engine_containers, engine_packages, sglang_options
from engine_containers import option_names as flags
from engine_containers import vllm_releases as parse_every_vllm_argv

from policy.engines import sglang as policy_sglang
from policy.engines import vllm as vllm_pack
from stacks.rules.passthrough import owned_flags


@pytest.mark.parametrize("version", sglang.RELEASES)
def test_the_option_list_is_read_from_the_source(version):
    # The reader finds what the issue names: 0.5.23 dropped the deprecated --cuda-graph-max-bs alias,
    # so argparse calls it an ambiguous prefix of the -decode/-prefill pair; --tp is declared nowhere.
    options = sglang_options(version)
    assert len(options) > 400
    assert options["--tp-size"] and options["--tensor-parallel-size"] and options["--model-path"]
    assert options["--enable-metrics"] is False and options["--trust-remote-code"] is False
    assert "--tp" not in options
    assert ("--cuda-graph-max-bs" in options) == (version == "0.5.17")
    parser = sglang_cli.parser(options)
    if version == "0.5.23":
        with pytest.raises(sglang_cli.Refused, match="ambiguous option: --cuda-graph-max-bs"):
            parser.parse_args(["--cuda-graph-max-bs", "8"])
    with pytest.raises(sglang_cli.Refused, match="unrecognized"):
        parser.parse_args(["--no-such-flag", "1"])


@pytest.mark.parametrize("version", sglang.RELEASES)
def test_sglang_argv_parses_with_full_names(version):
    options = sglang_options(version)
    parser = sglang_cli.parser(options)
    seen = 0
    for c in engine_containers():
        if c.engine != "sglang":
            continue
        seen += 1
        parser.parse_args(list(c.argv[1:]))   # raises Refused as `sglang serve` would exit 2
        unknown = [f for f in flags(c.argv[1:]) if f not in options]
        assert unknown == [], f"{c.where}: not declared by SGLang {version} (abbreviations only): {unknown}"
    assert seen


# ---- vLLM: each release's own `vllm serve` parser (tests/vllm_cli.py, tests/vllm_parse.py) ----

# Collected once per worker: every rendered vLLM container of the stacks, the variants and the profiles.
VLLM_CONTAINERS = {c.where: c for c in engine_containers() if c.engine == "vllm"}
# What the parsers must refuse (engine_containers.VLLM_REFUSED, in the session's one batch of argvs).
REFUSED = VLLM_REFUSED
# Source lines of the parser builders that read the platform (vllm_parse.py installs CpuPlatform, no GPU
# here): the no-op hook, and at 0.33.0 --mm-processor-device's choices, which gain "cuda" on CUDA.
PLATFORM_DEPENDENT_OPTIONS = {"0.26.0": (), "0.33.0": ("--mm-processor-device",)}


@pytest.fixture(scope="session")
def vllm_releases(tmp_path_factory) -> dict[str, vllm_cli.Release]:
    return parse_every_vllm_argv(tmp_path_factory)


@pytest.mark.parametrize("version", vllm.RELEASES)
def test_the_vllm_parser_is_the_pinned_release_and_refuses(vllm_releases, version):
    r = vllm_releases[version]
    assert (r.vllm, r.torch.split("+")[0]) == (version, vllm.TORCH[version])
    assert r.detected_platform == "UnspecifiedPlatform"   # why vllm_parse.py sets CpuPlatform
    assert len(r.options) > 300 and r.options["--tensor-parallel-size"] and not r.options["--enable-prefix-caching"]
    for argv, why in REFUSED.items():
        assert r.results[argv] is not None and why in r.results[argv], (argv, r.results[argv])


@pytest.mark.parametrize("version", vllm.RELEASES)
def test_the_platform_reaches_only_options_the_program_never_renders(vllm_releases, version):
    r = vllm_releases[version]
    hooks = [line for line in r.platform_lines if "pre_register_and_update(parser)" in line]
    assert hooks and all(line.startswith("AsyncEngineArgs.add_cli_args") for line in hooks)
    other = [line for line in r.platform_lines if line not in hooks]
    assert bool(other) == bool(PLATFORM_DEPENDENT_OPTIONS[version]), other
    assert all("current_platform.device_type" in line for line in other), other
    for c in VLLM_CONTAINERS.values():
        assert not set(flags(c.argv[1:])) & set(PLATFORM_DEPENDENT_OPTIONS[version]), c.where


@pytest.mark.parametrize("version", vllm.RELEASES)
@pytest.mark.parametrize("where", sorted(VLLM_CONTAINERS))
def test_vllm_argv_parses_with_full_names(vllm_releases, version, where):
    r = vllm_releases[version]
    argv = VLLM_CONTAINERS[where].argv
    assert r.results[argv] is None, f"vLLM {version} `vllm {' '.join(argv)}`: {r.results[argv]}"
    unknown = [f for f in flags(argv[1:]) if f not in r.options]
    assert unknown == [], f"not declared by vLLM {version} (abbreviations only): {unknown}"


@pytest.mark.parametrize("version", vllm.RELEASES)
def test_vllm_flags_the_program_owns_or_reads_back_are_declared(vllm_releases, version):
    options = vllm_releases[version].options
    pack = (*vllm_pack.TENSOR_PARALLEL_FLAGS, *vllm_pack.DATA_PARALLEL_FLAGS, vllm_pack.OFFLOAD_SIZE_FLAG,
            vllm_pack.OFFLOAD_BACKEND_FLAG)
    assert all(options[f] is True for f in pack), pack   # each takes a value
    assert {f: f in options for f in owned_flags("vllm")} == dict.fromkeys(owned_flags("vllm"), True)


def test_vllm_takes_every_key_in_one_api_key_flag():
    """Issue 21: a stack with consumers renders `--api-key` once, with the shared key's variable first and
    one Secret-backed variable per consumer after it, every one of them up to the next flag. Each release's
    own parser accepts the argv (test_vllm_argv_parses_with_full_names): a single-valued --api-key would
    leave the second key as an unrecognized argument."""
    seen = 0
    for c in VLLM_CONTAINERS.values():
        if "--api-key" not in c.argv:
            continue
        seen += 1
        assert c.argv.count("--api-key") == 1, c.where
        start = c.argv.index("--api-key") + 1
        keys = list(itertools.takewhile(lambda a: not a.startswith("--"), c.argv[start:]))
        refs = {e["name"] for e in c.container["env"] if "valueFrom" in e}
        assert keys[0] == "$(VLLM_API_KEY)" and len(keys) >= 3, c.where
        assert all(k.startswith("$(") and k[2:-1] in refs for k in keys), c.where
    assert seen


SGLANG_API_KEY_FIELD = {"0.5.17": "sglang/srt/server_args.py", "0.5.23": "sglang/srt/arg_groups/fields/serving.py"}


@pytest.mark.parametrize("version", sglang.RELEASES)
def test_sglang_takes_one_api_key(version):
    """Why a stack with consumers refuses SGLang (policy/engines/sglang.py MULTI_KEY_REFUSED), read from the
    installed sources: the api_key field is one optional string, and the auth check takes one key."""
    import ast

    root = engine_packages() / f"sglang=={version}"
    tree = ast.parse((root / SGLANG_API_KEY_FIELD[version]).read_text())
    (field,) = [n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "api_key"]
    assert ast.unparse(field.annotation).startswith("A[Optional[str],")
    auth = ast.parse((root / "sglang/srt/utils/auth.py").read_text())
    (decide,) = [n for n in ast.walk(auth) if isinstance(n, ast.FunctionDef) and n.name == "decide_request_auth"]
    annotations = {a.arg: ast.unparse(a.annotation) for a in decide.args.args + decide.args.kwonlyargs if a.annotation}
    assert annotations["api_key"] == "Optional[str]"
    for path in SGLANG_API_KEY_FIELD.values():
        assert path in policy_sglang.MULTI_KEY_REFUSED
    assert "sglang/srt/utils/auth.py" in policy_sglang.MULTI_KEY_REFUSED


def test_kept_parser_answers_follow_every_input_but_the_clone_path(tmp_path):
    """tests/vllm_cli.py reads kept answers by verdict_key: another argv or another installed file is
    another key (a new parse); a bin script's shebang, which names the clone, is not."""
    made = itertools.count()

    def root(record: str) -> Path:
        r = tmp_path / str(next(made))
        for v in vllm.RELEASES:
            d = r / v / "lib" / "python3.11" / "site-packages" / "x-1.dist-info"
            d.mkdir(parents=True)
            (d / "RECORD").write_text(record)
        return r
    base = "x/__init__.py,sha256=aaa,10\n../../../bin/x,sha256=bbb,20\n"
    key = vllm_cli.verdict_key(root(base), [("serve", "/m")])
    assert key == vllm_cli.verdict_key(root(base.replace("bbb,20", "ccc,24")), [("serve", "/m")])
    assert key != vllm_cli.verdict_key(root(base.replace("aaa", "ddd")), [("serve", "/m")])
    assert key != vllm_cli.verdict_key(root(base), [("serve", "/m", "--port", "1")])


NON_DEFAULT_ARGS_LOGGER = {"0.26.0": "vllm/entrypoints/serve/utils/api_utils.py",
                           "0.33.0": "vllm/entrypoints/common/startup.py"}


@pytest.mark.parametrize("version", vllm.RELEASES)
def test_which_release_logs_the_keys_is_read_from_its_installed_source(version):
    """upstream_vllm.LOGS_API_KEYS_AT_INFO (why policy/engines/vllm.py MULTI_KEY_ENV sets WARNING), from
    the release's own log_non_default_args: the "non-default args" line at INFO, its dict redacted or not."""
    import ast

    site = next((vllm_cli.venvs() / version).glob("lib/python*/site-packages"))
    tree = ast.parse((site / NON_DEFAULT_ARGS_LOGGER[version]).read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "log_non_default_args"]
    (call,) = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == "logger.info"
               and "non-default args" in ast.unparse(n.args[0])]
    redacted = "redact_sensitive_args" in ast.unparse(call.args[1])
    assert vllm.LOGS_API_KEYS_AT_INFO[version] is not redacted, ast.unparse(call)
    assert vllm_pack.MULTI_KEY_ENV == {vllm.LOGGING_LEVEL_ENV: "WARNING"}
