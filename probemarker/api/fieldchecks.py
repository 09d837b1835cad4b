"""The checks every part of the marker's validation repeats, on top of fields.py's readers.

Stage: api (pure). Input: a part of an untrusted document, its field path and the
pass's `Errors`. Output: the problems recorded there: a required string that is
missing or not a string (`required_str`), a list over its limit (`check_max_items`),
a value used twice in its list (`check_unique`). Used by validation.py,
handlervalidation.py and labelvalidation.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probemarker.api.fields import Errors, as_str, child, describe, index

__all__ = ["check_max_items", "check_unique", "required_str"]


def required_str(
    mapping: Mapping[str, Any], field: str, path: str, errors: Errors, what: str
) -> str | None:
    """`mapping[field]` as a string; missing, it is an error that says `what` it holds."""
    if field not in mapping:
        errors.add(child(path, field), f"required: {what}")
        return None
    return as_str(mapping[field], child(path, field), errors)


def check_max_items(items: Sequence[Any] | None, limit: int, path: str, errors: Errors) -> None:
    if items is not None and len(items) > limit:
        errors.add(path, f"must have at most {limit} items, got {len(items)}")


def check_unique(
    value: Any,
    *,
    seen: dict[str, int],
    i: int,
    path: str,
    list_path: str,
    errors: Errors,
    message: str,
) -> None:
    """Record `value` (item `i` of `list_path`) in `seen`; a repeat is an error at `path`."""
    if not isinstance(value, str):
        return
    if value in seen:
        errors.add(
            path, f"{message}: {describe(value)} is also used by {index(list_path, seen[value])}"
        )
    else:
        seen[value] = i
