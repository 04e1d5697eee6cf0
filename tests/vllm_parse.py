"""Run by the interpreter of one .venv-vllm/<release> (tests/vllm_cli.py), never imported by the tests:
vLLM's own `vllm serve` command line, built the way that release's `vllm` entry point builds it, parses
every argv it is given. Reads {"argvs": [[...], ...]} (each argv from "serve" on) as JSON on stdin and
writes the answer as JSON to the file named by its one argument (vLLM logs to stdout).

What `vllm serve ARGS` does before it starts anything (vllm-project/vllm v0.26.0 and v0.33.0,
vllm/entrypoints/cli/main.py main): a FlexibleArgumentParser (vllm/utils/argparse_utils.py) with
subparsers(required=False, dest="subparser"), each command's subparser_init (for `serve`:
vllm/entrypoints/cli/serve.py ServeSubcommand, whose subparser_init calls make_arg_parser of
vllm/entrypoints/openai/cli_args.py at v0.26.0, vllm/entrypoints/common/cli_args.py at v0.33.0:
FrontendArgs.add_cli_args, then AsyncEngineArgs.add_cli_args), then parser.parse_args(), then
cmd.validate(args) (validate_parsed_serve_args). Only the `serve` command is registered here: the other
commands add their own subparsers and do not change the serve subparser. Left out as well: cli_env_setup
(it only sets VLLM_WORKER_MULTIPROC_METHOD), and at v0.33.0 the bench-only maybe_exec_rust_bench and
configure_logging_from_args (logging). The command's dispatch comes
next and starts the server; its first step, AsyncEngineArgs.from_cli_args (vllm/engine/arg_utils.py),
already resolves the model path (EngineArgs.__post_init__: a path that is not a local directory is a
Hugging Face repository to download), so it needs the model's files and is not run.

The platform: vLLM picks it at first use (vllm/platforms/__init__.py resolve_current_platform_cls_qualname):
CUDA when NVML finds a GPU, else UnspecifiedPlatform, whose empty device type makes DeviceConfig() fail
(vllm/config/device.py __post_init__: "Failed to infer device type"), and add_cli_args builds a
DeviceConfig for its defaults, so on a machine without a GPU `vllm serve --help` itself fails. The CUDA
platform module cannot be imported without the NVIDIA driver (vllm/platforms/cuda.py imports
vllm._C_stable_libtorch, linked to libcuda.so.1). So, as vLLM's main does for `vllm bench` on an
unspecified platform, vLLM's CpuPlatform is installed through vllm.platforms' own setter. What that
changes in the parser is reported (platform_lines: every source line of the parser builders that reads
the platform) and checked by tests/test_engine_flags.py: at both releases pre_register_and_update
(interface.py: no-op for both CUDA and CPU) and the DeviceConfig default; at v0.33.0 also the
choices of --mm-processor-device, which add the platform's device type ("cuda" on CUDA), an option the
program never renders.
"""

import argparse
import contextlib
import inspect
import io
import json
import sys
import traceback


def _builders():
    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
    from vllm.entrypoints.cli import serve
    builders = [EngineArgs.add_cli_args, AsyncEngineArgs.add_cli_args, serve.make_arg_parser]
    frontend = getattr(sys.modules[serve.make_arg_parser.__module__], "FrontendArgs", None)
    if frontend is not None:
        builders.append(frontend.add_cli_args)
    return builders


def _platform_lines() -> list[str]:
    out = []
    for fn in _builders():
        for line in inspect.getsource(fn).splitlines():
            if "current_platform" in line:
                out.append(f"{fn.__qualname__}: {line.strip()}")
    return out


def _options(serve_parser: argparse.ArgumentParser) -> dict[str, bool]:
    """{option string: takes a value} of the serve subparser."""
    return {s: a.nargs != 0 for a in serve_parser._actions for s in a.option_strings}


# A config-only model directory (facts-engines.md section 4 ran the same step on it).
_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 4096,
           "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 16, "vocab_size": 32000,
           "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"}
_PARALLEL = ("world_size", "tensor_parallel_size", "pipeline_parallel_size", "nnodes", "node_rank", "local_world_size",
             "master_addr", "master_port", "distributed_executor_backend")


def _engine_config(parser, cmd, argv: list[str]) -> dict | str:
    import os

    import vllm
    from vllm.usage.usage_lib import UsageContext
    model = os.path.abspath("config-only-model")
    os.makedirs(model, exist_ok=True)
    with open(os.path.join(model, "config.json"), "w") as f:
        json.dump(_CONFIG, f)
    try:
        args = parser.parse_args([argv[0], model, *argv[2:]])
        cmd.validate(args)
        args.model = args.model_tag
        if args.headless:
            args.api_server_count = 0
        config = vllm.AsyncEngineArgs.from_cli_args(args).create_engine_config(
            usage_context=UsageContext.OPENAI_API_SERVER, headless=args.headless)
        return {k: getattr(config.parallel_config, k) for k in _PARALLEL}
    except SystemExit as e:
        return f"exit {e.code}"
    except Exception as e:    # noqa: BLE001 - what the server's start would die of, reported per argv
        return f"{type(e).__name__}: {e}"


def main() -> None:
    request = json.load(sys.stdin)
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform
    detected = type(platforms.current_platform).__name__
    platforms.current_platform = CpuPlatform()

    import torch
    import vllm
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmd = ServeSubcommand()
    serve_parser = cmd.subparser_init(subparsers)
    serve_parser.set_defaults(dispatch_function=cmd.cmd)

    results = []
    for argv in request["argvs"]:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(list(argv))
                cmd.validate(args)
            results.append(None)
        except SystemExit as e:   # argparse's error(): usage and message on stderr, exit 2
            lines = err.getvalue().strip().splitlines()
            results.append(f"exit {e.code}: {lines[-1] if lines else ''}")
        except Exception as e:    # noqa: BLE001 - what `vllm serve` would die of, reported per argv
            results.append(f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}")

    configs = [_engine_config(parser, cmd, list(argv)) for argv in request.get("configs", [])]
    answer = {"vllm": vllm.__version__, "torch": torch.__version__, "detected_platform": detected,
              "options": _options(serve_parser), "platform_lines": _platform_lines(), "results": results,
              "configs": configs}
    with open(sys.argv[1], "w") as f:
        json.dump(answer, f)


if __name__ == "__main__":
    main()
