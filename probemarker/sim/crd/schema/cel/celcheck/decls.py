"""Function declarations: cel-go's standard library (common/stdlib), in its declaration order.

Stage: read by celcheck.env to build an environment. Inputs: none. Outputs: `Overload`,
`Function`, `merge` and `standard_functions()`.

Invariants: overload ids are cel-go's (the cost estimator keys on them); the order of overloads
within a function is cel-go's (the checker's result type and the cost estimator's field path
of an index both depend on it). A member overload's first argument is the receiver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.types import CelType


def _params_of(types: Iterable[CelType], out: dict[str, None]) -> None:
    for item in types:
        if item.kind is t.Kind.TYPE_PARAM:
            out[item.name] = None
        _params_of(item.params, out)


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    args: tuple[CelType, ...]
    result: CelType
    member: bool = False
    type_params: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(
        cls, id_: str, args: Iterable[CelType], result: CelType, *, member: bool = False
    ) -> Overload:
        arg_tuple = tuple(args)
        names: dict[str, None] = {}
        _params_of((*arg_tuple, result), names)
        return cls(id_, arg_tuple, result, member, tuple(names))


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    overloads: tuple[Overload, ...]


def merge(functions: dict[str, Function], name: str, *overloads: Overload) -> None:
    """Declare `overloads` of `name`, after any already declared (cel-go's Function merge)."""
    known = functions.get(name)
    if known is None:
        functions[name] = Function(name, tuple(overloads))
        return
    ids = {o.id for o in known.overloads}
    extra = tuple(o for o in overloads if o.id not in ids)
    functions[name] = Function(name, known.overloads + extra)


def g(id_: str, args: Iterable[CelType], result: CelType) -> Overload:
    """A global overload."""
    return Overload.of(id_, args, result)


def m(id_: str, args: Iterable[CelType], result: CelType) -> Overload:
    """A member (receiver) overload."""
    return Overload.of(id_, args, result, member=True)


A, B = t.param("A"), t.param("B")
_LIST_A, _MAP_AB = t.list_of(A), t.map_of(A, B)
_BOOL, _INT, _STR = t.BOOL, t.INT, t.STRING
_TS, _DUR = t.TIMESTAMP, t.DURATION

_COMPARED = (
    ("bool", t.BOOL, t.BOOL), ("int64", t.INT, t.INT), ("int64_double", t.INT, t.DOUBLE),
    ("int64_uint64", t.INT, t.UINT), ("uint64", t.UINT, t.UINT),
    ("uint64_double", t.UINT, t.DOUBLE), ("uint64_int64", t.UINT, t.INT),
    ("double", t.DOUBLE, t.DOUBLE), ("double_int64", t.DOUBLE, t.INT),
    ("double_uint64", t.DOUBLE, t.UINT), ("string", t.STRING, t.STRING),
    ("bytes", t.BYTES, t.BYTES), ("timestamp", _TS, _TS), ("duration", _DUR, _DUR),
)  # fmt: skip
CROSS_TYPE_COMPARISONS = frozenset(
    f"{prefix}_{suffix}"
    for prefix in ("less", "less_equals", "greater", "greater_equals")
    for suffix, left, right in _COMPARED
    if left != right
)
_NAMED = {"int64": t.INT, "uint64": t.UINT, "double": t.DOUBLE, "bool": t.BOOL,
          "string": t.STRING, "bytes": t.BYTES, "timestamp": _TS, "duration": _DUR}  # fmt: skip


def _arith(functions: dict[str, Function]) -> None:
    merge(functions, "_+_", *(
        g(f"add_{n}", (a, b), r) for n, a, b, r in (
            ("bytes", t.BYTES, t.BYTES, t.BYTES), ("double", t.DOUBLE, t.DOUBLE, t.DOUBLE),
            ("duration_duration", _DUR, _DUR, _DUR), ("duration_timestamp", _DUR, _TS, _TS),
            ("timestamp_duration", _TS, _DUR, _TS), ("int64", _INT, _INT, _INT),
            ("list", _LIST_A, _LIST_A, _LIST_A), ("string", _STR, _STR, _STR),
            ("uint64", t.UINT, t.UINT, t.UINT))))  # fmt: skip
    numeric = (("double", t.DOUBLE), ("int64", _INT), ("uint64", t.UINT))
    merge(functions, "_/_", *(g(f"divide_{n}", (x, x), x) for n, x in numeric))
    merge(functions, "_%_", *(g(f"modulo_{n}", (x, x), x) for n, x in numeric[1:]))
    merge(functions, "_*_", *(g(f"multiply_{n}", (x, x), x) for n, x in numeric))
    merge(
        functions, "-_", g("negate_double", (t.DOUBLE,), t.DOUBLE), g("negate_int64", (_INT,), _INT)
    )
    merge(functions, "_-_", *(
        g(f"subtract_{n}", (a, b), r) for n, a, b, r in (
            ("double", t.DOUBLE, t.DOUBLE, t.DOUBLE), ("duration_duration", _DUR, _DUR, _DUR),
            ("int64", _INT, _INT, _INT), ("timestamp_duration", _TS, _DUR, _TS),
            ("timestamp_timestamp", _TS, _TS, _DUR), ("uint64", t.UINT, t.UINT, t.UINT))))  # fmt: skip
    for op, prefix in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"),
                       ("_>=_", "greater_equals")):  # fmt: skip
        merge(functions, op, *(g(f"{prefix}_{n}", (a, b), _BOOL) for n, a, b in _COMPARED))


