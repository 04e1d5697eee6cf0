"""Model profiles (issue 20): every model-family fact behind models[].profile (policy/profiles/), the
generic profile rendering no DeepSeek flag, kwarg or file, and what the stack file passes through
(vllm/sglang extraArgs, models[].env) refused where the program owns it."""

from __future__ import annotations

import copy
import json
import typing

import pytest
import sglang_cli
import upstream_sglang
from conftest import STACKS, k8s_objects
from engine_containers import (
    GENERIC_32B,
    GENERIC_72B,
    engine_containers,
    rendered_variants,
    sglang_options,
)
from test_config import SECRETS, problems, raw_config

from config_model import ServedModel, Sglang, Vllm
from policy import profiles
from policy.engines import ENGINES, engine_named
from policy.profiles import deepseek_v4
from stacks import loader
from stacks.rules.passthrough import owned_env, owned_flags

# ---- the profiles ----


@pytest.mark.parametrize("name", profiles.NAMES)
def test_each_profile_module_has_every_fact(name):
    p = profiles.profile_named(name)
    for attr in typing.get_type_hints(profiles.Profile):
        assert hasattr(p, attr), f"profile {name} has no {attr}"
    assert set(p.ENGINE_DEFAULTS) == {e.NAME for e in ENGINES}, "a profile states its settings for every engine"
    for e in ENGINES:
        section = Vllm if e.SECTION == "vllm" else Sglang
        assert set(p.ENGINE_DEFAULTS[e.NAME]) <= set(section.model_fields), (name, e.NAME)
    assert set(p.COLD_START_ESTIMATE_SECONDS) == set(p.COLD_START_INCLUDES_IMAGE_PULL)
    # A profile that knows its shard count knows a sharded checkpoint: its index is required, so a
    # single model.safetensors never passes for it (components/scripts/model_files.py weight_files).
    assert p.EXPECTED_SHARD_COUNT is None or "model.safetensors.index.json" in p.REQUIRED_FILES


def test_an_unknown_profile_names_the_field_and_the_profiles():
    raw = raw_config()
    raw["models"][0]["profile"] = "llama"
    [line] = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].profile = 'llama': ")
    assert "'deepseek-v4'" in line and "'generic'" in line


def model(**fields) -> ServedModel:
    return ServedModel.model_validate({"name": "m", "profile": "deepseek-v4", "servedModelName": "m", "directory": "d",
                                       "objectPrefix": "p", "revision": "r", **fields})


def test_unset_fields_take_the_profile_s_values():
    ds = model()
    assert (ds.expected_shard_count, ds.size_gib) == (48, 155.43)
    assert {k: getattr(ds.vllm, k) for k in deepseek_v4.ENGINE_DEFAULTS["vllm"]} == deepseek_v4.ENGINE_DEFAULTS["vllm"]
    g = model(profile="generic", expectedShardCount=3, sizeGiB=10)
    assert (g.vllm.reasoning_parser, g.vllm.tokenizer_mode, g.vllm.block_size, g.vllm.max_model_len) == (None,) * 4
    assert g.vllm.trust_remote_code is False and g.sglang.moe_runner_backend is None
    # A value the stack file sets wins over the profile's.
    assert model(profile="generic", expectedShardCount=3, sizeGiB=10, vllm={"reasoningParser": "qwen3"}).vllm.reasoning_parser == "qwen3"
    assert model(vllm={"maxModelLen": 65536}).vllm.max_model_len == 65536


@pytest.mark.parametrize("off", [None, "off"])
def test_a_parser_set_to_null_or_off_renders_no_flag(off):
    m = model(vllm={"reasoningParser": off, "toolCallParser": off, "tokenizerMode": off})
    argv = engine_named("vllm").serve_args("/m", "m", 8000, m.vllm)
    for flag in ("--reasoning-parser", "--tool-call-parser", "--enable-auto-tool-choice", "--tokenizer-mode"):
        assert flag not in argv
    assert "off" not in argv
    s = model(engine="sglang", sglang={"reasoningParser": off, "moeRunnerBackend": off}).sglang
    argv = engine_named("sglang").serve_args("/m", "m", 30000, s)
    assert "--reasoning-parser" not in argv and "--moe-runner-backend" not in argv and "off" not in argv
    assert argv[argv.index("--tool-call-parser") + 1] == "deepseekv4"   # the one left unset keeps the profile's


