"""The check of a CRD schema's `default` values (apiextensions-apiserver
pkg/apiserver/schema/defaulting ValidateDefaults, Kubernetes 1.32), run when the schema is
structural.

Input: a decoded structural schema and the path it is reported under. Output: field errors,
in the API server's walk order (a node's default, then its items, then its properties;
additionalProperties are not followed). Per default value:

1. it must be pruned already: `<path>.default: Invalid value: <%#v>: must not have unknown
   fields`;
2. it must be valid for the node's schema (OpenAPI value validation, errors under
   `<path>.default...`);
3. only then, its node's CEL rules (and those below it) must hold for it, evaluated as an
   update from the default to itself and, with ratcheting on (1.30+), also as a create.

Not done (documented): defaults inside resource metadata (`metadata`, `apiVersion`,
`kind` of the root or of embedded resources; the API server also forbids those) and the
ObjectMeta coercion of defaults of embedded resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.schema import prune, values
from probemarker.sim.crd.schema.cel import rules
from probemarker.sim.crd.schema.node import SchemaNode, parse_schema

__all__ = ["validate_defaults"]

Schema = Mapping[str, Any]
_META = ("metadata", "apiVersion", "kind")


def validate_defaults(schema: Schema, path: str) -> list[FieldError]:
    """ValidateDefaults with the root taken as a resource root."""
    return _walk(schema, path, inside_meta=False, root=True)


def _walk(s: Schema, path: str, *, inside_meta: bool, root: bool = False) -> list[FieldError]:
    embedded = root or bool(s.get("x-kubernetes-embedded-resource"))
    if s.get("x-kubernetes-embedded-resource"):
        inside_meta = False
    errors: list[FieldError] = []
    if s.get("default") is not None and not inside_meta:
        errors += _check(s, path)
    items = s.get("items")
    if isinstance(items, Mapping):
        errors += _walk(items, f"{path}.items", inside_meta=inside_meta)
    props = s.get("properties")
    for key, prop in (props if isinstance(props, Mapping) else {}).items():
        meta = inside_meta or (embedded and key in _META)
        errors += _walk(prop, f"{path}.properties[{key}]", inside_meta=meta)
    return errors


def _under(path: str, sub: str) -> str:
    if sub in ("", "<nil>"):
        return path
    return path + sub if sub.startswith("[") else f"{path}.{sub}"


def _check(s: Schema, path: str) -> list[FieldError]:
    node = parse_schema(s)
    value = s["default"]
    where = f"{path}.default"
    errors: list[FieldError] = []
    dropped: list[str] = []
    prune.prune_object(
        {"v": value}, SchemaNode(type="object", properties={"v": node}), unknown=dropped
    )
    if dropped:
        rendered = gorepr.interface_value(value)
        errors.append(invalid_rendered(where, rendered, "must not have unknown fields"))
    found = values.validate_value(value, node)
    if found:
        return errors + [_moved(e, where) for e in found]
    compiled = rules.compile_rules(node)
    if compiled.count:
        cel_errors = compiled.validate(value, old=value)
        if not cel_errors:
            cel_errors = compiled.validate(value, old=None)
        errors += [_moved(e, where) for e in cel_errors]
    return errors


def _moved(error: FieldError, where: str) -> FieldError:
    path = _under(where, error.path)
    return FieldError(
        path=path,
        type=error.type,
        message=path + error.message[len(error.path) :],
        value=error.value,
        detail=error.detail,
    )
