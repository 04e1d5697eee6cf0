"""Stack variants for tests: the dev stack with some config replaced, rendered like a stack file."""

from __future__ import annotations

import copy
import functools
import json
import shutil
from pathlib import Path

from conftest import PROJECT_DIR

from render import runtime, stackfile
from stacks import loader

# A test fixture, not a published image: the committed stacks carry no SGLang digest because the
# field report did not record the v0.5.17 CUDA 13.0 image's digest.
SGLANG_FIXTURE = {"upstream": "lmsysorg/sglang:v0.5.17-cu130", "digest": "sha256:" + "5" * 64, "cudaVersion": "13.0"}
SECRETS = ("apiKey", "objectStoreAccessKeyId", "objectStoreSecretAccessKey", "cephUserKey", "registryDockerConfigJson")


def dev_config() -> dict[str, object]:
    # A test builds dozens of variants from it (tests/engine_containers.py: about a hundred a call): the two
    # files it reads are parsed once per content, and each caller gets its own copy to change.
    contents = tuple((PROJECT_DIR / name).read_bytes() for name in ("Pulumi.yaml", "Pulumi.dev.yaml"))
    return copy.deepcopy(_dev_config(contents))


@functools.lru_cache(maxsize=4)
def _dev_config(contents: tuple[bytes, bytes]) -> dict[str, object]:
    """dev_config() of Pulumi.yaml and Pulumi.dev.yaml with these contents (stackfile.read reads those two)."""
    sf = stackfile.read(PROJECT_DIR, "dev")
    assert tuple(p.read_bytes() for p in (PROJECT_DIR / "Pulumi.yaml", sf.path)) == contents, "changed while read"
    prefix = "llm-serving:"
    out: dict[str, object] = {}
    for key, value in sf.config.items():
        if key.startswith(prefix):
            # As the program reads it: by the field's type, so text fields stay text.
            out[key[len(prefix):]] = loader.decode(key[len(prefix):], value)
    return out


def variant_file(stack: str = "variant", **changes) -> stackfile.StackFile:
    """Pulumi.dev.yaml's config with top-level keys replaced; every secret set (masked)."""
    cfg = copy.deepcopy(dev_config())
    cfg.update(changes)
    sf = stackfile.StackFile(stack=stack, path=PROJECT_DIR / f"Pulumi.{stack}.yaml")
    sf.config = {"pulumi:disable-default-providers": '["*"]'}
    for key, value in cfg.items():
        sf.config[f"llm-serving:{key}"] = value if isinstance(value, str) else json.dumps(value)
    for key in SECRETS:
        sf.config[f"llm-serving:{key}"] = stackfile.MASK
        sf.secret_keys.append(f"llm-serving:{key}")
    return sf


def model(**changes) -> dict:
    base = copy.deepcopy(dev_config()["models"][0])
    base.update(changes)
    return base


def sglang_stack(**model_changes) -> stackfile.StackFile:
    images = copy.deepcopy(dev_config()["images"])
    images["sglang"] = SGLANG_FIXTURE
    m = model(**{"name": "deepseek-v4-flash-sglang", "servedModelName": "deepseek-v4-flash-sglang",
                 "engine": "sglang", "orchestrator": "rolebasedgroup", **model_changes})
    m.pop("vllm", None)
    m.pop("rollout", None)
    m.pop("startupBudgetSeconds", None)
    return variant_file(images=images, models=[m], compileCache={"kind": "existingClaim", "claimName": "jit-cache"})


def pair_file(engine: str, orchestrator: str) -> stackfile.StackFile:
    """The stack of one supported engine/orchestrator pair (tests/test_topologies.py PAIRS)."""
    if engine == "sglang":
        return sglang_stack(orchestrator=orchestrator)
    m = model(orchestrator=orchestrator)
    if orchestrator != "deployment":
        m.pop("rollout")  # Recreate is for Deployments; the others default to RollingUpdate, maxSurge 0
    return variant_file(models=[m])


def render(sf: stackfile.StackFile) -> runtime.Rendered:
    return runtime.render(sf)


# Two consumers on the dev stack (issue 21): one by namespace, one by labels; their keys set as
# `pulumi config set --secret --path` leaves them, each its own (masked stand-ins, as the render has them).
CONSUMERS = [{"name": "search", "namespace": "team-search", "requestsPerMinute": 600},
             {"name": "notebooks", "namespaceSelector": {"matchLabels": {"team": "data"}}, "requestsPerMinute": 60}]


def consumers_file(consumers: list[dict] | None = None, keys: dict[str, str] | None = None,
                   **changes) -> stackfile.StackFile:
    """The dev stack with consumers; `keys` are the consumerKeys members (default: one per consumer)."""
    consumers = CONSUMERS if consumers is None else consumers
    sf = variant_file(consumers=consumers, **changes)
    keys = {c["name"]: f"[secret {c['name']}-key]" for c in consumers} if keys is None else keys
    sf.config["llm-serving:consumerKeys"] = json.dumps(keys)
    sf.secret_keys.append("llm-serving:consumerKeys")
    return sf


def prod_with_identity(identity: str, *edits: tuple[str, str]) -> str:
    """Pulumi.prod.yaml's text with no IAM user and objectStore.workloadIdentity set to `identity` (its
    YAML lines), then each (old, new) edit once; a missing `old` fails."""
    text = (PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    for old, new in (("    createCredentials: true\n", "    createCredentials: false\n" + identity), *edits):
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def stack_project(root: Path, stack: str, text: str) -> Path:
    """A project directory holding Pulumi.yaml and Pulumi.<stack>.yaml with `text`."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / f"Pulumi.{stack}.yaml").write_text(text)
    return root
