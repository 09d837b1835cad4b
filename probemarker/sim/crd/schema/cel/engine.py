"""Kubernetes-flavoured CEL on top of cel-python (celpy), for x-kubernetes-validations.

What Kubernetes does that plain celpy does not, and is done here:
- values are converted by schema (k8s.io/apiserver/pkg/cel/common UnstructuredToVal): integers
  of `type: number` become doubles, `format: date-time`/`duration`/`byte` strings become
  timestamps/durations/bytes, object property names are escaped (`a-b` -> `a__dash__b`,
  keywords -> `__in__`, ...), int-or-string values stay int or string (CEL `dyn`);
- `has(a.b)` is true iff key `b` is present in `a`, and an error (not false) if `a` itself
  cannot be evaluated, as in cel-go;
- the Kubernetes string and list library functions (lowerAscii, split, join, indexOf, isSorted,
  sum, max, ...), on top of celpy's standard ones (`matches` is RE2 search, unanchored;
  `size` of a string counts code points; all()/exists() over a map iterate its keys);
- runtime errors are worded like cel-go's (`no such key: x`, `no such overload`, ...).
"""

from __future__ import annotations

import base64
import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator

from probemarker.sim.crd.schema.cel import library
from probemarker.sim.crd.schema.cel.library import CelOptional
from probemarker.sim.crd.schema.node import SchemaNode

__all__ = [
    "CelCompileError",
    "CelError",
    "CelOptional",
    "CelProgram",
    "compile_cel",
    "escape_name",
    "to_cel",
]

_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
     "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
     "void", "while"}
)  # fmt: skip
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")


class CelCompileError(ValueError):
    """A rule that does not parse."""


class CelError(Exception):
    """A rule that failed at run time; str() is worded like cel-go's error."""


def escape_name(name: str) -> str | None:
    """k8s.io/apiserver/pkg/cel.Escape; None when the property cannot be accessed from CEL."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    out = name.replace("__", "__underscores__")
    return out.replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")


class _KubeEvaluator(Evaluator):
    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return _KubeEvaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        # celpy's map/filter/exists_one raise a rule error out of the macro instead of returning
        # it as a value, which defeats CEL's commutative `true || error == true`.
        try:
            return super().member_dot_arg(tree)
        except CELEvalError as exc:
            return exc

    def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
        node: Any = exprlist.children[0] if exprlist.children else None
        while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
            node = node.children[0]
        if not (isinstance(node, lark.Tree) and node.data == "member_dot"):
            return super().macro_has_eval(exprlist)
        member_tree, name_token = node.children
        name = cast(lark.Token, name_token).value
        target = self.visit(member_tree)
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, celtypes.MapType):
            return celtypes.BoolType(celtypes.StringType(name) in target)
        return CELEvalError("invalid type for field selection.", TypeError, None)


class _KubeRunner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _KubeEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


_ENV = celpy.Environment(runner_class=_KubeRunner)


@dataclass(frozen=True, slots=True)
class CelProgram:
    source: str
    uses_old_self: bool
    runner: Any
    ast: Any = None

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        """Evaluate with already converted variables (see to_cel); raises CelError."""
        try:
            return self.runner.evaluate(dict(variables))
        except CELEvalError as exc:
            raise CelError(_error_text(exc)) from exc
        except RecursionError as exc:  # pragma: no cover - pathological rules
            raise CelError("max recursion depth exceeded") from exc
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise CelError(f"no such overload: {exc}") from exc


def compile_cel(source: str) -> CelProgram:
    """Parse a rule (or messageExpression); raises CelCompileError worded like cel-go's."""
    try:
        ast = _ENV.compile(source)
    except CELParseError as exc:
        line = getattr(exc, "line", None) or 1
        column = getattr(exc, "column", None) or 1
        first = str(exc.args[0]).splitlines()[0] if exc.args else "syntax error"
        raise CelCompileError(f"ERROR: <input>:{line}:{column}: Syntax error: {first}") from exc
    except Exception as exc:
        raise CelCompileError(f"ERROR: <input>:1:1: {exc}") from exc
    uses_old = any(
        isinstance(tok, lark.Token) and tok.type == "IDENT" and tok.value == "oldSelf"
        for tok in ast.scan_values(lambda v: isinstance(v, lark.Token))
    )
    runner = _ENV.program(ast, library.FUNCTIONS)
    return CelProgram(source=source, uses_old_self=uses_old, runner=runner, ast=ast)


