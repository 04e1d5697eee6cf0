"""What a complete model directory contains; shared by the sync Job's verifier and the pods' gate.

Plain standard library only: it runs in the verify image and in the engine image.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

INDEX_FILE = "model.safetensors.index.json"
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", INDEX_FILE)
# One of these tokenizer payloads must exist besides tokenizer_config.json.
TOKENIZER_PAYLOADS = ("tokenizer.json", "tokenizer.model")
CHECKSUM_FILE = "SHA256SUMS"
CHUNK = 8 * 1024 * 1024


def missing_files(model_dir: str, expected_shards: int) -> list[str]:
    """Everything that makes model_dir incomplete, as human-readable lines; empty when complete."""
    problems = []
    for name in REQUIRED_FILES:
        if not os.path.isfile(os.path.join(model_dir, name)):
            problems.append(f"missing {name}")
    if not any(os.path.isfile(os.path.join(model_dir, n)) for n in TOKENIZER_PAYLOADS):
        problems.append("missing tokenizer (" + " or ".join(TOKENIZER_PAYLOADS) + ")")
    index_path = os.path.join(model_dir, INDEX_FILE)
    if not os.path.isfile(index_path):
        return problems
    shards = shard_names(index_path)
    if len(shards) != expected_shards:
        problems.append(f"weight index names {len(shards)} shards, expected {expected_shards}")
    for shard in shards:
        path = os.path.join(model_dir, shard)
        if not os.path.isfile(path):
            problems.append(f"missing shard {shard}")
        elif os.path.getsize(path) == 0:
            problems.append(f"empty shard {shard}")
    return problems


def shard_names(index_path: str) -> list[str]:
    with open(index_path, encoding="utf-8") as f:
        index = json.load(f)
    return sorted(set(index.get("weight_map", {}).values()))


def model_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments the verifier and the gate share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--revision", required=True)
    p.add_argument("--expected-shards", type=int, required=True)
    p.add_argument("--marker", required=True)
    p.add_argument("--manifest-sha256", default="",
                   help=f"the pinned sha256 of {CHECKSUM_FILE}; empty accepts any manifest")
    return p


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def report_problems(header: str, problems: list[str]) -> int:
    """Print one line per problem under a header to stderr; exit status 1 if any, else 0."""
    if not problems:
        return 0
    print(header, file=sys.stderr)
    for line in problems:
        print(f"  - {line}", file=sys.stderr)
    return 1
