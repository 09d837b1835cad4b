"""The Go types of an apiextensions.k8s.io/v1 CustomResourceDefinition (and the metav1
types it embeds), as tables for `gojson`: JSON names, Go type names (as reflect prints
them in decode errors), pointer-ness and omitempty, taken from
apiextensions-apiserver pkg/apis/apiextensions/v1/types*.go (Kubernetes 1.32) and
apimachinery's ObjectMeta.

The custom unmarshalers mirror v1/marshal.go: `JSON` keeps any value; a
`JSONSchemaPropsOrBool` takes an object (a schema, decoded without strictness) or
true/false, anything else is the error `boolean or JSON schema expected`; a
`JSONSchemaPropsOrArray` takes an object or a list of schemas, anything else leaves it
empty (decoded as None); a `JSONSchemaPropsOrStringArray` takes an object or a list of
strings. metav1.Time takes null or an RFC 3339 string.

`decode_crd(body, strict=...)` and `encode_crd(value)` are the entry points.
"""

from __future__ import annotations

import re
from typing import Any

from probemarker.sim.crd.gotext.gojson import (
    Decoded,
    DecodeError,
    Field,
    GoType,
    Registry,
    TypeError_,
    decode,
    decode_inner,
    encode,
)

__all__ = ["CRD", "REGISTRY", "SCHEMA", "decode_crd", "encode_crd"]

CRD = "v1.CustomResourceDefinition"
SCHEMA = "v1.JSONSchemaProps"
REGISTRY = Registry()

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", re.IGNORECASE
)


def _scalar(key: str, kind: Any = "string", bits: int = 64) -> None:
    REGISTRY.add(key, GoType(kind, key, bits=bits))


def _slice(elem: str, name: str = "") -> str:
    key = name or f"[]{elem}"
    REGISTRY.add(key, GoType("slice", key, elem=elem))
    return key


def _map(elem: str, name: str = "") -> str:
    key = name or f"map[string]{elem}"
    REGISTRY.add(key, GoType("map", key, elem=elem))
    return key


def _struct(key: str, *fields: Field) -> None:
    REGISTRY.add(key, GoType("struct", key, fields=fields))


def _f(json: str, type_key: str = "string", *, ptr: bool = False, omit: bool = True) -> Field:
    return Field(json, type_key, pointer=ptr, omitempty=omit)


for _name in ("string", "v1.ResourceScope", "v1.ConversionStrategyType", "v1.JSONSchemaURL",
              "v1.FieldValueErrorReason", "types.UID", "v1.ManagedFieldsOperationType",
              "v1.CustomResourceDefinitionConditionType", "v1.ConditionStatus"):  # fmt: skip
    _scalar(_name)
_scalar("bool", "bool")
_scalar("int64", "int")
_scalar("int32", "int", 32)
_scalar("uint8", "int", 9)  # 0..255 is checked by the caller's schema, not here
_scalar("float64", "float")
REGISTRY.add("[]uint8", GoType("bytes", "[]uint8"))
for _custom, _go_name in (("json", "v1.JSON"), ("orbool", "v1.JSONSchemaPropsOrBool"),
                          ("orarray", "v1.JSONSchemaPropsOrArray"),
                          ("orstrings", "v1.JSONSchemaPropsOrStringArray"),
                          ("time", "v1.Time"), ("raw", "v1.FieldsV1")):  # fmt: skip
    REGISTRY.add(_go_name, GoType("custom", _go_name, custom=_custom))

_STRINGS = _slice("string")
_struct("v1.OwnerReference", _f("apiVersion", omit=False), _f("kind", omit=False),
        _f("name", omit=False), _f("uid", "types.UID", omit=False),
        _f("controller", "bool", ptr=True), _f("blockOwnerDeletion", "bool", ptr=True))  # fmt: skip
_struct("v1.ManagedFieldsEntry", _f("manager"), _f("operation", "v1.ManagedFieldsOperationType"),
        _f("apiVersion"), _f("time", "v1.Time", ptr=True), _f("fieldsType"),
        _f("fieldsV1", "v1.FieldsV1", ptr=True), _f("subresource"))  # fmt: skip
_struct("v1.ObjectMeta", _f("name"), _f("generateName"), _f("namespace"), _f("selfLink"),
        _f("uid", "types.UID"), _f("resourceVersion"), _f("generation", "int64"),
        _f("creationTimestamp", "v1.Time"), _f("deletionTimestamp", "v1.Time", ptr=True),
        _f("deletionGracePeriodSeconds", "int64", ptr=True),
        _f("labels", _map("string")), _f("annotations", "map[string]string"),
        _f("ownerReferences", _slice("v1.OwnerReference")), _f("finalizers", _STRINGS),
        _f("managedFields", _slice("v1.ManagedFieldsEntry")))  # fmt: skip

