"""The e2e builds the releases the stacks deploy: a bump of one without the other fails here, offline.

`make e2e` runs the controllers built from e2e/tools/<name>/go.mod and the Kubernetes release in
e2e/tools/kubernetes/VERSION; the stacks deploy the releases of config_model (Platform defaults) and
components/platform.py (what AIBrix's bundle brings). A proof against another release proves nothing
about this one.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import PROJECT_DIR

from components.platform import AIBRIX_BUNDLED
from config_model.infra import Cluster
from config_model.operations import Platform

TOOLS = PROJECT_DIR / "e2e" / "tools"


def required(wrapper: str, module: str) -> str:
    """The version of `module` the wrapper's go.mod requires (what `go build` compiles)."""
    text = (TOOLS / wrapper / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.M)
    assert found, f"e2e/tools/{wrapper}/go.mod does not require {module}"
    return found[1]


def test_the_aibrix_controller_is_the_release_the_stacks_deploy():
    assert required("aibrix", "github.com/vllm-project/aibrix") == Platform().aibrix_version


def test_the_kuberay_operator_is_the_release_aibrix_bundles():
    assert required("kuberay", "github.com/ray-project/kuberay/ray-operator") == AIBRIX_BUNDLED["kuberay"]
    # AIBrix's own go.mod pins the operator API it creates RayClusters with: the same release.
    assert required("aibrix", "github.com/ray-project/kuberay/ray-operator") == AIBRIX_BUNDLED["kuberay"]


def test_egctl_is_the_envoy_gateway_aibrix_installs_and_the_crd_is_read_from():
    # e2e/test_gateway_xds.py translates with it; apivalidation/module_crds.py and e2e/cluster.py read the
    # EnvoyPatchPolicy CRD from the Go module of the same release.
    from apivalidation import module_crds
    module, version, _ = module_crds.MODULE_CRDS["EnvoyPatchPolicy"]
    assert required("envoy-gateway", module) == AIBRIX_BUNDLED["envoyGateway"] == version


def test_the_gang_scheduler_is_the_scheduler_plugins_release_aibrix_builds_podgroups_for():
    # e2e/test_gang.py proves gang scheduling with scheduler-plugins' scheduler; AIBrix v0.7.0's controller
    # compiles that release's PodGroup API (scheduling.x-k8s.io/v1alpha1) in, and the e2e reads the CRD
    # from the same module (e2e/coscheduling.py).
    version = (TOOLS / "scheduler-plugins" / "VERSION").read_text().strip()
    assert required("scheduler-plugins", "sigs.k8s.io/scheduler-plugins") == version
    assert required("aibrix", "sigs.k8s.io/scheduler-plugins") == version


def test_the_control_plane_is_a_kubernetes_release_the_stacks_accept():
    version = (TOOLS / "kubernetes" / "VERSION").read_text().strip()
    minor = re.fullmatch(r"v(1\.\d+)\.\d+", version)[1]
    assert Cluster(kubernetes_version=minor).kubernetes_version == minor
    assert required("kubernetes", "k8s.io/kubernetes") == version
    # The staging modules at the same release: v0.<minor>.<patch> for v1.<minor>.<patch>.
    assert required("kubernetes", "k8s.io/client-go") == "v0." + version.removeprefix("v1.")


def test_the_provider_is_registered_under_the_sdk_version_and_says_which_release_it_is():
    # The module proxy serves pulumi-kubernetes only at v4.25.0 (commit f47bc2d6f199); the e2e registers it
    # under the version pulumi_kubernetes asks for and runs every scenario with that pair (README).
    release = (TOOLS / "pulumi-kubernetes" / "RELEASE").read_text().strip()
    assert required("pulumi-kubernetes", "github.com/pulumi/pulumi-kubernetes/provider/v4").endswith("-f47bc2d6f199")
    assert release == "v4.25.0"
    import pulumi_kubernetes
    sdk = json.loads((Path(pulumi_kubernetes.__file__).parent / "pulumi-plugin.json").read_text())

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.removeprefix("v").split("."))
    assert sdk["name"] == "kubernetes" and parts(sdk["version"]) >= parts(release)


@pytest.mark.parametrize("module", ["k8s.io/apimachinery", "sigs.k8s.io/yaml", "go.yaml.in/yaml/v2"])
def test_the_manifest_reader_is_kubectls_at_the_release_the_e2e_runs(module):
    """e2e/tools/yamlread reads build/<stack>/kubernetes.yaml as kubectl does (e2e/test_yamlread.py): with
    the YAML libraries of the Kubernetes release the e2e builds (e2e/build-tools.sh checks the same)."""
    assert required("yamlread", module) == required("kubernetes", module)


@pytest.mark.parametrize("wrapper", sorted(p.name for p in TOOLS.iterdir() if p.is_dir()))
def test_every_wrapper_is_a_go_module_that_names_what_it_builds(wrapper):
    go_mod = TOOLS / wrapper / "go.mod"
    assert go_mod.is_file() and (TOOLS / wrapper / "go.sum").is_file()
    assert re.search(r"^tool\b", go_mod.read_text(), re.M) or (TOOLS / wrapper / "main.go").is_file()


def test_no_build_output_is_committed_under_e2e():
    # Wrapper modules, scripts and small text only: never a binary, a module cache or the provider's
    # generated schema copies.
    tracked = subprocess.run(["git", "ls-files", "e2e"], cwd=PROJECT_DIR, capture_output=True, text=True,
                             check=True).stdout.split()
    allowed = re.compile(r".*(\.py|\.sh|\.yaml|/go\.mod|/go\.sum|/main\.go|/VERSION|/RELEASE|/OVERRIDES|/run-policy-pack)$")
    assert tracked and [f for f in tracked if not allowed.fullmatch(f)] == []


def test_the_endpoint_picker_is_the_release_the_stacks_deploy():
    # e2e/test_inference_pool.py runs the picker built from e2e/tools/gie (cmd/epp) with the args and config the
    # stacks render for the image policy/endpoint_picker.py pins: the same GIE release.
    from policy import endpoint_picker
    assert required("gie", "sigs.k8s.io/gateway-api-inference-extension") == endpoint_picker.EPP_VERSION
