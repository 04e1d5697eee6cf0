"""policy/quantity.py against Kubernetes' own parser (issue 19): the same corpus goes to .e2e/bin/quantity
(k8s.io/apimachinery's resource package at the version kube-apiserver is built with: e2e/tools/quantity,
`make e2e-tools`) and to the port, and every answer must be the same: the exact value where the parser
accepts, the same message where it refuses; for a manifest field (what the server decodes) too, and
Value/MilliValue for the non-negative values below 10^15.

No cluster: only the binary. The corpus: the strings of the issue, the cross product of signs, number
forms and suffixes (every binary, decimal and exponent suffix, and near-misses), whitespace, int32
exponent wrap-around, JSON numbers, null and booleans, and 3000 strings from a seeded generator.
Exponents stay within a few hundred (and the wrap-arounds that land on the int64 path): ParseQuantity
rescales the digits to nanounits on its slow path, which for e-2147483648 does not finish.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from decimal import Decimal

import pytest
from harness import BIN, ROOT

sys.path.insert(0, str(ROOT))
from policy import quantity as Q  # noqa: E402

TOOL = BIN / "quantity"
ISSUE = ["200G", "100M", "2048Ki", "1e9", ".5Gi", "1Pi"]
SIGNS = ["", "+", "-"]
NUMBERS = ["", ".", "0", "00", "0.", ".0", "1", "007", "12", "1.", ".5", "1.5", "0.001", "0.0000000001", "10.50",
           "123456789", "999999999999999999", "9999999999999999999", "1234567890123456789012345", "3.14159265358979323846"]
SUFFIXES = ([*Q.BINARY, *Q.DECIMAL] + ["e0", "e3", "E3", "e+3", "e-3", "E-3", "e-9", "e-10", "e18", "e19", "e-20", "e308",
            "e-400", "e007", "e-0"]
            + ["e", "E+", "e-", "e+-3", "ee3", "Ee3", "eE", "i", "Ki5", "KI", "ki", "kb", "gi", "mi", "MI", "Mm", "mm",
               "m3", "u5", "n-1", "Gi ", " Gi", "G i", "Gib", "K", "3", "+3", "-3", "..", "e3.5", "e3e3", "µ", "%"])
WHITESPACE = [" ", "  ", "\t", "\n", "\r", "\v", "\f", "\x1c", "\x85", "\xa0", "\u2000", "\u2028", "\u3000"]
EDGES = ["", "0", "-0", "+0", "-", "+", "--1", "+-1", "1-", "1+", "1.5.5", "1..5", "1,5", "0x10", "1_000", "١",
         "1e4294967296", "1e4294967299", "5e-4294967296", "1e2147483647", "1e9223372036854775807",
         "1e9223372036854775808", "1e-9223372036854775808", "9Ei", "-9Ei", "8Ei", "7.99999999999Ei", "99Ti", "100Ti",
         "9223372036854775807", "9223372036854775808", "-9223372036854775809", "0.5Ki", "0.0001Ki", "1.5n", "-1.5n",
         "1e-20", "-1e-20", "0e-20", "1Gi", "1gi", "1GI", "1Gb", "1G", "500m", "0.5", "1.5Gi", "Gi", "Ei", "Pi", "e-9",
         "e-10", "+.Gi", "-Ei", "1.G", "1.Gi", "１Gi"]
JSON_NUMBERS = [0, 1, -1, 7, 2**40, 2**63, 10**30, 0.5, 1.5, -2.25, 1e-7, 1e20, 1e21, 1e300, 0.1, 3.14159, -0.0]


def generated(rng: random.Random, n: int) -> list[str]:
    """Half well-formed (random digits, fraction, sign and any suffix), half random text over the
    grammar's alphabet with a few strangers."""
    out = []
    alphabet = "0123456789.+-eEinumkKMGTP" * 3 + " xIgÄ_,"
    for _ in range(n // 2):
        whole = "".join(rng.choices("0123456789", k=rng.randint(0, 22)))
        frac = "." + "".join(rng.choices("0123456789", k=rng.randint(0, 14))) if rng.random() < 0.5 else ""
        suffix = rng.choice([*Q.BINARY, *Q.DECIMAL, f"e{rng.randint(-30, 30)}", f"E{rng.randint(-400, 400):+d}"])
        out.append(rng.choice(SIGNS) + whole + frac + suffix)
    out += ["".join(rng.choices(alphabet, k=rng.randint(1, 12))) for _ in range(n - n // 2)]
    return out


def corpus() -> tuple[list[str], list[object]]:
    """(strings, other JSON values)."""
    strings = ISSUE + EDGES + [s + n + x for s in SIGNS for n in NUMBERS for x in SUFFIXES]
    strings += [w + q for w in WHITESPACE for q in ("1Gi", "500m", "-1")] + [q + w for w in WHITESPACE for q in ("1Gi", "1")]
    strings += generated(random.Random(19), 3000)
    return list(dict.fromkeys(strings)), [*JSON_NUMBERS, None, True, False]


@pytest.fixture(scope="module")
def tool_answers() -> list[dict]:
    if not os.access(TOOL, os.X_OK):
        pytest.fail("missing in .e2e/bin: quantity; build it with `make e2e-tools` (e2e/build-tools.sh quantity)",
                    pytrace=False)
    strings, others = corpus()
    lines = [json.dumps(s, ensure_ascii=False) for s in strings] + [json.dumps(v) for v in others]
    assert all("\n" not in line for line in lines)
    run = subprocess.run([TOOL], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(out) == len(lines)
    return [{"input": v, **a} for v, a in zip(strings + others, out)]


def go(answer: dict) -> tuple[str, object]:
    if "error" in answer:
        return "refused", answer["error"]
    return "value", Decimal(int(answer["unscaled"])).scaleb(-answer["scale"], Q._EXACT)


def ours(fn, value: object) -> tuple[str, object]:
    try:
        return "value", fn(value)
    except Q.QuantityError as e:
        return "refused", str(e)


def test_parse_quantity_is_kubernetes(tool_answers):
    strings = [a for a in tool_answers if "parse" in a]
    differ = [(a["input"], go(a["parse"]), ours(Q.parse, a["input"])) for a in strings
              if go(a["parse"]) != ours(Q.parse, a["input"])]
    assert not differ, "\n".join(f"{s!r}: kubernetes {k}, policy.quantity {p}" for s, k, p in differ[:40])
    # The corpus exercises every outcome, so agreement is not agreement on one kind of answer.
    outcome = Counter(go(a["parse"])[1] if "error" in a["parse"] else "value" for a in strings)
    assert outcome["value"] > 1000 and all(outcome[e] > 20 for e in (Q.ERR_FORMAT, Q.ERR_NUMERIC, Q.ERR_SUFFIX)), outcome
    for s in ISSUE:
        assert go(next(a["parse"] for a in strings if a["input"] == s))[1] > 0, s


def test_manifest_fields_decode_as_the_server_does(tool_answers):
    """Quantity.UnmarshalJSON of what encoding/json writes: strings trimmed, numbers, null, booleans."""
    differ = [(a["input"], go(a["json"]), ours(Q.parse_field, a["input"])) for a in tool_answers
              if go(a["json"]) != ours(Q.parse_field, a["input"])]
    assert not differ, "\n".join(f"{s!r}: kubernetes {k}, policy.quantity {p}" for s, k, p in differ[:40])
    trimmed = [a["input"] for a in tool_answers if "parse" in a and "error" in a["parse"] and "error" not in a["json"]]
    assert " 1Gi" in trimmed and "\xa01Gi" in trimmed and "\t1Gi" not in trimmed, trimmed[:20]


def test_value_and_milli_value_are_kubernetes(tool_answers):
    """Value (bytes of a memory quantity) and MilliValue (millicores): ceilings, for values >= 0."""
    checked = 0
    for a in tool_answers:
        answer = a["json"]
        if "value" not in answer or go(answer)[1] < 0:
            continue
        q = go(answer)[1]
        assert (Q.value(q), Q.milli_value(q)) == (answer["value"], answer["milli"]), (a["input"], answer)
        checked += 1
    assert checked > 500
