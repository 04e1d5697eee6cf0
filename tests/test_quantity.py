"""policy/quantity.py, the project's one Kubernetes quantity parser (issue 19), and its callers.

The values below follow k8s.io/apimachinery v0.37.2 pkg/api/resource/quantity.go; e2e/test_quantity.py
holds the module to the real package on thousands of strings (these included)."""

from __future__ import annotations

import ast
import copy
import re
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import k8s_objects, render_stack

from apivalidation import apiserver
from policy import quantity as Q
from policy import rules
from policy.manifests import quantity_gib
from policy.unknowns import UNKNOWN, UnknownTouched

ROOT = Path(__file__).resolve().parent.parent
D = Decimal

# The strings the wrong copy (policy.manifests.quantity_gib before issue 19) read as 0.
ISSUE = {"200G": D(200 * 10**9), "100M": D(100 * 10**6), "2048Ki": D(2048 * 2**10), "1e9": D(10**9),
         ".5Gi": D(2**29), "1Pi": D(2**50)}

ACCEPTED = {
    **ISSUE,
    "0": D(0), "-0": D(0), "+1": D(1), "007": D(7), "1.": D(1), ".5": D("0.5"), "1.5": D("1.5"), "10.50": D("10.5"),
    "500m": D("0.5"), "1m": D("0.001"), "1u": D("1e-6"), "1n": D("1e-9"), "1k": D(1000), "1M": D(10**6),
    "1G": D(10**9), "1T": D(10**12), "1P": D(10**15), "1E": D(10**18),
    "1Ki": D(1024), "1Mi": D(2**20), "1Gi": D(2**30), "1.5Gi": D(3 * 2**29), "1Ti": D(2**40), "1Ei": D(2**60),
    "1e3": D(1000), "1E3": D(1000), "1e+3": D(1000), "1e-3": D("0.001"), "2.5e2": D(250), "1e007": D(10**7),
    "1.Gi": D(2**30), "1.G": D(10**9), "-1Gi": D(-(2**30)),
    # Finer than a nanounit: rounded away from zero to the next one.
    "1.5n": D("2e-9"), "0.0000000001": D("1e-9"), "-1e-20": D("-1e-9"), "0e-20": D(0),
    # Binary suffixes are capped at 2^63-1 in magnitude; decimal ones are not.
    "9Ei": D(2**63 - 1), "-9Ei": D(-(2**63 - 1)), "9E": D(9 * 10**18), "1e30": D(10**30),
    # Digits beyond int64 and 18 places stay exact.
    "123456789012345678901234567890": D(123456789012345678901234567890),
    # The exponent is an int64 cut to int32.
    "1e4294967296": D(1), "1e4294967299": D(1000),
    # A numeric part without digits is 0 on the int64 path, refused on the other (below).
    "Gi": D(0), "Ti": D(0), "k": D(0), "-": D(0), ".": D(0), "+.Gi": D(0), "e-9": D(0),
}

REFUSED = {
    "": Q.ERR_FORMAT, "1.5.5": Q.ERR_FORMAT, " 1Gi": Q.ERR_FORMAT, "1Gi ": Q.ERR_FORMAT, "1gi": Q.ERR_FORMAT,
    "1GI": Q.ERR_FORMAT, "1e": Q.ERR_SUFFIX, "1e+": Q.ERR_SUFFIX, "1ee3": Q.ERR_SUFFIX, "1Ki5": Q.ERR_SUFFIX,
    "1i": Q.ERR_SUFFIX, "1K": Q.ERR_SUFFIX, "1kb": Q.ERR_FORMAT, "1e+-3": Q.ERR_FORMAT, "1e3e3": Q.ERR_FORMAT,
    "--1": Q.ERR_SUFFIX, "1,5": Q.ERR_FORMAT, "0x10": Q.ERR_FORMAT, "1_000": Q.ERR_FORMAT, "lots": Q.ERR_FORMAT,
    "１Gi": Q.ERR_FORMAT, "1e9223372036854775808": Q.ERR_SUFFIX,
    "Ei": Q.ERR_NUMERIC, "Pi": Q.ERR_NUMERIC, "-Ei": Q.ERR_NUMERIC, "e-10": Q.ERR_NUMERIC,
}


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted(text):
    assert Q.parse(text) == ACCEPTED[text]


@pytest.mark.parametrize("text", REFUSED)
def test_refused_with_the_servers_message(text):
    with pytest.raises(Q.QuantityError) as e:
        Q.parse(text)
    assert str(e.value) == REFUSED[text]


def test_parse_takes_text_only():
    with pytest.raises(TypeError):
        Q.parse(1)


@pytest.mark.parametrize("value, expected", [
    (" 1Gi", D(2**30)), ("1Gi  ", D(2**30)), ("\xa01Gi\u3000", D(2**30)), ("\x85 1", D(1)),
    (0, D(0)), (1073741824, D(2**30)), (1.5, D("1.5")), (1e20, D(10**20)), (-2, D(-2)), (None, D(0)),
])
def test_a_manifest_field_is_decoded_as_the_server_does(value, expected):
    """UnmarshalJSON trims what encoding/json writes as itself; a number is its JSON text; null is 0."""
    assert Q.parse_field(value) == expected


