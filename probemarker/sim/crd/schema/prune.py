"""Structural pruning and defaulting of custom resources
(apiextensions-apiserver pkg/apiserver/schema/{pruning,defaulting}).

Pruning drops every field the schema does not specify, except: apiVersion/kind (strings) and
metadata (an object) at the resource root and in x-kubernetes-embedded-resource objects;
anything under x-kubernetes-preserve-unknown-fields (whose *specified* properties are still
pruned). Then nulls in non-nullable fields without a default are removed. Defaulting fills
absent properties (and nulls in non-nullable ones) with a deep copy of `default`, then descends,
so defaults nested inside a default apply too; it never creates a missing parent object.
Both functions return new values and leave their input untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.schema.node import SchemaNode

_META_FIELDS = ("apiVersion", "kind", "metadata")


def prune_object(
    obj: Mapping[str, Any], root: SchemaNode, *, unknown: list[str] | None = None
) -> dict[str, Any]:
    """Prune a whole resource (the root counts as an embedded resource). The paths of dropped
    fields (`spec.probes[0].perodSeconds`) are appended to `unknown` when it is given."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    _prune(out, root, "", unknown if unknown is not None else [], resource_root=True)
    _prune_nulls(out, root)
    return out


def default_object(obj: Mapping[str, Any], root: SchemaNode) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    _default(out, root)
    return out


def _keeps_meta(key: str, value: Any) -> bool:
    if key in ("apiVersion", "kind"):
        return isinstance(value, str)
    return key == "metadata" and isinstance(value, dict)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(
    value: Any,
    schema: SchemaNode | None,
    path: str,
    unknown: list[str],
    *,
    resource_root: bool = False,
) -> None:
    embedded = resource_root or (schema is not None and schema.embedded_resource)
    if schema is not None and schema.preserve_unknown_fields:
        _skip_prune(value, schema, path, unknown, embedded=embedded)
        return
    if isinstance(value, dict):
        for key in list(value):
            child = value[key]
            if schema is not None and embedded and key in _META_FIELDS and _keeps_meta(key, child):
                continue
            if schema is not None and key in schema.properties:
                _prune(child, schema.properties[key], _child(path, key), unknown)
            elif (
                schema is not None
                and isinstance(schema.additional_properties, SchemaNode | bool)
                and schema.additional_properties
            ):
                _prune(child, schema.additional_schema, _child(path, key), unknown)
            else:
                if key not in _META_FIELDS or path:
                    unknown.append(_child(path, key))
                del value[key]
    elif isinstance(value, list):
        item_schema = schema.items if schema is not None else None
        for index, item in enumerate(value):
            _prune(item, item_schema, f"{path}[{index}]", unknown)


def _skip_prune(
    value: Any, schema: SchemaNode, path: str, unknown: list[str], *, embedded: bool
) -> None:
    """Under x-kubernetes-preserve-unknown-fields: keep unknown keys, prune specified subtrees."""
    if isinstance(value, dict):
        for key, child in value.items():
            if embedded and key in _META_FIELDS:
                continue
            if key in schema.properties:
                _prune(child, schema.properties[key], _child(path, key), unknown)
            elif isinstance(schema.additional_properties, SchemaNode):
                _prune(child, schema.additional_properties, _child(path, key), unknown)
    elif isinstance(value, list) and schema.items is not None:
        for index, item in enumerate(value):
            embedded_item = schema.items.embedded_resource
            _skip_prune(item, schema.items, f"{path}[{index}]", unknown, embedded=embedded_item)


def _drop_null(value: Any, schema: SchemaNode) -> bool:
    return value is None and not schema.nullable and not schema.has_default


def _prune_nulls(value: Any, schema: SchemaNode | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        additional = schema.additional_properties
        for key in list(value):
            child_schema = schema.properties.get(key)
            if child_schema is None and isinstance(additional, SchemaNode):
                child_schema = additional
            if child_schema is None:
                continue
            if _drop_null(value[key], child_schema):
                del value[key]
            else:
                _prune_nulls(value[key], child_schema)
    elif isinstance(value, list):
        for item in value:
            _prune_nulls(item, schema.items)


def _non_nullable_null(value: Any, schema: SchemaNode | None) -> bool:
    return value is None and schema is not None and not schema.nullable


def _default(value: Any, schema: SchemaNode | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        for key, prop in schema.properties.items():
            if not prop.has_default or prop.default is None:
                continue
            if key not in value or _non_nullable_null(value[key], prop):
                value[key] = copy.deepcopy(prop.default)
        additional = schema.additional_properties
        for key, child in value.items():
            if key in schema.properties:
                _default(child, schema.properties[key])
            elif isinstance(additional, SchemaNode):
                if _non_nullable_null(child, additional) and additional.has_default:
                    value[key] = child = copy.deepcopy(additional.default)
                _default(child, additional)
    elif isinstance(value, list):
        items = schema.items
        for index, item in enumerate(value):
            if items is not None and _non_nullable_null(item, items) and items.has_default:
                value[index] = item = copy.deepcopy(items.default)
            _default(item, items)
