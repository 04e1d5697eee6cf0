"""Every port of upstream code is of the release the stacks run, or says why not: a bump of a deployed
release fails here, naming the port to re-read, its files and both releases.

A port declares what it was read at in a module-level PORTED_FROM (a dict, or a tuple of them for a
module porting several upstreams):

    repo          owner/name (or the document's title)
    release       the tag or version read; None when it was read at a commit or without a version, then
                  `commit` or `untagged` says what; `releases` instead for a port read (or run) at several
    files         what to re-read on a bump (a trailing / is a directory)
    component     the key of tests/deployed_releases.py COMPONENTS it stands for; or
    not_deployed  why no release of the stacks can be compared (nothing deploys or pins it)
    covers        {"from", "to", "why"}: the port is held to that range of releases, inclusive
    not_read      {release: why}: a deployed release accepted without being read, each with its reason
    deployed_as   the component release this release comes with (structured-merge-diff v6.4.2 -> Kubernetes)
    commit, untagged, note: free text for a human

Modules outside tests/ that port upstream code, but hold no PORTED_FROM of their own, are declared in
OUTSIDE below, and each declaration is held to the release the module's own text names. The CRD copies in
../shared/crds are ports of their own: one per row of SOURCES.md (CRD_COMPONENTS).
"""

from __future__ import annotations

import importlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import deployed_releases
import pytest
from conftest import PROJECT_DIR, shared_dir

from config_model.operations import Platform
from render import update_rules

MIRRORS = Path("/work/.mirror")

_PULUMI_COMPARED = update_rules.PULUMI_ENGINE["covers"]
_SAME_SDK_FILES = {"from": "v3.259.0", "to": "v3.276.0", "why": "sdk/go/common/workspace/loaders.go and "
                   "sdk/go/common/resource/config/{plaintext,map,key}.go are identical at v3.276.0 (module cache)"}

# Modules outside tests/ whose docstring says they port upstream code. Each `anchor` is text the module
# itself carries: when it re-reads another release, its text changes and this table must follow.
OUTSIDE = {
    "apivalidation/apiserver.py": ({
        "repo": "kubernetes/kubernetes", "release": "1.37", "commit": "008b3652959ca58af8be3fb5b6ecfe9ae7638282",
        "anchor": "kubernetes/kubernetes for 1.37", "component": "kubernetes",
        "files": ("staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go",
                  "staging/src/k8s.io/apimachinery/pkg/api/validate/content/", "staging/src/k8s.io/apimachinery/pkg/api/"
                  "validation/", "staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go",
                  "pkg/apis/core/helper/helpers.go", "pkg/apis/{core,apps,batch,networking,policy}/validation/validation.go"),
        "covers": {"from": "1.29", "to": "1.37", "why": "where the server accepts something older supported versions "
                   "(1.29) refuse, the older rule is kept (module docstring)"}},),
    "apivalidation/updates.py": ({
        "repo": "kubernetes/kubernetes", "release": "v1.37.2", "anchor": "k8s.io/kubernetes v1.37.2",
        "component": "kubernetes",
        "files": ("pkg/apis/core/validation/validation.go", "pkg/apis/apps/validation/validation.go",
                  "pkg/apis/batch/validation/validation.go", "pkg/features/kube_features.go",
                  "plugin/pkg/admission/storage/persistentvolume/resize/admission.go")},),
    "apivalidation/cel_rules.py": ({
        "repo": "kubernetes/kubernetes", "release": "1.37", "anchor": "kubernetes/kubernetes v1.37",
        "component": "kubernetes",
        "files": ("staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go",
                  "staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting/algorithm.go",
                  "staging/src/k8s.io/apiserver/pkg/cel/escaping.go")},),
    "render/stackfile.py": ({
        "repo": "pulumi/pulumi", "release": "v3.259.0", "anchor": "LoadProjectStackBytes, tag v3.259.0",
        "component": "pulumi", "covers": _SAME_SDK_FILES,
        "files": ("sdk/go/common/workspace/loaders.go", "sdk/go/common/resource/config/plaintext.go",
                  "sdk/go/common/resource/config/map.go", "sdk/go/common/resource/config/key.go")},),
    "stacks/loader.py": ({
        "repo": "pulumi/pulumi", "release": "v3.259.0", "anchor": "marshalText, pulumi v3.259.0",
        "component": "pulumi", "covers": _SAME_SDK_FILES, "files": ("sdk/go/common/resource/config/plaintext.go",)},),
    "render/changes.py": (
        {"repo": "pulumi/pulumi", "release": "v3.259.0", "anchor": "pulumi/pulumi v3.259.0 step_generator.go",
         "component": "pulumi", "covers": {**_PULUMI_COMPARED, "why": "performPostSteps is unchanged at v3.276.0; "
                                           + _PULUMI_COMPARED["why"]},
         "files": ("pkg/resource/deploy/step_generator.go", "pkg/resource/deploy/deployment_executor.go")},),
    "render/update_steps.py": (
        {"repo": "pulumi/pulumi-kubernetes", "release": "v4.32.0", "anchor": "pulumi-kubernetes v4.32.0",
         "component": "pulumi-kubernetes", "not_read": update_rules.PULUMI_KUBERNETES_PROVIDER["not_read"],
         "files": ("provider/pkg/await/await.go", "provider/pkg/provider/provider.go")},
        {"repo": "kubernetes/kubernetes", "release": "v1.37.2", "anchor": "v1.37.2): a PV while it is Bound",
         "component": "kubernetes", "files": ("pkg/controller/volume/pvprotection/pv_protection_controller.go",)},
    ),
    "stacks/transitions.py": ({
        "repo": "pulumi/pulumi", "release": "v3.259.0", "anchor": "pulumi/pulumi v3.259.0", "component": "pulumi",
        "covers": {**_PULUMI_COMPARED, "why": "readStackResourceOutputs (builtins.go) is unchanged at v3.276.0; "
                   + _PULUMI_COMPARED["why"]},
        "files": ("pkg/resource/deploy/step_generator.go", "pkg/resource/deploy/builtins.go")},),
    "components/retention.py": ({
        "repo": "pulumi/pulumi", "release": "v3.259.0", "anchor": "pulumi/pulumi v3.259.0", "component": "pulumi",
        "covers": _PULUMI_COMPARED, "files": ("pkg/resource/deploy/step.go",)},),
}

