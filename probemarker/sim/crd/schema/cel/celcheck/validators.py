"""cel-go's AST validators that Kubernetes enables (cel/validator.go), run after a successful
type check: homogeneous list and map literals, and (Kubernetes 1.29+) literal arguments of
duration(), timestamp() and matches() that would fail at run time.

Stage: between the checker and the cost estimate. Inputs: the `Checked` tree and the profile.
Output: errors as (offset, message): `expected type 'int' but found 'string'`,
`invalid duration argument`, `invalid timestamp argument`, `invalid matches argument`.
Not done: the string.format() literal checks of cel-go's strings extension.
"""

from __future__ import annotations

import datetime
import re

import re2

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.celcheck.checker import Checked
from probemarker.sim.crd.schema.cel.celcheck.env import Profile
from probemarker.sim.crd.schema.cel.celcheck.expr import (
    Call,
    Expr,
    ListExpr,
    Literal,
    MapExpr,
    children,
)

_DURATION = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+")
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))"
)


def _valid_duration(text: str) -> bool:
    return text in ("0", "+0", "-0") or _DURATION.fullmatch(text) is not None


def _valid_timestamp(text: str) -> bool:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    return all(
        int(g) < lim for g, lim in ((match.group(7) or "0", 24), (match.group(8) or "0", 60))
    )


def _valid_regex(text: str) -> bool:
    options = re2.Options()
    options.log_errors = False  # RE2 would print the error on stderr
    try:
        re2.compile(text, options)
    except re2.error:
        return False
    return True


_LITERAL_CHECKS = {
    "duration": _valid_duration,
    "timestamp": _valid_timestamp,
    "matches": _valid_regex,
}


def _calls_and_literals(
    root: Expr, checked: Checked, exempt: frozenset[str]
) -> tuple[list[Call], list[Expr]]:
    """Every call, and every list/map literal not inside a call of an exempt function."""
    calls: list[Call] = []
    aggregates: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, exempted = stack.pop()
        node = checked.rewrites.get(node.id, node)
        if isinstance(node, Call):
            calls.append(node)
            exempted = exempted or node.function in exempt
        elif isinstance(node, ListExpr | MapExpr) and not exempted:
            aggregates.append(node)
        stack.extend((child, exempted) for child in reversed(children(node)))
    return calls, aggregates


def _homogeneous(node: Expr, checked: Checked, errors: list[tuple[int, str]]) -> None:
    def mismatch(e: Expr, expected: t.CelType, actual: t.CelType) -> None:
        errors.append((e.offset, f"expected type '{t.format_type(expected)}' but found "
                                 f"'{t.format_type(actual)}'"))  # fmt: skip

    types = checked.types
    if isinstance(node, ListExpr):
        first: t.CelType | None = None
        for item in node.elements:
            found = types[item.id]
            if first is None:
                first = found
            elif not t.equivalent(first, found):
                mismatch(item, first, found)
                break
    elif isinstance(node, MapExpr) and node.entries:
        key0, value0 = types[node.entries[0][0].id], types[node.entries[0][1].id]
        for key, value in node.entries[1:]:
            if not t.equivalent(key0, types[key.id]):
                mismatch(key, key0, types[key.id])
            if not t.equivalent(value0, types[value.id]):
                mismatch(value, value0, types[value.id])


def validate(checked: Checked, profile: Profile) -> list[tuple[int, str]]:
    """The validators' errors for a checked expression without checker errors."""
    exempt = frozenset({"format"}) if profile.libraries.strings_version >= 1 else frozenset()
    calls, aggregates = _calls_and_literals(checked.root, checked, exempt)
    errors: list[tuple[int, str]] = []
    if not profile.homogeneous_literals_in_checker:
        for node in aggregates:
            _homogeneous(node, checked, errors)
    if profile.literal_validators:
        for call in calls:
            valid = _LITERAL_CHECKS.get(call.function)
            if valid is None or not call.args or not isinstance(call.args[0], Literal):
                continue
            value = call.args[0].value
            if isinstance(value, str) and not valid(value):
                errors.append((call.args[0].offset, f"invalid {call.function} argument"))
    return errors
