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
# A checkpoint small enough for one file ships it under this name and no index (transformers
# SAFE_WEIGHTS_NAME beside SAFE_WEIGHTS_INDEX_NAME; most models under ~10 GB).
SINGLE_FILE = "model.safetensors"
# The files a complete checkpoint of each model directory holds besides its shards and tokenizer
# payload, as its model's profile names them (policy/profiles/ REQUIRED_FILES): {directory: [file]},
# written by the program into the scripts ConfigMap beside this file (components/scripts.py), so the
# sync Job's verifier and every pod's gate read one list.
REQUIRED_FILES_DATA = "model_files.json"
# One of these tokenizer payloads must exist besides tokenizer_config.json.
TOKENIZER_PAYLOADS = ("tokenizer.json", "tokenizer.model")
CHECKSUM_FILE = "SHA256SUMS"
CHUNK = 8 * 1024 * 1024


DEFAULT_REQUIRED_FILES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), REQUIRED_FILES_DATA)


def required_files(model_dir: str, path: str = DEFAULT_REQUIRED_FILES_PATH) -> list[str] | None:
    """The required files of model_dir (<root>/<directory>/<revision>); None when none are recorded."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data.get(os.path.basename(os.path.dirname(os.path.normpath(model_dir))))


def missing_files(model_dir: str, expected_shards: int | None,
                  data_path: str = DEFAULT_REQUIRED_FILES_PATH) -> list[str]:
    """Everything that makes model_dir incomplete, as human-readable lines; empty when complete."""
    required = required_files(model_dir, data_path)
    if required is None:
        return [f"no required files recorded for {model_dir} in {data_path} (the scripts ConfigMap's "
                f"{REQUIRED_FILES_DATA}, written from the model's profile)"]
    # A profile whose checkpoint is sharded lists the index among them (deepseek-v4): then a single
    # file never passes for it.
    problems = [f"missing {name}" for name in dict.fromkeys(required)
                if not os.path.isfile(os.path.join(model_dir, name))]
    if not any(os.path.isfile(os.path.join(model_dir, n)) for n in TOKENIZER_PAYLOADS):
        problems.append("missing tokenizer (" + " or ".join(TOKENIZER_PAYLOADS) + ")")
    return problems + weight_files(model_dir, expected_shards)[1]


def weight_files(model_dir: str, expected_shards: int | None) -> tuple[list[str], list[str]]:
    """(the weight files, what is wrong with them). Sharded: the index and every shard its weight_map
    names, as many as expected_shards when the stack gives a count (unset: the index's count).
    Otherwise the single model.safetensors, which is one shard."""
    index_path = os.path.join(model_dir, INDEX_FILE)
    if os.path.isfile(index_path):
        try:
            shards = shard_names(index_path)
        except (OSError, ValueError) as err:
            return [], [f"unreadable {INDEX_FILE}: {err}"]
        problems = [] if shards else [f"{INDEX_FILE} names no shards in its weight_map"]
        if expected_shards is not None and len(shards) != expected_shards:
            problems.append(f"weight index names {len(shards)} shards, expected {expected_shards}")
    elif os.path.isfile(os.path.join(model_dir, SINGLE_FILE)):
        shards, problems = [SINGLE_FILE], []
        if expected_shards is not None and expected_shards != 1:
            problems.append(f"checkpoint is a single {SINGLE_FILE} without {INDEX_FILE}, expected {expected_shards} shards")
    else:
        return [], [f"missing weights: neither {INDEX_FILE} nor a single {SINGLE_FILE}"]
    for shard in shards:
        path = os.path.join(model_dir, shard)
        if not os.path.isfile(path):
            problems.append(f"missing shard {shard}")
        elif os.path.getsize(path) == 0:
            problems.append(f"empty shard {shard}")
    return shards, problems


def shard_names(index_path: str) -> list[str]:
    """The files the index's weight_map names; ValueError for an index of another shape."""
    with open(index_path, encoding="utf-8") as f:
        index = json.load(f)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError("its weight_map is not an object of tensor name -> file name")
    return sorted(set(weight_map.values()))


def model_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments the verifier and the gate share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--revision", required=True)
    p.add_argument("--expected-shards", type=int, default=None,
                   help=f"shards the {INDEX_FILE} must name; unset: as many as it names ({SINGLE_FILE} alone is one)")
    p.add_argument("--marker", required=True)
    p.add_argument("--manifest-sha256", default="",
                   help=f"the pinned sha256 of {CHECKSUM_FILE}; empty accepts any manifest")
    p.add_argument("--required-files", default=DEFAULT_REQUIRED_FILES_PATH,
                   help=f"JSON of each model directory's required files; default: {REQUIRED_FILES_DATA} beside this script")
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
