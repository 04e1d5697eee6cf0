"""Issue 28: every model states its family. A model without `profile` gets the one its directory or
served name names (policy/profiles choose), and is refused with the field and the profiles when none
or several do; Qwen3, Llama 3.1/3.3 and gpt-oss have profiles whose parser names are read back from
the pinned engines' sources; the engine defaults that are the field report's H20 figures (fp8 KV,
0.88, 0.82, 4096) are deepseek-v4's and marked as such, and another family renders the engine's own."""

from __future__ import annotations

import ast
import copy
import glob

import pytest
import upstream_sglang
import upstream_vllm
import vllm_cli
from engine_containers import FAMILIES, engine_containers, engine_packages, family_model
from test_config import SECRETS, problems, raw_config

from config_model.inherited import Inherited
from config_model.profile_defaults import profile_choice, profile_inherited
from policy import profiles
from policy.engines import ENGINES, engine_named, release_of_image
from policy.profiles import deepseek_v4
from stacks import loader

DEEPSEEK_H20_FLAGS = ("--kv-cache-dtype", "--gpu-memory-utilization", "--mem-fraction-static", "--chunked-prefill-size",
                      "--moe-runner-backend", "--swa-full-tokens-ratio", "--block-size", "--tokenizer-mode",
                      "--trust-remote-code")


def one_model(**fields) -> dict:
    """The dev stack with its one model changed; `profile` left out unless given."""
    raw = raw_config()
    m = {k: v for k, v in raw["models"][0].items() if k != "profile"}
    m.update(fields)
    raw["models"] = [m]
    return raw


def validated(raw: dict):
    return loader.validate(raw, "dev", SECRETS)


# ---- the profile: declared, chosen by name, or refused ----

@pytest.mark.parametrize("directory,served,profile", [
    ("DeepSeek-V4-Flash-0731", "DeepSeek-V4-Flash", "deepseek-v4"),
    ("Qwen3-235B-A22B-FP8", "qwen", "qwen3"),
    ("weights-a", "Qwen3-8B", "qwen3"),
    ("Qwen3-30B-A3B-Instruct-2507", "q", "qwen3"),
    ("Qwen3-0.6B", "q", "qwen3"),
    ("Meta-Llama-3.1-8B-Instruct", "llama", "llama3"),
    ("Llama-3.3-70B-Instruct", "llama", "llama3"),
    ("gpt-oss-120b", "oss", "gpt-oss"),
])
def test_a_profile_is_chosen_where_one_family_names_the_model(directory, served, profile):
    raw = one_model(directory=directory, servedModelName=served, expectedShardCount=3, sizeGiB=10)
    m = validated(raw).models[0]
    assert m.profile == profile
    assert "profile" not in m.model_fields_set
    where = [f"{field} {value!r}" for field, value in (("directory", directory), ("servedModelName", served))
             if value not in ("weights-a", "qwen", "q", "llama", "oss")]
    assert profile_choice(m) == f"inferred from {' and '.join(where)}"


@pytest.mark.parametrize("directory", ["Qwen3-Coder-30B-A3B-Instruct", "Qwen3-VL-8B-Instruct", "Qwen3-Next-80B-A3B",
                                       "Llama-3.2-3B-Instruct", "Hermes-3-Llama-3.1-70B", "Llama-3.1-Nemotron-70B",
                                       "DeepSeek-V4-Pro", "Mistral-Large-2411", "gpt-oss-safeguard"])
def test_a_model_no_family_names_is_refused_naming_the_field_and_every_profile(directory):
    raw = one_model(directory=directory, servedModelName="m", expectedShardCount=3, sizeGiB=10)
    [line] = problems(raw)
    assert line.startswith(f"Pulumi.dev.yaml: llm-serving:models[0].profile = (unset): is required: neither directory "
                           f"{directory!r} nor servedModelName 'm' names a model family the program knows; set it to "
                           "one of: "), line
    for name in profiles.NAMES:
        assert f"{name!r} (" in line, name