def test_an_empty_parser_is_still_refused_with_a_hint_of_the_field():
    raw = raw_config()
    raw["models"][0]["vllm"]["reasoningParser"] = ""
    [line] = problems(raw)
    assert line.startswith("Pulumi.dev.yaml: llm-serving:models[0].vllm.reasoningParser = '': ")


def test_generic_needs_the_size_deepseek_s_profile_knows_and_takes_the_shard_count_from_the_index():
    raw = raw_config()
    m = raw["models"][0]
    m.update(copy.deepcopy(GENERIC_72B))
    m.pop("sizeGiB")
    m.pop("startupBudgetSeconds")
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].sizeGiB = (unset): is required for profile "
                             "'generic': it knows no checkpoint of this model"]
    m["sizeGiB"] = 136
    m.pop("expectedShardCount")
    [accepted] = loader.validate(raw, "dev", SECRETS).models
    assert accepted.expected_shard_count is None


# ---- the issue's stack: two generic models, nothing of DeepSeek's ----

DEEPSEEK_VALUES = {v for e in deepseek_v4.ENGINE_DEFAULTS.values() for v in e.values() if isinstance(v, str)}


def test_a_generic_stack_renders_no_deepseek_flag_kwarg_prompt_or_file():
    rendered = rendered_variants()["generic"]
    argvs = {c.where: c.argv for c in engine_containers() if c.where.startswith("generic/")}
    assert {w.split("/")[1] for w in argvs} == {"qwen-72b", "qwen-32b"}
    for where, argv in argvs.items():
        assert not DEEPSEEK_VALUES & set(argv), where
        for flag in ("--tokenizer-mode", "--block-size", "--trust-remote-code"):
            assert flag not in argv, (where, flag)
    big = next(a for w, a in argvs.items() if "qwen-72b" in w)
    small = next(a for w, a in argvs.items() if "qwen-32b" in w)
    assert "--reasoning-parser" not in big and "--tool-call-parser" not in big
    assert big[big.index("--max-model-len") + 1] == "32768" and big[-2:] == ("--max-num-batched-tokens", "8192")
    assert big[big.index("--tensor-parallel-size") + 1] == "4" and small[small.index("--tensor-parallel-size") + 1] == "2"
    assert small[small.index("--reasoning-parser") + 1] == "deepseek_r1" and "--max-model-len" not in small
    env = next(c.env for c in engine_containers() if "qwen-72b" in c.where and c.where.startswith("generic/"))
    assert ("VLLM_LOGGING_LEVEL", "INFO") in env

    jobs = {o["metadata"]["name"]: o for o in k8s_objects(rendered) if o["kind"] == "Job"}
    day2 = [o for name, o in jobs.items() if name.startswith(("smoke-", "warmup-"))]
    assert len(day2) == 4
    for job in day2:
        text = json.dumps(job, ensure_ascii=False)
        assert "thinking" not in text and deepseek_v4.SMOKE_PROMPT not in text
    # Checks follow the parsers: the 72B runs none, the 32B both.
    by_model = {o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["args"] for o in day2
                if o["metadata"]["name"].startswith("smoke-")}
    checks = {name.split("-")[2]: a[a.index("--checks") + 1] for name, a in by_model.items()}
    assert checks == {"72b": "", "32b": "reasoning,tool-call"}

    [scripts] = [o for o in k8s_objects(rendered) if o["kind"] == "ConfigMap"
                 and o["metadata"]["name"] == "llm-serving-model-scripts"]
    assert json.loads(scripts["data"]["model_files.json"]) == {
        "Qwen2.5-72B-Instruct": list(profiles.generic.REQUIRED_FILES), "QwQ-32B": list(profiles.generic.REQUIRED_FILES)}


