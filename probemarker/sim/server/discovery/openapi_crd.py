"""The OpenAPI v3 component schemas of a custom resource, as apiextensions-apiserver builds them.

Follows k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder: for one
served version of a CRD,

* the kind's schema is the version's `openAPIV3Schema` with its vendor
  extensions unfolded (`x-kubernetes-int-or-string` gains the
  `anyOf: [integer, string]` pattern, as `Structural.Unfold` does), `metadata`
  replaced by a reference to ObjectMeta, `apiVersion` and `kind` replaced by
  TypeMeta's, embedded resources (`x-kubernetes-embedded-resource`) given the
  same three fields, and the `x-kubernetes-group-version-kind` extension;
  without a schema it is just `{"type": "object"}` with that extension;
* the list kind's schema has `items` (references to the kind), ListMeta and the
  list kind's GVK;
* both are named as kube-openapi names them: the group reversed, then version and
  kind (`io.probemarker.v1alpha1.PodProbeMarker`).

Invariant: the CRD is never modified (schemas are deep copies).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from probemarker.sim.server.discovery.openapi_meta import (
    list_meta_property,
    object_meta_property,
    ref,
    type_meta_properties,
)

_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def definition_name(group: str, version: str, kind: str) -> str:
    """kube-openapi's friendly name of `<group>/<version>.<kind>`."""
    head = ".".join(reversed(group.split("."))) if "." in group else group
    return f"{head}.{version}.{kind}" if head else f"{version}.{kind}"


def _unfold(schema: dict[str, Any]) -> None:
    if schema.get("x-kubernetes-int-or-string") is True:
        any_of = schema.get("anyOf")
        all_of = schema.get("allOf") or []
        first_any = all_of[0].get("anyOf") if all_of and isinstance(all_of[0], dict) else None
        if any_of is None:
            schema["anyOf"] = copy.deepcopy(_INT_OR_STRING)
        elif any_of != _INT_OR_STRING and first_any != _INT_OR_STRING:
            schema["allOf"] = [{"anyOf": copy.deepcopy(_INT_OR_STRING)}, *all_of]
    for child in _children(schema):
        _unfold(child)


def _add_embedded(schema: dict[str, Any]) -> None:
    for child in _children(schema):
        _add_embedded(child)
    if schema.get("x-kubernetes-embedded-resource") is True:
        properties = schema.setdefault("properties", {})
        properties.update(type_meta_properties())
        properties["metadata"] = object_meta_property()
        required = schema.setdefault("required", [])
        for name in ("kind", "apiVersion"):
            if name not in required:
                required.append(name)


def _children(schema: dict[str, Any]) -> list[dict[str, Any]]:
    found = [s for s in (schema.get("properties") or {}).values() if isinstance(s, dict)]
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found.append(schema[key])
    return found


def _served_version(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if (
            isinstance(entry, Mapping)
            and entry.get("name") == version
            and entry.get("served", True)
        ):
            return entry
    return None


def crd_schemas(crd: Mapping[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """The kind and list-kind schemas of `version` of `crd`, by name (empty when the version
    is not served)."""
    entry = _served_version(crd, version)
    if entry is None:
        return {}
    spec = crd["spec"]
    group, names = spec["group"], spec["names"]
    kind = names["kind"]
    list_kind = names.get("listKind") or f"{kind}List"
    raw = (entry.get("schema") or {}).get("openAPIV3Schema")
    if isinstance(raw, dict):
        schema: dict[str, Any] = copy.deepcopy(raw)
        _unfold(schema)
        properties = schema.setdefault("properties", {})
        properties["metadata"] = object_meta_property()
        properties.update(type_meta_properties())
        _add_embedded(schema)
    else:
        schema = {"type": "object"}
    schema["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": version}]
    name = definition_name(group, version, kind)
    return {
        name: schema,
        definition_name(group, version, list_kind): list_schema(
            item_name=name,
            group=group,
            version=version,
            kind=kind,
            list_kind=list_kind,
            plural=names["plural"],
        ),
    }


def list_schema(
    *, item_name: str, group: str, version: str, kind: str, list_kind: str, plural: str
) -> dict[str, Any]:
    """The schema of a list kind whose items are `item_name`."""
    return {
        "description": f"{list_kind} is a list of {kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            **type_meta_properties(),
            "items": {
                "type": "array",
                "description": f"List of {plural}. More info: {_CONVENTIONS}",
                "items": ref(item_name),
            },
            "metadata": list_meta_property(),
        },
        "x-kubernetes-group-version-kind": [
            {"group": group, "kind": list_kind, "version": version}
        ],
    }
