"""OpenAPI v3 value validation of a custom resource, as kube-openapi's validate package does it
and apiextensions-apiserver's kubeOpenAPIResultToFieldErrors turns the result into field errors.

Paths follow kube-openapi: properties `a.b`, items `a[0]`, map keys `a.key` (not `a[key]`).
Messages: `<path> in body should be greater than or equal to 1` etc.; type errors
`<path> in body must be of type integer: "string"`. Per node, every applicable validator runs
(type, allOf/anyOf/oneOf/not, string, format, number, array, enum, object); string checks stop
at the first failure and minProperties/maxProperties failures hide the object's other checks.
On update, ratcheting drops errors from correlatable nodes whose value did not change.
Also here: x-kubernetes-list-type set/map uniqueness (schema/listtype).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import re2

from probemarker.sim.crd.gotext.fielderr import FieldError, go_float, go_json, go_quote
from probemarker.sim.crd.schema import formats
from probemarker.sim.crd.schema.node import SchemaNode
from probemarker.sim.jsontype import json_type

_NONE: Any = object()  # "no correlated old value"


def validate_object(
    obj: Mapping[str, Any], root: SchemaNode, *, old: Mapping[str, Any] | None
) -> list[FieldError]:
    errors = _Validator().node(obj, root, "", old if old is not None else _NONE)
    if old is None or not list_type_errors(old, root):
        errors.extend(list_type_errors(obj, root))
    return errors


def validate_value(value: Any, schema: SchemaNode) -> list[FieldError]:
    """Validate a bare value against a schema node taken as the root (how CRD defaults are
    checked): errors at the root have the path `<nil>` and messages ` in body ...`."""
    return _Validator().node(value, schema, "", _NONE)


def _types(schema: SchemaNode) -> list[str]:
    if schema.int_or_string:
        return ["integer", "string"]
    return [schema.type] if schema.type else []


def _err_path(name: str) -> str:
    name = name.removeprefix(".")
    return name if name else "<nil>"


def _num(value: float, like: Any) -> str:
    """A bound as kube-openapi prints it: int64 for integer data, float64 otherwise."""
    return str(int(value)) if isinstance(like, int) else go_float(value)


def _invalid(name: str, value: Any, message: str) -> FieldError:
    return FieldError.invalid(_err_path(name), value, message)


def _correlate(old: Any, key: str, schema: SchemaNode) -> Any:
    # Map keys correlate whatever the map type (apiserver's CorrelatedObject.Key).
    if old is _NONE or not isinstance(old, dict):
        return _NONE
    return old.get(key, _NONE)


def _correlate_item(old: Any, item: Any, schema: SchemaNode) -> Any:
    if old is _NONE or not isinstance(old, list) or schema.list_type != "map":
        return _NONE
    if not isinstance(item, dict):
        return _NONE
    keys = schema.list_map_keys
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return _NONE


class _Validator:
    def node(self, value: Any, schema: SchemaNode, path: str, old: Any) -> list[FieldError]:
        if old is not _NONE and old == value and type(old) is type(value):
            return []  # ratcheting: an unchanged correlatable value keeps its (old) errors away
        errors: list[FieldError] = []
        types = _types(schema)
        if value is None:
            if types and not schema.nullable:
                msg = f'{path} in body must be of type {",".join(types)}: "null"'
                errors.append(FieldError.type_invalid(_err_path(path), "null", msg))
            errors.extend(self._enum(value, schema, path))
            return errors
        errors.extend(self._type(value, schema, types, path))
        errors.extend(self._props(value, schema, path))
        if isinstance(value, str):
            errors.extend(self._string(value, schema, path))
            errors.extend(self._format(value, schema, path))
        if isinstance(value, int | float) and not isinstance(value, bool):
            errors.extend(self._number(value, schema, path))
        if isinstance(value, list):
            errors.extend(self._array(value, schema, path, old))
        errors.extend(self._enum(value, schema, path))
        if isinstance(value, dict):
            errors.extend(self._object(value, schema, path, old))
        return errors

    def _type(
        self, value: Any, schema: SchemaNode, types: list[str], path: str
    ) -> list[FieldError]:
        if not types:
            return []
        actual = json_type(value)
        if (
            schema.format
            and not (set(types) & {"integer", "number"})
            and actual in ("string", "array")
        ):
            return []
        float_int = actual == "number" and float(value).is_integer() and "integer" in types
        int_float = actual == "integer" and "number" in types
        if actual in types or float_int or int_float:
            return []
        msg = f'{path} in body must be of type {",".join(types)}: "{actual}"'
        return [FieldError.type_invalid(_err_path(path), actual, msg)]

    def _props(self, value: Any, schema: SchemaNode, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if schema.all_of:
            sub = [e for s in schema.all_of for e in self.node(value, s, path, _NONE)]
            if sub:
                errors.append(_invalid("", "", f'"{path}" must validate all the schemas (allOf)'))
                errors.extend(sub)
        if schema.any_of:
            results = [self.node(value, s, path, _NONE) for s in schema.any_of]
            if all(results):
                errors.append(
                    _invalid("", "", f'"{path}" must validate at least one schema (anyOf)')
                )
                errors.extend(results[0])
        if schema.one_of:
            results = [self.node(value, s, path, _NONE) for s in schema.one_of]
            valid = sum(1 for r in results if not r)
            if valid != 1:
                found = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
                msg = f'"{path}" must validate one and only one schema (oneOf). {found}'
                errors.append(_invalid("", "", msg))
                if valid == 0:
                    errors.extend(results[0])
        if schema.not_ is not None and not self.node(value, schema.not_, path, _NONE):
            errors.append(_invalid("", "", f'"{path}" must not validate the schema (not)'))
        return errors

    def _string(self, value: str, schema: SchemaNode, path: str) -> list[FieldError]:
        if schema.max_length is not None and len(value) > schema.max_length:
            return [FieldError.too_long(_err_path(path), schema.max_length)]
        if schema.min_length is not None and len(value) < schema.min_length:
            msg = f"{path} in body should be at least {schema.min_length} chars long"
            return [_invalid(path, value, msg)]
        if schema.pattern is not None:
            try:
                matched = re2.search(schema.pattern, value) is not None
            except re2.error as exc:
                msg = (
                    f"{path} in body should match '{schema.pattern}, but pattern is invalid: {exc}'"
                )
                return [_invalid(path, value, msg)]
            if not matched:
                msg = f"{path} in body should match '{schema.pattern}'"
                return [_invalid(path, value, msg)]
        return []

    def _format(self, value: str, schema: SchemaNode, path: str) -> list[FieldError]:
        if not schema.format or formats.check(schema.format, value):
            return []
        msg = f"{path} in body must be of type {schema.format}: {go_quote(value)}"
        return [FieldError.type_invalid(_err_path(path), value, msg)]

    def _number(self, value: float, schema: SchemaNode, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if schema.multiple_of is not None and schema.multiple_of != 0:
            quotient = value / schema.multiple_of
            if not float(quotient).is_integer():
                msg = f"{path} in body should be a multiple of {_num(schema.multiple_of, value)}"
                errors.append(_invalid(path, value, msg))
        if schema.maximum is not None:
            bound = int(schema.maximum) if isinstance(value, int) else schema.maximum
            if value > bound or (schema.exclusive_maximum and value >= bound):
                op = "less than" if schema.exclusive_maximum else "less than or equal to"
                msg = f"{path} in body should be {op} {_num(schema.maximum, value)}"
                errors.append(_invalid(path, value, msg))
        if schema.minimum is not None:
            bound = int(schema.minimum) if isinstance(value, int) else schema.minimum
            if value < bound or (schema.exclusive_minimum and value <= bound):
                op = "greater than" if schema.exclusive_minimum else "greater than or equal to"
                msg = f"{path} in body should be {op} {_num(schema.minimum, value)}"
                errors.append(_invalid(path, value, msg))
        return errors

    def _array(self, value: list[Any], schema: SchemaNode, path: str, old: Any) -> list[FieldError]:
        errors: list[FieldError] = []
        size = len(value)
        if schema.min_items is not None and size < schema.min_items:
            msg = f"{path} in body should have at least {schema.min_items} items"
            errors.append(_invalid(path, size, msg))
        if schema.max_items is not None and size > schema.max_items:
            errors.append(FieldError.too_many(_err_path(path), size, schema.max_items))
        if schema.unique_items and any(value[i] in value[:i] for i in range(size)):
            errors.append(_invalid(path, "", f"{path} in body shouldn't contain duplicates"))
        if schema.items is not None:
            for index, item in enumerate(value):
                item_old = _correlate_item(old, item, schema)
                errors.extend(self.node(item, schema.items, f"{path}[{index}]", item_old))
        return errors

    def _enum(self, value: Any, schema: SchemaNode, path: str) -> list[FieldError]:
        if not schema.enum:
            return []
        for allowed in schema.enum:
            if allowed == value and isinstance(allowed, bool) == isinstance(value, bool):
                return []
        names = [a if isinstance(a, str) else go_json(a) for a in schema.enum]
        return [FieldError.not_supported(_err_path(path), value, names)]

    def _object(
        self, value: dict[str, Any], schema: SchemaNode, path: str, old: Any
    ) -> list[FieldError]:
        count = len(value)
        if schema.min_properties is not None and count < schema.min_properties:
            msg = f"{path} in body should have at least {schema.min_properties} properties"
            return [_invalid(path, count, msg)]
        if schema.max_properties is not None and count > schema.max_properties:
            return [FieldError.too_many(_err_path(path), count, schema.max_properties)]
        errors: list[FieldError] = []
        additional = schema.additional_schema
        if additional is not None:
            for key, child in value.items():
                if key not in schema.properties:
                    child_old = _correlate(old, key, schema)
                    errors.extend(self.node(child, additional, f"{path}.{key}", child_old))
        for name, prop in schema.properties.items():
            if name in value:
                child_path = f"{path}.{name}" if path else name
                errors.extend(
                    self.node(value[name], prop, child_path, _correlate(old, name, schema))
                )
        for name in schema.required:
            if name not in value:
                errors.append(FieldError.required(_err_path(f"{path}.{name}")))
        return errors


def list_type_errors(value: Any, schema: SchemaNode | None, path: str = "") -> list[FieldError]:
    """x-kubernetes-list-type set/map invariants (pkg/apiserver/schema/listtype); field.Path
    syntax here: map keys as `[key]`."""
    if schema is None:
        return []
    errors: list[FieldError] = []
    if isinstance(value, dict):
        for key, child in value.items():
            if key in schema.properties:
                child_path = f"{path}.{key}" if path else key
                errors.extend(list_type_errors(child, schema.properties[key], child_path))
            elif schema.additional_schema is not None:
                errors.extend(list_type_errors(child, schema.additional_schema, f"{path}[{key}]"))
    elif isinstance(value, list):
        errors.extend(_list_uniqueness(value, schema, path))
        for index, item in enumerate(value):
            errors.extend(list_type_errors(item, schema.items, f"{path}[{index}]"))
    return errors


def _identity(value: Any) -> Any:
    """How Go compares set elements: scalars by type and value, compounds by their JSON."""
    if isinstance(value, dict | list):
        return ("json", go_json(value))
    return (type(value).__name__, value)


def _first_repeats(values: list[Any]) -> list[int]:
    """validateListSet: the index of the second appearance of every repeated value."""
    counts: dict[Any, int] = {}
    repeats: list[int] = []
    for index, value in enumerate(values):
        ident = _identity(value)
        counts[ident] = counts.get(ident, 0) + 1
        if counts[ident] == 2:
            repeats.append(index)
    return repeats


def _list_uniqueness(value: list[Any], schema: SchemaNode, path: str) -> list[FieldError]:
    if schema.list_type == "set":
        return [FieldError.duplicate(f"{path}[{i}]", value[i]) for i in _first_repeats(value)]
    if schema.list_type != "map":
        return []
    for index, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            detail = "must be an object for an array of list-type map"
            return [FieldError.invalid(f"{path}[{index}]", item, detail)]
    keys = [
        {k: item[k] for k in schema.list_map_keys if isinstance(item, dict) and k in item}
        for item in value
    ]
    return [FieldError.duplicate(f"{path}[{i}]", keys[i]) for i in _first_repeats(keys)]
