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
}


# Modules whose files the tests read at the release the stacks pin, downloaded by the same `make` step (their CRDs
# are in ../shared/crds; nothing here adds them to the render's index): the Gateway API Inference Extension whose
# endpoint picker policy/endpoint_picker.py builds (tests/upstream_gie.py: its chart, flag set, config loader and
# the v1.5.0 InferencePool CRD, which still requires endpointPickerRef).
MODULE_SOURCES = {
    "gateway-api-inference-extension": ("sigs.k8s.io/gateway-api-inference-extension", "v1.5.0"),
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