def _error_text(exc: CELEvalError) -> str:
    message = str(exc.args[0]) if exc.args else "evaluation error"
    cause = exc.args[1] if len(exc.args) > 1 else None
    detail = exc.args[2] if len(exc.args) > 2 else None
    if message.startswith("no such member in mapping"):
        return "no such key: " + message.split(": ", 1)[1].strip("'")
    if message == "no such key" and detail:
        return f"no such key: {detail[0] if isinstance(detail, tuple) else detail}"
    if cause is IndexError or message == "invalid_argument":
        return "index out of bounds"
    if cause is ZeroDivisionError:
        return "division by zero" if "divide" in message else "modulus by zero"
    if "overflow" in message:
        return "integer overflow"
    if "no matching overload" in message or message.startswith("no such overload"):
        return "no such overload"
    if "does not support field selection" in message or "field selection" in message:
        return "no such overload"
    return message


def _convert_scalar(value: Any, schema: SchemaNode | None) -> Any:
    kind = schema.type if schema is not None else ""
    fmt = schema.format if schema is not None else ""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.DoubleType(value) if kind == "number" else celtypes.IntType(value)
    if isinstance(value, float):
        if kind == "integer" and value.is_integer():
            return celtypes.IntType(int(value))
        return celtypes.DoubleType(value)
    if isinstance(value, str) and kind == "string" and fmt:
        try:
            if fmt in ("date-time", "datetime"):
                return celtypes.TimestampType(value.replace("Z", "+00:00").replace("z", "+00:00"))
            if fmt == "date":
                day = datetime.date.fromisoformat(value)
                return celtypes.TimestampType(
                    datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
                )
            if fmt == "duration":
                return celtypes.DurationType(value)
            if fmt == "byte":
                return celtypes.BytesType(base64.b64decode(value))
        except (ValueError, TypeError):
            return celtypes.StringType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    return value


def to_cel(value: Any, schema: SchemaNode | None, *, resource_root: bool = False) -> Any:
    """A JSON value as Kubernetes presents it to CEL for a node of `schema`."""
    if value is None:
        return None
    if isinstance(value, list):
        items = schema.items if schema is not None else None
        converted = [to_cel(v, items) for v in value]
        if schema is not None and schema.list_type in ("set", "map"):
            return _UnorderedList(converted)
        return celtypes.ListType(converted)
    if not isinstance(value, dict):
        return _convert_scalar(value, schema)
    out: dict[Any, Any] = {}
    embedded = resource_root or (schema is not None and schema.embedded_resource)
    dyn = schema is None or (not schema.properties and schema.additional_properties is None)
    additional = schema.additional_schema if schema is not None else None
    for key, child in value.items():
        # untyped/preserve-unknown objects are dyn maps; type meta is visible in resources
        plain = (dyn and not (embedded and key == "metadata")) or (
            embedded and key in ("apiVersion", "kind")
        )
        if plain:
            out[celtypes.StringType(key)] = to_cel(child, None)
        elif embedded and key == "metadata" and isinstance(child, dict):
            # Only metadata.name and metadata.generateName are visible (WithTypeAndObjectMeta).
            meta = {k: child[k] for k in ("name", "generateName") if k in child}
            out[celtypes.StringType(key)] = to_cel(meta, None)
        elif schema is not None and key in schema.properties:
            escaped = escape_name(key)
            if escaped is not None:
                out[celtypes.StringType(escaped)] = to_cel(child, schema.properties[key])
        elif additional is not None:
            out[celtypes.StringType(key)] = to_cel(child, additional)
    return celtypes.MapType(out)


class _UnorderedList(celtypes.ListType):
    """A list of x-kubernetes-list-type set or map: `==` ignores the order of the elements,
    as Kubernetes' unstructuredSetList/unstructuredMapList do."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, list):
            return bool(super().__eq__(other))
        if len(self) != len(other):
            return False
        remaining = list(other)
        for item in self:
            for index, candidate in enumerate(remaining):
                try:
                    same = bool(candidate == item)
                except TypeError:
                    same = False
                if same:
                    del remaining[index]
                    break
            else:
                return False
        return True

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)


def cel_to_text(value: Any) -> str | None:
    """A messageExpression result as a Go string, or None when it is not a string."""
    if isinstance(value, celtypes.StringType | str):
        return str(value)
    return None


def cast_bool(value: Any) -> bool | None:
    """True/False for a CEL bool result, None for anything else (a non-bool rule result)."""
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    return cast(bool | None, None)
