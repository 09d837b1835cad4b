"""CEL types as cel-go's type checker represents them (common/types.Type), and their names.

Stage: shared by every other celcheck module. Inputs: none. Outputs: `CelType` values and
constructors, `format_type` (cel-go's FormatCELType, the wording of type errors).

Invariants: a `CelType` is an immutable value; two types are equal exactly when cel-go's
IsExactType holds (same kind, same runtime name, equal parameters). Type parameters carry
their name (`A`, `_var0`) as `name`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    ANY = "any"
    BOOL = "bool"
    BYTES = "bytes"
    DOUBLE = "double"
    DURATION = "duration"
    DYN = "dyn"
    ERROR = "error"
    INT = "int"
    LIST = "list"
    MAP = "map"
    NULL = "null"
    OPAQUE = "opaque"
    STRING = "string"
    STRUCT = "struct"
    TIMESTAMP = "timestamp"
    TYPE = "type"
    TYPE_PARAM = "type_param"
    UINT = "uint"


@dataclass(frozen=True, slots=True)
class CelType:
    """One CEL type: `kind`, the runtime type name and the type parameters."""

    kind: Kind
    name: str
    params: tuple[CelType, ...] = ()


ANY = CelType(Kind.ANY, "google.protobuf.Any")
BOOL = CelType(Kind.BOOL, "bool")
BYTES = CelType(Kind.BYTES, "bytes")
DOUBLE = CelType(Kind.DOUBLE, "double")
DURATION = CelType(Kind.DURATION, "google.protobuf.Duration")
DYN = CelType(Kind.DYN, "dyn")
ERROR = CelType(Kind.ERROR, "error")
INT = CelType(Kind.INT, "int")
NULL = CelType(Kind.NULL, "null_type")
STRING = CelType(Kind.STRING, "string")
TIMESTAMP = CelType(Kind.TIMESTAMP, "google.protobuf.Timestamp")
TYPE = CelType(Kind.TYPE, "type")
UINT = CelType(Kind.UINT, "uint")

SCALARS = frozenset(
    {Kind.BOOL, Kind.DOUBLE, Kind.DURATION, Kind.INT, Kind.TIMESTAMP, Kind.UINT}
)  # cel-go's isScalar: sizes known at compile time


def list_of(elem: CelType) -> CelType:
    return CelType(Kind.LIST, "list", (elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType(Kind.MAP, "map", (key, value))


def type_of(inner: CelType) -> CelType:
    """The type of a type value, `type(int)`."""
    return CelType(Kind.TYPE, "type", (inner,))


def param(name: str) -> CelType:
    return CelType(Kind.TYPE_PARAM, name)


def opaque(name: str, *params: CelType) -> CelType:
    return CelType(Kind.OPAQUE, name, params)


def struct(name: str) -> CelType:
    return CelType(Kind.STRUCT, name)


def optional(inner: CelType) -> CelType:
    return opaque("optional_type", inner)


def function_type(result: CelType, args: tuple[CelType, ...]) -> CelType:
    return opaque("function", result, *args)


def is_dyn(t: CelType) -> bool:
    return t.kind in (Kind.DYN, Kind.ANY)


def is_dyn_or_error(t: CelType) -> bool:
    return t.kind in (Kind.DYN, Kind.ANY, Kind.ERROR)


def unwrap_optional(t: CelType) -> tuple[CelType, bool]:
    if t.kind is Kind.OPAQUE and t.name == "optional_type":
        return t.params[0], True
    return t, False


_FIXED_NAMES = {
    Kind.ANY: "any",
    Kind.DURATION: "duration",
    Kind.ERROR: "!error!",
    Kind.NULL: "null",
    Kind.TIMESTAMP: "timestamp",
}


def format_type(t: CelType) -> str:
    """FormatCELType: `int`, `list(string)`, `map(string, dyn)`, `type(int)`, `selfType0.spec`."""
    fixed = _FIXED_NAMES.get(t.kind)
    if fixed is not None:
        return fixed
    if t.kind is Kind.TYPE_PARAM or not t.params:
        return t.name
    if t.kind is Kind.OPAQUE and t.name == "function":
        return format_signature(t.params[1:], instance=False, result=t.params[0])
    return f"{t.name}({', '.join(format_type(p) for p in t.params)})"


def format_signature(
    args: tuple[CelType, ...], *, instance: bool, result: CelType | None = None
) -> str:
    """A call signature as cel-go prints it: `(int, string)`, `string.(int)`, `(int) -> bool`."""
    text = ""
    if instance:
        text = format_type(args[0]) + "."
        args = args[1:]
    text += "(" + ", ".join(format_type(a) for a in args) + ")"
    if result is not None:
        text += " -> " + format_type(result)
    return text


def equivalent(a: CelType, b: CelType) -> bool:
    """IsEquivalentType: exact, except that type parameter names are not compared."""
    if a.kind is not b.kind or len(a.params) != len(b.params):
        return False
    if a.kind is not Kind.TYPE_PARAM and a.name != b.name:
        return False
    return all(equivalent(x, y) for x, y in zip(a.params, b.params, strict=True))
