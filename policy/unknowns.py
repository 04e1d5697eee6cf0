"""Properties as the real policy server hands them over, made safe for the rules.

pulumi_policy 1.21.0 (policy.py `_PolicyAnalyzerServicer.Analyze`/`AnalyzeStack`) wraps every
resource's properties in read-only `_DictProxy`/`_ListProxy` objects (not `dict`/`list`: `+`, `copy`
and JSON encoding fail on them) whose item access raises `UnknownValueError` on a value unknown during
preview; the server turns that exception into an advisory "can't run policy ... during preview", so a
mandatory rule that touched any unknown field would be skipped. `plain()` unwraps the proxies without
touching values and replaces each unknown with UNKNOWN, a poison value: arithmetic on it stays
unknown, while any decision (truth, comparison, str, int, iteration, attribute, hashing) raises
`UnknownTouched`. A rule wraps each independent check in `decide()`, so an unknown field skips
exactly the checks that read it and nothing else; `pulumi up` runs the same rules again on known
values before it changes the resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Iterable, TypeVar

# The sentinels the engine sends for unknown values (pulumi_policy/proxy.py, the same strings as
# sdk/go/common/resource/plugin/rpc.go in pulumi/pulumi).
UNKNOWN_SENTINELS = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
    "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
    "e48ece36-62e2-4504-bad9-02848725956a",  # archive
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
})


class UnknownTouched(Exception):
    """A rule needed a value that is not known yet (preview)."""


def _decide(*_: Any) -> Any:
    raise UnknownTouched()


def _stay_unknown(*_: Any) -> "_Unknown":
    return UNKNOWN


class _Unknown:
    __slots__ = ()
    __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _decide
    __str__ = __format__ = __int__ = __float__ = __index__ = __iter__ = __len__ = _decide
    __contains__ = __getitem__ = __hash__ = _decide
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = _stay_unknown
    __neg__ = _stay_unknown

    def __getattr__(self, name: str) -> Any:
        raise UnknownTouched()

    def __repr__(self) -> str:
        return "<unknown during preview>"

    def __copy__(self) -> "_Unknown":
        return self

    def __deepcopy__(self, memo: dict) -> "_Unknown":
        return self


UNKNOWN = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def _raw(proxy: Any) -> Any:
    """The container behind a pulumi_policy proxy, read without the unknown check (the server's own
    serializer unwraps them the same way: deserialize.py `_serialize_property`)."""
    try:
        return proxy["__target"]
    except (KeyError, IndexError, TypeError):
        return proxy


def plain(value: Any) -> Any:
    """Proxies to dicts and lists, unknown sentinels to UNKNOWN; secrets arrive as plain values."""
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        raw = _raw(value)
        return {k: plain(raw[k]) for k in raw}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        raw = _raw(value)
        return [plain(raw[i]) for i in range(len(raw))]
    return value


T = TypeVar("T")


def decide(check: Callable[..., Iterable[T]], *args: Any) -> list[T]:
    """Run one check; a check that needs an unknown value decides nothing during preview."""
    try:
        return list(check(*args))
    except UnknownTouched:
        return []


def known_or_unknown(compute: Callable[[], T]) -> "T | _Unknown":
    """A derived value, or UNKNOWN when it depends on an unknown one."""
    try:
        return compute()
    except UnknownTouched:
        return UNKNOWN


def each(items: Any) -> list[Any]:
    """The items of a list that may itself be unknown (then: none known yet)."""
    try:
        return list(items or [])
    except UnknownTouched:
        return []


def items_of(value: Any) -> list[Any]:
    """A list field, [] when absent; raises UnknownTouched when the list is unknown."""
    if is_unknown(value):
        raise UnknownTouched()
    return list(value or [])


def mapping(value: Any) -> dict:
    """A dict field, {} when absent; raises UnknownTouched when unknown."""
    if is_unknown(value):
        raise UnknownTouched()
    return value if isinstance(value, dict) else {}
