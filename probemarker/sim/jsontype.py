"""The name of a decoded JSON value's type, in the two vocabularies the API server's
messages use.

Stage: the sim's ground floor, beside `errors` (the store's patches, the CRD's Go text
and its schema validation all word a value's type, and none of them may import
another). Input: a value as a JSON decoder gives it (None, bool, int, float, str,
list, dict). Output: its type's name.

- `json_type`: OpenAPI's (kube-openapi's validation messages, `must be of type
  integer: "string"`): null, boolean, integer, number, string, array, object;
- `go_json_type`: Go's encoding/json's, as an UnmarshalTypeError words it (`json:
  cannot unmarshal array into Go value of type ...`): bool and number where OpenAPI
  says boolean, integer and number.

Pure.
"""

from __future__ import annotations

from typing import Any

__all__ = ["go_json_type", "json_type"]

_GO_WORDS = {"boolean": "bool", "integer": "number"}


def json_type(value: Any) -> str:
    """OpenAPI's name of `value`'s type; a bool is a boolean, never an integer."""
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
    if isinstance(value, list):
        return "array"
    return "object"


def go_json_type(value: Any) -> str:
    """Go's encoding/json's name of `value`'s type: `json_type` with bool and number."""
    name = json_type(value)
    return _GO_WORDS.get(name, name)
