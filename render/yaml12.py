"""YAML as the Pulumi CLI reads stack files: go-yaml v3.0.1 (pulumi/pulumi sdk/go.mod at v3.259.0)
decoding into Go `any`.

PyYAML only tokenizes and composes here; every scalar is resolved by `resolve()`, a port of
go-yaml v3.0.1 resolve.go, and the node tree is decoded the way decode.go does it: duplicate keys
refused with their lines (decoder.mapping, uniqueKeys), merge keys, an anchor that contains itself
refused, and alias expansion limited by the same ratio (decoder.unmarshal, allowedAliasRatio), so a
small file of nested aliases is refused after a few thousand nodes instead of filling memory.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml
from yaml import composer, nodes, parser, reader, resolver, scanner


@dataclass(frozen=True)
class YamlProblem:
    line: int | None
    path: tuple[Any, ...]
    message: str


class YamlErrors(Exception):
    def __init__(self, problems: list[YamlProblem]):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class GoKey(str):
    """A mapping key that was not text in the file (Go `%v` of it, as config/object.go unmarshalObject
    turns map[any]any keys into strings)."""


class _Fatal(Exception):
    def __init__(self, line: int | None, path: tuple[Any, ...], message: str):
        super().__init__(message)
        self.problem = YamlProblem(line, path, message)


@dataclass(frozen=True)
class _Alias:
    target: nodes.Node
    anchor: str
    start_mark: Any


class _Composer(reader.Reader, scanner.Scanner, parser.Parser, composer.Composer, resolver.BaseResolver):
    """Composes nodes without resolving any implicit tag (the empty tag means: resolve later, as
    go-yaml does) and keeps aliases visible, so their expansion can be counted."""

    def __init__(self, stream: str):
        reader.Reader.__init__(self, stream)
        scanner.Scanner.__init__(self)
        parser.Parser.__init__(self)
        composer.Composer.__init__(self)
        resolver.BaseResolver.__init__(self)

    def resolve(self, kind, value, implicit):
        return ""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()
            if event.anchor not in self.anchors:
                raise composer.ComposerError(None, None, f"unknown anchor {event.anchor!r} referenced", event.start_mark)
            return _Alias(self.anchors[event.anchor], event.anchor, event.start_mark)
        # YAML lets a later anchor of the same name replace an earlier one (go-yaml does; PyYAML
        # refuses), so there is no duplicate-anchor check here.
        anchor = self.peek_event().anchor
        if self.check_event(yaml.ScalarEvent):
            return self.compose_scalar_node(anchor)
        if self.check_event(yaml.SequenceStartEvent):
            return self.compose_sequence_node(anchor)
        return self.compose_mapping_node(anchor)


# resolve.go: the first character decides what a plain scalar may be.
_MAP = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
        "": None, "~": None, "null": None, "Null": None, "NULL": None,
        ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan,
        ".inf": math.inf, ".Inf": math.inf, ".INF": math.inf, "+.inf": math.inf, "+.Inf": math.inf, "+.INF": math.inf,
        "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf}
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_UINT64_MAX = 2 ** 64 - 1
_PREFIXED = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
_DIGITS = {16: "0-9a-fA-F", 8: "0-7", 2: "01", 10: "0-9"}
# resolve.go allowedTimestampFormats, as Go's time.Parse reads them.
_TIMESTAMP = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:([Tt])|( ))(\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,](\d+))?"
                        r"(Z|[+-]\d{2}:\d{2})?)?")


def _go_parse_int(text: str, base: int, signed: bool) -> int | None:
    """strconv.ParseInt / ParseUint (64 bits); base 0 reads 0x, 0o, 0b and a leading-0 octal."""
    sign, body = 1, text
    if signed and body[:1] in "+-" and body:
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if base == 0:
        base = _PREFIXED.get(body[:2], 0)
        if base:
            body = body[2:]
        elif body[:1] == "0" and len(body) > 1:
            base, body = 8, body[1:]
        else:
            base = 10
    if not body or not re.fullmatch(f"[{_DIGITS[base]}]+", body):
        return None
    value = sign * int(body, base)
    low, high = _INT64 if signed else (0, _UINT64_MAX)
    return value if low <= value <= high else None


def _go_parse_float(text: str) -> float | None:
    """strconv.ParseFloat for the decimal forms resolve.go hands it; out of range is an error."""
    if not _YAML_FLOAT.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _go_time(text: str) -> str | None:
    """A timestamp as the CLI passes it on: go-yaml decodes it into time.Time, the CLI re-encodes
    the stack document (RFC 3339) and config/object.go unmarshalObject keeps time.Time.String()."""
    m = _TIMESTAMP.fullmatch(text)
    if not m:
        return None
    year, month, day, t_sep, space, hh, mm, ss, frac, zone = m.groups()
    if (t_sep is None) != (zone is None) and (t_sep is not None or zone is not None):
        # The T layouts need a zone; the space layout has none.
        return None
    year, month, day = int(year), int(month), int(day)
    hour, minute, second = int(hh or 0), int(mm or 0), int(ss or 0)
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]
            and hour < 24 and minute < 60 and second < 60):
        return None
    nanos = (frac or "").ljust(9, "0")[:9].rstrip("0")
    offset = 0 if zone in (None, "Z") else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 60 + int(zone[4:6]))
    stamp = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{'.' + nanos if nanos else ''}"
    if offset == 0:
        return f"{stamp} +0000 UTC"
    numeric = f"{'+' if offset > 0 else '-'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
    return f"{stamp} {numeric} {numeric}"


def resolve(text: str, tag: str = "") -> tuple[str, Any]:
    """go-yaml v3.0.1 resolve.go resolve() for a plain scalar: (short tag, value)."""
    hint = "N" if text == "" else ("S" if text[0] in "+-" else "D" if text[0].isdigit() and text[0].isascii()
                                   else "M" if text[0] in "yYnNtTfFoO~" else "." if text[0] == "." else "")
    if not hint or tag == "!!str":
        return "!!str", text
    if text in _MAP:
        value = _MAP[text]
        return ("!!null" if value is None else "!!bool" if isinstance(value, bool) else "!!float"), value
    if hint == ".":
        value = _go_parse_float(text)
        if value is not None:
            return "!!float", value
    elif hint in "DS":
        if tag in ("", "!!timestamp"):
            stamp = _go_time(text)
            if stamp is not None:
                return "!!timestamp", stamp
        plain = text.replace("_", "")
        for signed in (True, False):
            value = _go_parse_int(plain, 0, signed)
            if value is not None:
                return "!!int", value
        value = _go_parse_float(plain)
        if value is not None:
            return "!!float", value
        for prefix, base in (("0b", 2), ("0o", 8)):
            if plain.startswith(prefix):
                value = _go_parse_int(plain[2:], base, True)
                if value is not None:
                    return "!!int", value
    return "!!str", text


def _short_tag(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix):] if tag.startswith(prefix) else tag


def go_key(value: Any) -> str:
    """fmt.Sprintf("%v", key) for a non-text key."""
    if isinstance(value, str):
        return value
    if value is None:
        return GoKey("<nil>")
    if isinstance(value, bool):
        return GoKey("true" if value else "false")
    if isinstance(value, float):
        return GoKey(_go_g(value))
    return GoKey(str(value))


def _go_g(f: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64): %e when the exponent is below -4 or at least 6."""
    if not math.isfinite(f):
        return "NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = Decimal(repr(abs(f))).normalize().as_tuple()
    ds, x = "".join(map(str, digits)), len(digits) + exp - 1
    minus = "-" if f < 0 else ""
    if x < -4 or x >= 6:
        return f"{minus}{ds[0]}{'.' + ds[1:] if len(ds) > 1 else ''}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    return minus + format(Decimal(repr(abs(f))).normalize(), "f")


