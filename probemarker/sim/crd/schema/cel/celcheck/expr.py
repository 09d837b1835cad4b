"""The expression tree the checker and the cost estimator walk: cel-go's parsed AST
(common/ast), with macros already expanded into comprehensions.

Stage: produced by celcheck.parse, read by celcheck.checker and celcheck.cost.
Inputs/outputs: none (data only).

Invariants: every node has a unique `id` within one expression and the `offset` (in code points
from the start of the source) of the token cel-go reports errors at: the `.` of a selection,
the `(` of a call, the operator of an operation, the first character of an identifier or a
literal, the `[` of a list or index, the `{` of a map. Nodes made by a macro expansion carry
the offset of the macro call's `(`.
"""

from __future__ import annotations

from dataclasses import dataclass

from probemarker.sim.crd.schema.cel.celcheck.types import CelType

ACCUMULATOR = "__result__"


@dataclass(frozen=True, slots=True)
class Expr:
    id: int
    offset: int


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A constant; `value` is bool, int, float, str, bytes or None, `type` its CEL type."""

    value: object
    type: CelType


@dataclass(frozen=True, slots=True)
class Ident(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """`operand.field`; with `test_only` the presence test of has(operand.field)."""

    operand: Expr
    field: str
    test_only: bool = False


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A function or operator call (`_+_`, `size`, ...); `target` is the receiver of a
    member call (`a.f(x)`), None for a global call."""

    function: str
    target: Expr | None
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ListExpr(Expr):
    elements: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class MapExpr(Expr):
    entries: tuple[tuple[Expr, Expr], ...]


@dataclass(frozen=True, slots=True)
class StructExpr(Expr):
    """`Name{field: value}` (message construction)."""

    type_name: str
    fields: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True, slots=True)
class Comprehension(Expr):
    iter_range: Expr
    iter_var: str
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of `e`, in cel-go's visiting order."""
    if isinstance(e, Select):
        return (e.operand,)
    if isinstance(e, Call):
        return ((e.target,) if e.target is not None else ()) + e.args
    if isinstance(e, ListExpr):
        return e.elements
    if isinstance(e, MapExpr):
        return tuple(x for entry in e.entries for x in entry)
    if isinstance(e, StructExpr):
        return tuple(value for _, value in e.fields)
    if isinstance(e, Comprehension):
        return (e.iter_range, e.accu_init, e.loop_condition, e.loop_step, e.result)
    return ()


def walk(e: Expr) -> list[Expr]:
    """Every node of the tree, parents before children."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out