def test_names_of_two_families_are_ambiguous_and_refused():
    raw = one_model(directory="Qwen3-8B", servedModelName="gpt-oss-20b", expectedShardCount=3, sizeGiB=10)
    [line] = problems(raw)
    assert ("models[0].profile = (unset): is required: directory 'Qwen3-8B' and servedModelName 'gpt-oss-20b' name "
            "more than one model family ('qwen3' by directory 'Qwen3-8B', 'gpt-oss' by servedModelName "
            "'gpt-oss-20b'); set it to one of: ") in line


def test_a_declared_profile_wins_over_the_name_and_says_so():
    m = validated(one_model(profile="generic", directory="Qwen3-8B", expectedShardCount=5, sizeGiB=16)).models[0]
    assert m.profile == "generic" and profile_choice(m) == "declared"
    assert m.vllm.reasoning_parser is None and m.vllm.tool_call_parser is None


def test_the_shipped_stacks_declare_deepseek_v4_and_plan_md_says_so(rendered, stack):
    cfg = rendered.config
    assert {(m.profile, profile_choice(m)) for m in cfg.models} == {("deepseek-v4", "declared")}
    plan = (__import__("render.plan_md", fromlist=["plan_md"]).plan_md(rendered))
    for m in cfg.models:
        assert f"- `{m.name}` (served as `{m.served_model_name}`): **deepseek-v4**, declared" in plan


def test_the_family_variants_take_their_profile_from_the_directory():
    for family in FAMILIES:
        for engine in ("vllm", "sglang"):
            raw = raw_config()
            raw["models"] = [family_model(family, engine)]
            raw["modelVolume"]["capacityGiB"] = 1000
            raw["images"]["sglang"] = {"upstream": "lmsysorg/sglang:v0.5.23-cu130", "digest": "sha256:" + "5" * 64,
                                       "cudaVersion": "13.0"}
            raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
            m = validated(raw).models[0]
            assert m.profile == family
            assert profile_choice(m).startswith(f"inferred from directory {FAMILIES[family]['directory']!r}")


# ---- each family's flags, through the rendered argv (the real parsers: tests/test_engine_flags.py) ----

def family_argv(family: str, engine: str) -> tuple[str, ...]:
    [argv] = {c.argv for c in engine_containers() if c.where.startswith(f"family-{family}-{engine}/")}
    return argv


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_family_renders_its_parsers_and_no_deepseek_or_h20_flag(family, engine):
    argv = family_argv(family, engine)
    defaults = profiles.profile_named(family).ENGINE_DEFAULTS[engine]
    for field, flag in (("reasoning_parser", "--reasoning-parser"), ("tool_call_parser", "--tool-call-parser")):
        if defaults[field] is None:
            assert flag not in argv
        else:
            assert argv[argv.index(flag) + 1] == defaults[field]
    assert ("--enable-auto-tool-choice" in argv) == (engine == "vllm" and defaults["tool_call_parser"] is not None)
    for flag in DEEPSEEK_H20_FLAGS:
        assert flag not in argv, (family, engine, flag)
    strings = {v for e in deepseek_v4.ENGINE_DEFAULTS.values() for v in e.values() if isinstance(v, str)}
    assert not strings & set(argv)


def test_the_families_parser_names_are_registered_by_every_pinned_release():
    for p in profiles.PROFILES.values():
        for e in ENGINES:
            for field, by_release in e.REGISTERED_NAMES.items():
                value = p.ENGINE_DEFAULTS[e.NAME].get(field)
                if value is not None:
                    missing = [r for r, names in by_release.items() if value not in names]
                    assert not missing, f"{p.NAME} {e.NAME} {field} {value!r} not registered by {missing}"


def test_the_smoke_kwarg_and_reasoning_tags_follow_the_family():
    assert (profiles.qwen3.REASONING_KWARG, profiles.qwen3.REASONING_TAGS) == ("enable_thinking", ("<think>", "</think>"))
    assert profiles.llama3.REASONING_KWARG is None and profiles.gpt_oss.REASONING_KWARG is None
    for p in profiles.PROFILES.values():
        assert p.DSPARK == (p.NAME == "deepseek-v4") and (p.COLD_START_ESTIMATE_SECONDS == {}) == (p.NAME != "deepseek-v4")
        assert p.KV_CACHE is None   # no family here has one shape (each module says why)


