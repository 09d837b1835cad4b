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

from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.schema.cel.fieldpath import valid_field_path
from probemarker.sim.crd.validation.listtypes import list_type_errors, map_list_errors
from probemarker.sim.crd.validation.newstructural import child, new_structural_error, properties_of

__all__ = ["SchemaWalk", "walk_schema"]

Schema = Mapping[str, Any]
_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
_META = ("metadata", "kind", "apiVersion")
_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"]
_NEWLINES = re.compile(r"[\n\r]+")


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
    """The SchemaErrors at and below `s`, and `s` for the CEL check (its rules dropped when
    there are any)."""
    errors = _keywords(s, path, ctx)
    if s.get("uniqueItems"):
        detail = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        errors.append(FieldError.forbidden(child(path, "uniqueItems"), detail))
    additional = s.get("additionalProperties")
    if additional is not None and properties_of(s) and additional is not True:
        detail = "additionalProperties and properties are mutual exclusive"
        errors.append(FieldError.forbidden(child(path, "additionalProperties"), detail))
    found, cel = _subtrees(s, path, ctx, root)
    errors += found
    errors += _extensions(s, path)
    errors += list_type_errors(s, path) + map_list_errors(s, path) + _rule_fields(s, path)
    if errors:
        cel.pop("x-kubernetes-validations", None)
    return errors, cel


def _subtrees(
    s: Schema, path: str, ctx: _Context, root: bool
) -> tuple[list[FieldError], dict[str, Any]]:
    """Walk additionalProperties, properties, not/allOf/oneOf/anyOf/definitions, items and
    dependencies, in that order; the CEL copy of `s` gets the walked CEL children."""
    errors: list[FieldError] = []
    cel = dict(s)
    additional = s.get("additionalProperties")
    if isinstance(additional, Mapping):
        reason = "inside additionalProperties applying to object metadata"
        sub = ctx.forbid_defaults(reason) if ctx.inside_meta else ctx
        found, cel["additionalProperties"] = _walk(
            additional, child(path, "additionalProperties"), sub
        )
        errors += found
    if properties_of(s):
        cel["properties"] = {}
        for key, prop in properties_of(s).items():
            sub = _property_context(s, key, ctx, root)
            found, cel["properties"][key] = _walk(prop, f"{path}.properties[{key}]", sub)
            errors += found
    errors += _junctors(s, path, ctx)
    items = s.get("items")
    if isinstance(items, Mapping):
        found, cel["items"] = _walk(items, child(path, "items"), ctx)
        errors += found
    for index, item in enumerate(items if isinstance(items, list) else ()):
        errors += _walk(item, f"{path}.items[{index}]", ctx)[0]
    for key, dependency in (s.get("dependencies") or {}).items():
        if isinstance(dependency, Mapping):
            errors += _walk(dependency, f"{path}.dependencies[{key}]", ctx)[0]
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


def _rule_fields(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, rule in enumerate(s.get("x-kubernetes-validations") or ()):
        errors += _rule(s, rule, f"{path}.x-kubernetes-validations[{index}]")
    return errors


def _rule(s: Schema, rule: Mapping[str, Any], at: str) -> list[FieldError]:
    text, message = str(rule.get("rule") or ""), str(rule.get("message") or "")
    errors: list[FieldError] = []
    if not text.strip():
        errors.append(FieldError.required(f"{at}.rule", "rule is not specified"))
    elif message and not message.strip():
        detail = "message must be non-empty if specified"
        errors.append(FieldError.invalid(f"{at}.message", message, detail))
    elif _NEWLINES.search(message.strip()):
        detail = "message must not contain line breaks"
        errors.append(FieldError.invalid(f"{at}.message", message, detail))
    elif _NEWLINES.search(text.strip()) and not message.strip():
        detail = "message must be specified if rule contains line breaks"
        errors.append(FieldError.required(f"{at}.message", detail))
    expression = str(rule.get("messageExpression") or "")
    if expression and not expression.strip():
        detail = "messageExpression must be non-empty if specified"
        errors.append(FieldError.required(f"{at}.messageExpression", detail))
    reason = rule.get("reason")
    if reason is not None and reason not in _REASONS:
        errors.append(FieldError.not_supported(f"{at}.reason", reason, _REASONS))
    return errors + _rule_field_path(s, str(rule.get("fieldPath") or ""), f"{at}.fieldPath")


def _rule_field_path(s: Schema, field_path: str, at: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if field_path and not field_path.strip():
        detail = "fieldPath must be non-empty if specified"
        errors.append(FieldError.invalid(at, field_path, detail))
    if _NEWLINES.search(field_path):
        errors.append(FieldError.invalid(at, field_path, "fieldPath must not contain line breaks"))
    if field_path and not _path_valid(s, field_path):
        errors.append(FieldError.invalid(at, field_path, "fieldPath must be a valid path"))
    return errors


def _path_valid(s: Schema, field_path: str) -> bool:
    if new_structural_error(s) is not None:
        return True
    try:
        valid_field_path(field_path, s)
    except ValueError:
        return False
    return True
