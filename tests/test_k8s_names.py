"""The name and label rules of policy/k8s_names.py against k8s.io/apimachinery v0.37.2's own test
cases (pkg/api/validate/content/dns_test.go TestIsDNS1123Label, TestIsDNS1123Subdomain; kube_test.go
TestIsLabelKey, TestIsLabelValue; pkg/util/validation/validation_test.go TestIsDNS1035Label), and
the two wordings of them (config_model/k8s.py, apivalidation/apiserver.py) agreeing on what is valid."""

from __future__ import annotations

import itertools
import re

import pytest

from apivalidation import apiserver
from config_model import k8s
from policy import k8s_names as names

DNS1123_LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
                      "a" * 63]
DNS1123_LABEL_BAD = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b",
                     "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1",
                     "1 2", "a" * 64]
DNS1123_SUBDOMAIN_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
                          "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1",
                          "a-1.1", "a--1--2--b.1", "0.a", "01.a", "012.a", "1a.a", "1-a.a", "0.1", "01.1", "012.1",
                          "1a.1", "1-a.1", "1--a--b--2.1", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5",
                          "11.22.33.44.55", "a" * 253]
DNS1123_SUBDOMAIN_BAD = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b",
                         "1_", "_1", "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "1 ",
                         " 1", "1 2", "A.a", "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A",
                         "01.A", "012.A", "1A.a", "1a.A", "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
                         "a@b", "a,b", "a_b", "a;b", "a:b", "a%b", "a?b", "a$b", "a" * 254]
DNS1035_LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_LABEL_BAD = ["0", "01", "012", "1a", "1-a", "1--a--b--2"] + DNS1123_LABEL_BAD
LABEL_KEY_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
                  "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple",
                  "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123",
                  "example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63, "a" * 253 + "/" + "b" * 63]
LABEL_KEY_BAD = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash", "Example.com/abc",
                 "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc"]
LABEL_VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
LABEL_VALUE_BAD = ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts-with-dash",
                   "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64]

CASES = [(names.dns1123_label, DNS1123_LABEL_GOOD, DNS1123_LABEL_BAD),
         (names.dns1123_subdomain, DNS1123_SUBDOMAIN_GOOD, DNS1123_SUBDOMAIN_BAD),
         (names.dns1035_label, DNS1035_LABEL_GOOD, DNS1035_LABEL_BAD),
         (names.label_key, LABEL_KEY_GOOD, LABEL_KEY_BAD),
         (names.label_value, LABEL_VALUE_GOOD, LABEL_VALUE_BAD)]


@pytest.mark.parametrize("rule, good, bad", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_upstream_cases(rule, good, bad):
    assert [v for v in good if rule(v)] == []
    assert [v for v in bad if not rule(v)] == []


def test_findings_in_upstream_order():
    """The order IsDNS1123Label and IsLabelKey append their messages in."""
    assert names.dns1123_label("a.b") == [(names.DOTS, None)]
    assert names.dns1123_label("a." * 40) == [(names.TOO_LONG, 63), (names.FORMAT, None)]
    assert names.label_key("/") == [(names.PREFIX_EMPTY, None), (names.NAME_EMPTY, None), (names.NAME_FORMAT, None)]
    assert names.label_key("A/" + "b" * 64) == [(names.PREFIX_FORMAT, None), (names.NAME_TOO_LONG, 63)]
    assert names.label_key("a/b/c") == [(names.KEY_PARTS, None)]


def test_lengths_are_go_bytes_unless_the_caller_counts_characters():
    assert (names.TOO_LONG, 63) in names.label_value("é" * 32)  # 64 bytes
    assert (names.TOO_LONG, 63) not in names.label_value("é" * 32, size=len)


def samples() -> list[str]:
    alphabet = ["a", "Z", "0", "-", ".", "_", "/", " ", "é"]
    short = ["".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)]
    return short + [c * n for c in ("a", "a.", "a/", "-") for n in range(60, 70)] + ["a" * 253 + "/" + "b" * 63]


def test_the_pydantic_patterns_are_the_same_rules():
    for value in samples():
        assert bool(re.fullmatch(names.DNS1123_LABEL_PATTERN, value)) == (names.dns1123_label(value) == []), value
        assert bool(re.fullmatch(names.LABEL_VALUE_PATTERN, value)) == (
            value != "" and names.label_value(value) == []), value


@pytest.mark.parametrize("rule", ["dns1123_label", "dns1123_subdomain", "dns1035_label", "label_key", "label_value"])
def test_the_stack_config_and_the_api_server_check_refuse_the_same_values(rule):
    for value in samples():
        assert (getattr(k8s, rule)(value) == []) == (getattr(apiserver, rule)(value) == []), value