# ---- parser names the stack's engine release does not register: refused in preview ----

@pytest.mark.parametrize("section,field,value", [("vllm", "reasoningParser", "qwen4"),
                                                 ("vllm", "toolCallParser", "qwen3_json"),   # 0.33.0 only
                                                 ("vllm", "tokenizerMode", "kimi_k3")])      # 0.33.0 only
def test_a_vllm_name_the_images_release_lacks_is_refused(section, field, value):
    raw = raw_config()
    raw["models"][0][section][field] = value
    [line] = problems(raw)
    assert line.startswith(f"Pulumi.dev.yaml: llm-serving:models[0].{section}.{field} = {value!r}: is not a ")
    assert "that vLLM 0.26.0 (the release images.vllm names) registers; it has: " in line
    raw["images"]["vllm"]["upstream"] = "vllm/vllm-openai:v0.33.0-cu129"
    if value == "qwen4":
        [line] = problems(raw)
        assert "that vLLM 0.33.0 (the release images.vllm names) registers" in line
    else:
        assert getattr(validated(raw).models[0].vllm, "tool_call_parser" if field == "toolCallParser"
                       else "tokenizer_mode") == value


def test_an_sglang_name_is_checked_against_the_release_of_its_image():
    raw = raw_config()
    raw["models"] = [family_model("qwen3", "sglang")]
    raw["models"][0]["sglang"]["reasoningParser"] = "deepseek-v41"    # registered from 0.5.23 on
    raw["images"]["sglang"] = {"upstream": "lmsysorg/sglang:v0.5.17-cu130", "digest": "sha256:" + "5" * 64,
                               "cudaVersion": "13.0"}
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
    raw["modelVolume"]["capacityGiB"] = 1000
    [line] = problems(raw)
    assert "models[0].sglang.reasoningParser = 'deepseek-v41': is not a reasoning parser that SGLang 0.5.17" in line
    raw["images"]["sglang"]["upstream"] = "lmsysorg/sglang:v0.5.23-cu130"
    assert validated(raw).models[0].sglang.reasoning_parser == "deepseek-v41"
    raw["images"]["sglang"]["upstream"] = "registry.internal/sglang:latest"   # no release: any pinned one's names
    assert validated(raw).models[0].sglang.reasoning_parser == "deepseek-v41"
    raw["models"][0]["sglang"]["reasoningParser"] = "qwen9"
    [line] = problems(raw)
    assert "is not a reasoning parser that any SGLang release the program pins (0.5.17, 0.5.23) registers" in line


@pytest.mark.parametrize("image,release", [("vllm/vllm-openai:v0.26.0-cu129", "0.26.0"), ("x/sglang:v0.5.23", "0.5.23"),
                                           ("registry:5000/vllm", None), ("x/vllm:latest", None), ("x:1.2.3.4", None)])
def test_the_release_is_the_one_the_tag_names(image, release):
    assert release_of_image(image) == release


# ---- the names, read back from the pinned sources ----

def _keys(path, name: str) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if ast.unparse(target) == name:
                value = node.value
                if isinstance(value, ast.Subscript):           # TokenizerMode = Literal[...]
                    return frozenset(e.value for e in value.slice.elts)
                return frozenset(k.value for k in (value.keys if isinstance(value, ast.Dict) else value.elts))
    raise AssertionError(f"{path}: no {name}")