class _Decoder:
    """decode.go's decoder for `any` targets."""

    LOW, HIGH = 400_000, 4_000_000

    def __init__(self) -> None:
        self.decodes = 0
        self.alias_decodes = 0
        self.alias_depth = 0
        self.expanding: set[int] = set()
        self.problems: list[YamlProblem] = []

    def _ratio(self) -> float:
        if self.decodes <= self.LOW:
            return 0.99
        if self.decodes >= self.HIGH:
            return 0.10
        return 0.99 - 0.89 * (self.decodes - self.LOW) / (self.HIGH - self.LOW)

    def decode(self, node: Any, path: tuple[Any, ...]) -> Any:
        self.decodes += 1
        if self.alias_depth:
            self.alias_decodes += 1
        if self.alias_decodes > 100 and self.decodes > 1000 and self.alias_decodes / self.decodes > self._ratio():
            raise _Fatal(_line(node), path, "the document contains excessive aliasing (the alias expansion limit "
                         "of go-yaml v3, which the Pulumi CLI reads stack files with)")
        if isinstance(node, _Alias):
            if id(node.target) in self.expanding:
                raise _Fatal(_line(node), path, f"anchor {node.anchor!r} value contains itself")
            self.expanding.add(id(node.target))
            self.alias_depth += 1
            try:
                return self.decode(node.target, path)
            finally:
                self.alias_depth -= 1
                self.expanding.discard(id(node.target))
        if isinstance(node, nodes.ScalarNode):
            return self._scalar(node, path)
        if isinstance(node, nodes.SequenceNode):
            return [self.decode(item, path + (i,)) for i, item in enumerate(node.value)]
        return self._mapping(node, path, {}, None)

    def _scalar(self, node: nodes.ScalarNode, path: tuple[Any, ...]) -> Any:
        tag = _short_tag(node.tag)
        if tag in ("", "!"):
            return resolve(node.value)[1] if node.style is None else node.value
        if tag == "!!str":
            return node.value
        if tag == "!!binary":
            try:
                # Go's base64.StdEncoding skips only line breaks.
                text = node.value.replace("\n", "").replace("\r", "")
                return base64.b64decode(text.encode(), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                raise _Fatal(_line(node), path, "!!binary value contains invalid base64 data") from None
        if tag not in ("!!bool", "!!int", "!!float", "!!null", "!!timestamp"):
            return node.value
        rtag, value = resolve(node.value, tag)
        if rtag == tag:
            return value
        if tag == "!!float" and rtag == "!!int":
            return float(value)
        raise _Fatal(_line(node), path, f"is tagged {tag} but its text reads as {rtag} (go-yaml refuses it)")

    def _mapping(self, node: nodes.MappingNode, path: tuple[Any, ...], out: dict, merged: set | None) -> dict:
        pairs = node.value
        duplicated = False
        for i, (key_i, _) in enumerate(pairs):
            for key_j, _ in pairs[i + 1:]:
                if _same_key(key_i, key_j):
                    duplicated = True
                    self.problems.append(YamlProblem(_line(key_j), path + (_key_text(key_j),),
                                                     f"is already defined at line {_line(key_i)}; the Pulumi CLI "
                                                     "refuses duplicate keys (go-yaml v3)"))
        if duplicated:
            return out
        merge_node = None
        for key_node, value_node in pairs:
            if _is_merge(key_node):
                merge_node = value_node
                continue
            key = self.decode(key_node, path)
            if isinstance(key, (dict, list)):
                raise _Fatal(_line(key_node), path, "a mapping key must be a scalar")
            key = go_key(key)
            if merged is not None:
                if key in merged:
                    continue
                merged.add(key)
            elif key in out:
                raise _Fatal(_line(key_node), path + (key,), "is the same key as another one of this mapping once "
                             "read as text (the CLI would keep either at random)")
            out[key] = self.decode(value_node, path + (key,))
        if merge_node is not None:
            self._merge(merge_node, path, out, merged if merged is not None else set(out))
        return out

    def _merge(self, node: Any, path: tuple[Any, ...], out: dict, merged: set) -> None:
        sources = node.value if isinstance(node, nodes.SequenceNode) else [node]
        for source in sources:
            target = source.target if isinstance(source, _Alias) else source
            if not isinstance(target, nodes.MappingNode):
                raise _Fatal(_line(source), path, "map merge requires map or sequence of maps as the value")
            # Counted like decode.go, where merging unmarshals the (aliased) mapping into the parent.
            self.decodes += 1
            if isinstance(source, _Alias):
                self.alias_depth += 1
            try:
                self._mapping(target, path, out, merged)
            finally:
                if isinstance(source, _Alias):
                    self.alias_depth -= 1


def _line(node: Any) -> int | None:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


def _kind(node: Any) -> str:
    return "alias" if isinstance(node, _Alias) else type(node).__name__


def _value_text(node: Any) -> str:
    if isinstance(node, _Alias):
        return node.anchor
    return node.value if isinstance(node, nodes.ScalarNode) else ""


def _same_key(a: Any, b: Any) -> bool:
    """decode.go mapping(): same node kind and same source text, whatever the quoting."""
    return _kind(a) == _kind(b) and _value_text(a) == _value_text(b)


def _key_text(node: Any) -> str:
    return _value_text(node) or "(complex key)"


def _is_merge(node: Any) -> bool:
    return (isinstance(node, nodes.ScalarNode) and node.value == "<<"
            and (node.style is None and _short_tag(node.tag) in ("", "!") or _short_tag(node.tag) == "!!merge"))


def load(data: bytes) -> Any:
    """The first document of `data` as go-yaml v3 decodes it into `any`; YamlErrors lists every
    duplicate key, or the one error that stopped the read."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # loaders.go readFileStripUTF8BOM
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlErrors([YamlProblem(None, (), f"invalid YAML: not UTF-8 text (byte {err.start})")]) from None
    decoder = _Decoder()
    try:
        loader = _Composer(text)
        try:
            node = _first_document(loader)
        finally:
            loader.dispose()
        value = None if node is None else decoder.decode(node, ())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (column {mark.column + 1})" if mark else ""
        raise YamlErrors([YamlProblem(mark.line + 1 if mark else None, (),
                                      f"invalid YAML{where}: {err.problem or err.context}")]) from None
    except yaml.YAMLError as err:
        raise YamlErrors([YamlProblem(None, (), f"invalid YAML: {str(err).splitlines()[0]}")]) from None
    except RecursionError:
        raise YamlErrors([YamlProblem(None, (), "invalid YAML: nested too deeply")]) from None
    except _Fatal as err:
        raise YamlErrors([err.problem]) from None
    if decoder.problems:
        raise YamlErrors(decoder.problems)
    return value


def _first_document(loader: _Composer) -> Any:
    """go-yaml's Unmarshal reads the first document only."""
    loader.get_event()  # StreamStart
    return None if loader.check_event(yaml.StreamEndEvent) else loader.compose_document()