# The CRD copies, by directory under ../shared/crds: the component whose release they must be, or why none.
CRD_COMPONENTS = {
    "aibrix": "aibrix", "kuberay/v1.2.1": "kuberay", "rbg": "rbg", "gateway-api/v1.2.1-standard": "gateway-api",
    "envoy-gateway": "envoy-gateway",
    # deployed_releases reads the Prometheus Operator release from this very row: nothing to compare.
    "prometheus-operator": None,
    "kuberay/v1.7.0": None, "lws": None, "gateway-api-inference-extension": None,
    "gateway-api-inference-extension/v1.5.0-experimental": None,
}
_CRD_NOT_DEPLOYED = {
    "prometheus-operator": "the release deployed_releases reports for the Prometheus Operator is this row's",
    "kuberay/v1.7.0": "the newest KubeRay tag, for reference only (SOURCES.md)",
    "lws": "no stack deploys LeaderWorkerSet",
    "gateway-api-inference-extension": "no shipped stack deploys it; gateway.routingLayer inferencePool installs the "
    "picker's release, v1.5.0, whose InferencePool v1 differs from this v1.6.0 copy only in endpointPickerRef being "
    "required (tests/test_endpoint_picker.py checks the pool against both)",
    "gateway-api-inference-extension/v1.5.0-experimental": "no stack deploys it",
}

# Ports whose release differs from what the stacks run and that say nothing about it: reported on issue 19,
# not excused. Each (module, repo, deployed release) must still occur, so a fix has to remove its line.
KNOWN_UNEXPLAINED = {
    # Read at 1.37 only; the stacks run 1.33 and accept 1.29.
    ("apivalidation/updates.py", "kubernetes/kubernetes", "1.29"), ("apivalidation/updates.py", "kubernetes/kubernetes", "1.33"),
    ("apivalidation/cel_rules.py", "kubernetes/kubernetes", "1.29"),
    ("apivalidation/cel_rules.py", "kubernetes/kubernetes", "1.33"),
    ("render/update_steps.py", "kubernetes/kubernetes", "1.29"),
    ("render/update_steps.py", "kubernetes/kubernetes", "1.33"),
    ("tests/upstream_day2.py", "kubernetes/kubernetes", "1.29"), ("tests/upstream_day2.py", "kubernetes/kubernetes", "1.33"),
    ("tests/upstream_day2.py", "kubernetes-sigs/structured-merge-diff", "1.29"),
    ("tests/upstream_day2.py", "kubernetes-sigs/structured-merge-diff", "1.33"),
    # Recorded without a tag, while the engine the stacks run pins torch 2.11.0.
    ("tests/upstream_pytorch.py", "pytorch/pytorch", "2.11.0"),
    # Read for CUDA 12.9; the SGLang variant's image is CUDA 13.0.
    ("tests/upstream_cuda.py", "NVIDIA CUDA Programming Guide", "13.0"),
}


