"""Go's `%#v` of the values apiextensions validation puts into field errors.

field.Error.ErrorBody prints a bad value that is not a string, number or bool with `%#v`,
so a CRD error can show `[]string{"a", "b"}`, `map[string]interface {}{"a":1}` (a default),
or a whole internal struct (`apiextensions.JSONSchemaProps{ID:"", ...}`). Input: decoded
JSON values of a v1 CustomResourceDefinition (see `validation.crdtypes`); output: the text
Go prints. Non-nil pointers print an address; the sim prints one fixed address (a real
server prints a different one on every request, so no client can depend on it). Map keys
are sorted, as fmt sorts them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from probemarker.sim.crd.gotext.fielderr import FieldError, go_quote, go_scalar

__all__ = [
    "POINTER",
    "interface_value",
    "invalid_rendered",
    "schema_or_array",
    "schema_props",
    "strings",
    "versions",
]

POINTER = "0xc000000000"
_P = "apiextensions."

Render = Callable[[Any], str]


def invalid_rendered(path: str, rendered: str, detail: str) -> FieldError:
    """field.Invalid with a bad value already printed as Go prints it (`%#v`)."""
    message = f"{path}: Invalid value: {rendered}" + (f": {detail}" if detail else "")
    return FieldError(
        path=path, type="FieldValueInvalid", message=message, value=rendered, detail=detail
    )


def strings(values: list[str] | None) -> str:
    """A []string: `[]string{"a", "b"}`, `[]string{}` or `[]string(nil)`."""
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def interface_value(value: Any) -> str:
    """An interface{} holding a JSON value as util/json decodes it."""
    if value is None:
        return "interface {}(nil)"
    scalar = go_scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(interface_value(v) for v in value) + "}"
    items = ", ".join(f"{go_quote(k)}:{interface_value(value[k])}" for k in sorted(value))
    return "map[string]interface {}{" + items + "}"


def _pointer(type_name: str) -> Render:
    return lambda value: f"(*{type_name})({'nil' if value is None else POINTER})"


def _string(value: Any) -> str:
    return go_quote(value if isinstance(value, str) else "")


def _bool(value: Any) -> str:
    return "true" if value else "false"


def _int(value: Any) -> str:
    return str(value if isinstance(value, int) else 0)


def _slice(type_name: str, element: Render) -> Render:
    def render(value: Any) -> str:
        if value is None:
            return f"{type_name}(nil)"
        return type_name + "{" + ", ".join(element(v) for v in value) + "}"

    return render


def _map(type_name: str, element: Render) -> Render:
    def render(value: Any) -> str:
        if value is None:
            return f"{type_name}(nil)"
        items = ", ".join(f"{go_quote(k)}:{element(value[k])}" for k in sorted(value))
        return type_name + "{" + items + "}"

    return render


def _struct(type_name: str, fields: tuple[tuple[str, str, Render], ...]) -> Render:
    def render(value: Any) -> str:
        value = value if isinstance(value, Mapping) else {}
        parts = [f"{go}:{field(value.get(key))}" for go, key, field in fields]
        return type_name + "{" + ", ".join(parts) + "}"

    return render


def _schema(value: Any) -> str:
    return schema_props(value)


def _or_strings(value: Any) -> str:
    schema = value if isinstance(value, Mapping) else None
    listed = value if isinstance(value, list) else None
    return (
        f"{_P}JSONSchemaPropsOrStringArray{{Schema:{_pointer(_P + 'JSONSchemaProps')(schema)}, "
        f"Property:{strings(listed)}}}"
    )


_RULE = _struct(
    _P + "ValidationRule",
    (
        ("Rule", "rule", _string),
        ("Message", "message", _string),
        ("MessageExpression", "messageExpression", _string),
        ("Reason", "reason", _pointer(_P + "FieldValueErrorReason")),
        ("FieldPath", "fieldPath", _string),
        ("OptionalOldSelf", "optionalOldSelf", _pointer("bool")),
    ),
)
_SCHEMAS = _slice("[]" + _P + "JSONSchemaProps", _schema)
_SCHEMA_MAP = _map("map[string]" + _P + "JSONSchemaProps", _schema)
_SCHEMA_FIELDS: tuple[tuple[str, str, Render], ...] = (
    ("ID", "id", _string), ("Schema", "$schema", _string), ("Ref", "$ref", _pointer("string")),
    ("Description", "description", _string), ("Type", "type", _string),
    ("Nullable", "nullable", _bool), ("Format", "format", _string), ("Title", "title", _string),
    ("Default", "default", _pointer(_P + "JSON")), ("Maximum", "maximum", _pointer("float64")),
    ("ExclusiveMaximum", "exclusiveMaximum", _bool), ("Minimum", "minimum", _pointer("float64")),
    ("ExclusiveMinimum", "exclusiveMinimum", _bool),
    ("MaxLength", "maxLength", _pointer("int64")), ("MinLength", "minLength", _pointer("int64")),
    ("Pattern", "pattern", _string), ("MaxItems", "maxItems", _pointer("int64")),
    ("MinItems", "minItems", _pointer("int64")), ("UniqueItems", "uniqueItems", _bool),
    ("MultipleOf", "multipleOf", _pointer("float64")),
    ("Enum", "enum", _slice("[]" + _P + "JSON", interface_value)),
    ("MaxProperties", "maxProperties", _pointer("int64")),
    ("MinProperties", "minProperties", _pointer("int64")),
    ("Required", "required", strings), ("Items", "items", _pointer(_P + "JSONSchemaPropsOrArray")),
    ("AllOf", "allOf", _SCHEMAS), ("OneOf", "oneOf", _SCHEMAS), ("AnyOf", "anyOf", _SCHEMAS),
    ("Not", "not", _pointer(_P + "JSONSchemaProps")), ("Properties", "properties", _SCHEMA_MAP),
    ("AdditionalProperties", "additionalProperties", _pointer(_P + "JSONSchemaPropsOrBool")),
    ("PatternProperties", "patternProperties", _SCHEMA_MAP),
    ("Dependencies", "dependencies", _map(_P + "JSONSchemaDependencies", _or_strings)),
    ("AdditionalItems", "additionalItems", _pointer(_P + "JSONSchemaPropsOrBool")),
    ("Definitions", "definitions", _map(_P + "JSONSchemaDefinitions", _schema)),
    ("ExternalDocs", "externalDocs", _pointer(_P + "ExternalDocumentation")),
    ("Example", "example", _pointer(_P + "JSON")),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields", _pointer("bool")),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource", _bool),
    ("XIntOrString", "x-kubernetes-int-or-string", _bool),
    ("XListMapKeys", "x-kubernetes-list-map-keys", strings),
    ("XListType", "x-kubernetes-list-type", _pointer("string")),
    ("XMapType", "x-kubernetes-map-type", _pointer("string")),
    ("XValidations", "x-kubernetes-validations", _slice(_P + "ValidationRules", _RULE)),
)  # fmt: skip
_SCHEMA_STRUCT = _struct(_P + "JSONSchemaProps", _SCHEMA_FIELDS)


def schema_props(schema: Any) -> str:
    """An internal apiextensions.JSONSchemaProps (from a decoded v1 schema)."""
    return _SCHEMA_STRUCT(schema)


def schema_or_array(items: Any) -> str:
    """An apiextensions.JSONSchemaPropsOrArray (a decoded `items`)."""
    schema = items if isinstance(items, Mapping) else None
    listed = items if isinstance(items, list) else None
    return (
        f"{_P}JSONSchemaPropsOrArray{{Schema:{_pointer(_P + 'JSONSchemaProps')(schema)}, "
        f"JSONSchemas:{_SCHEMAS(listed)}}}"
    )


_COLUMN = _struct(
    _P + "CustomResourceColumnDefinition",
    (
        ("Name", "name", _string),
        ("Type", "type", _string),
        ("Format", "format", _string),
        ("Description", "description", _string),
        ("Priority", "priority", _int),
        ("JSONPath", "jsonPath", _string),
    ),
)
_SELECTABLE = _struct(_P + "SelectableField", (("JSONPath", "jsonPath", _string),))
_VERSION = _struct(
    _P + "CustomResourceDefinitionVersion",
    (
        ("Name", "name", _string),
        ("Served", "served", _bool),
        ("Storage", "storage", _bool),
        ("Deprecated", "deprecated", _bool),
        ("DeprecationWarning", "deprecationWarning", _pointer("string")),
        ("Schema", "schema", _pointer(_P + "CustomResourceValidation")),
        ("Subresources", "subresources", _pointer(_P + "CustomResourceSubresources")),
        (
            "AdditionalPrinterColumns",
            "additionalPrinterColumns",
            _slice("[]" + _P + "CustomResourceColumnDefinition", _COLUMN),
        ),
        (
            "SelectableFields",
            "selectableFields",
            _slice("[]" + _P + "SelectableField", _SELECTABLE),
        ),
    ),
)
versions = _slice("[]" + _P + "CustomResourceDefinitionVersion", _VERSION)
