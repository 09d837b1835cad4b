"""Label and field selectors as the API server parses and matches them.

``parse_label_selector`` follows the lexer/parser of k8s.io/apimachinery/pkg/labels
(``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``, ``>``/``<`` on integers),
including its error wording, so a malformed ``labelSelector`` is refused with the same
400 message. Field selectors live in :mod:`probemarker.sim.store.fieldselectors` and are re-exported here:
``parse_field_selector`` follows pkg/fields (``=``, ``==``, ``!=``, terms
joined by ``,``, ``\\`` escapes in values); which field labels a resource supports is
given by :func:`supported_field_labels` and :func:`field_value`, as the per-kind field
label conversion functions of pkg/apis/core/v1 define them.

Invariants: parsed selectors are immutable values; an empty selector matches everything;
a missing field reads as ``""`` when matching, as ``fields.Set.Get`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from probemarker.sim.errors import BadRequest
from probemarker.sim.store.fieldselectors import (
    FieldSelector,
    FieldTerm,
    field_value,
    parse_field_selector,
    supported_field_labels,
)

__all__ = [
    "FieldSelector",
    "FieldTerm",
    "LabelSelector",
    "Requirement",
    "field_value",
    "parse_field_selector",
    "parse_label_selector",
    "supported_field_labels",
]

# ---------------------------------------------------------------- label keys and values

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def qualified_name_errors(key: str) -> list[str]:
    """validation.IsQualifiedName: ``[prefix/]name``."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
        errs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        errs = []
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append("prefix part " + _SUBDOMAIN_MSG)
    else:
        return [
            "a qualified name "
            + _QUALIFIED_NAME_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _NAME_RE.fullmatch(name):
        errs.append("name part " + _QUALIFIED_NAME_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def _go_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------- label selectors


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement; ``operator`` is a selection.Operator string:
    ``in notin = == != exists ! gt lt``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in ("in", "=", "=="):
            return self.key in labels and labels[self.key] in self.values
        if op in ("notin", "!="):
            return self.key not in labels or labels[self.key] not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if self.key not in labels:
            return False
        try:
            have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
        except ValueError:
            return False
        return have > want if op == "gt" else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of requirements, sorted by key as the parser sorts them."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _parse_int64(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


_ERR, _EOS, _CPAR, _COMMA, _NOT, _DEQ, _EQ, _GT, _ID, _IN, _LT, _NEQ, _NOTIN, _OPAR = range(14)
_TOKENS = {
    ")": _CPAR, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "in": _IN,
    "<": _LT, "!=": _NEQ, "notin": _NOTIN, "(": _OPAR,
}  # fmt: skip
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


def _lex(text: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((_EOS, ""))
            return items
        if text[pos] in _SPECIAL:
            buf, last = "", (_ERR, "")
            while pos < n and text[pos] in _SPECIAL:
                buf += text[pos]
                if buf in _TOKENS:
                    last = (_TOKENS[buf], buf)
                elif last[0] != _ERR:
                    break
                pos += 1
            if last[0] == _ERR:
                items.append((_ERR, f"error expected: keyword found '{buf}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_TOKENS.get(word, _ID), word))


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        if values and tok in (_IN, _NOTIN):
            tok = _ID
        return tok, lit

    def take(self, values: bool = True) -> tuple[int, str]:
        item = self.peek(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok in (_ID, _NOT):
                try:
                    reqs.append(self.requirement())
                except ValueError as e:
                    raise ValueError(f"unable to parse requirement: {e}") from None
                t, lit2 = self.take()
                if t == _EOS:
                    return reqs
                if t != _COMMA:
                    raise ValueError(f"found '{lit2}', expected: ',' or 'end of string'")
                t2, l2 = self.peek()
                if t2 not in (_ID, _NOT):
                    raise ValueError(f"found '{l2}', expected: identifier after ','")
            elif tok == _EOS:
                return reqs
            else:
                raise ValueError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        operator = ""
        tok, key = self.take()
        if tok == _NOT:
            operator = "!"
            tok, key = self.take()
        if tok != _ID:
            raise ValueError(f"found '{key}', expected: identifier")
        key_errs = qualified_name_errors(key)
        if key_errs:
            raise ValueError(f": Invalid value: {_go_quote(key)}: {'; '.join(key_errs)}")
        if operator == "!" or self.peek()[0] in (_EOS, _COMMA):
            # "!key" is complete by itself; whatever follows is the caller's problem.
            return Requirement(key, operator or "exists")
        tok, lit = self.take(values=False)
        ops = {_IN: "in", _EQ: "=", _DEQ: "==", _GT: "gt", _LT: "lt", _NOTIN: "notin", _NEQ: "!="}
        if tok not in ops:
            raise ValueError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = ops[tok]
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        return _new_requirement(key, op, sorted(values))

    def set_values(self) -> set[str]:
        tok, lit = self.take()
        if tok != _OPAR:
            raise ValueError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == _CPAR:
            self.take()
            return {""}
        if tok not in (_ID, _COMMA):
            raise ValueError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            t, item = self.take()
            if t == _ID:
                values.add(item)
                t2, l2 = self.peek()
                if t2 == _COMMA:
                    continue
                if t2 == _CPAR:
                    break
                raise ValueError(f"found '{l2}', expected: ',' or ')'")
            if t == _COMMA:
                if not values:
                    values.add("")
                t2, _ = self.peek()
                if t2 == _CPAR:
                    values.add("")
                    break
                if t2 == _COMMA:
                    self.take()
                    values.add("")
                continue
            raise ValueError(f"found '{item}', expected: ',', or identifier")
        if self.take()[0] != _CPAR:
            raise ValueError(f"found '{lit}', expected: ')'")
        return values

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (_EOS, _COMMA):
            return {""}
        tok, lit = self.take()
        if tok == _ID:
            return {lit}
        raise ValueError(f"found '{lit}', expected: identifier")


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    errs: list[str] = []
    if op in ("gt", "lt"):
        for i, v in enumerate(values):
            try:
                _parse_int64(v)
            except ValueError:
                errs.append(
                    f"values[{i}]: Invalid value: {_go_quote(v)}: for 'Gt', 'Lt' operators, "
                    "the value must be an integer"
                )
    for i, v in enumerate(values):
        value_errs = label_value_errors(v)
        if value_errs:
            errs.append(
                f"values[{i}][{key}]: Invalid value: {_go_quote(v)}: {'; '.join(value_errs)}"
            )
    if errs:
        raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, op, tuple(values))


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value; BadRequest with labels.Parse's message."""
    try:
        reqs = _LabelParser(text).parse()
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))
