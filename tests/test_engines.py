"""The engines' argv builders (policy/engines/) against the field report's validated commands (sections 5
and 12.1), and what components/engines.py asks of a model's engine."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from conftest import shared_dir

from components import engines
from config_model import ServedModel, Vllm
from policy.engines import sglang as sglang_engine
from policy.engines import vllm as vllm_engine
from policy.profiles import deepseek_v4

REPORT = "000_238c050cad1f662b.txt"


def report_command_in(start: str, end: str, program: str) -> list[str]:
    """The `<program> serve` command between two headings of the field report, tokenized as a shell would."""
    text = (shared_dir("seed") / REPORT).read_text(encoding="utf-8")
    section = text[text.index(start):text.index(end)]
    match = re.search(rf"^{program} serve .*?(?=\n\n)", section, flags=re.S | re.M)
    assert match, f"{program} command not found under {start!r}"
    return shlex.split(match.group(0).replace("\\\n", " "))


def report_command() -> list[str]:
    """Section 5's validated vLLM command."""
    return report_command_in("5. vLLM Startup", "6. Why the Service", "vllm")


def flags(argv: list[str]) -> dict[str, str | None]:
    """--flag value pairs; value None for switches."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--"):
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            out[argv[i]] = argv[i + 1] if has_value else None
            i += 2 if has_value else 1
        else:
            i += 1
    return out


def model(**vllm) -> ServedModel:
    return ServedModel(name="deepseek-v4-flash", served_model_name="DeepSeek-V4-Flash",
                       directory="DeepSeek-V4-Flash-0731", object_prefix="models/x", revision="0731",
                       vllm=Vllm(**vllm))


def test_defaults_are_the_report_command_without_dspark_plus_max_num_seqs():
    report = report_command()
    expected = flags(report[2:])
    expected.pop("--speculative-config")  # section 5: first baseline is target-only
    ours = vllm_engine.serve_args(report[2], "DeepSeek-V4-Flash", 8000, model().vllm)
    assert ours[:2] == ["serve", report[2]]
    got = flags(ours[2:])
    assert got.pop("--max-num-seqs") == "64"  # section 5 asks for an explicit value
    assert got == expected


def test_dspark_switch_gives_the_report_speculative_config():
    report = flags(report_command()[2:])
    ours = flags(vllm_engine.serve_args("/m", "DeepSeek-V4-Flash", 8000, Vllm(speculative_decoding="dspark")))
    assert json.loads(ours["--speculative-config"]) == json.loads(report["--speculative-config"])


def test_enforce_eager_and_data_parallel_switches():
    argv = vllm_engine.serve_args("/m", "m", 8000, Vllm(enforce_eager=True, tensor_parallel_size=4, data_parallel_size=2))
    f = flags(argv[2:])
    assert "--enforce-eager" in f and f["--tensor-parallel-size"] == "4" and f["--data-parallel-size"] == "2"
    assert "--enforce-eager" not in vllm_engine.serve_args("/m", "m", 8000, Vllm())


def test_api_key_never_in_argv():
    argv = vllm_engine.serve_args("/m", "m", 8000, Vllm())
    assert not any("api-key" in a for a in argv)


@pytest.mark.parametrize("value,text", [(0.88, "0.88"), (0.9, "0.9"), (0.875, "0.875")])
def test_gpu_memory_utilization_has_no_float_noise(value, text):
    f = flags(vllm_engine.serve_args("/m", "m", 8000, Vllm(gpu_memory_utilization=value))[2:])
    assert f["--gpu-memory-utilization"] == text


def test_parallel_size_and_cold_start_estimates():
    assert engines.parallel_size(model(tensor_parallel_size=4, data_parallel_size=2)) == 8
    # Measured for DeepSeek-V4-Flash only (field report 6, 12.2): its profile's; a generic model has none.
    assert deepseek_v4.COLD_START_ESTIMATE_SECONDS == {"vllm": 720, "sglang": 1380}
    assert engines.cold_start_estimate_seconds(model()) == 720
    generic_model = model().model_copy(update={"profile": "generic"})
    assert engines.cold_start_estimate_seconds(generic_model) is None


# ---- SGLang (field report 12.1) ----

def report_sglang_command() -> list[str]:
    """Section 12.1's validated SGLang command on H20."""
    return report_command_in("12.1 H20 Startup Parameters", "12.2 Cold Start", "sglang")