VLLM_SOURCES = {"reasoning_parser": ("vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER"),
                "tool_call_parser": ("vllm/tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
                "tokenizer_mode": ("vllm/config/model.py", "TokenizerMode")}
SGLANG_SOURCES = {"0.5.17": {"reasoning_parser": ("sglang/srt/parser/reasoning_parser.py", "DetectorMap"),
                             "tool_call_parser": ("sglang/srt/function_call/function_call_parser.py", "ToolCallParserEnum")},
                  "0.5.23": {"reasoning_parser": ("sglang/srt/parser/reasoning_parser_names.py", "REASONING_PARSER_NAMES"),
                             "tool_call_parser": ("sglang/srt/function_call/parser_names.py", "TOOL_CALL_PARSER_NAMES")}}


@pytest.mark.parametrize("version", upstream_vllm.RELEASES)
def test_vllm_registered_names_are_the_installed_releases(version):
    from pathlib import Path
    site = Path(glob.glob(str(vllm_cli.venvs() / version / "lib" / "python*" / "site-packages"))[0])
    table = engine_named("vllm").REGISTERED_NAMES
    assert set(table) == set(VLLM_SOURCES)
    for field, (path, name) in VLLM_SOURCES.items():
        assert table[field][version] == _keys(site / path, name), (version, field)
    # What an unset --gpu-memory-utilization / --kv-cache-dtype leaves (policy/engines/vllm.py DEFAULT_*).
    cache = ast.parse((site / "vllm/config/cache.py").read_text())
    fields = {ast.unparse(n.target): n.value for n in ast.walk(cache) if isinstance(n, ast.AnnAssign) and n.value}
    vllm = engine_named("vllm")
    assert ast.unparse(fields["gpu_memory_utilization"]).startswith(f"Field(default={vllm.DEFAULT_GPU_MEMORY_UTILIZATION},")
    assert ast.literal_eval(fields["cache_dtype"]) == vllm.DEFAULT_KV_CACHE_DTYPE


@pytest.mark.parametrize("version", upstream_sglang.RELEASES)
def test_sglang_registered_names_are_the_installed_releases(version):
    root = engine_packages() / f"sglang=={version}"
    table = engine_named("sglang").REGISTERED_NAMES
    for field, (path, name) in SGLANG_SOURCES[version].items():
        # "auto" detects the parser from the chat template (the --reasoning-parser/--tool-call-parser choices).
        assert table[field][version] == _keys(root / path, name) | {"auto"}, (version, field)


def test_the_tables_cover_exactly_the_pinned_releases():
    assert {r for t in engine_named("vllm").REGISTERED_NAMES.values() for r in t} == set(upstream_vllm.RELEASES)
    assert {r for t in engine_named("sglang").REGISTERED_NAMES.values() for r in t} == set(upstream_sglang.RELEASES)


# ---- the H20 figures: deepseek-v4's, marked; others take the engine's own ----

def test_the_h20_figures_are_deepseek_v4_s_and_marked_as_the_field_report_s():
    vllm, sglang = deepseek_v4.ENGINE_DEFAULTS["vllm"], deepseek_v4.ENGINE_DEFAULTS["sglang"]
    assert (vllm["kv_cache_dtype"], vllm["gpu_memory_utilization"]) == ("fp8", 0.88)
    assert (sglang["mem_fraction_static"], sglang["chunked_prefill_size"]) == (0.82, 4096)
    for p in profiles.PROFILES.values():
        for engine, marked in p.FIELD_REPORT_DEFAULTS.items():
            assert set(marked) <= set(p.ENGINE_DEFAULTS[engine]), p.NAME
            assert all(p.ENGINE_DEFAULTS[engine][f] is not None for f in marked), p.NAME
    assert all(not any(p.FIELD_REPORT_DEFAULTS.values()) for p in profiles.PROFILES.values() if p.NAME != "deepseek-v4")


def test_profile_inherited_lists_the_figures_a_stack_leaves_unset():
    cfg = validated(raw_config())
    assert list(profile_inherited(cfg.models)) == [Inherited("models[0].vllm.kvCacheDtype", "fp8", "5"),
                                                    Inherited("models[0].vllm.gpuMemoryUtilization", 0.88, "5")]
    raw = raw_config()
    raw["models"][0]["vllm"]["gpuMemoryUtilization"] = 0.88        # declared: no longer inherited
    raw["models"][0]["vllm"]["kvCacheDtype"] = "auto"
    assert list(profile_inherited(validated(raw).models)) == []
    raw = raw_config()
    raw["models"] = [family_model("qwen3", "vllm")]
    raw["modelVolume"]["capacityGiB"] = 1000
    assert list(profile_inherited(validated(raw).models)) == []


def test_an_sglang_deepseek_model_inherits_its_four_h20_figures():
    raw = raw_config()
    m = copy.deepcopy(raw["models"][0])
    m.update(engine="sglang", orchestrator="rolebasedgroup", sglang={"tensorParallelSize": 8})
    for k in ("vllm", "rollout", "startupBudgetSeconds"):
        m.pop(k)
    raw["models"] = [m]
    raw["images"]["sglang"] = {"upstream": "lmsysorg/sglang:v0.5.17-cu130", "digest": "sha256:" + "5" * 64,
                               "cudaVersion": "13.0"}
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
    found = {(i.path, i.value, i.section) for i in profile_inherited(validated(raw).models)}
    assert found == {("models[0].sglang.memFractionStatic", 0.82, "12.1"),
                     ("models[0].sglang.chunkedPrefillSize", 4096, "12.1"),
                     ("models[0].sglang.moeRunnerBackend", "marlin", "12.1"),
                     ("models[0].sglang.swaFullTokensRatio", 0.1, "12.1")}


def test_the_memory_share_an_unset_engine_takes_is_the_engine_s_own():
    raw = raw_config()
    raw["models"] = [family_model("llama3", "vllm"), family_model("llama3", "sglang")]
    raw["models"][1]["servedModelName"] = "llama-sg"
    raw["images"]["sglang"] = {"upstream": "lmsysorg/sglang:v0.5.17-cu130", "digest": "sha256:" + "5" * 64,
                               "cudaVersion": "13.0"}
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
    raw["modelVolume"]["capacityGiB"] = 1000
    v, s = validated(raw).models
    engines = {e.NAME: e for e in ENGINES}
    assert engines["vllm"].memory_fraction(v.vllm) == 0.92 and engines["vllm"].kv_cache_dtype(v.vllm) == "auto"
    assert engines["sglang"].memory_fraction(s.sglang) is None and engines["sglang"].kv_cache_dtype(s.sglang) == "auto"
    ds = validated(raw_config()).models[0]
    assert engines["vllm"].memory_fraction(ds.vllm) == 0.88 and engines["vllm"].kv_cache_dtype(ds.vllm) == "fp8"


def _sglang_deepseek(gpu_type: str, **sglang) -> dict:
    raw = raw_config()
    m = copy.deepcopy(raw["models"][0])
    m.update(engine="sglang", orchestrator="rolebasedgroup", sglang={"tensorParallelSize": 8, **sglang})
    for k in ("vllm", "rollout", "startupBudgetSeconds"):
        m.pop(k)
    raw["models"] = [m]
    raw["gpuPool"] = {"gpuType": gpu_type}
    raw["images"]["sglang"] = {"upstream": "lmsysorg/sglang:v0.5.23-cu130", "digest": "sha256:" + "5" * 64,
                               "cudaVersion": "13.0"}
    raw["compileCache"] = {"kind": "existingClaim", "claimName": "jit-cache"}
    return raw


def test_a_hopper_only_profile_value_is_refused_on_another_architecture():
    """DeepSeek-V4's marlin MoE path is the field report's Hopper choice (12.1): on a B200 (sm100) a stack
    that leaves moeRunnerBackend unset is refused naming the field; set it, or 'off' for SGLang's own."""
    validated(_sglang_deepseek("H20"))
    (line,) = problems(_sglang_deepseek("B200"))
    assert line == ("Pulumi.dev.yaml: llm-serving:models[0].sglang.moeRunnerBackend = 'marlin': is profile "
                    "deepseek-v4's value for sm90, and this model runs on sm100: marlin is the MXFP4 MoE path the field "
                    "report ran on Hopper (12.1), not the one SGLang takes on other GPUs; set it for this GPU, or to "
                    "'off' to let SGLang choose"), line
    assert validated(_sglang_deepseek("B200", moeRunnerBackend="off")).models[0].sglang.moe_runner_backend is None
    assert validated(_sglang_deepseek("B200", moeRunnerBackend="flashinfer_mxfp4")).models[0].sglang.moe_runner_backend \
        == "flashinfer_mxfp4"
    # A pool without a catalogue type names its architecture; a model's own nodeSelector names its GPU.
    own = _sglang_deepseek("H20")
    own["models"][0]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-B200"}
    assert "this model runs on sm100" in problems(own)[0]
