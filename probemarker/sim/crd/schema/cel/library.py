"""The Kubernetes CEL library functions (k8s.io/apiserver/pkg/cel/library and cel-go's strings
extension as Kubernetes enables it) for celpy: called as methods, the receiver comes first.

Covered: optionals hasValue, value, orValue (for optionalOldSelf); strings charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split,
substring, trim, join; lists isSorted, sum, max, indexOf, lastIndexOf (min is celpy's own).
Failures raise TypeError/ValueError, which celpy turns into CEL errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celpy import celtypes

_S = celtypes.StringType
_I = celtypes.IntType


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return value


def _char_at(text: Any, index: Any) -> Any:
    text = _str(text)
    if not 0 <= int(index) <= len(text):
        raise ValueError(f"index out of range: {index}")
    return _S(text[int(index)] if int(index) < len(text) else "")


def _index_of(target: Any, item: Any, start: Any = 0) -> Any:
    if isinstance(target, list):
        for pos, value in enumerate(target):
            if value == item:
                return _I(pos)
        return _I(-1)
    text, sub = _str(target), _str(item)
    if not 0 <= int(start) <= len(text):
        raise ValueError(f"index out of range: {start}")
    return _I(text.find(sub, int(start)))


def _last_index_of(target: Any, item: Any, end: Any = None) -> Any:
    if isinstance(target, list):
        for pos in range(len(target) - 1, -1, -1):
            if target[pos] == item:
                return _I(pos)
        return _I(-1)
    text, sub = _str(target), _str(item)
    if end is None:
        return _I(text.rfind(sub))
    if not 0 <= int(end) < max(len(text), 1):
        raise ValueError(f"index out of range: {end}")
    return _I(text.rfind(sub, 0, int(end) + len(sub)))


def _lower_ascii(text: Any) -> Any:
    return _S("".join(c.lower() if c.isascii() else c for c in _str(text)))


def _upper_ascii(text: Any) -> Any:
    return _S("".join(c.upper() if c.isascii() else c for c in _str(text)))


def _replace(text: Any, old: Any, new: Any, limit: Any = -1) -> Any:
    return _S(_str(text).replace(_str(old), _str(new), int(limit)))


def _split(text: Any, sep: Any, limit: Any = -1) -> Any:
    text, sep = _str(text), _str(sep)
    limit = int(limit)
    if limit == 0:
        return celtypes.ListType([])
    if sep == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(sep, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([_S(p) for p in parts])


def _substring(text: Any, start: Any, end: Any = None) -> Any:
    text = _str(text)
    stop = len(text) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(text):
        raise ValueError(f"index out of range: {start}, {stop}")
    return _S(text[int(start) : stop])


def _trim(text: Any) -> Any:
    return _S(_str(text).strip())


def _join(items: Any, sep: Any = "") -> Any:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return _S(_str(sep).join(_str(i) for i in items))


def _is_sorted(items: Any) -> Any:
    return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))


def _sum(items: Any) -> Any:
    total: Any = _I(0)
    for pos, item in enumerate(items):
        total = item if pos == 0 else total + item
    return total


def _max(items: Any, *more: Any) -> Any:
    values = [items, *more] if more else list(items)
    if not values:
        raise ValueError("max(list) argument must not be empty")
    return max(values)


class CelOptional:
    """A CEL optional (oldSelf of an optionalOldSelf rule): hasValue(), value(), orValue(x)."""

    __slots__ = ("payload", "present")

    def __init__(self, payload: Any = None, *, present: bool) -> None:
        self.present = present
        self.payload = payload

    def __repr__(self) -> str:
        return f"optional.of({self.payload!r})" if self.present else "optional.none()"


def _optional(value: Any) -> CelOptional:
    if not isinstance(value, CelOptional):
        raise TypeError("no such overload")
    return value


def _has_value(value: Any) -> Any:
    return celtypes.BoolType(_optional(value).present)


def _value(value: Any) -> Any:
    opt = _optional(value)
    if not opt.present:
        raise ValueError("optional.none() dereference")
    return opt.payload


def _or_value(value: Any, default: Any) -> Any:
    opt = _optional(value)
    return opt.payload if opt.present else default


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
}