def test_the_shipped_stacks_are_deepseek_v4():
    for stack in STACKS:
        cfg = loader.validate(raw_config(stack), stack, SECRETS)
        assert {m.profile for m in cfg.models} == {"deepseek-v4"}


def test_per_model_smoke_overrides_the_profile():
    raw = raw_config()
    raw["models"][0]["smoke"] = {"prompt": "Say OK", "expectedText": "OK", "checks": ["tool-call"],
                                 "reasoningKwarg": "enable_thinking"}
    cfg = loader.validate(raw, "dev", SECRETS)
    from components.engines import smoke_settings
    s = smoke_settings(cfg.models[0], cfg.operations.smoke)
    assert (s.prompt, s.expected_text, s.checks, s.reasoning_kwarg) == ("Say OK", "OK", ("tool-call",), "enable_thinking")
    raw["models"][0]["smoke"] = {"reasoningKwarg": None}
    assert smoke_settings(loader.validate(raw, "dev", SECRETS).models[0], cfg.operations.smoke).reasoning_kwarg is None


# ---- pass-through: extraArgs and env ----

def test_every_rendered_flag_is_owned():
    """The owned set is read off the builders; every flag any rendered argv carries (the tests' extra
    flags aside) is in it, so extraArgs can never set one of them a second time."""
    extra = {"--max-num-batched-tokens", "--schedule-conservativeness", "--enable-mixed-chunk"}
    for c in engine_containers():
        flags = {a.split("=", 1)[0] for a in c.argv[1:] if a.startswith("-")} - extra
        assert flags <= owned_flags(c.engine), (c.where, flags - owned_flags(c.engine))
        names = {name for name, _ in c.env} - {"VLLM_LOGGING_LEVEL"}
        assert names <= owned_env(), (c.where, names - owned_env())


@pytest.mark.parametrize("arg,owner", [
    ("--port", "--port"), ("--port=9000", "--port"), ("--tensor-parallel", "--tensor-parallel-size"),
    ("--no-enable-prefix-caching", "--enable-prefix-caching"), ("-tp", "-tp"), ("--api-key", "--api-key"),
    ("--model", "--model"), ("--served-model-name", "--served-model-name"), ("--pipeline-parallel-size", None),
    ("--reasoning-parser", "--reasoning-parser"), ("--kv-transfer-config", "--kv-transfer-config"),
])
def test_an_owned_vllm_flag_in_extra_args_is_refused_naming_the_field(arg, owner):
    raw = raw_config()
    raw["models"][0]["vllm"]["extraArgs"] = ["--max-num-batched-tokens", "8192", arg]
    [line] = problems(raw)
    assert line.startswith(f"Pulumi.dev.yaml: llm-serving:models[0].vllm.extraArgs[2] = {arg!r}: ")
    if owner not in (None, arg.split("=")[0]):
        assert f"sets {owner}" in line
    assert "rendered by the program" in line



@pytest.mark.parametrize("arg,field", [("--enable-prefix-caching", "enablePrefixCaching instead (now true)"),
                                       ("--no-enable-prefix-caching", "enablePrefixCaching instead (now true)"),
                                       ("--tensor-parallel", "tensorParallelSize instead (now 8)"),
                                       ("--max-num-seqs=64", "maxNumSeqs instead (now ")])
def test_a_flag_a_field_renders_is_refused_pointing_at_that_field(arg, field):
    """Issue 20's own example passes `--enable-prefix-caching` in extraArgs: the message names the field
    that renders it (found by its description in config_model/serving.py) and its current value."""
    raw = raw_config()
    raw["models"][0]["vllm"]["extraArgs"] = [arg]
    [line] = problems(raw)
    assert f"rendered by the program; set models[0].vllm.{field}" in line, line

