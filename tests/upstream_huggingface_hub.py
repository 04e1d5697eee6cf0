"""huggingface_hub (github.com/huggingface/huggingface_hub) home directory, READ: it comes with the
transformers each engine release pins (SGLang 0.5.17 transformers 5.12.1, 0.5.23 5.19.0, per the
wheels' Requires-Dist). Recorded without a tag; re-check src/huggingface_hub/constants.py (HF_HOME)
at the version the new transformers requires when an engine bumps it."""

from __future__ import annotations

from source_facts import ReadAt

PORTED_FROM = {
    "repo": "huggingface/huggingface_hub", "release": None,
    "untagged": "recorded without a tag: it comes with the transformers each engine release pins",
    "files": ("src/huggingface_hub/constants.py",),
    "not_deployed": "no stack pins it; the engine image's transformers brings it",
}

READ = (ReadAt("HF_HOME", ("vllm", "sglang"), "huggingface/huggingface_hub src/huggingface_hub/constants.py",
               "~/.cache/huggingface (offline here: only the modules cache of trust-remote-code)"),)
