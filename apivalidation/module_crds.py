"""CRDs of kinds the stacks render that ../shared/crds does not hold, read from the upstream Go
module at the release the cluster runs (never copied into this repository).

EnvoyPatchPolicy: the Envoy Gateway v1.2.8 that AIBrix v0.7.0 installs (components/platform.py
AIBRIX_BUNDLED; ../shared/crds/SOURCES.md saves seven of that chart's CRDs, not this one). The module
is the repository at the tag, so the chart's generated CRD is in it byte for byte. `make` downloads it
(`go mod download github.com/envoyproxy/gateway@v1.2.8`, 3.5 MB, the Go module proxy); without it the
render refuses the kind and says how to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

# kind -> (module, version, its CRD file in the module). Standard library only: e2e/cluster.py, which
# applies the same file to the local API server, loads this module by path.
MODULE_CRDS = {
    "EnvoyPatchPolicy": ("github.com/envoyproxy/gateway", "v1.2.8",
                         "charts/gateway-helm/crds/generated/gateway.envoyproxy.io_envoypatchpolicies.yaml"),
    # gateway.implementation istio (components/gateway_implementations/istio.py): the istio.io/api that Istio
    # 1.30.1 pins (istio/istio go.mod at tag 1.30.1), whose generated CRDs Istio's charts install.
    "DestinationRule": ("istio.io/api", "v1.30.1-0.20260529120535-23c54ad84d6e",
                        "kubernetes/customresourcedefinitions.gen.yaml"),
}

# Kinds the stacks may render whose CRD no module the proxy serves holds: the render cannot check them
# against a schema and says so; a test checks each against a port of its upstream types, read at the tag.
# kind -> (its apiVersion, why).
SOURCE_CHECKED = {
    "ProxySettingsPolicy": ("gateway.nginx.org/v1alpha1",
                            "NGINX Gateway Fabric v2.6.0's (gateway.implementation nginxGatewayFabric): its Go module "
                            "is not served by the module proxy; tests/upstream_nginx_gateway_fabric.py ports its types"),
}


def source_checked(obj: dict) -> str | None:
    """Why the object is checked by a test against its upstream types instead of a CRD, or None."""
    api_version, why = SOURCE_CHECKED.get(obj.get("kind", ""), (None, None))
    return why if api_version is not None and obj.get("apiVersion") == api_version else None


# Modules whose files the tests read at the release the stacks pin, downloaded by the same `make` step (their CRDs
# are in ../shared/crds; nothing here adds them to the render's index): the Gateway API Inference Extension whose
# endpoint picker policy/endpoint_picker.py builds (tests/upstream_gie.py: its chart, flag set, config loader and
# the v1.5.0 InferencePool CRD, which still requires endpointPickerRef).
MODULE_SOURCES = {
    "gateway-api-inference-extension": ("sigs.k8s.io/gateway-api-inference-extension", "v1.5.0"),
    # The Envoy Gateway the Envoy AI Gateway v1.1.0 pins (components/gateway_implementations/envoy_ai_gateway.py):
    # tests/test_gateway_implementations.py checks the BackendTrafficPolicy against its CRD.
    "envoy-gateway-ai-gateway": ("github.com/envoyproxy/gateway", "v1.8.1"),
}


def module_cache() -> Path:
    """Where the go command keeps downloaded modules: GOMODCACHE, else GOPATH's first entry/pkg/mod,
    else ~/go/pkg/mod (cmd/go/internal/modfetch: the same defaults, without running go)."""
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return Path(gopath or Path.home() / "go") / "pkg" / "mod"


def _escaped(module_path: str) -> str:
    """golang.org/x/mod/module EscapePath: an upper-case letter is `!` and its lower case."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in module_path)


def module_dir(module_path: str, version: str) -> Path:
    return module_cache() / f"{_escaped(module_path)}@{version}"


def crd_dir(kind: str) -> Path:
    """The directory of the kind's CRD file (the loader picks the file by the kind it names)."""
    module_path, version, file = MODULE_CRDS[kind]
    return (module_dir(module_path, version) / file).parent


def download_command(kind: str) -> str:
    module_path, version, _ = MODULE_CRDS[kind]
    return f"go mod download {module_path}@{version}"


def missing_hint(kind: str) -> str | None:
    """Why the kind has no CRD here and the command that fixes it, or None for other kinds."""
    if kind not in MODULE_CRDS or crd_dir(kind).is_dir():
        return None
    return f"its CRD is read from the Go module cache ({crd_dir(kind)} is missing): run `{download_command(kind)}`"


def download() -> int:
    """`make`'s step: download every module above (a no-op once in the cache). A machine without the
    go command or the module proxy is told so, and the render then refuses those kinds with the hint."""
    import shutil
    import subprocess
    import sys
    wanted = {(m, v) for m, v, _ in MODULE_CRDS.values()} | set(MODULE_SOURCES.values())
    for module_path, version in sorted(wanted):
        if not module_dir(module_path, version).is_dir():
            if shutil.which("go") is None:
                print(f"warning: no go command: {module_path}@{version} (CRDs of {', '.join(MODULE_CRDS)}; sources of "
                      f"{', '.join(MODULE_SOURCES)}) not downloaded", file=sys.stderr)
                return 0
            done = subprocess.run(["go", "mod", "download", f"{module_path}@{version}"], check=False)
            if done.returncode != 0:
                print(f"warning: `go mod download {module_path}@{version}` failed", file=sys.stderr)
    return 0