def test_owned_sglang_flags_include_its_aliases_and_are_declared_by_both_releases():
    for version in upstream_sglang.RELEASES:
        options = sglang_options(version)
        for flag in engine_named("sglang").UNRENDERED_OWNED_FLAGS:
            assert flag in options, (version, flag)
    assert {"--model", "--tp-size", "--dp-size", "--api-key", "--model-path"} <= owned_flags("sglang")


def test_sglang_extra_args_parse_with_both_pinned_parsers():
    argvs = [c.argv for c in engine_containers() if c.where.startswith("generic-sglang/")]
    assert argvs and all(a[-3:] == ("--schedule-conservativeness", "0.3", "--enable-mixed-chunk") for a in argvs)
    for version in upstream_sglang.RELEASES:
        parser = sglang_cli.parser(sglang_options(version))
        for argv in argvs:
            parser.parse_args(list(argv[1:]))


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "HF_HUB_OFFLINE", "XDG_CACHE_HOME", "VLLM_NIXL_SIDE_CHANNEL_HOST"])
def test_an_owned_env_name_is_refused_naming_the_field(name):
    raw = raw_config()
    raw["models"][0]["env"] = {"VLLM_LOGGING_LEVEL": "INFO", name: "x"}
    assert problems(raw) == [f"Pulumi.dev.yaml: llm-serving:models[0].env.{name} = 'x': is set by the program on "
                             "the engine containers; choose another variable"]


def test_a_bad_env_name_and_a_kubelet_expansion_are_refused():
    raw = raw_config()
    raw["models"][0]["env"] = {"1BAD": "x"}
    assert problems(raw) == ["Pulumi.dev.yaml: llm-serving:models[0].env['1BAD'] = '1BAD': the key must be an "
                             "environment variable name: letters, digits and '_', not starting with a digit"]
    raw["models"][0]["env"] = {"GOOD": "$(VLLM_API_KEY)"}
    assert problems(raw)[0].startswith("Pulumi.dev.yaml: llm-serving:models[0].env.GOOD = '$(VLLM_API_KEY)'")


def test_extra_args_and_env_reach_every_engine_of_a_p_d_model():
    for topology in ("pd-generic", "pd-same-pod-generic", "hybrid-generic"):
        argvs = [c.argv for c in engine_containers() if c.where.startswith(f"{topology}/")]
        assert argvs, topology
        for argv in argvs:
            assert argv[-2:] == ("--max-num-batched-tokens", "8192"), (topology, argv)
            assert "--default-chat-template-kwargs" not in argv and "--reasoning-config" not in argv
            assert "deepseek_v4" not in argv


def test_a_generic_model_may_share_nothing_of_its_directory_with_another_profile():
    raw = raw_config()
    other = {**copy.deepcopy(raw["models"][0]), "name": "other", "servedModelName": "other", "profile": "generic",
             "sizeGiB": 155.43}
    raw["models"].append(other)
    assert ("Pulumi.dev.yaml: llm-serving:models[1].profile = 'generic': must equal models[0].profile "
            "'deepseek-v4': both models use directory 'DeepSeek-V4-Flash-0731'") in problems(raw)


def test_the_32b_of_the_issue_validates():
    raw = raw_config()
    raw["models"] = [{**copy.deepcopy(raw["models"][0]), **copy.deepcopy(GENERIC_32B)}]
    raw["models"][0].pop("startupBudgetSeconds")
    cfg = loader.validate(raw, "dev", SECRETS)
    assert cfg.models[0].vllm.tool_call_parser == "hermes"


def test_dspark_needs_a_profile_with_a_dspark_head():
    raw = raw_config()
    raw["models"] = [{**copy.deepcopy(raw["models"][0]), **copy.deepcopy(GENERIC_72B)}]
    raw["models"][0]["vllm"]["speculativeDecoding"] = "dspark"
    assert "Pulumi.dev.yaml: llm-serving:models[0].vllm.speculativeDecoding = 'dspark': needs a checkpoint with a " \
           "DSpark head; profile 'generic' has none (set it 'off')" in problems(raw)
