"""Init container of every engine pod: refuse to start on a model that is not verified.

It checks and never downloads. It needs the sync Job's ready marker naming the expected
revision, and every file a complete model has. On failure it prints what is missing and exits 1,
so the pod stays in Init and the GPUs load nothing half-synced.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_files import missing_files, model_arguments, report_problems  # noqa: E402


def gate_problems(model_dir: str, revision: str, expected_shards: int, marker: str) -> list[str]:
    marker_path = os.path.join(model_dir, marker)
    if not os.path.isfile(marker_path):
        return [f"no ready marker {marker_path}: the model sync Job has not verified this directory yet"]
    try:
        with open(marker_path, encoding="utf-8") as f:
            found = json.load(f).get("revision")
    except (OSError, ValueError) as err:
        return [f"unreadable ready marker {marker_path}: {err}"]
    problems = []
    if found != revision:
        problems.append(f"ready marker names revision {found!r}, this pod expects {revision!r}")
    return problems + missing_files(model_dir, expected_shards)


def main(argv: list[str] | None = None) -> int:
    a = model_arguments(__doc__).parse_args(argv)
    problems = gate_problems(a.model_dir, a.revision, a.expected_shards, a.marker)
    if report_problems(f"model gate: {a.model_dir} is not ready:", problems):
        return 1
    print(f"model gate: {a.model_dir} revision {a.revision} is ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