@pytest.mark.parametrize("value", ["\t1Gi", "1Gi\n", "1\u2028", "\x1c1", True, False, [1], {"a": 1}, {1, 2}, "1gi"])
def test_a_manifest_field_the_server_refuses(value):
    """encoding/json escapes \\t, \\n and U+2028, so TrimSpace never sees them; booleans and objects
    are their JSON text, which is no quantity."""
    assert Q.try_parse_field(value) is None
    with pytest.raises(Q.QuantityError):
        Q.parse_field(value)


def test_value_milli_value_and_gib_are_exact():
    assert [Q.value(Q.parse(s)) for s in ("1", "1.5", "1m", "0", "1Gi")] == [1, 2, 1, 0, 2**30]
    assert [Q.milli_value(Q.parse(s)) for s in ("1", "500m", "1.5m", "0.1m", "2.5", "1n")] == [1000, 500, 2, 1, 2500, 1]
    assert Q.gib(Q.parse("1536Mi")) == Fraction(3, 2)
    assert Q.gib(Q.parse("200G")) == Fraction(200 * 10**9, 2**30)
    with pytest.raises(ValueError):
        Q.milli_value(Q.parse("-1"))


def test_comparisons_are_by_value():
    assert Q.parse("1Gi") == Q.parse("1024Mi") == Q.parse("1073741824") == Q.parse("1.073741824G")
    assert Q.parse("1G") < Q.parse("1Gi") < Q.parse("1.1G")
    assert Q.parse("999m") < Q.parse("1") < Q.parse("1001m")


@pytest.mark.parametrize("text", ISSUE)
def test_policy_gib_reads_the_issues_strings(text):
    """The copy that read them as 0 now asks policy.quantity (the policies' GiB are floats for messages)."""
    assert quantity_gib(text) == float(ISSUE[text] / 2**30) > 0


def test_policy_gib_of_unknown_and_refused_values():
    with pytest.raises(UnknownTouched):
        quantity_gib(UNKNOWN)
    assert quantity_gib("lots") == quantity_gib(None) == quantity_gib(0) == 0.0


def _shm_violations(size: object) -> list[str]:
    dep = copy.deepcopy(next(o for o in k8s_objects(render_stack("dev")) if o["kind"] == "Deployment"))
    shm = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "shm")
    shm["emptyDir"]["sizeLimit"] = size
    policy = next(p for p in rules.RESOURCE_POLICIES if p.name == "shm-memory")
    return policy.check(f"kubernetes:{dep['apiVersion']}:Deployment", dep)


@pytest.mark.parametrize("size", ["200G", "1Pi", "68719476736", "65536Mi", "1e11", "64Gi"])
def test_the_shm_rule_takes_every_spelling_of_enough(size):
    """The dev engine pod has 8 GPUs: 64Gi of /dev/shm. "200G" (186 GiB) was refused as 0 before."""
    assert _shm_violations(size) == []


@pytest.mark.parametrize("size", ["64G", "65535Mi", ".5Gi", "2048Ki", "lots"])
def test_the_shm_rule_refuses_every_spelling_of_too_little(size):
    assert any("below 64Gi" in v for v in _shm_violations(size))


@pytest.mark.parametrize("value", [*ACCEPTED, *REFUSED, " 1Gi", 1.5, 7, True])
def test_apivalidation_reads_quantities_with_policy_quantity(value):
    assert apiserver.parse_quantity(value) == Q.try_parse_field(value)


def test_apivalidation_keeps_a_missing_quantity_refused():
    assert apiserver.parse_quantity(None) is None


def _go_mod_version(path: Path, module: str, directive: str) -> str:
    m = re.search(rf"^\s*{directive}\s+{re.escape(module)}\s+(?:=>\s+{re.escape(module)}\s+)?(v\S+)", path.read_text(),
                  re.MULTILINE)
    assert m, f"{path}: no {directive} of {module}"
    return m.group(1)


def test_the_port_and_its_reference_are_the_api_servers_apimachinery():
    """policy.quantity is read at the apimachinery kube-apiserver is built with (e2e/tools/kubernetes) and
    e2e/test_quantity.py compares it with that version; bumping one without the others fails here:
    re-read quantity.go and suffix.go at the new version."""
    served = _go_mod_version(ROOT / "e2e/tools/kubernetes/go.mod", "k8s.io/apimachinery", "replace")
    reference = _go_mod_version(ROOT / "e2e/tools/quantity/go.mod", "k8s.io/apimachinery", "require")
    assert Q.APIMACHINERY == served == reference
    assert f"k8s.io/apimachinery {Q.APIMACHINERY}" in Q.__doc__


def test_the_module_is_stdlib_only():
    """policy/quantity.py is imported by the pack, apivalidation, the render and the tests."""
    tree = ast.parse((ROOT / "policy" / "quantity.py").read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names - {"__future__"} <= sys.stdlib_module_names, names
