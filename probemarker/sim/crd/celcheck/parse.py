"""From celpy's lark parse tree to cel-go's expression tree (celcheck.expr).

Stage: after celpy has parsed a rule (probemarker.sim.crd.cel.compile_cel), before type checking.
Input: the source text and its lark tree (built with positions). Output: a `Parsed` with the
root expression and the errors cel-go's parser reports after parsing succeeded (malformed
macro arguments), each as (offset, message).

What cel-go's parser does and is done here: the macros has/all/exists/exists_one/map/filter
are expanded into comprehensions exactly as cel-go v0.16-v0.22 expand them (the cost estimate
depends on that shape); `!!x` and `--x` collapse to `x`; operators become calls of `_+_`,
`_[_]`, `@in`, `!_`, `-_`, `_?_:_`, ...; every node gets the offset cel-go locates it at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lark

from probemarker.sim.crd.celcheck import types as t
from probemarker.sim.crd.celcheck.expr import (
    ACCUMULATOR,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapExpr,
    Select,
    StructExpr,
)
from probemarker.sim.crd.celcheck.literals import literal_value

_BINARY = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
}  # fmt: skip
_CHAINS = frozenset({"relation", "addition", "multiplication"})
_PASS = frozenset({"primary", "member", "paren_expr"})
_QUANTIFIERS = frozenset({"all", "exists", "exists_one"})


@dataclass(frozen=True, slots=True)
class Parsed:
    root: Expr
    errors: tuple[tuple[int, str], ...]


def _kids(tree: lark.Tree[Any]) -> list[Any]:
    return [c for c in tree.children if c is not None]


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.next_id = 0
        self.errors: list[tuple[int, str]] = []

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def after(self, pos: int) -> int:
        """The offset of the first token at or after `pos` (skipping blanks and comments)."""
        text = self.source
        while pos < len(text):
            if text[pos] in " \t\r\n\f":
                pos += 1
            elif text.startswith("//", pos):
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end
            else:
                return pos
        return pos

    def end(self, node: Any) -> int:
        if isinstance(node, lark.Token):
            return int(node.end_pos or 0)
        return int(node.meta.end_pos) if not node.meta.empty else 0

    def start(self, node: Any) -> int:
        if isinstance(node, lark.Token):
            return int(node.start_pos or 0)
        return int(node.meta.start_pos) if not node.meta.empty else 0

    def build(self, tree: Any) -> Expr:
        data = tree.data
        kids = _kids(tree)
        if data in _PASS:
            return self.build(kids[0])
        if data == "expr":
            return self._conditional(kids)
        if data in ("conditionalor", "conditionaland"):
            return self._logical(data, kids)
        if data in _CHAINS:
            return self._binary(kids)
        if data == "unary":
            return self._unary(tree)
        method = getattr(self, "_" + str(data), None)
        if method is None:
            raise ValueError(f"unexpected parse node {data}")
        result: Expr = method(tree, kids)
        return result

    def _conditional(self, kids: list[Any]) -> Expr:
        if len(kids) == 1:
            return self.build(kids[0])
        cond = self.build(kids[0])
        offset = self.after(self.end(kids[0]))
        branches = (self.build(kids[1]), self.build(kids[2]))
        return Call(self.new_id(), offset, "_?_:_", None, (cond, *branches))

    def _logical(self, data: str, kids: list[Any]) -> Expr:
        if len(kids) == 1:
            return self.build(kids[0])
        left = self.build(kids[0])
        offset = self.after(self.end(kids[0]))
        right = self.build(kids[1])
        name = "_||_" if data == "conditionalor" else "_&&_"
        return Call(self.new_id(), offset, name, None, (left, right))

    def _binary(self, kids: list[Any]) -> Expr:
        if len(kids) == 1:
            return self.build(kids[0])
        operator, right_tree = kids
        left_tree = _kids(operator)[0]
        left = self.build(left_tree)
        offset = self.after(self.end(left_tree))
        right = self.build(right_tree)
        return Call(self.new_id(), offset, _BINARY[str(operator.data)], None, (left, right))

    def _unary(self, tree: Any) -> Expr:
        kids = _kids(tree)
        if len(kids) == 1:
            return self.build(kids[0])
        op_kind = kids[0].data
        offset = self.start(kids[0])
        count, inner = 0, tree
        while isinstance(inner, lark.Tree) and inner.data == "unary" and len(_kids(inner)) == 2:
            if _kids(inner)[0].data != op_kind:
                break
            count += 1
            inner = _kids(inner)[1]
        operand = self.build(inner)
        if count % 2 == 0:
            return operand
        if (
            count == 1
            and op_kind == "unary_neg"
            and _bare_literal(inner)
            and _unsigned_number(operand)
        ):
            assert isinstance(operand, Literal)
            value = -operand.value  # type: ignore[operator]
            return Literal(operand.id, offset, value, operand.type)  # cel-go: `- 1` is a literal
        name = "!_" if op_kind == "unary_not" else "-_"
        return Call(self.new_id(), offset, name, None, (operand,))

    def _literal(self, tree: Any, kids: list[Any]) -> Expr:
        token = kids[0]
        value, cel_type = literal_value(str(token.type), str(token.value))
        return Literal(self.new_id(), self.start(token), value, cel_type)

    def _ident(self, tree: Any, kids: list[Any]) -> Expr:
        return Ident(self.new_id(), self.start(kids[0]), str(kids[0].value))

    def _dot_ident(self, tree: Any, kids: list[Any]) -> Expr:
        return Ident(self.new_id(), self.start(kids[0]), "." + str(kids[0].value))

    def _member_dot(self, tree: Any, kids: list[Any]) -> Expr:
        operand = self.build(kids[0])
        offset = self.after(self.end(kids[0]))
        return Select(self.new_id(), offset, operand, str(kids[1].value))

    def _member_index(self, tree: Any, kids: list[Any]) -> Expr:
        operand = self.build(kids[0])
        offset = self.after(self.end(kids[0]))
        index = self.build(kids[1])
        return Call(self.new_id(), offset, "_[_]", None, (operand, index))

    def _args(self, kids: list[Any]) -> tuple[Expr, ...]:
        exprlist = [k for k in kids if isinstance(k, lark.Tree) and k.data == "exprlist"]
        return tuple(self.build(e) for e in _kids(exprlist[0])) if exprlist else ()

    def _member_dot_arg(self, tree: Any, kids: list[Any]) -> Expr:
        target = self.build(kids[0])
        name = str(kids[1].value)
        offset = self.after(self.end(kids[1]))
        return self._call_or_macro(offset, name, target, self._args(kids[2:]))

    def _ident_arg(self, tree: Any, kids: list[Any]) -> Expr:
        offset = self.after(self.end(kids[0]))
        return self._call_or_macro(offset, str(kids[0].value), None, self._args(kids[1:]))

    def _dot_ident_arg(self, tree: Any, kids: list[Any]) -> Expr:
        offset = self.after(self.end(kids[0]))
        return self._call_or_macro(offset, "." + str(kids[0].value), None, self._args(kids[1:]))

    def _list_lit(self, tree: Any, kids: list[Any]) -> Expr:
        offset = self.start(tree)
        return ListExpr(self.new_id(), offset, self._args(kids))

    def _map_lit(self, tree: Any, kids: list[Any]) -> Expr:
        offset = self.start(tree)
        items = _kids(kids[0]) if kids else []
        built = [self.build(item) for item in items]
        entries = tuple((built[i], built[i + 1]) for i in range(0, len(built) - 1, 2))
        return MapExpr(self.new_id(), offset, entries)

    def _member_object(self, tree: Any, kids: list[Any]) -> Expr:
        name = _qualified(kids[0])
        offset = self.after(self.end(kids[0]))
        items = _kids(kids[1]) if len(kids) > 1 else []
        fields = tuple(
            (str(items[i].value), self.build(items[i + 1])) for i in range(0, len(items) - 1, 2)
        )
        return StructExpr(self.new_id(), offset, name or "", fields)

    def _call_or_macro(
        self, offset: int, name: str, target: Expr | None, args: tuple[Expr, ...]
    ) -> Expr:
        expanded = _expand_macro(self, offset, name, target, args)
        if expanded is not None:
            return expanded
        return Call(self.new_id(), offset, name, target, args)


def _bare_literal(tree: Any) -> bool:
    """A unary/member/primary chain down to a literal, with no parentheses."""
    node = tree
    while isinstance(node, lark.Tree) and node.data in ("unary", "member", "primary"):
        kids = _kids(node)
        if len(kids) != 1:
            return False
        node = kids[0]
    return isinstance(node, lark.Tree) and node.data == "literal"


def _unsigned_number(e: Expr) -> bool:
    return (
        isinstance(e, Literal)
        and e.type in (t.INT, t.DOUBLE)
        and isinstance(e.value, int | float)
        and not isinstance(e.value, bool)
        and e.value >= 0
    )


def _qualified(tree: Any) -> str | None:
    """`a.b.c` of a member tree made only of identifiers, else None."""
    node = tree
    while isinstance(node, lark.Tree) and node.data in ("member", "primary") and node.children:
        inner = _kids(node)[0]
        if isinstance(inner, lark.Tree) and inner.data == "member_dot":
            prefix = _qualified(_kids(inner)[0])
            return None if prefix is None else f"{prefix}.{_kids(inner)[1].value}"
        if isinstance(inner, lark.Tree) and inner.data == "ident":
            return str(_kids(inner)[0].value)
        node = inner
    return None


def _expand_macro(
    b: _Builder, offset: int, name: str, target: Expr | None, args: tuple[Expr, ...]
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


def _macro_error(b: _Builder, arg: Expr, message: str) -> Expr:
    b.errors.append((arg.offset, message))
    return Literal(b.new_id(), arg.offset, None, t.ERROR)


def _quantifier(b: _Builder, at: int, name: str, target: Expr, var: str, pred: Expr) -> Expr:
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


def _map_filter(b: _Builder, at: int, name: str, target: Expr, args: tuple[Expr, ...]) -> Expr:
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


def parse_tree(source: str, tree: lark.Tree[Any]) -> Parsed:
    """Convert celpy's tree of `source` (built with propagate_positions)."""
    builder = _Builder(source)
    root = builder.build(tree)
    return Parsed(root=root, errors=tuple(builder.errors))
