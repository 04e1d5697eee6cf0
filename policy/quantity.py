"""Kubernetes resource quantities ("500m", "1.5Gi", "1e9"), read exactly as the API server reads them.

The one parser of the project: the policy pack, the API-server validation (apivalidation), the render and
the tests all ask this module. Standard library only (the pack's publish boundary).

A port of k8s.io/apimachinery v0.37.2 (the version e2e/tools/kubernetes builds kube-apiserver with),
pkg/api/resource/quantity.go (parseQuantityString, ParseQuantity, Quantity.UnmarshalJSON, ScaledValue)
and suffix.go (the suffix table and suffixHandler.interpret). tests/test_quantity.py fails when the two
wrappers pin different versions; e2e/test_quantity.py feeds thousands of strings to the real package
(e2e/tools/quantity) and to this module and requires the same value or the same refusal, message included.

What the grammar comment of quantity.go does not say, and the code does (so this module does too):
- the numeric part may have no digits at all: "-", ".", "Gi", "k" and "e-9" are 0, while "Ei", "Pi" and
  "e-10" are refused ("unable to parse numeric part"): the digit-less string only fails on the slow path
  (more than 18 digits, below a nanounit, or a binary suffix with a fraction or too large a mantissa);
- the exponent of "e<n>" is read as an int64 and then cut to int32: "1e4294967296" is 1;
- values finer than 1n are rounded away from zero to the next nanounit ("1.5n" is 2n, "-1e-20" is -1n);
  binary-suffixed values are capped at 2^63-1 in magnitude ("9Ei" is 2^63-1), decimal ones are not;
- ParseQuantity refuses surrounding whitespace, but a manifest field goes through UnmarshalJSON, which
  trims it first (parse_field: " 1Gi" is accepted there).
"""

from __future__ import annotations

import decimal
import json
import math
import re
from decimal import Decimal
from fractions import Fraction

APIMACHINERY = "v0.37.2"

# quantity.go: splitREString and the three errors (their text is what the API server answers).
ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
# suffix.go newSuffixer: suffix -> (base, exponent).
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT64_MAX = 2**63 - 1
_MAX_INT64_FACTORS = 18  # math.go maxInt64Factors
_NANO = -9  # amount.go Nano
# Exact arithmetic: the largest precision and exponent range the decimal module allows.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
# Go's unicode.IsSpace that strings.TrimSpace removes and that encoding/json writes as itself (it writes
# \t \n \v \f \r and U+2028/U+2029 as escapes, which no quantity survives).
_RAW_JSON_SPACE = " \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_INT64_TEXT = re.compile(r"[+-]?[0-9]+")


class QuantityError(ValueError):
    """ParseQuantity's refusal; str() is the API server's message."""


def _wrap32(n: int) -> int:
    """Go's int32(n) conversion: two's complement truncation."""
    return (n + 2**31) % 2**32 - 2**31


