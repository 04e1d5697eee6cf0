"""Init container of every engine pod: refuse to start on a model that is not verified.

It checks and never downloads or hashes a shard. It needs the sync Job's ready marker naming the
expected revision, the manifest it verified (by digest, and the pinned one if the stack pins it),
every file at the size it verified, and every file a complete model has. On failure it prints what is missing and exits 1,
so the pod stays in Init and the GPUs load nothing half-synced.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_files import (  # noqa: E402
    CHECKSUM_FILE,
    DEFAULT_REQUIRED_FILES_PATH,
    file_sha256,
    missing_files,
    model_arguments,
    report_problems,
)


def gate_problems(model_dir: str, revision: str, expected_shards: int | None, marker: str, pinned: str = "",
                  required_files: str = DEFAULT_REQUIRED_FILES_PATH) -> list[str]:
    marker_path = os.path.join(model_dir, marker)
    if not os.path.isfile(marker_path):
        return [f"no ready marker {marker_path}: the model sync Job has not verified this directory yet"]
    try:
        with open(marker_path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError) as err:
        return [f"unreadable ready marker {marker_path}: {err}"]
    problems = []
    if record.get("revision") != revision:
        problems.append(f"ready marker names revision {record.get('revision')!r}, this pod expects {revision!r}")
    return problems + content_problems(model_dir, record, pinned) + missing_files(model_dir, expected_shards, required_files)


def content_problems(model_dir: str, record: dict, pinned: str) -> list[str]:
    """The files are still what was verified: the manifest's digest (one small file) and every listed
    file's size. Shards are never hashed here; that is the sync Job's work."""
    recorded, sizes = record.get("manifest_sha256"), record.get("sizes")
    if not isinstance(recorded, str) or not isinstance(sizes, dict):
        return ["ready marker records no manifest digest or file sizes: run the model sync Job again"]
    problems = []
    if pinned and recorded != pinned:
        problems.append(f"ready marker records {CHECKSUM_FILE} sha256 {recorded}, the stack pins {pinned}")
    manifest_path = os.path.join(model_dir, CHECKSUM_FILE)
    if not os.path.isfile(manifest_path):
        problems.append(f"missing {CHECKSUM_FILE}")
    elif (found := file_sha256(manifest_path)) != recorded:
        problems.append(f"{CHECKSUM_FILE} has sha256 {found}, the ready marker recorded {recorded}")
    for name, size in sorted(sizes.items()):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            problems.append(f"missing {name} (recorded in the ready marker)")
        elif (actual := os.path.getsize(path)) != size:
            problems.append(f"{name} is {actual} bytes, the ready marker recorded {size}")
    return problems


def main(argv: list[str] | None = None) -> int:
    a = model_arguments(__doc__).parse_args(argv)
    problems = gate_problems(a.model_dir, a.revision, a.expected_shards, a.marker, a.manifest_sha256, a.required_files)
    if report_problems(f"model gate: {a.model_dir} is not ready:", problems):
        return 1
    print(f"model gate: {a.model_dir} revision {a.revision} is ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
