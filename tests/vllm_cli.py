"""vLLM's own `vllm serve` parser at each release the stacks deploy (tests/upstream_vllm.py RELEASES).

Each release's parser runs in its own virtualenv .venv-vllm/<release> (the Makefile builds it from
requirements-vllm-<release>.txt): one process per release parses every argv of the session in one batch
(tests/vllm_parse.py says what it runs and why each step is vLLM's own), the releases side by side.
The answer is kept in the session's temporary directory, so the pytest-xdist workers share one run,
and in the machine's cache by what it follows from (verdict_key), so an unchanged set is not re-run.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import upstream_vllm
from conftest import IN_CI, PROJECT_DIR

PARSE_SCRIPT = Path(__file__).with_name("vllm_parse.py")
TIMEOUT_S = 600
# The parser processes' environment: nothing of the machine's VLLM_* settings; HOME is their own directory.
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
       "DO_NOT_TRACK": "1"}


@dataclass(frozen=True)
class Release:
    vllm: str                       # vllm.__version__ of the virtualenv
    torch: str
    detected_platform: str          # what vLLM detected before CpuPlatform was set (no GPU here)
    options: dict[str, bool]        # option string of the serve subparser: takes a value
    platform_lines: tuple[str, ...]
    results: dict[tuple[str, ...], str | None]   # argv: None when accepted, else why not
    # argv: the parallel configuration create_engine_config gives (vllm_parse.py), else why not
    configs: dict[tuple[str, ...], dict | str]


def venvs() -> Path:
    root = Path(os.environ.get("VLLM_VENVS") or PROJECT_DIR / ".venv-vllm")
    missing = [v for v in upstream_vllm.RELEASES if not (root / v / ".requirements-installed").exists()]
    if missing:
        if IN_CI:
            pytest.fail(f"vLLM {missing} missing under {root}; `make test` installs them from requirements-vllm-*.txt")
        pytest.skip(f"vLLM {missing} is not installed under {root} (run `make test`)")
    return root


def _run(root: Path, argvs: list[list[str]], out_dir: Path, configs: list[list[str]]) -> dict[str, dict]:
    request = json.dumps({"argvs": argvs, "configs": configs}).encode()
    procs = {}
    for v in upstream_vllm.RELEASES:
        out, log = out_dir / f"{v}.json", (out_dir / f"{v}.log").open("wb")
        procs[v] = (out, log, subprocess.Popen([str(root / v / "bin" / "python"), str(PARSE_SCRIPT), str(out)],
                                               stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                               env={**ENV, "HOME": str(out_dir)}, cwd=out_dir))
        procs[v][2].stdin.write(request)
        procs[v][2].stdin.close()
    answers = {}
    for v, (out, log, proc) in procs.items():
        try:
            code = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for _, _, p in procs.values():
                p.kill()
            raise
        finally:
            log.close()
        if code != 0 or not out.exists():
            tail = (out_dir / f"{v}.log").read_text(errors="replace")[-4000:]
            raise AssertionError(f"vLLM {v}'s parser process exited {code}:\n{tail}")
        answers[v] = json.loads(out.read_text())
    return answers


def verdicts_dir() -> Path:
    """Where answers are kept: the machine's cache (like uv's and Go's), not the clone, so a fresh
    clone on the same machine with the same argvs and packages reads them; VLLM_VERDICTS overrides."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("VLLM_VERDICTS") or cache / "llm-serving" / "vllm-verdicts")


def verdict_key(root: Path, argvs: list[tuple[str, ...]], configs: list[tuple[str, ...]] = ()) -> str:
    """What a run's answers follow from, and nothing else: the argvs, the parse script, and each
    release's installed packages (the uv-written RECORD of every distribution: each file's hash).
    The answers of a run are kept in verdicts_dir() by this key: the parsers take about 35 s of CPU
    (50-60 s on a new virtualenv's first run), and the next `make test` of the same argvs on the same
    packages gets the same answers; a new argv, script or package is a new key, so a new run."""
    h = hashlib.sha256(json.dumps(argvs).encode())
    if configs:
        h.update(json.dumps(configs).encode())
    h.update(PARSE_SCRIPT.read_bytes())
    for v in upstream_vllm.RELEASES:
        for record in sorted((root / v).glob("lib/python*/site-packages/*.dist-info/RECORD")):
            h.update(record.parent.name.encode())
            # Files outside site-packages (../../../bin scripts) carry the virtualenv's own path in
            # their shebang, so they differ per clone; the parser imports none of them.
            h.update(b"".join(line for line in record.read_bytes().splitlines(keepends=True)
                              if not line.startswith(b"../")))
    return h.hexdigest()[:16]


def parse(argvs: list[tuple[str, ...]], tmp_root: Path, configs: list[tuple[str, ...]] = ()) -> dict[str, Release]:
    """Every argv (from "serve" on) through each release's parser, and each of `configs` on to vLLM's engine
    config; one run per set of argvs and session."""
    root = venvs()
    unique = sorted({tuple(a) for a in argvs})
    unique_configs = sorted({tuple(a) for a in configs})
    key = verdict_key(root, unique, unique_configs)
    out_dir = tmp_root / f"vllm-parse-{key}"
    out_dir.mkdir(parents=True, exist_ok=True)
    answer_file = out_dir / "answers.json"
    kept = verdicts_dir() / f"{key}.json"
    with (out_dir / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another worker's run: wait for it, then read its answer
        if not answer_file.exists():
            if kept.exists():
                answer_file.write_text(kept.read_text())
            else:
                answer_file.write_text(json.dumps(_run(root, [list(a) for a in unique], out_dir,
                                                       [list(a) for a in unique_configs])))
                kept.parent.mkdir(parents=True, exist_ok=True)
                tmp = kept.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(answer_file.read_text())
                os.replace(tmp, kept)   # another session reading it sees all of it or nothing
        answers = json.loads(answer_file.read_text())
    return {v: Release(vllm=a["vllm"], torch=a["torch"], detected_platform=a["detected_platform"],
                       options=a["options"], platform_lines=tuple(a["platform_lines"]),
                       results=dict(zip(unique, a["results"], strict=True)),
                       configs=dict(zip(unique_configs, a.get("configs", []), strict=True)))
            for v, a in answers.items()}


def session_tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the session's pytest-xdist workers share (each worker's basetemp is beneath it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
