"""cel-go's type checker (checker/checker.go) over celcheck.expr trees.

Stage: after celcheck.parse, before the cost estimate. Inputs: the parsed root and an `Env`.
Output: a `Checked`: the type of every node (type parameters left unbound become dyn), the
overload ids each call resolved to, the resolved name of each identifier, calls rewritten to
namespaced functions (`sets.contains(a, b)`), and the errors as (offset, message), worded as
cel-go words them (`undefined field 'x'`, `undeclared reference to 'f' (in container '')`,
`found no matching overload for '_+_' applied to '(int, string)'`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.decls import Function
from probemarker.sim.crd.schema.cel.celcheck.env import Env
from probemarker.sim.crd.schema.cel.celcheck.expr import (
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
from probemarker.sim.crd.schema.cel.celcheck.types import CelType, format_signature, format_type
from probemarker.sim.crd.schema.cel.celcheck.unify import (
    Mapping,
    is_assignable,
    is_assignable_list,
    most_general,
    substitute,
)


@dataclass(frozen=True, slots=True)
class Checked:
    """The checker's findings, keyed by node id (the maps are filled while checking)."""

    root: Expr
    types: dict[int, CelType] = field(default_factory=dict)
    overloads: dict[int, tuple[str, ...]] = field(default_factory=dict)
    idents: dict[int, str] = field(default_factory=dict)
    rewrites: dict[int, Expr] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def output_type(self) -> CelType:
        return self.types.get(self.root.id, t.ERROR)


def qualified_name(e: Expr) -> str | None:
    """`a.b.c` for a chain of plain selections on an identifier (containers.ToQualifiedName)."""
    if isinstance(e, Ident):
        return e.name
    if isinstance(e, Select) and not e.test_only:
        prefix = qualified_name(e.operand)
        return None if prefix is None else f"{prefix}.{e.field}"
    return None


