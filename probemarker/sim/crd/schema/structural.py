"""CRD schemas for the simulated API server: what kube-apiserver does to a custom resource.

Stage: the server calls `StructuralSchema.admit` on every create/update of a custom resource
and `StructuralSchema.default` when serving stored objects (the CRD itself is checked by
`validation.definition.validate_crd` when it is created).
Inputs are plain JSON values (dict/list/str/int/float/bool/None); outputs are new values (inputs
are never mutated) and `FieldError`s worded the way apiextensions-apiserver words them.

Order of operations on a write (as in apiextensions-apiserver):
1. structural pruning of unknown fields (apiVersion, kind, metadata kept at the root and in
   x-kubernetes-embedded-resource objects; x-kubernetes-preserve-unknown-fields honoured),
   then removal of nulls in non-nullable fields;
2. defaulting (`default` of properties, additionalProperties and items; only where the parent exists);
3. ObjectMeta checks (only when `namespaced=` is given), OpenAPI v3 value validation
   (kube-openapi), list-type set/map uniqueness;
4. x-kubernetes-validations CEL rules, unless step 3 gave a "blocking" error (Required,
   NotSupported, TooLong, TooMany, TypeInvalid), in which case one
   `<nil>: Invalid value: null: some validation rules were not checked ...` error is added instead.
On update (old given), CRD validation ratcheting applies (on by default since 1.30): errors on
unchanged, correlatable parts of the object are dropped, except those of transition rules.
`unknown_fields` lists what pruning drops, for `fieldValidation=Strict`/`Warn`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext.fielderr import FieldError, aggregate_message, go_quote
from probemarker.sim.crd.schema import meta, prune, values
from probemarker.sim.crd.schema.cel import rules
from probemarker.sim.crd.schema.node import SchemaNode, parse_schema

__all__ = [
    "FieldError",
    "StructuralSchema",
    "invalid_status_message",
    "status_causes",
]

_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


class StructuralSchema:
    """The openAPIV3Schema of one CRD version, compiled once (CEL programs included)."""

    __slots__ = ("_rules", "root")

    def __init__(self, root: SchemaNode) -> None:
        self.root = root
        self._rules = rules.compile_rules(root)

    def __repr__(self) -> str:
        return f"StructuralSchema(type={self.root.type!r}, rules={self._rules.count})"

    @classmethod
    def from_crd_version(cls, version: Mapping[str, Any]) -> StructuralSchema:
        """Build from one entry of a CRD's `spec.versions[]` (uses `schema.openAPIV3Schema`).

        A version without a schema gets an empty object schema that preserves unknown fields.
        A rule that does not compile fails every object it applies to with
        `rule compile error: ...`, as in Kubernetes (validate_crd refuses such CRDs first).
        """
        schema = version.get("schema") or {}
        raw = schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None
        if not isinstance(raw, Mapping):
            raw = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return cls(parse_schema(raw))

    def prune(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Structural pruning plus removal of nulls in non-nullable fields (a new object)."""
        return prune.prune_object(obj, self.root)

    def unknown_fields(self, obj: Mapping[str, Any]) -> list[str]:
        """Paths of the fields pruning would drop (`spec.probes[0].perodSeconds`), sorted: what
        `fieldValidation=Strict` refuses (400 `strict decoding error: unknown field "<path>"`)
        and `Warn` reports as warnings."""
        unknown: list[str] = []
        prune.prune_object(obj, self.root, unknown=unknown)
        return sorted(unknown)

    def default(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Apply defaults (a new object); what the API server does when reading from etcd."""
        return prune.default_object(obj, self.root)

    def validate(
        self,
        obj: Mapping[str, Any],
        *,
        old: Mapping[str, Any] | None = None,
        namespaced: bool | None = None,
    ) -> list[FieldError]:
        """Validate an already pruned and defaulted object (create when old is None).

        `namespaced` given: ObjectMeta is checked first, as customResourceValidator does
        (name/generateName, namespace, labels, annotations); None leaves that to the caller.
        """
        errors: list[FieldError] = []
        if namespaced is not None:
            errors.extend(meta.validate_metadata(obj, namespaced=namespaced))
        errors.extend(values.validate_object(obj, self.root, old=old))
        if any(e.type in _BLOCKING for e in errors):
            if self._rules.count:
                errors.append(FieldError.invalid("<nil>", None, _NOT_CHECKED))
            return errors
        errors.extend(self._rules.validate(obj, old=old))
        return errors

    def admit(
        self,
        obj: Mapping[str, Any],
        *,
        old: Mapping[str, Any] | None = None,
        namespaced: bool | None = None,
    ) -> tuple[dict[str, Any], list[FieldError]]:
        """Prune, default and validate `obj` as kube-apiserver does on create (old=None) or update.

        Returns the object as it would be stored and the validation errors (empty when admitted).
        `old` is the stored object (already pruned/defaulted) for updates and status writes.
        See `validate` for `namespaced`.
        """
        admitted = self.default(self.prune(obj))
        return admitted, self.validate(admitted, old=old, namespaced=namespaced)


def invalid_status_message(kind: str, group: str, name: str, errors: list[FieldError]) -> str:
    """The message of the 422 Status: `Kind.group "name" is invalid: [e1, e2]` (apimachinery NewInvalid)."""
    qualified = f"{kind}.{group}" if group else kind
    quoted = go_quote(name)
    if not errors:
        return f"{qualified} {quoted} is invalid"
    return f"{qualified} {quoted} is invalid: {aggregate_message(errors)}"


def status_causes(errors: list[FieldError]) -> list[dict[str, str]]:
    """`details.causes` of the 422 Status: one {reason, message, field} per error, in order."""
    return [{"reason": e.type, "message": e.body, "field": e.path} for e in errors]
