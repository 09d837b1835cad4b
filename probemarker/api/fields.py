"""Field errors and the small typed readers the validator walks a document with.

Stage: api (pure). A document is untrusted JSON/YAML: every reader checks the type
first and records a `FieldError` naming the field path instead of raising, so the
validator returns every problem at once and never crashes on garbage.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from probemarker.kit.printable import printable


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem: the field path (Kubernetes style) and what is wrong and how to fix it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(slots=True)
class Errors:
    """Collects field errors during one validation pass."""

    items: list[FieldError] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))

    def __bool__(self) -> bool:
        return bool(self.items)


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, i: int | str) -> str:
    return f"{path}[{i}]"


def describe(value: Any) -> str:
    """A short, safe rendering of a bad value for an error message."""
    kind = json_type(value)
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f'"{printable(text)}"'
    if kind in ("integer", "number", "boolean", "null"):
        return f"{kind} {value!r}" if kind != "null" else "null"
    return kind


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def as_map(value: Any, path: str, errors: Errors) -> Mapping[str, Any] | None:
    """The fields of an object; null fields count as absent, as the API server drops them."""
    if not isinstance(value, Mapping):
        errors.add(path, f"must be an object (a map of fields), got {describe(value)}")
        return None
    bad_keys = [k for k in value if not isinstance(k, str)]
    if bad_keys:
        errors.add(path, f"keys must be strings, got {describe(bad_keys[0])}")
        return None
    return {k: v for k, v in value.items() if v is not None}


def as_list(value: Any, path: str, errors: Errors) -> Sequence[Any] | None:
    if isinstance(value, list | tuple):
        return value
    errors.add(path, f"must be a list, got {describe(value)}")
    return None


def as_str(value: Any, path: str, errors: Errors) -> str | None:
    if isinstance(value, str):
        return value
    errors.add(path, f"must be a string, got {describe(value)}")
    return None


def as_int(value: Any, path: str, errors: Errors) -> int | None:
    # JSON has one number type; Kubernetes accepts 3.0 for an integer field but not 3.5.
    if isinstance(value, bool):
        errors.add(path, f"must be an integer, got {describe(value)}")
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    errors.add(path, f"must be an integer, got {describe(value)}")
    return None


def as_string_map(value: Any, path: str, errors: Errors) -> dict[str, str] | None:
    mapping = as_map(value, path, errors)
    if mapping is None:
        return None
    result: dict[str, str] = {}
    complete = True
    for key, item in mapping.items():
        text = as_str(item, index(path, key), errors)
        if text is None:
            complete = False
        else:
            result[key] = text
    # A map with a bad entry is reported once; callers skip their emptiness checks.
    return result if complete else None


def check_known(
    mapping: Mapping[str, Any], known: Iterable[str], path: str, errors: Errors
) -> None:
    """Unknown fields are errors, as with kubectl's default strict field validation."""
    known_set = tuple(known)
    for key in mapping:
        if key not in known_set:
            errors.add(
                child(path, key),
                f"unknown field (check the spelling; known fields here: {', '.join(known_set)})",
            )


def matches(pattern: str, text: str) -> bool:
    """Patterns from rules.py, matched the way RE2 (CEL `matches`, OpenAPI `pattern`) does.

    RE2's `$` (without the m flag) matches only at the end of the text; Python's also
    matches before a final newline, which would let "true\\n" pass as a label value.
    """
    return re.search(_re2_end(pattern), text) is not None


@functools.cache
def _re2_end(pattern: str) -> str:
    return (
        pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    )
