"""The per-node checks of a CRD's openAPIV3Schema that apiextensions validation calls
SchemaErrors (ValidateCustomResourceDefinitionOpenAPISchema, Kubernetes 1.32), without the
CEL part (`celadmit`).

Input: a decoded schema (`crdtypes`), the path it is reported under and whether defaults
are allowed. Output: a `SchemaWalk` with the errors in the API server's order (a node's own
keyword checks, uniqueItems, additionalProperties vs properties, then its subtrees:
additionalProperties, properties, not, allOf, oneOf, anyOf, definitions, items,
dependencies, then x-kubernetes-preserve-unknown-fields, map and list types, list map keys
and the fields of its x-kubernetes-validations), and `cel_schema`: the schema with the
rules removed from every node whose subtree has a SchemaError, since the API server
compiles a node's rules only when no schema error was found at or below it.

Defaults are forbidden in the top-level metadata, apiVersion and kind, and below
additionalProperties inside resource metadata; x-kubernetes-embedded-resource is
forbidden inside resource metadata. `valid_field_path` is cel.ValidFieldPath (rule
fieldPath and selectableFields).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from probemarker.sim.crd import gorepr
from probemarker.sim.crd.fielderr import FieldError
from probemarker.sim.crd.structural import child, new_structural_error

__all__ = ["SchemaWalk", "invalid_rendered", "valid_field_path", "walk_schema"]

Schema = Mapping[str, Any]
_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
_META = ("metadata", "kind", "apiVersion")
_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"]
_NEWLINES = re.compile(r"[\n\r]+")
_MAP_KEY = "this property is in x-kubernetes-list-map-keys, so it"


def invalid_rendered(path: str, rendered: str, detail: str) -> FieldError:
    """field.Invalid with a value already printed as Go prints it (`%#v`)."""
    message = f"{path}: Invalid value: {rendered}" + (f": {detail}" if detail else "")
    return FieldError(
        path=path, type="FieldValueInvalid", message=message, value=rendered, detail=detail
    )


@dataclass(frozen=True, slots=True)
class _Context:
    """specStandardValidatorV3: defaults allowed (or why not), inside resource metadata."""

    allow_defaults: bool = True
    reason: str = ""
    inside_meta: bool = False

    def forbid_defaults(self, reason: str) -> _Context:
        return replace(self, allow_defaults=False, reason=reason)


@dataclass(slots=True)
class SchemaWalk:
    errors: list[FieldError] = field(default_factory=list)
    cel_schema: dict[str, Any] = field(default_factory=dict)


def walk_schema(schema: Schema, path: str, *, allow_defaults: bool = True) -> SchemaWalk:
    errors, cel_schema = _walk(schema, path, _Context(allow_defaults), root=True)
    return SchemaWalk(errors, cel_schema)


def _walk(
    s: Schema, path: str, ctx: _Context, *, root: bool = False
) -> tuple[list[FieldError], dict[str, Any]]:
    errors = _keywords(s, path, ctx)
    cel = dict(s)
    props = s.get("properties") if isinstance(s.get("properties"), Mapping) else {}
    additional = s.get("additionalProperties")
    if s.get("uniqueItems"):
        detail = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        errors.append(FieldError.forbidden(child(path, "uniqueItems"), detail))
    if additional is not None:
        if props and (additional is False or isinstance(additional, Mapping)):
            detail = "additionalProperties and properties are mutual exclusive"
            errors.append(FieldError.forbidden(child(path, "additionalProperties"), detail))
        if isinstance(additional, Mapping):
            sub = (
                ctx.forbid_defaults("inside additionalProperties applying to object metadata")
                if ctx.inside_meta
                else ctx
            )
            found, cel["additionalProperties"] = _walk(
                additional, child(path, "additionalProperties"), sub
            )
            errors += found
    if props:
        cel["properties"] = {}
        for key, prop in props.items():
            found, cel["properties"][key] = _walk(
                prop, f"{path}.properties[{key}]", _property_context(s, key, ctx, root)
            )
            errors += found
    errors += _junctors(s, path, ctx)
    items = s.get("items")
    if isinstance(items, Mapping):
        found, cel["items"] = _walk(items, child(path, "items"), ctx)
        errors += found
    elif isinstance(items, list):
        for index, item in enumerate(items):
            errors += _walk(item, f"{path}.items[{index}]", ctx)[0]
    for key, dependency in (s.get("dependencies") or {}).items():
        if isinstance(dependency, Mapping):
            errors += _walk(dependency, f"{path}.dependencies[{key}]", ctx)[0]
    errors += (
        _extensions(s, path) + _list_type(s, path) + _map_list(s, path) + _rule_fields(s, path)
    )
    if errors:
        cel.pop("x-kubernetes-validations", None)
    return errors, cel


def _property_context(s: Schema, key: str, ctx: _Context, root: bool) -> _Context:
    if (root or s.get("x-kubernetes-embedded-resource")) and key in _META:
        ctx = replace(ctx, inside_meta=True)
        if root:
            ctx = ctx.forbid_defaults(f"in top-level {key}")
    return ctx


def _junctors(s: Schema, path: str, ctx: _Context) -> list[FieldError]:
    errors: list[FieldError] = []
    if isinstance(s.get("not"), Mapping):
        errors += _walk(s["not"], child(path, "not"), ctx)[0]
    for junctor in ("allOf", "oneOf", "anyOf"):
        for index, part in enumerate(s.get(junctor) or ()):
            errors += _walk(part, f"{path}.{junctor}[{index}]", ctx)[0]
    for key, definition in (s.get("definitions") or {}).items():
        errors += _walk(definition, f"{path}.definitions[{key}]", ctx)[0]
    return errors


def _keywords(s: Schema, path: str, ctx: _Context) -> list[FieldError]:
    """specStandardValidatorV3.validate."""
    errors: list[FieldError] = []
    kind = s.get("type") or ""
    if kind and kind not in _TYPES:
        errors.append(FieldError.not_supported(child(path, "type"), kind, _TYPES))
    if s.get("default") is not None and not ctx.allow_defaults:
        detail = "must not be set" + (f" {ctx.reason}" if ctx.reason else "")
        errors.append(FieldError.forbidden(child(path, "default"), detail))
    forbidden = (
        ("id", bool(s.get("id")), "id is not supported"),
        ("additionalItems", "additionalItems" in s, "additionalItems is not supported"),
        ("patternProperties", bool(s.get("patternProperties")), "patternProperties is not supported"),
        ("definitions", bool(s.get("definitions")), "definitions is not supported"),
        ("dependencies", "dependencies" in s, "dependencies is not supported"),
        ("$ref", "$ref" in s, "$ref is not supported"),
        ("type", kind == "null", "type cannot be set to null, use nullable as an alternative"),
        ("items", isinstance(s.get("items"), list) and bool(s["items"]), "items must be a schema object and not an array"),
        ("x-kubernetes-embedded-resource", ctx.inside_meta and bool(s.get("x-kubernetes-embedded-resource")), "must not be used inside of resource meta"),
    )  # fmt: skip
    errors += [
        FieldError.forbidden(child(path, key), detail) for key, hit, detail in forbidden if hit
    ]
    return errors


def _extensions(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        where = child(path, "x-kubernetes-preserve-unknown-fields")
        errors.append(FieldError.invalid(where, False, "must be true or undefined"))
    kind = s.get("type") or ""
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None and kind != "object":
        detail = "must be object if x-kubernetes-map-type is specified"
        where = child(path, "type")
        errors.append(
            FieldError.invalid(where, kind, detail) if kind else FieldError.required(where, detail)
        )
    if map_type is not None and map_type not in ("atomic", "granular"):
        where = child(path, "x-kubernetes-map-type")
        errors.append(FieldError.not_supported(where, map_type, ["atomic", "granular"]))
    return errors


def _list_type(s: Schema, path: str) -> list[FieldError]:
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
    props = items.get("properties") or {}
    seen: set[str] = set()
    for key in keys:
        if key in props:
            if props[key].get("type") in ("array", "object"):
                detail = "must be a scalar type if parent array's x-kubernetes-list-type is map"
                errors.append(
                    FieldError.invalid(f"{path}.items.properties[{key}].type", item_type, detail)
                )
        else:
            detail = "entries must all be names of item properties"
            errors.append(
                invalid_rendered(
                    child(path, "x-kubernetes-list-map-keys"), gorepr.strings(keys), detail
                )
            )
        if key in seen:
            detail = "must not contain duplicate entries"
            errors.append(
                invalid_rendered(
                    child(path, "x-kubernetes-list-map-keys"), gorepr.strings(keys), detail
                )
            )
        seen.add(key)
    return errors


def _map_list(s: Schema, path: str) -> list[FieldError]:
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


def _rule_fields(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, rule in enumerate(s.get("x-kubernetes-validations") or ()):
        errors += _rule(s, rule, f"{path}.x-kubernetes-validations[{index}]")
    return errors


def _rule(s: Schema, rule: Mapping[str, Any], at: str) -> list[FieldError]:
    errors: list[FieldError] = []
    text, message = str(rule.get("rule") or ""), str(rule.get("message") or "")
    expression, field_path = (
        str(rule.get("messageExpression") or ""),
        str(rule.get("fieldPath") or ""),
    )
    if not text.strip():
        errors.append(FieldError.required(f"{at}.rule", "rule is not specified"))
    elif message and not message.strip():
        errors.append(
            FieldError.invalid(f"{at}.message", message, "message must be non-empty if specified")
        )
    elif _NEWLINES.search(message.strip()):
        errors.append(
            FieldError.invalid(f"{at}.message", message, "message must not contain line breaks")
        )
    elif _NEWLINES.search(text.strip()) and not message.strip():
        detail = "message must be specified if rule contains line breaks"
        errors.append(FieldError.required(f"{at}.message", detail))
    if expression and not expression.strip():
        detail = "messageExpression must be non-empty if specified"
        errors.append(FieldError.required(f"{at}.messageExpression", detail))
    reason = rule.get("reason")
    if reason is not None and reason not in _REASONS:
        errors.append(FieldError.not_supported(f"{at}.reason", reason, _REASONS))
    if field_path and not field_path.strip():
        errors.append(
            FieldError.invalid(
                f"{at}.fieldPath", field_path, "fieldPath must be non-empty if specified"
            )
        )
    if _NEWLINES.search(field_path):
        errors.append(
            FieldError.invalid(
                f"{at}.fieldPath", field_path, "fieldPath must not contain line breaks"
            )
        )
    if field_path and not _path_valid(s, field_path):
        errors.append(
            FieldError.invalid(f"{at}.fieldPath", field_path, "fieldPath must be a valid path")
        )
    return errors


def _path_valid(s: Schema, field_path: str) -> bool:
    if new_structural_error(s) is not None:
        return True
    try:
        valid_field_path(field_path, s)
    except ValueError:
        return False
    return True


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
