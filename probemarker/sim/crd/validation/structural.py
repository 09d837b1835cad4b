"""Structural schemas, as apiextensions-apiserver pkg/apiserver/schema checks them when a
CRD is written (Kubernetes 1.32): `validate_structural` is ValidateStructural (the
invariants and the completeness check), run once NewStructural (`newstructural`) accepted
the schema.

Input: a decoded openAPIV3Schema (`crdtypes`: absent fields are absent, an empty list is
an empty list) and the field path it is reported under. Output: field errors worded as
the API server words them, sorted by their text as ValidateStructural sorts them.

What ValidateStructural requires: a type everywhere outside value validations (except
int-or-string and preserve-unknown-fields nodes), `items` for arrays, no
additionalProperties at the root, x-kubernetes-embedded-resource only on objects with
properties or preserve-unknown-fields, and nothing in allOf/anyOf/oneOf/not that is not a
value validation (no type, default, description, nullable, x-kubernetes-* extension).
The two int-or-string patterns (`anyOf: [{type: integer}, {type: string}]`, also first in
an allOf) are exempt. At the root, `metadata` may restrict nothing but the schemas of
`name` and `generateName`. Only the root's own allOf/anyOf/oneOf/not are checked for
completeness (every property they mention must exist in the structural part), as in 1.32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import re2

from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.validation.newstructural import as_schema, child, properties_of

__all__ = ["go_regexp_error", "validate_structural"]

Schema = Mapping[str, Any]
_ROOT, _ITEM, _FIELD = "root", "item", "field"
_JUNCTORS = ("anyOf", "allOf", "oneOf")
_EMPTY_TYPE = {
    _ROOT: "must not be empty at the root",
    _ITEM: "must not be empty for specified array items",
    _FIELD: "must not be empty for specified object fields",
}
_METADATA_ONLY = (
    "must not specify anything other than name and generateName, but metadata is implicitly "
    "specified"
)
# RE2's error codes as Go's regexp/syntax words them.
_RE2_CODES = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "bad repetition operator": "invalid nested repetition operator",
    "trailing \\": "trailing backslash at end of expression",
    "invalid repetition size": "invalid repeat count",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid named capture group": "invalid named capture",
}


def go_regexp_error(pattern: str) -> str | None:
    """The error of Go's regexp.Compile for `pattern`, or None when it compiles."""
    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        text = exc.args[0] if exc.args else ""
        text = text.decode() if isinstance(text, bytes) else str(text)
        code, _, arg = text.partition(": ")
        if code == "trailing \\":
            arg = ""
        return f"error parsing regexp: {_RE2_CODES.get(code, code)}: `{arg}`"
    return None


def validate_structural(schema: Schema, path: str) -> list[FieldError]:
    errors = _invariants(schema, _ROOT, path) + _completeness(schema, path)
    return sorted(errors, key=lambda e: e.message)


