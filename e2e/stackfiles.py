"""Stack files for the topology variants the unit tests render (tests/variants.py, tests/test_pd.py),
written as `Pulumi.<name>.yaml` for the real CLI: the same config, each value as the CLI would store it
(structured values as YAML, text as text), secrets left out for `pulumi config set --secret`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

# The unit tests' variants, one per workload kind and topology; the RoleBasedGroup controller cannot be built here (README), so that variant's
# custom resource never reports Ready and stops at preview and a server-side dry run.
VARIANTS = ("vllm-stormservice", "pd-rayclusterfleet", "pd-same-pod-deployment", "hybrid-stormservice",
            "sglang-rolebasedgroup", "r1-leaderworkerset", "r1-rolebasedgroup", "r1-stormservice")
NEEDS_CONTROLLER_WE_LACK = {"sglang-rolebasedgroup": "RoleBasedGroup (sgl-project/rbg v0.7.0 is not served)",
                            "r1-rolebasedgroup": "RoleBasedGroup (sgl-project/rbg v0.7.0 is not served)",
                            "r1-leaderworkerset": "LeaderWorkerSet (the proxy answers 403 for sigs.k8s.io/lws@v0.10.0's "
                                                  "zip, its .info and .mod are served)"}
# Variants with a test of their own (e2e/test_multinode.py): they need nodes and a scheduler the test brings.
OWN_TEST = {"r1-stormservice"}
# The node pool of the two-node model on the real AIBrix controller: nodes e2e/test_multinode.py adds and
# removes (a label and a taint only its pods tolerate, as e2e/test_gang.py's pools).
MULTINODE_POOL = ("e2e.llm-serving.io/pool", "multinode")


# e2e/test_inference_pool.py's stack: the dev stack on the inferencePool routing layer, on a Gateway of that
# file's own (it plays the gateway's controller for the route's status, the namespace its own too); the test
# starts it on the aibrix layer and switches it to these settings (e2e/routing_switch.py).
INFERENCE_POOL_GATEWAY = {"routingLayer": "inferencePool", "implementation": "istio", "namespace": "e2e-epp-gateway",
                          "name": "inference-gw"}


def _inference_pool():
    """Two replicas (a 16-GPU budget), so the picker has a choice; OpenWebUI off (nothing of it is under test here). The picker
    image is the unit tests' fixture (tests/test_inference_pool.py EPP_FIXTURE): kwok runs no image."""
    from test_inference_pool import EPP_FIXTURE
    from variants import dev_config, model, variant_file
    cfg = dev_config()
    operations = {**cfg["operations"], "openWebUI": {**cfg["operations"]["openWebUI"], "enabled": False}}
    return variant_file(images={**cfg["images"], "endpointPicker": EPP_FIXTURE},
                        gateway={**cfg["gateway"], **INFERENCE_POOL_GATEWAY}, models=[model(replicas=2)],
                        operations=operations, gpuBudget=16)


def _variant(name: str):
    from test_pd import stack as pd_stack
    from variants import model, sglang_stack, variant_file
    if name == "inference-pool":
        return _inference_pool()
    if name.startswith("r1-"):
        return _r1(name.removeprefix("r1-"))
    if name == "vllm-stormservice":
        m = model(orchestrator="stormservice")
        m.pop("rollout")
        return variant_file(models=[m])
    if name == "day2-pd":
        return pd_stack("pd", "rayclusterfleet", 24)
    if name.startswith(("day2-", "fault-")):
        # The dev stack as it is: e2e/test_day2.py changes it with `pulumi config set`, as a user would;
        # the fault scenarios (e2e/scenario.py) interrupt its updates.
        return variant_file()
    return {"pd-rayclusterfleet": lambda: pd_stack("pd", "rayclusterfleet", 24),
            "pd-same-pod-deployment": lambda: pd_stack("pd-same-pod", "deployment", 8),
            "hybrid-stormservice": lambda: pd_stack("hybrid", "stormservice", 32),
            "sglang-rolebasedgroup": sglang_stack}[name]()


def _r1(orchestrator: str):
    """DeepSeek-R1 on two nodes of 8 GPUs (tests/multinode_stacks.py) on one orchestrator: SGLang on the
    StormService (its gang pool of nodes the test adds, coscheduling, a compile-cache claim the e2e storage
    class binds), vLLM on the LeaderWorkerSet, SGLang on the RoleBasedGroup."""
    from multinode_stacks import r1_stack
    from variants import SGLANG_FIXTURE
    engine = "vllm" if orchestrator == "leaderworkerset" else "sglang"
    # The SGLang release the other variants run (0.5.17, whose ported facts tests/test_upstream_releases.py
    # ties to it); its multi-node flags are the same option strings as 0.5.23's (tests/test_multinode_engines.py).
    image = {"sglang_image": SGLANG_FIXTURE}
    if orchestrator != "stormservice":
        return r1_stack(orchestrator, engine, stack=f"r1-{orchestrator}", **image)
    key, value = MULTINODE_POOL
    pool = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H20", key: value},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]}
    # The shortest await the stack may ask for (startup budget 60 s, 60 s before it): e2e/test_multinode.py
    # lets one `pulumi up` run into it with the group unbound.
    sf = r1_stack(orchestrator, engine, stack="r1-stormservice", pool=pool, startupBudgetSeconds=60,
                  rollout={"preStartSeconds": 60}, **image)
    sf.config["llm-serving:compileCache"] = json.dumps({"kind": "claim", "storageClassName": "e2e-standard",
                                                        "sizeGiB": 50})
    return sf


def _as_stored(key: str, text: str):
    from stacks import loader
    return loader.decode(key.split(":", 1)[1], text) if key.startswith("llm-serving:") else text


def _stored_config(name: str) -> tuple[dict, list[str]]:
    sf = _variant(name)
    config = {}
    for key, text in sf.config.items():
        # Secrets are set with the CLI; pulumi:* settings come from Pulumi.yaml.
        if key in sf.secret_keys or key.startswith("pulumi:"):
            continue
        config[key] = _as_stored(key, text)
    return config, list(sf.secret_keys)


def write(name: str, project_dir: Path, namespace: str) -> tuple[Path, list[str]]:
    """Writes Pulumi.<name>.yaml into the project copy; returns it and the secret keys to set."""
    # Built in a process of its own: tests/variants.py imports tests/conftest.py, which the e2e's
    # conftest would shadow under the same module name.
    out = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=120).stdout
    config, secret_keys = json.loads(out)
    # Its own namespace: variants share the cluster, and a destroyed namespace takes a while to go.
    config["llm-serving:namespace"] = namespace
    path = project_dir / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path, [k for k in secret_keys if k != "llm-serving:registryDockerConfigJson"]


def init(pulumi, name: str) -> str:
    """A new stack `name` of the variant, its secrets set from stdin as a user sets them; returns its namespace."""
    import secrets

    namespace = f"e2e-{name}"[:63]
    _, secret_keys = write(name, pulumi.project, namespace)
    pulumi.run("stack", "init", name, "--secrets-provider", "passphrase")
    for key in secret_keys:
        pulumi.set_secret(key, secrets.token_hex(16), stack=name)
    return namespace


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    print(json.dumps(_stored_config(sys.argv[1])))
