"""A parsed CRD openAPIV3Schema node (apiextensions JSONSchemaProps), the shape every
crdschema_* module walks.

Invariants: values are immutable after parsing; `properties` keeps the declaration order of the
CRD (Go iterates maps randomly, so any order is one Kubernetes could have produced);
`additional_properties` is a SchemaNode, True/False (`additionalProperties: true/false`) or None.
`type` is "" for x-kubernetes-int-or-string and untyped nodes, as in the Go structs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Rule:
    """One x-kubernetes-validations entry."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str = ""
    field_path: str = ""
    optional_old_self: bool = False


@dataclass(frozen=True, slots=True)
class SchemaNode:
    type: str = ""
    nullable: bool = False
    format: str = ""
    properties: Mapping[str, SchemaNode] = field(default_factory=dict)
    additional_properties: SchemaNode | bool | None = None
    items: SchemaNode | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    default: Any = _MISSING
    preserve_unknown_fields: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    map_type: str = ""
    rules: tuple[Rule, ...] = ()
    all_of: tuple[SchemaNode, ...] = ()
    any_of: tuple[SchemaNode, ...] = ()
    one_of: tuple[SchemaNode, ...] = ()
    not_: SchemaNode | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING

    @property
    def additional_schema(self) -> SchemaNode | None:
        """The additionalProperties schema, if it is a schema (`true` means an untyped schema)."""
        ap = self.additional_properties
        if isinstance(ap, SchemaNode):
            return ap
        if ap is True:
            return SchemaNode()
        return None


def _opt_int(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _opt_float(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _parse_rule(raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        return Rule(rule="")
    return Rule(
        rule=str(raw.get("rule", "")),
        message=str(raw.get("message", "") or ""),
        message_expression=str(raw.get("messageExpression", "") or ""),
        reason=str(raw.get("reason", "") or ""),
        field_path=str(raw.get("fieldPath", "") or ""),
        optional_old_self=bool(raw.get("optionalOldSelf", False)),
    )


def _parse_list(raw: Mapping[str, Any], key: str) -> tuple[SchemaNode, ...]:
    value = raw.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(parse_schema(v) for v in value if isinstance(v, Mapping))


def parse_schema(raw: Mapping[str, Any]) -> SchemaNode:
    """Parse a JSONSchemaProps mapping; unknown or malformed keywords are ignored here
    (validate_crd reports them)."""
    props_raw = raw.get("properties")
    properties = (
        {k: parse_schema(v) for k, v in props_raw.items() if isinstance(v, Mapping)}
        if isinstance(props_raw, Mapping)
        else {}
    )
    ap_raw = raw.get("additionalProperties")
    additional: SchemaNode | bool | None
    if isinstance(ap_raw, bool):
        additional = ap_raw
    elif isinstance(ap_raw, Mapping):
        additional = parse_schema(ap_raw)
    else:
        additional = None
    items_raw = raw.get("items")
    enum_raw = raw.get("enum")
    rules_raw = raw.get("x-kubernetes-validations")
    not_raw = raw.get("not")
    return SchemaNode(
        type=str(raw.get("type", "") or ""),
        nullable=bool(raw.get("nullable", False)),
        format=str(raw.get("format", "") or ""),
        properties=properties,
        additional_properties=additional,
        items=parse_schema(items_raw) if isinstance(items_raw, Mapping) else None,
        required=tuple(str(r) for r in raw.get("required") or () if isinstance(r, str)),
        enum=tuple(enum_raw) if isinstance(enum_raw, list) else None,
        minimum=_opt_float(raw, "minimum"),
        maximum=_opt_float(raw, "maximum"),
        exclusive_minimum=bool(raw.get("exclusiveMinimum", False)),
        exclusive_maximum=bool(raw.get("exclusiveMaximum", False)),
        multiple_of=_opt_float(raw, "multipleOf"),
        min_length=_opt_int(raw, "minLength"),
        max_length=_opt_int(raw, "maxLength"),
        pattern=raw["pattern"] if isinstance(raw.get("pattern"), str) else None,
        min_items=_opt_int(raw, "minItems"),
        max_items=_opt_int(raw, "maxItems"),
        unique_items=bool(raw.get("uniqueItems", False)),
        min_properties=_opt_int(raw, "minProperties"),
        max_properties=_opt_int(raw, "maxProperties"),
        default=raw.get("default", _MISSING),
        preserve_unknown_fields=bool(raw.get("x-kubernetes-preserve-unknown-fields", False)),
        embedded_resource=bool(raw.get("x-kubernetes-embedded-resource", False)),
        int_or_string=bool(raw.get("x-kubernetes-int-or-string", False)),
        list_type=str(raw.get("x-kubernetes-list-type", "") or ""),
        list_map_keys=tuple(str(k) for k in raw.get("x-kubernetes-list-map-keys") or ()),
        map_type=str(raw.get("x-kubernetes-map-type", "") or ""),
        rules=tuple(_parse_rule(r) for r in rules_raw) if isinstance(rules_raw, list) else (),
        all_of=_parse_list(raw, "allOf"),
        any_of=_parse_list(raw, "anyOf"),
        one_of=_parse_list(raw, "oneOf"),
        not_=parse_schema(not_raw) if isinstance(not_raw, Mapping) else None,
        raw=raw,
    )