_struct("v1.ValidationRule", _f("rule", omit=False), _f("message"), _f("messageExpression"),
        _f("reason", "v1.FieldValueErrorReason", ptr=True), _f("fieldPath"),
        _f("optionalOldSelf", "bool", ptr=True))  # fmt: skip
_struct("v1.ExternalDocumentation", _f("description"), _f("url"))
_SCHEMAS = _slice(SCHEMA)
_struct(SCHEMA, _f("id"), _f("$schema", "v1.JSONSchemaURL"), _f("$ref", ptr=True),
        _f("description"), _f("type"), _f("format"), _f("title"),
        _f("default", "v1.JSON", ptr=True), _f("maximum", "float64", ptr=True),
        _f("exclusiveMaximum", "bool"), _f("minimum", "float64", ptr=True),
        _f("exclusiveMinimum", "bool"), _f("maxLength", "int64", ptr=True),
        _f("minLength", "int64", ptr=True), _f("pattern"), _f("maxItems", "int64", ptr=True),
        _f("minItems", "int64", ptr=True), _f("uniqueItems", "bool"),
        _f("multipleOf", "float64", ptr=True), _f("enum", _slice("v1.JSON")),
        _f("maxProperties", "int64", ptr=True), _f("minProperties", "int64", ptr=True),
        _f("required", _STRINGS), _f("items", "v1.JSONSchemaPropsOrArray", ptr=True),
        _f("allOf", _SCHEMAS), _f("oneOf", _SCHEMAS), _f("anyOf", _SCHEMAS),
        _f("not", SCHEMA, ptr=True), _f("properties", _map(SCHEMA)),
        _f("additionalProperties", "v1.JSONSchemaPropsOrBool", ptr=True),
        _f("patternProperties", "map[string]v1.JSONSchemaProps"),
        _f("dependencies", _map("v1.JSONSchemaPropsOrStringArray", "v1.JSONSchemaDependencies")),
        _f("additionalItems", "v1.JSONSchemaPropsOrBool", ptr=True),
        _f("definitions", _map(SCHEMA, "v1.JSONSchemaDefinitions")),
        _f("externalDocs", "v1.ExternalDocumentation", ptr=True),
        _f("example", "v1.JSON", ptr=True), _f("nullable", "bool"),
        _f("x-kubernetes-preserve-unknown-fields", "bool", ptr=True),
        _f("x-kubernetes-embedded-resource", "bool"), _f("x-kubernetes-int-or-string", "bool"),
        _f("x-kubernetes-list-map-keys", _STRINGS), _f("x-kubernetes-list-type", ptr=True),
        _f("x-kubernetes-map-type", ptr=True),
        _f("x-kubernetes-validations", _slice("v1.ValidationRule", "v1.ValidationRules")))  # fmt: skip

_struct("v1.CustomResourceDefinitionNames", _f("plural", omit=False), _f("singular"),
        _f("shortNames", _STRINGS), _f("kind", omit=False), _f("listKind"),
        _f("categories", _STRINGS))  # fmt: skip
_struct("v1.CustomResourceValidation", _f("openAPIV3Schema", SCHEMA, ptr=True))
_struct("v1.CustomResourceSubresourceStatus")
_struct("v1.CustomResourceSubresourceScale", _f("specReplicasPath", omit=False),
        _f("statusReplicasPath", omit=False), _f("labelSelectorPath", ptr=True))  # fmt: skip
_struct("v1.CustomResourceSubresources",
        _f("status", "v1.CustomResourceSubresourceStatus", ptr=True),
        _f("scale", "v1.CustomResourceSubresourceScale", ptr=True))  # fmt: skip
_struct("v1.CustomResourceColumnDefinition", _f("name", omit=False), _f("type", omit=False),
        _f("format"), _f("description"), _f("priority", "int32"),
        _f("jsonPath", omit=False))  # fmt: skip
_struct("v1.SelectableField", _f("jsonPath", omit=False))
_struct("v1.CustomResourceDefinitionVersion", _f("name", omit=False),
        _f("served", "bool", omit=False), _f("storage", "bool", omit=False),
        _f("deprecated", "bool"), _f("deprecationWarning", ptr=True),
        _f("schema", "v1.CustomResourceValidation", ptr=True),
        _f("subresources", "v1.CustomResourceSubresources", ptr=True),
        _f("additionalPrinterColumns", _slice("v1.CustomResourceColumnDefinition")),
        _f("selectableFields", _slice("v1.SelectableField")))  # fmt: skip
