"""From celpy's lark parse tree to cel-go's expression tree (celcheck.expr).

Stage: after celpy has parsed a rule (probemarker.sim.crd.schema.cel.engine.compile_cel),
before type checking.
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

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.expr import (
    Call,
    Expr,
    Ident,
    ListExpr,
    Literal,
    MapExpr,
    Select,
    StructExpr,
)
from probemarker.sim.crd.schema.cel.celcheck.literals import literal_value
from probemarker.sim.crd.schema.cel.celcheck.macros import expand_macro

_BINARY = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
}  # fmt: skip
_CHAINS = frozenset({"relation", "addition", "multiplication"})
_PASS = frozenset({"primary", "member", "paren_expr"})


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
        expanded = expand_macro(self, offset, name, target, args)
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


def parse_tree(source: str, tree: lark.Tree[Any]) -> Parsed:
    """Convert celpy's tree of `source` (built with propagate_positions)."""
    builder = _Builder(source)
    root = builder.build(tree)
    return Parsed(root=root, errors=tuple(builder.errors))