# ---- the declarations ----

@dataclass(frozen=True)
class Port:
    module: str         # path from the project root
    decl: dict

    @property
    def releases(self) -> tuple:
        return tuple(self.decl["releases"]) if "releases" in self.decl else (self.decl["release"],)


def _as_tuple(declared) -> tuple[dict, ...]:
    return declared if isinstance(declared, tuple) else (declared,)


def upstream_modules() -> list[str]:
    return sorted(p.stem for p in (PROJECT_DIR / "tests").glob("upstream_*.py"))


def crd_ports(sources: Path) -> list[Port]:
    ports = []
    for directory, (repo, tag, commit) in deployed_releases.crd_sources(sources).items():
        decl = {"repo": repo, "release": tag, "commit": commit, "files": (f"../shared/crds/{directory}/",)}
        component = CRD_COMPONENTS.get(directory, "unclassified")
        decl |= {"component": component} if component else {"not_deployed": _CRD_NOT_DEPLOYED[directory]}
        ports.append(Port(f"../shared/crds/SOURCES.md ({directory}/)", decl))
    return ports


def ports(sources: Path | None = None) -> list[Port]:
    found = [Port(f"tests/{name}.py", d) for name in upstream_modules()
             for d in _as_tuple(getattr(importlib.import_module(name), "PORTED_FROM", ()))]
    found += [Port("render/update_rules.py", d) for d in update_rules.PORTED_FROM]
    found += [Port(module, d) for module, decls in OUTSIDE.items() for d in decls]
    return found + (crd_ports(sources) if sources else [])


# ---- the comparison ----

def _norm(component: str, release: str) -> str:
    """Releases as the deployment names them: no leading v; a Kubernetes release as its minor."""
    release = release.removeprefix("v")
    if component == "kubernetes":
        release = ".".join(release.split(".")[:2])
    return release


def _numbers(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release))


def _within(release: str, covers: dict) -> bool:
    """Inclusive, compared on as many numbers as the bound has (12 to 12 covers 12.9)."""
    r, lo, hi = _numbers(release), _numbers(covers["from"]), _numbers(covers["to"])
    return lo <= r[:len(lo)] and r[:len(hi)] <= hi


def accepted(port: Port, deployed: str) -> bool:
    if deployed.startswith("?"):
        return False        # deployed_releases could not tell (an engine release without its Requires-Dist)
    component = port.decl["component"]
    deployed = _norm(component, deployed)
    read = (port.decl["deployed_as"],) if "deployed_as" in port.decl else port.releases
    if any(r is not None and _norm(component, r) == deployed for r in read):
        return True
    if "covers" in port.decl and _numbers(deployed) and _within(deployed, port.decl["covers"]):
        return True
    return deployed in {_norm(component, r) for r in port.decl.get("not_read", {})}


@dataclass(frozen=True)
class Mismatch:
    port: Port
    where: str
    deployed: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.port.module, self.port.decl["repo"], _norm(self.port.decl["component"], self.deployed))

    def message(self) -> str:
        d = self.port.decl
        read = ", ".join(r or f"no release ({d.get('commit') or d.get('untagged')})" for r in self.port.releases)
        held = f"; held to {d['covers']['from']}..{d['covers']['to']}" if "covers" in d else ""
        return (f"{self.port.module} ports {d['repo']} read at {read}{held}, but {self.where} is "
                f"{self.deployed}: re-read {', '.join(d['files'])} at {self.deployed} and update PORTED_FROM")


def mismatches(all_ports: list[Port], stacks) -> list[Mismatch]:
    out = []
    cache: dict[str, dict[str, str]] = {}
    for port in all_ports:
        component = port.decl.get("component")
        if component is None:
            continue
        if component not in cache:
            cache[component] = deployed_releases.deployed(component, stacks)
        out += [Mismatch(port, where, release) for where, release in cache[component].items()
                if not accepted(port, release)]
    return out


@pytest.fixture(scope="module")
def stacks():
    return deployed_releases.deployments()


