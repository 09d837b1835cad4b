"""cel-go's macros (parser/macro.go), expanded while the tree is built: has() becomes a
presence test; all, exists, exists_one, map (2 and 3 arguments) and filter become
comprehensions over the accumulator `__result__`, node for node as cel-go v0.16-v0.22 build
them (the cost estimate walks these nodes).

Stage: called by celcheck.parse for every call. Inputs: the call's offset, name, receiver and
arguments, and the builder (ids, errors). Output: the expansion, or None when the call is no
macro; a malformed macro argument is reported as cel-go reports it.
"""

from __future__ import annotations

from typing import Protocol

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.expr import (
    ACCUMULATOR,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    Select,
)

_QUANTIFIERS = frozenset({"all", "exists", "exists_one"})


class IdSource(Protocol):
    errors: list[tuple[int, str]]

    def new_id(self) -> int: ...


def expand_macro(
    b: IdSource, offset: int, name: str, target: Expr | None, args: tuple[Expr, ...]
) -> Expr | None:
    if name == "has" and target is None and len(args) == 1:
        arg = args[0]
        if isinstance(arg, Select) and not arg.test_only:
            return Select(b.new_id(), offset, arg.operand, arg.field, test_only=True)
        return _macro_error(b, arg, "invalid argument to has() macro")
    if target is None:
        return None
    if name in _QUANTIFIERS and len(args) == 2:
        if not isinstance(args[0], Ident):
            return _macro_error(b, args[0], "argument must be a simple name")
        return _quantifier(b, offset, name, target, args[0].name, args[1])
    if (name == "map" and len(args) in (2, 3)) or (name == "filter" and len(args) == 2):
        if not isinstance(args[0], Ident):
            return _macro_error(b, args[0], "argument is not an identifier")
        return _map_filter(b, offset, name, target, args)
    return None


def _macro_error(b: IdSource, arg: Expr, message: str) -> Expr:
    b.errors.append((arg.offset, message))
    return Literal(b.new_id(), arg.offset, None, t.ERROR)


def _quantifier(b: IdSource, at: int, name: str, target: Expr, var: str, pred: Expr) -> Expr:
    def accu() -> Expr:
        return Ident(b.new_id(), at, ACCUMULATOR)

    def call(fn: str, *args: Expr) -> Expr:
        return Call(b.new_id(), at, fn, None, args)

    def lit(value: object, cel_type: t.CelType) -> Expr:
        return Literal(b.new_id(), at, value, cel_type)

    if name == "all":
        init, cond = lit(True, t.BOOL), call("@not_strictly_false", accu())
        step, result = call("_&&_", accu(), pred), accu()
    elif name == "exists":
        init = lit(False, t.BOOL)
        cond = call("@not_strictly_false", call("!_", accu()))
        step, result = call("_||_", accu(), pred), accu()
    else:
        init, cond = lit(0, t.INT), lit(True, t.BOOL)
        step = call("_?_:_", pred, call("_+_", accu(), lit(1, t.INT)), accu())
        result = call("_==_", accu(), lit(1, t.INT))
    return Comprehension(b.new_id(), at, target, var, ACCUMULATOR, init, cond, step, result)


def _map_filter(b: IdSource, at: int, name: str, target: Expr, args: tuple[Expr, ...]) -> Expr:
    var = args[0]
    assert isinstance(var, Ident)
    init = ListExpr(b.new_id(), at, ())
    cond = Literal(b.new_id(), at, True, t.BOOL)
    fn: Expr = var if name == "filter" else args[-1]
    keep: Expr | None = args[1] if name == "filter" or len(args) == 3 else None
    step: Expr = Call(
        b.new_id(), at, "_+_", None,
        (Ident(b.new_id(), at, ACCUMULATOR), ListExpr(b.new_id(), at, (fn,))),
    )  # fmt: skip
    if keep is not None:
        step = Call(b.new_id(), at, "_?_:_", None, (keep, step, Ident(b.new_id(), at, ACCUMULATOR)))
    result = Ident(b.new_id(), at, ACCUMULATOR)
    return Comprehension(b.new_id(), at, target, var.name, ACCUMULATOR, init, cond, step, result)