def _conversions(functions: dict[str, Function]) -> None:
    merge(functions, "type", g("type", (A,), t.type_of(A)))
    table = {
        "bool": ("bool", "string"), "bytes": ("bytes", "string"),
        "double": ("double", "int64", "string", "uint64"),
        "duration": ("duration", "int64", "string"), "int": ("int64", "double", "duration",
        "string", "timestamp", "uint64"), "string": ("string", "bool", "bytes", "double",
        "duration", "int64", "timestamp", "uint64"), "timestamp": ("timestamp", "int64", "string"),
        "uint": ("uint64", "double", "int64", "string"),
    }  # fmt: skip
    target_names = {"int": "int64", "uint": "uint64"}
    for fn, sources in table.items():
        target = target_names.get(fn, fn)
        merge(functions, fn, *(
            g(f"{src}_to_{target}", (_NAMED[src],), _NAMED[target]) for src in sources))  # fmt: skip
    merge(functions, "dyn", g("to_dyn", (A,), t.DYN))


def _strings_and_time(functions: dict[str, Function]) -> None:
    merge(functions, "contains", m("contains_string", (_STR, _STR), _BOOL))
    merge(functions, "endsWith", m("ends_with_string", (_STR, _STR), _BOOL))
    merge(functions, "startsWith", m("starts_with_string", (_STR, _STR), _BOOL))
    merge(functions, "matches", g("matches", (_STR, _STR), _BOOL),
          m("matches_string", (_STR, _STR), _BOOL))  # fmt: skip
    for fn, stem, with_duration in (
        ("getFullYear", "year", False), ("getMonth", "month", False),
        ("getDayOfYear", "day_of_year", False), ("getDayOfMonth", "day_of_month", False),
        ("getDate", "day_of_month_1_based", False), ("getDayOfWeek", "day_of_week", False),
        ("getHours", "hours", True), ("getMinutes", "minutes", True),
        ("getSeconds", "seconds", True), ("getMilliseconds", "milliseconds", True),
    ):  # fmt: skip
        tz = "timestamp_to_seconds_tz" if stem == "seconds" else f"timestamp_to_{stem}_with_tz"
        overloads = [m(f"timestamp_to_{stem}", (_TS,), _INT), m(tz, (_TS, _STR), _INT)]
        if with_duration:
            overloads.append(m(f"duration_to_{stem}", (_DUR,), _INT))
        merge(functions, fn, *overloads)


def standard_functions() -> dict[str, Function]:
    """cel-go's standard library, in the order standard.go declares it."""
    functions: dict[str, Function] = {}
    merge(functions, "_?_:_", g("conditional", (_BOOL, A, A), A))
    merge(functions, "_&&_", g("logical_and", (_BOOL, _BOOL), _BOOL))
    merge(functions, "_||_", g("logical_or", (_BOOL, _BOOL), _BOOL))
    merge(functions, "!_", g("logical_not", (_BOOL,), _BOOL))
    merge(functions, "@not_strictly_false", g("not_strictly_false", (_BOOL,), _BOOL))
    merge(functions, "_==_", g("equals", (A, A), _BOOL))
    merge(functions, "_!=_", g("not_equals", (A, A), _BOOL))
    _arith(functions)
    merge(functions, "_[_]", g("index_list", (_LIST_A, _INT), A),
          g("index_map", (_MAP_AB, A), B))  # fmt: skip
    merge(functions, "@in", g("in_list", (A, _LIST_A), _BOOL), g("in_map", (A, _MAP_AB), _BOOL))
    merge(functions, "size", *(
        o for n, x in (("bytes", t.BYTES), ("list", _LIST_A), ("map", _MAP_AB), ("string", _STR))
        for o in (g(f"size_{n}", (x,), _INT), m(f"{n}_size", (x,), _INT))))  # fmt: skip
    _conversions(functions)
    _strings_and_time(functions)
    return functions


STANDARD_TYPE_IDENTS: tuple[CelType, ...] = (
    t.BOOL, t.BYTES, t.DOUBLE, t.DURATION, t.INT, _LIST_A, _MAP_AB, t.NULL, t.STRING,
    t.TIMESTAMP, t.TYPE, t.UINT,
)  # fmt: skip
"""The types cel-go declares as identifiers, named by their runtime name (`int`, `list`,
`google.protobuf.Duration`), each of type type(T)."""