_struct("v1.ServiceReference", _f("namespace", omit=False), _f("name", omit=False),
        _f("path", ptr=True), _f("port", "int32", ptr=True))  # fmt: skip
_struct("v1.WebhookClientConfig", _f("url", ptr=True),
        _f("service", "v1.ServiceReference", ptr=True), _f("caBundle", "[]uint8"))  # fmt: skip
_struct("v1.WebhookConversion", _f("clientConfig", "v1.WebhookClientConfig", ptr=True),
        _f("conversionReviewVersions", _STRINGS, omit=False))  # fmt: skip
_struct("v1.CustomResourceConversion", _f("strategy", "v1.ConversionStrategyType", omit=False),
        _f("webhook", "v1.WebhookConversion", ptr=True))  # fmt: skip
_struct("v1.CustomResourceDefinitionSpec", _f("group", omit=False),
        _f("names", "v1.CustomResourceDefinitionNames", omit=False),
        _f("scope", "v1.ResourceScope", omit=False),
        _f("versions", _slice("v1.CustomResourceDefinitionVersion"), omit=False),
        _f("conversion", "v1.CustomResourceConversion", ptr=True),
        _f("preserveUnknownFields", "bool"))  # fmt: skip
_struct("v1.CustomResourceDefinitionCondition",
        _f("type", "v1.CustomResourceDefinitionConditionType", omit=False),
        _f("status", "v1.ConditionStatus", omit=False), _f("lastTransitionTime", "v1.Time"),
        _f("reason"), _f("message"))  # fmt: skip
_struct("v1.CustomResourceDefinitionStatus",
        _f("conditions", _slice("v1.CustomResourceDefinitionCondition"), omit=False),
        _f("acceptedNames", "v1.CustomResourceDefinitionNames", omit=False),
        _f("storedVersions", _STRINGS, omit=False))  # fmt: skip
_struct(CRD, _f("apiVersion"), _f("kind"), _f("metadata", "v1.ObjectMeta"),
        _f("spec", "v1.CustomResourceDefinitionSpec", omit=False),
        _f("status", "v1.CustomResourceDefinitionStatus"))  # fmt: skip


def _json(_: Registry, value: Any) -> tuple[Any, DecodeError | None]:
    return value, None


def _or_bool(registry: Registry, value: Any) -> tuple[Any, DecodeError | None]:
    if isinstance(value, dict):
        return decode_inner(registry, SCHEMA, value)
    if isinstance(value, bool):
        return value, None
    return None, "boolean or JSON schema expected"


def _or_array(registry: Registry, value: Any) -> tuple[Any, DecodeError | None]:
    if isinstance(value, dict):
        return decode_inner(registry, SCHEMA, value)
    if isinstance(value, list):
        return decode_inner(registry, _SCHEMAS, value)
    return None, None


def _or_strings(registry: Registry, value: Any) -> tuple[Any, DecodeError | None]:
    if isinstance(value, dict):
        return decode_inner(registry, SCHEMA, value)
    if isinstance(value, list):
        return decode_inner(registry, _STRINGS, value)
    return None, None


def _time(_: Registry, value: Any) -> tuple[Any, DecodeError | None]:
    if value is None:
        return None, None
    if not isinstance(value, str):
        kind = "bool" if isinstance(value, bool) else "number"
        if isinstance(value, list | dict):
            kind = "array" if isinstance(value, list) else "object"
        return None, TypeError_(kind, "string")
    if not _RFC3339.match(value):
        return None, (
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": '
            f'cannot parse "{value}" as "2006"'
        )
    return value, None


def _encode_schema_or(registry: Registry, value: Any) -> Any:
    if isinstance(value, dict):
        return encode(registry, SCHEMA, value)
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [encode(registry, SCHEMA, v) for v in value]
    return value


REGISTRY.unmarshalers.update(
    json=_json, orbool=_or_bool, orarray=_or_array, orstrings=_or_strings, time=_time, raw=_json
)
REGISTRY.encoders.update(orbool=_encode_schema_or, orarray=_encode_schema_or)
REGISTRY.encoders["orstrings"] = _encode_schema_or


def decode_crd(body: Any, *, strict: bool) -> Decoded:
    """Decode a CustomResourceDefinition request body (see `gojson.decode`)."""
    return decode(REGISTRY, CRD, body, strict=strict)


def encode_crd(value: Any) -> Any:
    """A decoded CustomResourceDefinition as Go's encoder writes it."""
    return encode(REGISTRY, CRD, value)
