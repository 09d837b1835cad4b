"""The CEL declaration of a schema node as Kubernetes builds it (k8s.io/apiserver/pkg/cel:
common.SchemaDeclType, DeclType, MaybeAssignTypeName), with the size bounds the cost estimator
uses.

Stage: after the schema is parsed (probemarker.sim.crd.schema.node), before a rule is checked.
Input: a `SchemaNode` and whether it is the root of a resource (the CRD root or an embedded
resource). Output: a `DeclType` tree, or None when the node is not visible to CEL.

Rules reproduced: objects become struct types whose field names are escaped (`a-b` ->
`a__dash__b`); additionalProperties become map(string, V); arrays (any list-type) become list(V);
x-kubernetes-int-or-string is `dyn`, sized as the largest string a request can hold (its
maxLength is ignored); a node without a type (x-kubernetes-preserve-unknown-fields alone) is
not visible; a resource root always shows apiVersion, kind, metadata.name and
metadata.generateName. Sizes: maxLength x 4 for strings (bytes, not code points), the longest
enum value when there is no maxLength (Kubernetes 1.32), fixed bounds for date, date-time and
duration, and otherwise as many elements as fit in a 3 MiB request given the minimum serialized
size of one element.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from probemarker.sim.crd.schema.cel.celcheck import types as t
from probemarker.sim.crd.schema.cel.engine import escape_name
from probemarker.sim.crd.schema.node import SchemaNode

MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
_MAX_STRING = MAX_REQUEST_SIZE_BYTES - 2


@dataclass(frozen=True, slots=True, eq=False)
class DeclType:
    """A CEL declaration: `max_elements` bounds size() (string length, list items, map
    entries); `min_size` is the smallest JSON serialization of a value."""

    name: str
    cel_type: t.CelType
    fields: Mapping[str, DeclField] | None = None
    key: DeclType | None = None
    elem: DeclType | None = None
    max_elements: int = 0
    min_size: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class DeclField:
    type: DeclType
    required: bool


STRING_KEY = DeclType("string", t.STRING, min_size=2)
_BOOL = DeclType("bool", t.BOOL, min_size=4)
_DOUBLE = DeclType("double", t.DOUBLE, min_size=1)
_INT = DeclType("int", t.INT, min_size=1)
_STRING_SCHEMA = SchemaNode(type="string")
_META_SCHEMA = SchemaNode(
    type="object", properties={"name": _STRING_SCHEMA, "generateName": _STRING_SCHEMA}
)


def with_type_and_object_meta(node: SchemaNode) -> SchemaNode:
    """The schema with apiVersion, kind and metadata.{name,generateName} declared."""
    props = node.properties
    meta = props.get("metadata")
    if (
        props.get("kind", SchemaNode()).type == "string"
        and props.get("apiVersion", SchemaNode()).type == "string"
        and meta is not None
        and meta.type == "object"
        and meta.properties.get("name", SchemaNode()).type == "string"
        and meta.properties.get("generateName", SchemaNode()).type == "string"
    ):
        return node
    merged = {
        **props,
        "kind": _STRING_SCHEMA,
        "apiVersion": _STRING_SCHEMA,
        "metadata": _META_SCHEMA,
    }
    return dataclasses.replace(node, properties=merged)


def schema_decl_type(
    node: SchemaNode, resource_root: bool, *, enum_sizes: bool = True
) -> DeclType | None:
    """common.SchemaDeclType; `enum_sizes` is False for Kubernetes before 1.32."""
    if node.int_or_string:
        return DeclType("dyn", t.DYN, max_elements=_MAX_STRING, min_size=1)
    if resource_root:
        node = with_type_and_object_meta(node)
    if node.type == "array":
        return _array(node, enum_sizes)
    if node.type == "object":
        return _object(node, enum_sizes)
    if node.type == "string":
        return _string(node, enum_sizes)
    return {"boolean": _BOOL, "number": _DOUBLE, "integer": _INT}.get(node.type)


def _array(node: SchemaNode, enum_sizes: bool) -> DeclType | None:
    if node.items is None:
        return None
    items = schema_decl_type(node.items, node.items.embedded_resource, enum_sizes=enum_sizes)
    if items is None:
        return None
    if node.max_items is not None:
        max_items = max(node.max_items, 0)
    else:
        max_items = _MAX_STRING // (items.min_size + 1)
    return DeclType(
        "list", t.list_of(items.cel_type), elem=items, max_elements=max_items, min_size=2
    )


def _object(node: SchemaNode, enum_sizes: bool) -> DeclType | None:
    extra = node.additional_properties
    if isinstance(extra, SchemaNode):
        values = schema_decl_type(extra, extra.embedded_resource, enum_sizes=enum_sizes)
        if values is None:
            return None
        if node.max_properties is not None:
            max_props = max(node.max_properties, 0)
        else:
            max_props = _MAX_STRING // (values.min_size + 6)
        cel_type = t.map_of(t.STRING, values.cel_type)
        return DeclType(
            "map", cel_type, key=STRING_KEY, elem=values, max_elements=max_props, min_size=2
        )
    fields: dict[str, DeclField] = {}
    min_size = 2
    required = set(node.required)
    for name, prop in node.properties.items():
        field_type = schema_decl_type(prop, prop.embedded_resource, enum_sizes=enum_sizes)
        if field_type is None:
            continue
        escaped = escape_name(name)
        if escaped is not None:
            fields[escaped] = DeclField(field_type, name in required)
        if name in required and not prop.has_default:
            min_size += len(name.encode()) + field_type.min_size + 4
    return DeclType("object", t.struct("object"), fields=fields, min_size=min_size)


def _string(node: SchemaNode, enum_sizes: bool) -> DeclType:
    fmt = node.format
    if fmt == "byte":
        max_len = max(node.max_length, 0) if node.max_length is not None else _MAX_STRING
        return DeclType("bytes", t.BYTES, max_elements=max_len, min_size=2)
    if fmt == "duration":
        return DeclType("duration", t.DURATION, max_elements=32, min_size=3)
    if fmt == "date":
        return DeclType("timestamp", t.TIMESTAMP, max_elements=12, min_size=12)
    if fmt == "date-time":
        return DeclType("timestamp", t.TIMESTAMP, max_elements=32, min_size=21)
    if node.max_length is not None:
        max_len = max(node.max_length, 0) * 4
    elif enum_sizes and node.enum:
        max_len = max((len(v.encode()) for v in node.enum if isinstance(v, str)), default=0)
    else:
        max_len = _MAX_STRING
    return DeclType("string", t.STRING, max_elements=max_len, min_size=2)


def assign_names(decl: DeclType, name: str) -> DeclType:
    """DeclType.MaybeAssignTypeName: objects named `object` get `name`, their fields
    `name.field`, map values `name.@elem`, list items `name.@idx`."""
    if decl.fields is not None:
        own = decl.name if decl.name != "object" else name
        fields = {
            key: DeclField(assign_names(f.type, f"{own}.{key}"), f.required)
            for key, f in decl.fields.items()
        }
        return dataclasses.replace(decl, name=own, cel_type=t.struct(own), fields=fields)
    if decl.key is not None and decl.elem is not None:
        elem = assign_names(decl.elem, f"{name}.@elem")
        return dataclasses.replace(decl, elem=elem, cel_type=t.map_of(t.STRING, elem.cel_type))
    if decl.elem is not None:
        elem = assign_names(decl.elem, f"{name}.@idx")
        return dataclasses.replace(decl, elem=elem, cel_type=t.list_of(elem.cel_type))
    return decl


def struct_types(decl: DeclType) -> dict[str, DeclType]:
    """Every object type within `decl`, by name (the checker's type provider)."""
    out: dict[str, DeclType] = {}
    stack = [decl]
    while stack:
        item = stack.pop()
        if item.fields is not None:
            out[item.name] = item
            stack.extend(f.type for f in item.fields.values())
        elif item.elem is not None:
            stack.append(item.elem)
    return out


def max_cardinality(min_size: int) -> int:
    """How often a value of this minimum size fits in one request (maxCardinality)."""
    return MAX_REQUEST_SIZE_BYTES // (min_size + 1)