def _invariants(s: Schema, level: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    items = as_schema(s.get("items"))
    kind = str(s.get("type") or "")
    if kind == "array" and items is None:
        errors.append(FieldError.required(child(path, "items"), "must be specified"))
    if items is not None:
        errors += _invariants(items, _ITEM, child(path, "items"))
    for key, prop in properties_of(s).items():
        errors += _invariants(prop, _FIELD, f"{path}.properties[{key}]")
    additional = s.get("additionalProperties")
    if additional is not None:
        if level == _ROOT:
            where = child(path, "additionalProperties")
            errors.append(FieldError.forbidden(where, "must not be used at the root"))
        if isinstance(additional, Mapping):
            errors += _invariants(additional, _FIELD, child(path, "additionalProperties"))
    errors += _extensions(s, path)
    skip_any_of = _int_or_string_any_of(s.get("anyOf"))
    all_of = s.get("allOf") or []
    skip_first = bool(all_of) and _int_or_string_any_of(
        as_schema(all_of[0]) and all_of[0].get("anyOf")
    )
    errors += _value_validation(s, skip_any_of, skip_first, path)
    errors += _types(s, level, path)
    errors += _meta_fields(s, level, path)
    return errors


def _extensions(s: Schema, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if s.get("x-kubernetes-int-or-string"):
        detail = "must be false if x-kubernetes-int-or-string is true"
        if s.get("x-kubernetes-preserve-unknown-fields") is True:
            where = child(path, "x-kubernetes-preserve-unknown-fields")
            errors.append(FieldError.invalid(where, True, detail))
        if s.get("x-kubernetes-embedded-resource"):
            errors.append(
                FieldError.invalid(child(path, "x-kubernetes-embedded-resource"), True, detail)
            )
    return errors


def _types(s: Schema, level: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = str(s.get("type") or "")
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    where = child(path, "type")
    if embedded and kind != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        errors.append(
            FieldError.invalid(where, kind, detail) if kind else FieldError.required(where, detail)
        )
    elif (
        not kind
        and not s.get("x-kubernetes-int-or-string")
        and s.get("x-kubernetes-preserve-unknown-fields") is not True
    ):
        errors.append(FieldError.required(where, _EMPTY_TYPE[level]))
    if embedded and s.get("additionalProperties") is not None:
        detail = "must not be used if x-kubernetes-embedded-resource is set"
        errors.append(FieldError.forbidden(child(path, "additionalProperties"), detail))
    if level == _ROOT and kind and kind != "object":
        errors.append(FieldError.invalid(where, kind, "must be object at the root"))
    return errors


def _meta_fields(s: Schema, level: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    check = level == _ROOT or bool(s.get("x-kubernetes-embedded-resource"))
    props = properties_of(s)
    for key in ("kind", "apiVersion"):
        if check and key in props and props[key].get("type") != "string":
            where = f"{path}.properties[{key}].type"
            errors.append(
                FieldError.invalid(where, str(props[key].get("type") or ""), "must be string")
            )
    if "metadata" in props:
        errors += _metadata(props["metadata"], check, level, f"{path}.properties[metadata]")
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    if embedded and s.get("x-kubernetes-preserve-unknown-fields") is not True and not props:
        detail = (
            "must not be empty if x-kubernetes-embedded-resource is true without "
            "x-kubernetes-preserve-unknown-fields"
        )
        errors.append(FieldError.required(child(path, "properties"), detail))
    return errors


# Keys of a metadata schema that make it more than an allowed restriction: present at all
# (pointers and slices decoded from JSON, even []), or set to a non-zero value.
_PRESENT = ("additionalProperties", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
            "x-kubernetes-map-type", "x-kubernetes-validations", "maximum", "minimum",
            "maxLength", "minLength", "maxItems", "minItems", "multipleOf", "maxProperties",
            "minProperties", "required", "not")  # fmt: skip
_NON_ZERO = ("description", "title", "nullable", "x-kubernetes-preserve-unknown-fields",
             "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "format",
             "exclusiveMaximum", "exclusiveMinimum", "pattern", "uniqueItems", "enum", "allOf",
             "oneOf", "anyOf")  # fmt: skip


def _metadata(m: Schema, check: bool, level: str, path: str) -> list[FieldError]:
    """validateStructuralMetadataInvariants."""
    errors: list[FieldError] = []
    kind = str(m.get("type") or "")
    if check and kind != "object":
        errors.append(FieldError.invalid(child(path, "type"), kind, "must be object"))
    if level != _ROOT:
        return errors
    names = set(properties_of(m))
    only_names = names == {"name", "generateName"} or (
        len(names) == 1 and names <= {"name", "generateName"}
    )
    extra = (
        (bool(names) and not only_names)
        or isinstance(m.get("items"), Mapping)
        or any(key in m for key in _PRESENT)
        or any(m.get(key) for key in _NON_ZERO)
    )
    if extra:
        errors.append(FieldError.forbidden(path, _METADATA_ONLY))
    return errors


def _int_or_string_any_of(any_of: Any) -> bool:
    """The anyOf of the int-or-string patterns: exactly [{type: integer}, {type: string}]."""
    if not isinstance(any_of, list) or len(any_of) != 2:
        return False
    return all(
        isinstance(entry, Mapping) and _only_type(entry, kind)
        for entry, kind in zip(any_of, ("integer", "string"), strict=True)
    )


def _only_type(entry: Schema, kind: str) -> bool:
    if entry.get("type") != kind:
        return False
    rest = {k: v for k, v in entry.items() if k not in ("type", "externalDocs", "example")}
    return not any(key in rest for key in (*_PRESENT, "properties", "default")) and not any(
        rest.get(key) for key in (*_NON_ZERO, "items")
    )


def _value_validation(
    v: Schema, skip_any_of: bool, skip_first: bool, path: str
) -> list[FieldError]:
    errors: list[FieldError] = []
    if not skip_any_of:
        for index, part in enumerate(v.get("anyOf") or ()):
            errors += _nested(part, False, False, f"{path}.anyOf[{index}]")
    for index, part in enumerate(v.get("allOf") or ()):
        errors += _nested(part, skip_first and index == 0, False, f"{path}.allOf[{index}]")
    for index, part in enumerate(v.get("oneOf") or ()):
        errors += _nested(part, False, False, f"{path}.oneOf[{index}]")
    if as_schema(v.get("not")) is not None:
        errors += _nested(v["not"], False, False, child(path, "not"))
    pattern = v.get("pattern")
    if pattern and (problem := go_regexp_error(pattern)) is not None:
        detail = f"must be a valid regular expression, but isn't: {problem}"
        errors.append(FieldError.invalid(child(path, "pattern"), pattern, detail))
    return errors


_NESTED_FORBIDDEN = (
    ("type", "type", "must be empty to be structural"),
    ("title", "title", "must be empty to be structural"),
    ("description", "description", "must be empty to be structural"),
    ("nullable", "nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", None, "must be false to be structural"),
    ("x-kubernetes-embedded-resource", None, "must be false to be structural"),
    ("x-kubernetes-int-or-string", None, "must be false to be structural"),
    ("x-kubernetes-list-map-keys", None, "must be empty to be structural"),
)


def _nested(v: Any, skip_any_of: bool, skip_first: bool, path: str) -> list[FieldError]:
    """validateNestedValueValidation."""
    if not isinstance(v, Mapping):
        return []
    errors = _value_validation(v, skip_any_of, skip_first, path)
    if as_schema(v.get("items")) is not None:
        errors += _nested(v["items"], False, False, child(path, "items"))
    for key, prop in properties_of(v).items():
        errors += _nested(prop, False, False, f"{path}.properties[{key}]")
    if v.get("type"):
        errors.append(FieldError.forbidden(child(path, "type"), "must be empty to be structural"))
    additional = v.get("additionalProperties")
    if isinstance(additional, Mapping) or additional is True:
        where = child(path, "additionalProperties")
        errors.append(FieldError.forbidden(where, "must be undefined to be structural"))
    if v.get("default") is not None:
        errors.append(
            FieldError.forbidden(child(path, "default"), "must be undefined to be structural")
        )
    for key, _, detail in _NESTED_FORBIDDEN[1:]:
        if v.get(key):
            errors.append(FieldError.forbidden(child(path, key), detail))
    for key in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        if key in v:
            errors.append(
                FieldError.forbidden(child(path, key), "must be undefined to be structural")
            )
    if v.get("x-kubernetes-validations"):
        where = child(path, "x-kubernetes-validations")
        errors.append(FieldError.forbidden(where, "must be empty to be structural"))
    if "metadata" in properties_of(v):
        where = f"{path}.properties[metadata]"
        errors.append(FieldError.forbidden(where, "must not be specified in a nested context"))
    return errors


def _completeness(root: Schema, path: str) -> list[FieldError]:
    """validateStructuralCompleteness: the root's own value validations only."""
    return _vv_completeness(root, root, path, path)


def _vv_completeness(v: Schema, s: Schema | None, s_path: str, v_path: str) -> list[FieldError]:
    if s is None:
        return [FieldError.required(s_path, f"because it is defined in {v_path}")]
    errors = _nested_completeness(as_schema(v.get("not")), s, s_path, child(v_path, "not"))
    for junctor in ("allOf", "anyOf", "oneOf"):
        for index, part in enumerate(v.get(junctor) or ()):
            errors += _nested_completeness(
                as_schema(part), s, s_path, f"{v_path}.{junctor}[{index}]"
            )
    return errors


def _nested_completeness(
    v: Schema | None, s: Schema | None, s_path: str, v_path: str
) -> list[FieldError]:
    if v is None:
        return []
    if s is None:
        return [FieldError.required(s_path, f"because it is defined in {v_path}")]
    errors = _vv_completeness(v, s, s_path, v_path)
    errors += _nested_completeness(
        as_schema(v.get("items")),
        as_schema(s.get("items")),
        child(s_path, "items"),
        child(v_path, "items"),
    )
    s_props = properties_of(s)
    for key, prop in properties_of(v).items():
        where = f"{s_path}.properties[{key}]"
        if key not in s_props:
            errors.append(
                FieldError.required(where, f"because it is defined in {v_path}.properties[{key}]")
            )
        else:
            errors += _nested_completeness(prop, s_props[key], where, f"{v_path}.properties[{key}]")
    return errors
