"""Issue 10 item 11: every rendered engine argv, of every topology, parses under the pinned engines'
own option strings, each flag by its full declared name (sources: tests/upstream_sglang.py, tests/upstream_vllm.py)."""

from __future__ import annotations

import argparse
import functools

import pytest
import sglang_cli
import upstream_sglang as sglang
import upstream_vllm as vllm
from engine_containers import engine_containers, engine_packages

from policy.engines import sglang as policy_sglang


@functools.lru_cache(maxsize=None)
def sglang_options(version: str) -> dict[str, bool]:
    root = engine_packages() / f"sglang=={version}"
    return sglang_cli.serve_options(root, sglang.FIELD_SOURCES[version], sglang.ADD_ARGUMENT_SOURCES)


def flags(argv) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("-")]


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


def vllm_parser() -> argparse.ArgumentParser:
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise AssertionError(message)
    p = Parser(prog="vllm serve", allow_abbrev=False, add_help=False)
    p.add_argument("model")
    for option, takes_value in vllm.SERVE_OPTIONS.items():
        p.add_argument(option, **({"nargs": takes_value} if isinstance(takes_value, str)
                                  else {} if takes_value else {"action": "store_true"}))
    return p


def test_vllm_argv_uses_only_options_declared_at_both_pinned_versions():
    seen = 0
    for c in engine_containers():
        if c.engine != "vllm":
            continue
        seen += 1
        vllm_parser().parse_args(list(c.argv[1:]))
    assert seen


def test_vllm_takes_every_key_in_one_api_key_flag():
    """Issue 21: a stack with consumers renders `--api-key` once, with the shared key's variable first and
    one variable per consumer after it; the option port (nargs "+", both releases) reads them all."""
    seen = 0
    for c in engine_containers():
        if c.engine != "vllm" or "--api-key" not in c.argv:
            continue
        seen += 1
        assert c.argv.count("--api-key") == 1, c.where
        parsed = vllm_parser().parse_args(list(c.argv[1:]))
        refs = {e["name"] for e in c.container["env"] if "valueFrom" in e}
        assert parsed.api_key[0] == "$(VLLM_API_KEY)" and len(parsed.api_key) >= 3, c.where
        assert all(k.startswith("$(") and k[2:-1] in refs for k in parsed.api_key), c.where
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