def _scan(s: str) -> tuple[bool, str, str, str, str]:
    """quantity.go parseQuantityString: (positive, value, num, denom, suffix); raises on ErrFormatWrong.
    `value` is the sign and number as written; `num` has its leading zeros stripped ("0" if none left)."""
    positive, pos, end = True, 0, len(s)
    if s[:1] in ("-", "+"):
        positive, pos = s[0] != "-", 1
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, s, s[start:], "", ""
    num = s[start:pos] or "0"
    denom = ""
    if s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        denom = s[start:pos]
        if pos >= end:
            return positive, s, num, denom, ""
    value, suffix_start = s[:pos], pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in ("-", "+"):
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT)
    return positive, value, num, denom, s[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """suffix.go interpret: (base, exponent, format); raises ErrSuffix."""
    if suffix in DECIMAL:
        return 10, DECIMAL[suffix], DECIMAL_SI
    if suffix in BINARY:
        return 2, BINARY[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _INT64_TEXT.fullmatch(suffix[1:]):
        n = int(suffix[1:])
        if -(2**63) <= n <= _INT64_MAX:  # strconv.ParseInt(_, 10, 64)
            return 10, _wrap32(n), DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def _fast_path(num: str, denom: str, exponent: int, fmt: str) -> bool:
    """Whether ParseQuantity takes its int64 path, which never reads `value` (so never fails on it)."""
    if fmt == BINARY_SI:
        if denom:
            return False
        # precision = 15 - len(num) - int32(float32(exponent)*3/10) - 1; exponent*3/10 is exact here.
        if 15 - len(num) - exponent * 3 // 10 - 1 < 0:
            return False
        return int(num) << exponent <= _INT64_MAX  # int64Multiply
    return (_MAX_INT64_FACTORS - len(num) - len(denom) >= 0
            and _wrap32(exponent - len(denom)) >= _NANO)


def parse(text: str) -> Decimal:
    """ParseQuantity(text) as an exact Decimal; raises QuantityError with the server's message."""
    if not isinstance(text, str):
        raise TypeError(f"a quantity string, not {type(text).__name__}")
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Decimal(0)
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(suffix)
    digits = num + denom
    if _fast_path(num, denom, exponent, fmt):
        # int64Amount{value: num+denom (times 2^exponent), scale: exponent - len(denom)} in int32.
        if fmt == BINARY_SI:
            amount = Decimal(int(digits) << exponent)
        else:
            amount = _EXACT.scaleb(Decimal(int(digits)), _wrap32(exponent - len(denom)))
        return amount if positive or not amount else amount.copy_negate()
    if not any(c in _DIGITS for c in value):  # inf.Dec SetString: "no digits read"
        raise QuantityError(ERR_NUMERIC)
    # inf.Dec of `value` (scale len(denom)), then scale += -exponent (base 10) or unscaled *= 2^exponent.
    unscaled = int(digits)
    if base == 10:
        amount = _EXACT.scaleb(Decimal(unscaled), -_wrap32(len(denom) + _wrap32(-exponent)))
    else:
        amount = _EXACT.scaleb(Decimal(unscaled << exponent), -len(denom))
    if amount and amount.as_tuple().exponent < _NANO:
        # Round(amount, Nano, RoundUp) on the magnitude: away from zero to the next nanounit.
        amount = amount.quantize(Decimal("1e-9"), rounding=decimal.ROUND_UP, context=_EXACT)
    if fmt == BINARY_SI and amount > _INT64_MAX:
        amount = Decimal(_INT64_MAX)
    return amount if positive or not amount else amount.copy_negate()


def parse_field(value: object) -> Decimal:
    """A Quantity field of a manifest as the API server decodes it: Quantity.UnmarshalJSON of what
    encoding/json.Marshal writes for `value` (server-side apply, which pulumi-kubernetes sends, converts
    the unstructured patch so: sigs.k8s.io/structured-merge-diff v6.4.2 value/reflectcache.go
    FromUnstructured). A string with surrounding spaces trimmed, a number by its JSON text, null as 0.
    Raises QuantityError."""
    if value is None:
        return Decimal(0)
    if isinstance(value, str):
        return parse(value.strip(_RAW_JSON_SPACE))
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        raise QuantityError(ERR_FORMAT) from None
    return parse(text.strip(_RAW_JSON_SPACE))


def try_parse_field(value: object) -> Decimal | None:
    """parse_field, or None where the server refuses the value."""
    try:
        return parse_field(value)
    except QuantityError:
        return None


def scaled_value(q: Decimal, scale: int) -> int:
    """Quantity.ScaledValue: ceil(q / 10^scale), for q >= 0 (Go's rounding of negative quantities differs
    between its int64 and inf.Dec forms; nothing here needs it)."""
    if q < 0:
        raise ValueError(f"scaled_value of a negative quantity {q}")
    return math.ceil(Fraction(q) / Fraction(10) ** scale)


def value(q: Decimal) -> int:
    """Quantity.Value: the whole units, rounded up (bytes of a memory quantity)."""
    return scaled_value(q, 0)


def milli_value(q: Decimal) -> int:
    """Quantity.MilliValue: thousandths, rounded up (millicores of a cpu quantity)."""
    return scaled_value(q, -3)


def gib(q: Decimal) -> Fraction:
    """q / 2^30 exactly: GiB of a memory quantity."""
    return Fraction(q) / 2**30
