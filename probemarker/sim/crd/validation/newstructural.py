"""NewStructural's refusals (apiextensions-apiserver pkg/apiserver/schema/convert.go,
Kubernetes 1.32): the fields a structural schema cannot hold, checked before the structural
invariants, and the small schema helpers the CRD checks share.

Input: a decoded openAPIV3Schema (`crdtypes`). Output: NewStructural's error text (`OpenAPIV3Schema
'$ref' is not supported`, `... 'items' must be a schema, but is an array`, ...) or None; the
API server shows it only when no other error was found in the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_schema", "child", "new_structural_error", "properties_of"]

Schema = Mapping[str, Any]


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def as_schema(value: Any) -> Schema | None:
    return value if isinstance(value, Mapping) else None


def properties_of(schema: Schema) -> Mapping[str, Schema]:
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def _unsupported(schema: Schema) -> str | None:
    for key, name in (("id", "id"), ("$schema", "schema")):
        if schema.get(key):
            return f"OpenAPIV3Schema '{name}' is not supported"
    if schema.get("$ref"):
        return "OpenAPIV3Schema '$ref' is not supported"
    for key in ("patternProperties", "dependencies"):
        if schema.get(key):
            return f"OpenAPIV3Schema '{key}' is not supported"
    if "additionalItems" in schema:
        return "OpenAPIV3Schema 'additionalItems' is not supported"
    if schema.get("definitions"):
        return "OpenAPIV3Schema 'definitions' is not supported"
    return None


def _value_validation_error(schema: Schema) -> str | None:
    nested = [as_schema(schema.get("not"))]
    for junctor in ("allOf", "anyOf", "oneOf"):
        nested.extend(as_schema(v) for v in schema.get(junctor) or ())
    for part in nested:
        if part is not None and (error := _structural_error(part)) is not None:
            return error
    return None


def _structural_error(schema: Schema) -> str | None:
    """NewStructural (and newNestedValueValidation, which refuses the same things)."""
    error = _unsupported(schema) or _value_validation_error(schema)
    if error is not None:
        return error
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    items = schema.get("items")
    if isinstance(items, list) and items:
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    children = [
        as_schema(items),
        *properties_of(schema).values(),
        as_schema(schema.get("additionalProperties")),
    ]
    for part in children:
        if part is not None and (error := _structural_error(part)) is not None:
            return error
    return None


def new_structural_error(schema: Schema) -> str | None:
    """Why NewStructural refuses `schema`, or None."""
    return _structural_error(schema)