@pytest.fixture(scope="module")
def all_ports():
    return ports(shared_dir("crds", "SOURCES.md"))


# ---- the tests ----

@pytest.mark.parametrize("name", upstream_modules())
def test_every_upstream_module_declares_what_it_was_read_at(name):
    assert _as_tuple(getattr(importlib.import_module(name), "PORTED_FROM", ())), f"tests/{name}.py has no PORTED_FROM"


KEYS = {"repo", "release", "releases", "files", "component", "not_deployed", "covers", "not_read", "deployed_as",
        "commit", "untagged", "note", "anchor"}


def test_every_declaration_is_complete(all_ports):
    for port in all_ports:
        d, where = port.decl, f"{port.module}: {port.decl.get('repo')}"
        assert set(d) <= KEYS, f"{where}: unknown keys {sorted(set(d) - KEYS)}"
        assert d.get("repo") and d.get("files") and not isinstance(d["files"], str), where
        assert ("release" in d) != ("releases" in d), f"{where}: one of release / releases"
        if "releases" in d:
            assert d["releases"] and all(d["releases"]), f"{where}: empty releases"
        if d.get("release", "") is None:
            assert d.get("commit") or d.get("untagged"), f"{where}: no release, and neither commit nor untagged says why"
        assert ("component" in d) != ("not_deployed" in d), f"{where}: one of component / not_deployed"
        if "component" in d:
            assert d["component"] in deployed_releases.COMPONENTS, f"{where}: no such component {d['component']!r}"
        else:
            assert d["not_deployed"].strip(), where
        if "covers" in d:
            assert set(d["covers"]) == {"from", "to", "why"} and d["covers"]["why"].strip(), where
            assert _numbers(d["covers"]["from"]) <= _numbers(d["covers"]["to"]), where
        assert all(isinstance(v, str) and v.strip() for v in d.get("not_read", {}).values()), where


def test_each_outside_declaration_names_the_release_its_module_names():
    for module, decls in OUTSIDE.items():
        text = (PROJECT_DIR / module).read_text()
        for d in decls:
            assert d["anchor"] in text, f"{module} no longer says {d['anchor']!r}: re-declare it in OUTSIDE"
            assert d["release"] in d["anchor"], f"{module}: the anchor must carry the release {d['release']}"


def test_update_rules_declares_the_releases_its_docstring_names():
    for d in update_rules.PORTED_FROM:
        assert f"tag {d['release']}" in update_rules.__doc__, d["repo"]


def test_every_crd_directory_is_classified(all_ports):
    assert not [p.module for p in all_ports if p.decl.get("component") == "unclassified"], \
        "a new directory in ../shared/crds/SOURCES.md: add it to CRD_COMPONENTS"


def test_ports_are_of_the_releases_the_stacks_run(all_ports, stacks):
    found = mismatches(all_ports, stacks)
    unexplained = [m.message() for m in found if m.key not in KNOWN_UNEXPLAINED]
    assert not unexplained, "\n".join(unexplained)
    # A known gap that closed must leave the list, so it cannot hide a new one.
    assert {m.key for m in found} == KNOWN_UNEXPLAINED


def test_every_component_a_port_stands_for_is_deployed_somewhere(all_ports, stacks):
    for component in sorted({p.decl["component"] for p in all_ports if "component" in p.decl}):
        assert deployed_releases.deployed(component, stacks), f"nothing deploys {component}: say not_deployed"


def _next_patch(release: str) -> str:
    major, minor, patch = _numbers(release)
    return f"v{major}.{minor}.{patch + 1}"


@pytest.fixture
def aibrix_default(monkeypatch):
    """Platform.aibrix_version's default moved to the next patch release, as a bump of the pin moves it."""
    pinned = Platform().aibrix_version
    monkeypatch.setattr(Platform.model_fields["aibrix_version"], "default", _next_patch(pinned))
    Platform.model_rebuild(force=True)
    yield pinned, Platform().aibrix_version
    monkeypatch.undo()
    Platform.model_rebuild(force=True)
    assert Platform().aibrix_version == pinned