class _Checker:
    def __init__(self, env: Env, root: Expr) -> None:
        self.env = env
        self.out = Checked(root)
        self.mapping: Mapping = {}
        self.var_counter = 0
        self.scopes: list[dict[str, CelType]] = []

    # --- helpers ---------------------------------------------------------------------------

    def error(self, e: Expr, message: str) -> None:
        self.out.errors.append((e.offset, message))

    def set_type(self, e: Expr, cel_type: CelType) -> None:
        self.out.types[e.id] = cel_type

    def type_of(self, e: Expr) -> CelType:
        return self.out.types.get(e.id, t.ERROR)

    def new_type_var(self) -> CelType:
        name = f"_var{self.var_counter}"
        self.var_counter += 1
        return t.param(name)

    def assignable(self, t1: CelType, t2: CelType) -> bool:
        result = is_assignable(self.mapping, t1, t2)
        if result is None:
            return False
        self.mapping = result
        return True

    def mismatch(self, e: Expr, expected: CelType, actual: CelType) -> None:
        self.error(e, f"expected type '{format_type(expected)}' but found '{format_type(actual)}'")

    def lookup_ident(self, name: str) -> CelType | None:
        name = name.removeprefix(".")
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return self.env.idents.get(name)

    def lookup_function(self, name: str) -> Function | None:
        return self.env.functions.get(name.removeprefix("."))

    # --- expressions -----------------------------------------------------------------------

    def check(self, e: Expr) -> None:
        if isinstance(e, Literal):
            self.set_type(e, e.type)
        elif isinstance(e, Ident):
            self.check_ident(e, e.name)
        elif isinstance(e, Select):
            self.check_select(e)
        elif isinstance(e, Call):
            self.check_call(e)
        elif isinstance(e, ListExpr):
            self.check_list(e)
        elif isinstance(e, MapExpr):
            self.check_map(e)
        elif isinstance(e, StructExpr):
            self.check_struct(e)
        elif isinstance(e, Comprehension):
            self.check_comprehension(e)

    def check_ident(self, e: Expr, name: str) -> None:
        found = self.lookup_ident(name)
        if found is None:
            self.set_type(e, t.ERROR)
            self.error(e, f"undeclared reference to '{name}' (in container '')")
            return
        self.set_type(e, found)
        self.out.idents[e.id] = name.removeprefix(".")

    def check_select(self, e: Select) -> None:
        qualified = qualified_name(e)
        if qualified is not None and "." in qualified and self.lookup_ident(qualified) is not None:
            self.out.rewrites[e.id] = Ident(e.id, e.offset, qualified)
            self.check_ident(e, qualified)
            return
        result = self.select_field(e, e.operand, e.field)
        if e.test_only:
            result = t.BOOL
        self.set_type(e, substitute(self.mapping, result, False))

    def select_field(self, e: Expr, operand: Expr, name: str) -> CelType:
        self.check(operand)
        operand_type = substitute(self.mapping, self.type_of(operand), False)
        target, is_optional = t.unwrap_optional(operand_type)
        result = t.ERROR
        if target.kind is t.Kind.MAP:
            result = target.params[1]
        elif target.kind is t.Kind.STRUCT:
            if not self.env.knows_struct(target.name):
                self.error(e, f"unexpected failed resolution of '{target.name}'")
            else:
                found = self.env.field_type(target.name, name)
                if found is None:
                    self.error(e, f"undefined field '{name}'")
                else:
                    result = found
        elif target.kind is t.Kind.TYPE_PARAM:
            self.assignable(t.DYN, target)
            result = t.DYN
        else:
            if not t.is_dyn_or_error(target):
                self.error(e, f"type '{format_type(target)}' does not support field selection")
            result = t.DYN
        return t.optional(result) if is_optional else result

    def check_call(self, e: Call) -> None:
        for arg in e.args:
            self.check(arg)
        if e.target is None:
            fn = self.lookup_function(e.function)
            if fn is None:
                self.error(e, f"undeclared reference to '{e.function}' (in container '')")
                self.set_type(e, t.ERROR)
                return
            self.resolve(e, fn, None)
            return
        prefix = qualified_name(e.target)
        if prefix is not None:
            fn = self.lookup_function(f"{prefix}.{e.function}")
            if fn is not None:
                rewritten = Call(e.id, e.offset, fn.name, None, e.args)
                self.out.rewrites[e.id] = rewritten
                self.resolve(rewritten, fn, None)
                return
        self.check(e.target)
        fn = self.lookup_function(e.function)
        if fn is None:
            self.set_type(e, t.ERROR)
            self.error(e, f"undeclared reference to '{e.function}' (in container '')")
            return
        self.resolve(e, fn, e.target)

    def resolve(self, e: Call, fn: Function, target: Expr | None) -> None:
        arg_types = tuple(self.type_of(a) for a in ((target,) if target else ()) + e.args)
        result: CelType | None = None
        ids: list[str] = []
        for overload in fn.overloads:
            if overload.id in self.env.disabled_overloads:
                continue
            if overload.member != (target is not None):
                continue
            if fn.name in ("_&&_", "_||_"):
                self.resolve_logical(e, overload.id, arg_types)
                return
            signature = t.function_type(overload.result, overload.args)
            if overload.type_params:
                fresh = {t.param(p): self.new_type_var() for p in overload.type_params}
                signature = substitute(fresh, signature, False)
            mapping = is_assignable_list(self.mapping, arg_types, signature.params[1:])
            if mapping is None:
                continue
            self.mapping = mapping
            ids.append(overload.id)
            fn_result = substitute(self.mapping, signature.params[0], False)
            if result is None:
                result = fn_result
            elif not t.is_dyn(result) and fn_result != result:
                result = t.DYN
        if result is None:
            shown = tuple(substitute(self.mapping, a, True) for a in arg_types)
            sig = format_signature(shown, instance=target is not None)
            self.error(e, f"found no matching overload for '{fn.name}' applied to '{sig}'")
            self.set_type(e, t.ERROR)
            return
        self.set_type(e, result)
        self.out.overloads[e.id] = tuple(ids)

    def resolve_logical(self, e: Call, overload_id: str, arg_types: tuple[CelType, ...]) -> None:
        failed = False
        for arg, arg_type in zip(e.args, arg_types, strict=True):
            if not self.assignable(arg_type, t.BOOL):
                self.mismatch(arg, t.BOOL, arg_type)
                failed = True
        if failed:
            self.set_type(e, t.ERROR)
            return
        self.set_type(e, t.BOOL)
        self.out.overloads[e.id] = (overload_id,)

    def join(self, e: Expr, previous: CelType | None, current: CelType) -> CelType:
        if previous is None:
            return current
        if self.assignable(previous, current):
            return most_general(previous, current)
        if not self.env.profile.homogeneous_literals_in_checker:
            return t.DYN
        self.mismatch(e, previous, current)
        return t.ERROR

    def check_list(self, e: ListExpr) -> None:
        elem: CelType | None = None
        for item in e.elements:
            self.check(item)
            elem = self.join(item, elem, self.type_of(item))
        self.set_type(e, t.list_of(elem if elem is not None else self.new_type_var()))

    def check_map(self, e: MapExpr) -> None:
        key_type: CelType | None = None
        value_type: CelType | None = None
        for key, value in e.entries:
            self.check(key)
            key_type = self.join(key, key_type, self.type_of(key))
            self.check(value)
            value_type = self.join(value, value_type, self.type_of(value))
        if key_type is None or value_type is None:
            key_type, value_type = self.new_type_var(), self.new_type_var()
        self.set_type(e, t.map_of(key_type, value_type))

    def check_struct(self, e: StructExpr) -> None:
        found = self.lookup_ident(e.type_name)
        if found is None:
            self.error(e, f"undeclared reference to '{e.type_name}' (in container '')")
            self.set_type(e, t.ERROR)
            return
        inner = found.params[0] if found.kind is t.Kind.TYPE and found.params else found
        self.error(e, f"'{format_type(inner)}' is not a message type")
        self.set_type(e, t.ERROR)
        for _, value in e.fields:
            self.check(value)

    def check_comprehension(self, e: Comprehension) -> None:
        self.check(e.iter_range)
        self.check(e.accu_init)
        range_type = substitute(self.mapping, self.type_of(e.iter_range), False)
        accu_type = self.type_of(e.accu_init)
        self.scopes.append({e.accu_var: accu_type})
        if range_type.kind in (t.Kind.LIST, t.Kind.MAP):
            var_type = range_type.params[0]
        elif range_type.kind in (t.Kind.DYN, t.Kind.ERROR, t.Kind.TYPE_PARAM):
            self.assignable(t.DYN, range_type)
            var_type = t.DYN
        else:
            self.error(
                e.iter_range,
                f"expression of type '{format_type(range_type)}' cannot be range of a "
                "comprehension (must be list, map, or dynamic)",
            )
            var_type = t.ERROR
        self.scopes.append({e.iter_var: var_type})
        self.check(e.loop_condition)
        self.assert_type(e.loop_condition, t.BOOL)
        self.check(e.loop_step)
        self.assert_type(e.loop_step, accu_type)
        self.scopes.pop()
        self.check(e.result)
        self.scopes.pop()
        self.set_type(e, substitute(self.mapping, self.type_of(e.result), False))

    def assert_type(self, e: Expr, expected: CelType) -> None:
        actual = self.type_of(e)
        if not self.assignable(expected, actual):
            self.mismatch(e, expected, actual)


def check(root: Expr, env: Env) -> Checked:
    """Type-check `root` in `env`."""
    checker = _Checker(env, root)
    checker.check(root)
    out = checker.out
    for key, value in out.types.items():
        out.types[key] = substitute(checker.mapping, value, True)
    return out
