"""cel.ValidFieldPath (apiextensions-apiserver pkg/apiserver/schema/cel, Kubernetes 1.32):
does a JSON path such as `.spec.ports['http']` name a field of a schema?

Used for the `fieldPath` of x-kubernetes-validations rules and for selectableFields. Input:
the path and a decoded schema; output: the steps (name, whether it is a property rather
than a map key) and the schema the path ends at, or a ValueError worded as the API server
words it (`does not refer to a valid field`, `expected [ or . but got: x`, ...). The path
is split as the API server's scanner splits it: `.`, `[` and `]` are tokens of their own,
and a token starting with a single quote runs to the next unescaped single quote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["path_text", "valid_field_path"]

Schema = Mapping[str, Any]


def _tokens(text: str) -> list[str]:
    """The tokens of ValidFieldPath's scanner: '.', '[', ']', quoted strings, names."""
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos] == "'":
            end = pos + 1
            while end < len(text) and not (text[end] == "'" and text[end - 1] != "\\"):
                end += 1
            tokens.append(text[pos : end + 1])
            pos = end + 1
        elif text[pos] in ".[]":
            tokens.append(text[pos])
            pos += 1
        else:
            end = pos
            while end < len(text) and text[end] not in ".[]":
                end += 1
            tokens.append(text[pos:end])
            pos = end
    return tokens


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    "\\": "\\",
}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) not in _ESCAPES:
            raise ValueError(f"invalid string literal: invalid escape char {match.group(0)}")
        return _ESCAPES[match.group(1)]

    return re.sub(r"\\(.)", one, text)


def valid_field_path(
    json_path: str, schema: Schema | None, *, allow_array: bool = True
) -> tuple[list[tuple[str, bool]], Schema | None]:
    """cel.ValidFieldPath: the path as (name, is a property) steps and the schema it ends
    at; ValueError with the API server's message when it does not refer to a field."""
    steps: list[tuple[str, bool]] = []
    tokens = _tokens(json_path)
    pos = 0
    while pos < len(tokens):
        token = tokens[pos]
        if token == "[":
            if not allow_array:
                raise ValueError("array notation is not allowed")
            if pos + 1 >= len(tokens):
                raise ValueError("unexpected end of JSON path")
            quoted = tokens[pos + 1]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                raise ValueError(f"expected single quoted string but got {quoted}")
            name = _unescape(quoted[1:-1])
            if pos + 2 >= len(tokens):
                raise ValueError("unexpected end of JSON path")
            if tokens[pos + 2] != "]":
                raise ValueError(f"expected ] but got {tokens[pos + 2]}")
            pos += 3
        elif token == ".":
            if pos + 1 >= len(tokens):
                raise ValueError("unexpected end of JSON path")
            name, pos = tokens[pos + 1], pos + 2
        else:
            raise ValueError(f"expected [ or . but got: {token}")
        schema = _step(schema, name, steps)
    return steps, schema


def _step(schema: Schema | None, name: str, steps: list[tuple[str, bool]]) -> Schema | None:
    props = schema.get("properties") if schema is not None else None
    if isinstance(props, Mapping) and props:
        if name not in props:
            raise ValueError("does not refer to a valid field")
        steps.append((name, True))
        found = props[name]
        return found if isinstance(found, Mapping) else None
    if schema is not None and schema.get("additionalProperties") is not None:
        steps.append((name, False))
        additional = schema["additionalProperties"]
        return additional if isinstance(additional, Mapping) else None
    raise ValueError("does not refer to a valid field")


def path_text(steps: list[tuple[str, bool]]) -> str:
    """The field.Path string of the steps: properties joined with `.`, map keys as `[k]`."""
    text = ""
    for name, named in steps:
        text = (f"{text}.{name}" if text else name) if named else f"{text}[{name}]"
    return text