def test_a_moved_aibrix_default_names_every_aibrix_port(all_ports, aibrix_default):
    pinned, moved = aibrix_default
    assert moved != pinned
    found = [m for m in mismatches(all_ports, deployed_releases.deployments()) if m.key not in KNOWN_UNEXPLAINED]
    assert {(m.port.decl["component"], m.deployed) for m in found} == {("aibrix", moved)}
    assert {m.port.module for m in found} == {"tests/upstream_aibrix.py", "tests/upstream_kuberay.py",
                                              "tests/upstream_envoy.py", "../shared/crds/SOURCES.md (aibrix/)"}
    # Every stack and variant is built for it, and each message says what to re-read.
    assert {m.where.split(":")[0] for m in found} == set(deployed_releases.stack_files())
    aibrix = next(m for m in found if m.port.module == "tests/upstream_aibrix.py").message()
    assert f"read at {pinned}" in aibrix and f"is {moved}" in aibrix and "pkg/plugins/gateway/gateway.go" in aibrix


def test_a_cli_past_the_compared_range_names_the_engine_ports(all_ports, stacks, monkeypatch):
    real, newer = deployed_releases.go_required, _next_patch(update_rules.PULUMI_ENGINE["covers"]["to"])
    monkeypatch.setattr(deployed_releases, "go_required",
                        lambda wrapper, module: newer if wrapper == "pulumi" else real(wrapper, module))
    found = {m.port.module for m in mismatches(all_ports, stacks) if m.key not in KNOWN_UNEXPLAINED}
    assert found == {"render/update_rules.py", "tests/upstream_day2.py", "render/stackfile.py", "stacks/loader.py",
                     "render/changes.py", "stacks/transitions.py", "components/retention.py"}


def test_the_engine_packages_the_ports_run_are_installed(stacks):
    # RUN ports execute the pinned wheels from .venv-engines: a deployed engine's pin must be installed.
    for component, package in (("tilelang", "tilelang"), ("apache-tvm-ffi", "apache-tvm-ffi"), ("sglang", "sglang")):
        installed = deployed_releases.pip_pins("requirements-engines.txt", package)
        for where, release in deployed_releases.deployed(component, stacks).items():
            assert release in installed, f"{where} is {package} {release}: add {package}=={release} to requirements-engines.txt"


def test_the_vllm_parsers_the_tests_run_are_the_deployed_releases(stacks):
    # tests/vllm_cli.py runs each release's own parser from .venv-vllm/<release>, built from
    # requirements-vllm-<release>.txt: one file per release of tests/upstream_vllm.py, pinning that vllm and
    # the torch its wheel requires.
    import upstream_vllm
    files = {p.name[len("requirements-vllm-"):-len(".txt")] for p in PROJECT_DIR.glob("requirements-vllm-*.txt")}
    assert files == set(upstream_vllm.RELEASES)
    for release in files:
        name = f"requirements-vllm-{release}.txt"
        assert deployed_releases.pip_pin(name, "vllm") == release
        assert deployed_releases.pip_pin(name, "torch") == upstream_vllm.TORCH[release]
    for where, release in deployed_releases.deployed("vllm", stacks).items():
        assert release in files, f"{where} is vLLM {release}: add requirements-vllm-{release}.txt"


def test_the_model_sync_image_names_no_release(stacks):
    # tests/upstream_aws_cli.py V2_TAG is compared with nothing while images.modelSync has no tag; one with a
    # tag must be compared (declare the component there and here).
    for where, cfg in stacks.items():
        upstream = cfg.images.model_sync.upstream
        assert ":" not in upstream.rpartition("/")[2], f"{where}: images.modelSync {upstream} names a release"


def _mirror(repo: str) -> Path | None:
    path = MIRRORS / repo.replace("/", "+") / "repo"
    return path if path.is_dir() else None


@pytest.mark.parametrize("repo", ["vllm-project/aibrix", "sgl-project/rbg", "kubernetes-sigs/lws", "pulumi/pulumi",
                                  "pulumi/pulumi-kubernetes"])
def test_declared_files_exist_at_the_release_in_the_mirror(repo):
    # The mirrors are this workplace's (/work/.mirror), not the project's: elsewhere this is skipped.
    mirror = _mirror(repo)
    if mirror is None:
        pytest.skip(f"no mirror of {repo}")
    checked = 0
    for port in ports():
        if port.decl["repo"] != repo:
            continue
        for release in filter(None, port.releases):
            listed = subprocess.run(["git", "-C", str(mirror), "ls-tree", "-r", "--name-only", release],
                                    capture_output=True, text=True, check=True).stdout.splitlines()
            for f in port.decl["files"]:
                assert any(p == f or (f.endswith("/") and p.startswith(f)) for p in listed), \
                    f"{port.module}: {f} is not in {repo} at {release}"
                checked += 1
    assert checked
