"""What apivalidation loads, and that loading less gives the same answers: the CRD files are chosen by
the kind their head names (apivalidation/cel_rules.py), built-in kinds are told apart without parsing
their schemas (ranges.py), and the CEL extension is loaded without the package's command-line tool."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import PROJECT_DIR, shared_dir

import apivalidation
from apivalidation import cel_rules, ranges


def crd(group: str, kind: str, plural: str, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata:
          name: {plural}.{group}
        spec:
          group: {group}
          names:
            categories:
            - test
            kind: {kind}
            plural: {plural}
          scope: Namespaced
          versions:
          - name: v1
            served: true
            schema:
              openAPIV3Schema:
                type: object
                description: "{extra}"
        """)


def test_each_kind_alone_loads_what_the_whole_directory_holds_for_it():
    """The index for one kind equals the full parse's entries of that kind, for every kind of
    ../shared/crds: the file heads name every CRD's kind."""
    crds = shared_dir("crds")
    full = apivalidation.crd_index(str(crds))  # the whole directory, cached for the session
    kinds = {kind for _, kind in full}
    assert len(kinds) > 30
    for kind in sorted(kinds):
        alone = apivalidation.crd_index(str(crds), frozenset({kind}))
        assert {k: v for k, v in alone.items() if k[1] == kind} == {k: v for k, v in full.items() if k[1] == kind}, kind
    assert all(kind is not None for _, kind in cel_rules._files(crds))


def test_only_the_files_of_the_kinds_asked_for_are_parsed(tmp_path):
    (tmp_path / "a.yaml").write_text(crd("a.example.com", "Alpha", "alphas"))
    # Not YAML at all: parsing it would raise, so asking for Alpha must leave it alone.
    (tmp_path / "b.yaml").write_text(crd("b.example.com", "Beta", "betas") + "\n: : [unclosed\n")
    assert set(cel_rules.load_crds(tmp_path, frozenset({"Alpha"}))) == {("a.example.com/v1", "Alpha")}


def test_a_kind_no_head_names_is_found_in_the_whole_text(tmp_path):
    """A file holding several CRDs names only the first in its head; the second is found by its text,
    as before the heads were indexed."""
    (tmp_path / "two.yaml").write_text(crd("a.example.com", "Alpha", "alphas") + "---\n"
                                       + crd("b.example.com", "Beta", "betas"))
    (tmp_path / "other.yaml").write_text(crd("c.example.com", "Gamma", "gammas"))
    index = cel_rules.load_crds(tmp_path, frozenset({"Beta"}))
    assert ("b.example.com/v1", "Beta") in index and ("c.example.com/v1", "Gamma") not in index


def test_builtin_kinds_are_told_apart_by_their_schema_file():
    assert ranges.is_builtin({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert ranges.is_builtin({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy"})
    assert not ranges.is_builtin({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute"})
    assert not ranges.is_builtin({"apiVersion": "apps/v1", "kind": "StormService"})
    assert ranges._builtin_validator("apps/v1", "StormService") is None


def test_the_cel_extension_loads_alone_and_the_package_reuses_it():
    code = textwrap.dedent("""\
        import json, sys
        from apivalidation import cel_rules
        alone = sorted(m for m in ("typer", "rich", "prompt_toolkit", "cel") if m in sys.modules)
        value = cel_rules.cel.compile("size(self) > 1").execute(cel_rules.cel.Context(variables={"self": "ab"}))
        import cel
        print(json.dumps({"loaded": alone, "value": value, "same": cel.compile is cel_rules.cel.compile}))
        """)
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"loaded": [], "value": True, "same": True}


def test_kinds_from_go_modules_are_served_from_their_module():
    """EnvoyPatchPolicy: ../shared/crds lacks it; the index reads it from Envoy Gateway v1.2.8's module
    (make downloads it), with the same loader, and the render names the command when it is missing."""
    from apivalidation import module_crds
    crds = shared_dir("crds")
    assert not [k for k in cel_rules.load_crds(crds, frozenset(module_crds.MODULE_CRDS)) if k[1] in module_crds.MODULE_CRDS]
    index = apivalidation.crd_index(str(crds), frozenset({"EnvoyPatchPolicy"}))
    schema = index[("gateway.envoyproxy.io/v1alpha1", "EnvoyPatchPolicy")]
    assert schema["properties"]["spec"]["properties"]["priority"]["format"] == "int32"


def test_the_module_crd_version_is_the_envoy_gateway_aibrix_installs():
    from apivalidation import module_crds
    from components.platform import AIBRIX_BUNDLED
    source = (shared_dir("crds") / "SOURCES.md").read_text()
    module, version, _ = module_crds.MODULE_CRDS["EnvoyPatchPolicy"]
    assert (module, version) == ("github.com/envoyproxy/gateway", AIBRIX_BUNDLED["envoyGateway"])
    assert f"| `envoy-gateway/` | envoyproxy/gateway | {version} |" in source


def test_a_missing_module_crd_is_refused_with_the_download_command(monkeypatch, tmp_path):
    from apivalidation import module_crds
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    obj = {"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "EnvoyPatchPolicy",
           "metadata": {"name": "p", "namespace": "aibrix-system"}, "spec": {}}
    index = apivalidation.crd_index.__wrapped__(str(shared_dir("crds")), frozenset({"EnvoyPatchPolicy"}))
    [problem] = apivalidation.validate([obj], index)
    assert problem.rule.endswith("run `go mod download github.com/envoyproxy/gateway@v1.2.8`"), problem.rule
    assert module_crds.crd_dir("EnvoyPatchPolicy").is_relative_to(tmp_path)

