"""The essential checks kube-apiserver makes when a CustomResourceDefinition (apiextensions.k8s.io/v1)
is created (apiextensions validation.ValidateCustomResourceDefinition), enough to refuse a broken
CRD with a clear 422: names, scope, versions, structural schema, defaults, list types, CEL rules.

Paths are field.Path strings as Kubernetes reports them, e.g.
`spec.versions[0].schema.openAPIV3Schema.properties[spec].type`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd import celadmit, prune, rules, values
from probemarker.sim.crd.fielderr import FieldError
from probemarker.sim.crd.node import SchemaNode, parse_schema

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})


def validate_crd(crd: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = crd.get("spec") if isinstance(crd.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    group = str(spec.get("group", "") or "")
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    plural = str(names.get("plural", "") or "")
    meta = crd.get("metadata") if isinstance(crd.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = str(meta.get("name", "") or "")
    if name != f"{plural}.{group}":
        errors.append(
            FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
        )
    errors.extend(_check_group(group))
    errors.extend(_check_names(names))
    scope = spec.get("scope", "")
    if scope not in ("Cluster", "Namespaced"):
        if not scope:
            errors.append(FieldError.required("spec.scope"))
        else:
            errors.append(FieldError.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    errors.extend(_check_versions(spec.get("versions")))
    return errors


def _check_group(group: str) -> list[FieldError]:
    if not group:
        return [FieldError.required("spec.group")]
    if not _DNS_SUBDOMAIN.match(group):
        return [
            FieldError.invalid(
                "spec.group",
                group,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            )
        ]
    if "." not in group:
        return [FieldError.invalid("spec.group", group, "should be a domain with at least one dot")]
    return []


def _check_names(names: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("plural", "singular"):
        value = str(names.get(key, "") or "")
        if key == "plural" and not value:
            errors.append(FieldError.required("spec.names.plural"))
        elif value and not _DNS_LABEL.match(value):
            errors.append(
                FieldError.invalid(
                    f"spec.names.{key}",
                    value,
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                )
            )
    if not names.get("kind"):
        errors.append(FieldError.required("spec.names.kind"))
    return errors


def _check_versions(versions: Any) -> list[FieldError]:
    if not isinstance(versions, list) or not versions:
        return [
            FieldError.invalid(
                "spec.versions",
                versions if versions is not None else None,
                "must have exactly one version marked as storage version",
            )
        ]
    errors: list[FieldError] = []
    storage = sum(1 for v in versions if isinstance(v, Mapping) and v.get("storage"))
    if storage != 1:
        errors.append(
            FieldError.invalid(
                "spec.versions", versions, "must have exactly one version marked as storage version"
            )
        )
    seen: set[str] = set()
    for index, version in enumerate(versions):
        path = f"spec.versions[{index}]"
        if not isinstance(version, Mapping):
            errors.append(FieldError.required(path))
            continue
        vname = str(version.get("name", "") or "")
        if not vname:
            errors.append(FieldError.required(f"{path}.name"))
        elif vname in seen:
            errors.append(FieldError.duplicate(f"{path}.name", vname))
        seen.add(vname)
        schema = version.get("schema")
        raw = schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None
        if not isinstance(raw, Mapping):
            errors.append(
                FieldError.required(f"{path}.schema.openAPIV3Schema", "schemas are required")
            )
            continue
        errors.extend(_check_schema(raw, f"{path}.schema.openAPIV3Schema"))
    return errors


def _check_schema(raw: Mapping[str, Any], path: str) -> list[FieldError]:
    root = parse_schema(raw)
    errors: list[FieldError] = []
    if root.type != "object":
        errors.append(FieldError.invalid(f"{path}.type", root.type, "must be object at the root"))
    meta = root.properties.get("metadata")
    if meta is not None:
        extra = sorted(set(meta.properties) - {"name", "generateName"})
        for key in extra:
            errors.append(
                FieldError.forbidden(
                    f"{path}.properties[metadata].properties[{key}]", "must not be specified"
                )
            )
    errors.extend(_check_node(root, raw, path, is_root=True))
    if not errors:
        # kube-apiserver compiles and costs the CEL rules only of a schema with no other errors.
        errors.extend(celadmit.validate_schema_rules(root, path))
    return errors


def _check_node(
    node: SchemaNode,
    raw: Mapping[str, Any],
    path: str,
    *,
    is_root: bool = False,
) -> list[FieldError]:
    errors: list[FieldError] = []
    untyped_ok = node.int_or_string or node.preserve_unknown_fields
    if not node.type and not untyped_ok:
        errors.append(
            FieldError.required(f"{path}.type", "must not be empty for specified object fields")
        )
    elif node.type and node.type not in _TYPES:
        errors.append(FieldError.not_supported(f"{path}.type", node.type, sorted(_TYPES)))
    if "$ref" in raw:
        errors.append(FieldError.forbidden(f"{path}.$ref", "$ref is not supported"))
    if node.unique_items:
        errors.append(
            FieldError.forbidden(
                f"{path}.uniqueItems",
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    if node.additional_properties is False:
        errors.append(
            FieldError.forbidden(
                f"{path}.additionalProperties", "additionalProperties cannot be set to false"
            )
        )
    if node.properties and node.additional_properties not in (None, False):
        errors.append(
            FieldError.forbidden(
                f"{path}.additionalProperties",
                "additionalProperties and properties are mutual exclusive",
            )
        )
    if node.type == "array" and node.items is None:
        errors.append(FieldError.required(f"{path}.items", "must be specified"))
    errors.extend(_check_list_type(node, path))
    if node.has_default and not is_root:
        errors.extend(_check_default(node, path))
    errors.extend(_check_rule_fields(node, path))
    for key, prop in node.properties.items():
        child_raw = raw.get("properties", {}).get(key, {})
        errors.extend(_check_node(prop, child_raw, f"{path}.properties[{key}]"))
    if isinstance(node.additional_properties, SchemaNode):
        errors.extend(
            _check_node(
                node.additional_properties,
                raw.get("additionalProperties", {}),
                f"{path}.additionalProperties",
            )
        )
    if node.items is not None:
        errors.extend(_check_node(node.items, raw.get("items", {}), f"{path}.items"))
    return errors


def _check_list_type(node: SchemaNode, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if node.list_type and node.list_type not in ("atomic", "set", "map"):
        errors.append(
            FieldError.not_supported(
                f"{path}.x-kubernetes-list-type", node.list_type, ["atomic", "set", "map"]
            )
        )
    if node.list_type == "map":
        items = node.items
        if not node.list_map_keys:
            errors.append(
                FieldError.required(
                    f"{path}.x-kubernetes-list-map-keys",
                    "must not be empty if x-kubernetes-list-type is map",
                )
            )
        if items is None or items.type != "object":
            errors.append(
                FieldError.invalid(
                    f"{path}.items.type",
                    items.type if items else "",
                    "must be object if parent array's x-kubernetes-list-type is map",
                )
            )
        elif node.list_map_keys:
            for key in node.list_map_keys:
                prop = items.properties.get(key)
                if prop is None:
                    errors.append(
                        FieldError.invalid(
                            f"{path}.x-kubernetes-list-map-keys",
                            list(node.list_map_keys),
                            "entries must all be names of item properties",
                        )
                    )
                elif key not in items.required and not prop.has_default:
                    errors.append(
                        FieldError.required(
                            f"{path}.items.properties[{key}]",
                            "all map keys must be required or have a default value",
                        )
                    )
    if node.list_type == "set" and node.items is not None and node.items.type == "object":
        errors.append(
            FieldError.invalid(
                f"{path}.items.type",
                "object",
                "must be scalar or atomic if parent array's x-kubernetes-list-type is set",
            )
        )
    return errors


def _check_default(node: SchemaNode, path: str) -> list[FieldError]:
    """validateStructuralDefaults: a default must be pruned already and valid for its schema."""
    value = node.default
    holder = SchemaNode(type="object", properties={"v": node})
    pruned = prune.prune_object({"v": value}, holder).get("v")
    if pruned != value:
        return [FieldError.invalid(f"{path}.default", value, "must not have unknown fields")]
    errors = []
    for error in values.validate_value(value, node):
        where = f"{path}.default" if error.path == "<nil>" else f"{path}.default.{error.path}"
        errors.append(FieldError.make(where, error.type, error.value, error.detail))
    return errors


def _check_rule_fields(node: SchemaNode, path: str) -> list[FieldError]:
    """The checks of x-kubernetes-validations entries that need no CEL (SchemaErrors)."""
    errors: list[FieldError] = []
    for index, rule in enumerate(node.rules):
        rule_path = f"{path}.x-kubernetes-validations[{index}]"
        if not rule.rule.strip():
            errors.append(FieldError.required(f"{rule_path}.rule"))
        if rule.field_path:
            try:
                rules.normalize_field_path(rule.field_path, node)
            except ValueError as exc:
                detail = f"fieldPath must be a valid path: {exc}"
                errors.append(FieldError.invalid(f"{rule_path}.fieldPath", rule.field_path, detail))
        if rule.reason and rule.reason not in (
            "FieldValueInvalid",
            "FieldValueForbidden",
            "FieldValueRequired",
            "FieldValueDuplicate",
        ):
            errors.append(
                FieldError.not_supported(
                    f"{rule_path}.reason",
                    rule.reason,
                    [
                        "FieldValueDuplicate",
                        "FieldValueForbidden",
                        "FieldValueInvalid",
                        "FieldValueRequired",
                    ],
                )
            )
    return errors
