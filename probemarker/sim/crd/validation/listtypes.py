"""The x-kubernetes-list-type / x-kubernetes-list-map-keys checks of one schema node, as
apiextensions validation (Kubernetes 1.32) makes them when a CRD is written.

Input: a decoded schema node and its path. Output: field errors in the API server's order:
list-type on a non-array, items of a set that are not atomic, an unsupported list type,
map keys without list-type map; for map lists the keys, items and key types; then
validateMapListKeysMapSet (items of set and map lists not nullable, map keys required or
defaulted and not nullable). Some values are shown as the API server shows them even when
odd: the items' list type on the map-type error of a set, the items' type on a key's type
error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.validation.newstructural import child

__all__ = ["list_type_errors", "map_list_errors"]

Schema = Mapping[str, Any]
_MAP_KEY = "this property is in x-kubernetes-list-map-keys, so it"


def list_type_errors(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = s.get("type") or ""
    list_type = s.get("x-kubernetes-list-type")
    items = s.get("items")
    if list_type is not None and kind != "array":
        detail = "must be array if x-kubernetes-list-type is specified"
        where = child(path, "type")
        errors.append(
            FieldError.invalid(where, kind, detail) if kind else FieldError.required(where, detail)
        )
    elif list_type == "set" and isinstance(items, Mapping):
        errors += _set_items(items, path)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        where = child(path, "x-kubernetes-list-type")
        errors.append(FieldError.not_supported(where, list_type, ["atomic", "set", "map"]))
    if s.get("x-kubernetes-list-map-keys"):
        where, detail = (
            child(path, "x-kubernetes-list-type"),
            "must be map if x-kubernetes-list-map-keys is non-empty",
        )
        if list_type is None:
            errors.append(FieldError.required(where, detail))
        elif list_type != "map":
            errors.append(FieldError.invalid(where, list_type, detail))
    if list_type == "map":
        errors += _map_list_shape(s, path)
    return errors


def _set_items(items: Schema, path: str) -> list[FieldError]:
    detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
    item_list_type = items.get("x-kubernetes-list-type")
    if items.get("type") == "array" and item_list_type is not None and item_list_type != "atomic":
        return [FieldError.invalid(f"{path}.items.x-kubernetes-list-type", item_list_type, detail)]
    if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
        # The API server shows the items' x-kubernetes-list-type here, not their map type.
        return [FieldError.invalid(f"{path}.items.x-kubernetes-map-type", item_list_type, detail)]
    return []


def _map_list_shape(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    keys = list(s.get("x-kubernetes-list-map-keys") or [])
    items = s.get("items", ...)
    if not keys:
        detail = "must not be empty if x-kubernetes-list-type is map"
        errors.append(FieldError.required(child(path, "x-kubernetes-list-map-keys"), detail))
    if items is ...:
        detail = "must have a schema if x-kubernetes-list-type is map"
        errors.append(FieldError.required(child(path, "items"), detail))
        return errors
    if not isinstance(items, Mapping):
        detail = "must only have a single schema if x-kubernetes-list-type is map"
        errors.append(invalid_rendered(child(path, "items"), gorepr.schema_or_array(items), detail))
        return errors
    item_type = items.get("type") or ""
    if item_type != "object":
        detail = "must be object if parent array's x-kubernetes-list-type is map"
        return [*errors, FieldError.invalid(f"{path}.items.type", item_type, detail)]
    return errors + _map_keys(keys, items.get("properties") or {}, item_type, path)


def _map_keys(keys: list[str], props: Schema, item_type: str, path: str) -> list[FieldError]:
    """Each key a scalar property of the items, and no key twice."""
    errors: list[FieldError] = []
    where, rendered = child(path, "x-kubernetes-list-map-keys"), gorepr.strings(keys)
    seen: set[str] = set()
    for key in keys:
        if key not in props:
            detail = "entries must all be names of item properties"
            errors.append(invalid_rendered(where, rendered, detail))
        elif props[key].get("type") in ("array", "object"):
            # the API server shows the items' type here, not the key's
            detail = "must be a scalar type if parent array's x-kubernetes-list-type is map"
            at = f"{path}.items.properties[{key}].type"
            errors.append(FieldError.invalid(at, item_type, detail))
        if key in seen:
            errors.append(invalid_rendered(where, rendered, "must not contain duplicate entries"))
        seen.add(key)
    return errors


def map_list_errors(s: Schema, path: str) -> list[FieldError]:
    """validateMapListKeysMapSet."""
    items = s.get("items")
    list_type = s.get("x-kubernetes-list-type")
    if not isinstance(items, Mapping) or list_type not in ("set", "map"):
        return []
    errors: list[FieldError] = []
    if items.get("nullable"):
        detail = f"cannot be nullable when x-kubernetes-list-type is {list_type}"
        errors.append(FieldError.forbidden(f"{path}.items.nullable", detail))
    if list_type != "map":
        return errors
    required = set(items.get("required") or ())
    props = items.get("properties") or {}
    for key in s.get("x-kubernetes-list-map-keys") or ():
        prop = props.get(key)
        if prop is None:
            continue
        where = f"{path}.items.properties[{key}]"
        if key not in required and prop.get("default") is None:
            detail = f"{_MAP_KEY} must have a default or be a required property"
            errors.append(FieldError.required(f"{where}.default", detail))
        if prop.get("nullable"):
            errors.append(
                FieldError.forbidden(f"{where}.nullable", f"{_MAP_KEY} cannot be nullable")
            )
    return errors