def sglang(**kw):
    """The SGLang section as a deepseek-v4 model resolves it (unset fields take the profile's)."""
    from config_model import Sglang
    return ServedModel(name="deepseek-v4-flash", served_model_name="DeepSeek-V4-Flash", directory="d",
                       object_prefix="models/x", revision="0731", engine="sglang", sglang=Sglang(**kw)).sglang


# The report typed `--tp`, which SGLang accepts only as an argparse abbreviation; we render the
# declared name (tests/test_engine_flags.py parses every rendered argv with the pinned option strings).
REPORT_ABBREVIATIONS = {"--tp": "--tensor-parallel-size"}


def test_sglang_defaults_are_the_report_command_plus_the_api_key_reference():
    report = [REPORT_ABBREVIATIONS.get(a, a) for a in report_sglang_command()]
    expected = flags(report[2:])
    model_path, served = expected["--model-path"], expected["--served-model-name"]
    ours = sglang_engine.serve_args(model_path, served, 30000, sglang(speculative_algorithm="DSPARK"))
    assert ours[0] == "serve"
    got = flags(ours[1:])
    assert got.pop("--api-key") == "$(SGLANG_API_KEY)"
    assert got.pop("--enable-metrics") is None  # our addition: monitoring reads /metrics
    assert got == expected
    ours_flags = [a for a in ours[1:] if a.startswith("--") and a not in ("--api-key", "--enable-metrics")]
    assert ours_flags == [a for a in report[2:] if a.startswith("--")]


def test_sglang_keeps_its_own_parser_spelling():
    f = flags(sglang_engine.serve_args("/m", "m", 30000, sglang())[1:])
    assert f["--reasoning-parser"] == "deepseek-v4" and f["--tool-call-parser"] == "deepseekv4"
    assert f["--moe-runner-backend"] == "marlin" and f["--tensor-parallel-size"] == "8" and f["--port"] == "30000"


def test_sglang_dspark_switch_and_optional_shape_limits():
    off = sglang_engine.serve_args("/m", "m", 30000, sglang())
    assert "--speculative-algorithm" not in off
    assert "--max-running-requests" not in off and "--cuda-graph-max-bs-decode" not in off
    on = flags(sglang_engine.serve_args("/m", "m", 30000, sglang(speculative_algorithm="DSPARK", max_running_requests=64,
                                                                  cuda_graph_max_bs=32))[1:])
    assert on["--speculative-algorithm"] == "DSPARK"
    assert on["--max-running-requests"] == "64" and on["--cuda-graph-max-bs-decode"] == "32"


def test_sglang_environment_turns_health_generation_off():
    m = ServedModel(name="s", profile="deepseek-v4", served_model_name="s", directory="d", object_prefix="p", revision="r", engine="sglang",
                    orchestrator="rolebasedgroup")
    cmd = engines.engine_command("/models/d", m)
    assert cmd.env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] == "0"
    assert cmd.command == ["sglang"] and "--api-key" in cmd.args
    assert engines.parallel_size(m) == 8 and engines.startup_budget_seconds(m) == 2700


def test_speculative_toggle_changes_nothing_else():
    m = model()
    on = engines.with_speculative_decoding(m, True)
    assert on.vllm.speculative_decoding == "dspark"
    assert on.model_copy(update={"vllm": m.vllm}) == m
    assert engines.with_speculative_decoding(on, False) == m
