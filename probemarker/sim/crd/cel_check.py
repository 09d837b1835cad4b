"""A small part of cel-go's type checker, for CRD creation: field selections on `self` and
`oldSelf` that name a property the schema does not declare (`undefined field 'x'`).

Only plain chains (`self.a.b`, also inside has()) are checked, and only through objects that
declare `properties`; maps, lists, untyped and preserve-unknown-fields nodes end the check, so
a rule this module accepts may still be one cel-go refuses, never the other way round.
"""

from __future__ import annotations

from typing import Any

import lark

from probemarker.sim.crd.cel import escape_name
from probemarker.sim.crd.node import SchemaNode

_ROOTS = ("self", "oldSelf")
_META = {"name": SchemaNode(type="string"), "generateName": SchemaNode(type="string")}


def _chain(member: lark.Tree[Any]) -> list[lark.Token] | None:
    """The selected field tokens of `self.a.b`, outermost last; None if not a plain chain."""
    tokens: list[lark.Token] = []
    node: Any = member
    while isinstance(node, lark.Tree) and node.data == "member" and node.children:
        child = node.children[0]
        if isinstance(child, lark.Tree) and child.data == "member_dot":
            token = child.children[1]
            if not isinstance(token, lark.Token):
                return None
            tokens.append(token)
            node = child.children[0]
            continue
        if isinstance(child, lark.Tree) and child.data == "primary" and child.children:
            ident = child.children[0]
            if isinstance(ident, lark.Tree) and ident.data == "ident":
                token = ident.children[0]
                if isinstance(token, lark.Token) and token.value in _ROOTS:
                    return list(reversed(tokens))
        return None
    return None


def _step(schema: SchemaNode, name: str, *, resource: bool) -> SchemaNode | bool | None:
    """The schema of field `name`; None when the check must stop; False when undefined."""
    if resource and name in ("apiVersion", "kind"):
        return SchemaNode(type="string")
    if resource and name == "metadata":
        return SchemaNode(type="object", properties=_META)
    if schema.type != "object" or not schema.properties or schema.preserve_unknown_fields:
        return None
    for key, prop in schema.properties.items():
        if escape_name(key) == name:
            return prop
    return False


def undefined_fields(ast: lark.Tree[Any], schema: SchemaNode, *, resource_root: bool) -> list[str]:
    """cel-go style errors (`ERROR: <input>:1:5: undefined field 'x'`) for `ast`."""
    errors: list[str] = []
    seen: set[tuple[int, int]] = set()
    for member in ast.iter_subtrees():
        if member.data != "member":
            continue
        tokens = _chain(member)
        if not tokens:
            continue
        node: SchemaNode = schema
        resource = resource_root or schema.embedded_resource
        for token in tokens:
            step = _step(node, str(token.value), resource=resource)
            if step is None:
                break
            if step is False:
                where = (token.line or 1, max((token.column or 1) - 1, 1))
                if where not in seen:
                    seen.add(where)
                    errors.append(
                        f"ERROR: <input>:{where[0]}:{where[1]}: undefined field '{token.value}'"
                    )
                break
            assert isinstance(step, SchemaNode)
            node, resource = step, step.embedded_resource
    return errors
