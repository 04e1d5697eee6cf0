"""Every workload kind and topology through the real CLI: preview with the policy pack, `pulumi up` to
what it waits for (the controllers that could be built move the custom resources: AIBrix v0.7.0 for
StormService and RayClusterFleet, KubeRay v1.2.1 for the RayClusters), a second preview that changes
nothing, and destroy. RoleBasedGroup has no controller here (README): preview and a server-side dry run.
"""

from __future__ import annotations

import json

import pytest
import stackfiles
from harness import POLICY_LAUNCHER, Pulumi, kubectl, log

POLICY = ("--policy-pack", POLICY_LAUNCHER, "--policy-pack-config", "policy/config.dev.json")


def _init(pulumi: Pulumi, name: str) -> str:
    return stackfiles.init(pulumi, name)


@pytest.mark.parametrize("name", [v for v in stackfiles.VARIANTS
                                  if v not in stackfiles.NEEDS_CONTROLLER_WE_LACK and v not in stackfiles.OWN_TEST])
def test_variant_up_again_and_destroy(pulumi: Pulumi, name: str):
    namespace = _init(pulumi, name)
    pulumi.run("preview", *POLICY, stack=name)
    up = pulumi.run("up", "--yes", "--skip-preview", *POLICY, stack=name, timeout=1200)
    log(f"{name}: up {up.seconds:.1f} s")
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    gpu_pods = [p for p in pods if any("nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {})
                                       for c in p["spec"]["containers"])]
    assert gpu_pods, f"{name}: no GPU pod was created"
    assert all(p["status"].get("phase") == "Running" for p in gpu_pods), [p["metadata"]["name"] for p in gpu_pods]
    again = pulumi.run("preview", "--expect-no-changes", *POLICY, stack=name, check=False)
    assert again.returncode == 0, again
    pulumi.run("destroy", "--yes", "--skip-preview", stack=name, timeout=900)


@pytest.mark.parametrize("name", sorted(stackfiles.NEEDS_CONTROLLER_WE_LACK))
def test_variant_without_its_controller_previews(pulumi: Pulumi, name: str):
    _init(pulumi, name)
    result = pulumi.run("preview", *POLICY, stack=name)
    assert "error" not in result.output.split("Resources:")[0].lower(), result
