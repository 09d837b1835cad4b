"""Field errors worded exactly as k8s.io/apimachinery/pkg/util/validation/field renders them.

`FieldError.message` is `Error()` (`<path>: <body>`), `FieldError.body` is `ErrorBody()`:
the type's canonical phrase ("Invalid value", "Required value", ...), then for value-carrying
types the bad value (Go %v for numbers/bools, %q for strings, JSON for anything else, `null`
for nil), then `: <detail>`. Go formatting of floats and quoting of strings is reproduced here.
"""

from __future__ import annotations

import decimal
import json
import math
from dataclasses import dataclass
from typing import Any

_PHRASES = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
# Types whose body never shows the value (ErrorBody's first switch case).
_VALUELESS = frozenset(
    {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
)


class _Omit:
    """Go's omitValue: the body shows no value at all."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation error. `path` is a Kubernetes field path (`spec.probes[0].name`),
    `type` a field.ErrorType reason (`FieldValueInvalid`, ...), `message` the full rendering."""

    path: str
    type: str
    message: str
    value: Any
    detail: str = ""

    @property
    def body(self) -> str:
        """ErrorBody(): the message without the leading `<path>: `."""
        return self.message[len(self.path) + 2 :]

    @classmethod
    def make(cls, path: str, type_: str, value: Any, detail: str) -> FieldError:
        body = _PHRASES.get(type_, type_)
        if type_ not in _VALUELESS and value is not OMIT:
            body = f"{body}: {go_value(value)}"
        if detail:
            body = f"{body}: {detail}"
        return cls(path=path, type=type_, message=f"{path}: {body}", value=value, detail=detail)

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls.make(path, "FieldValueInvalid", value, detail)

    @classmethod
    def type_invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls.make(path, "FieldValueTypeInvalid", value, detail)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls.make(path, "FieldValueRequired", "", detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls.make(path, "FieldValueForbidden", "", detail)

    @classmethod
    def duplicate(cls, path: str, value: Any) -> FieldError:
        return cls.make(path, "FieldValueDuplicate", value, "")

    @classmethod
    def not_supported(cls, path: str, value: Any, valid: list[str]) -> FieldError:
        detail = ""
        if valid:
            detail = "supported values: " + ", ".join(go_quote(v) for v in valid)
        return cls.make(path, "FieldValueNotSupported", value, detail)

    @classmethod
    def too_long(cls, path: str, max_length: int) -> FieldError:
        if max_length >= 0:
            unit = "byte" if max_length == 1 else "bytes"
            detail = f"may not be more than {max_length} {unit}"
        else:
            detail = "value is too long"
        return cls.make(path, "FieldValueTooLong", "<value omitted>", detail)

    @classmethod
    def too_many(cls, path: str, actual: int, maximum: int) -> FieldError:
        if maximum >= 0:
            detail = f"must have at most {maximum} {'item' if maximum == 1 else 'items'}"
        else:
            detail = "has too many items"
        return cls.make(path, "FieldValueTooMany", actual if actual >= 0 else OMIT, detail)


def aggregate_message(errors: list[FieldError]) -> str:
    """ErrorList.ToAggregate().Error(): duplicates dropped, one message bare, several in [a, b]."""
    seen: list[str] = []
    for error in errors:
        if error.message not in seen:
            seen.append(error.message)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def go_scalar(value: Any) -> str | None:
    """A JSON scalar (bool, number, string) as Go's %v/%q print it; None for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return None


def go_value(value: Any) -> str:
    """A bad value as ErrorBody prints it."""
    scalar = go_scalar(value)
    return scalar if scalar is not None else go_json(value)


def go_quote(text: str) -> str:
    """strconv.Quote: Go double-quoted string literal."""
    out = ['"']
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
               "\r": "\\r", "\t": "\\t", "\v": "\\v"}  # fmt: skip
    for ch in text:
        if ch in escapes:
            out.append(escapes[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _digits(value: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of |value| and the decimal exponent of the first one."""
    tup = decimal.Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(d) for d in tup.digits)
    exponent = int(tup.exponent) + len(digits) - 1
    return digits, exponent


def go_float(value: float) -> str:
    """fmt's %v for a float64: strconv 'g' with the shortest precision, which switches to the
    exponent form when the decimal exponent is < -4 or >= 6 (1e+06, 1.5e-05, 123456)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, exp = _digits(value)
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return sign + digits + "0" * (exp + 1 - len(digits))
    return f"{sign}{digits[: exp + 1]}.{digits[exp + 1 :]}"


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


def go_json(value: Any) -> str:
    """encoding/json.Marshal: sorted keys, compact, HTML-safe escapes."""
    text = json.dumps(_json_ready(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
