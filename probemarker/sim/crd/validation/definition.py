"""What kube-apiserver checks when a CustomResourceDefinition (apiextensions.k8s.io/v1) is
created or updated: apiextensions validation's ValidateCustomResourceDefinition and
ValidateCustomResourceDefinitionUpdate, Kubernetes 1.32.

Stage: after the request body was decoded (`crdtypes`; a body that does not decode is a 400
before any of this) and defaulted, before the CRD is stored. Input: the decoded v1 object
(and the stored one on update). Output: field errors in the API server's order; empty
means accepted. `prepare` applies what happens between decoding and validation (v1
defaults, the registry strategy's status handling).

The API server validates the internal form of the object: when every version has the same
schema (always so with one version), the v1 to internal conversion moves it to
`spec.validation`, so its errors read `spec.validation.openAPIV3Schema...`; only versions
with differing schemas are checked as `spec.versions[i].schema.openAPIV3Schema...`. The
same holds for subresources (`spec.subresources`), printer columns
(`spec.additionalPrinterColumns[i]`) and selectable fields. `spec.version` is the first
version's name, so an invalid first name is reported twice.

Order: metadata (`crdobject`); the spec (group, scope, schemas present, preserveUnknownFields vs
defaults, each version: name, deprecation warning, schema, subresources, columns,
selectable fields; unique names; one storage version; spec.version; names; the top-level
schema, subresources, columns, selectable fields; conversion); on update the immutable
fields; status.storedVersions; the API approval annotation of protected groups;
spec.preserveUnknownFields.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.schema import meta
from probemarker.sim.crd.validation import crdobject, crdspec, crdtypes
from probemarker.sim.crd.validation.schemacheck import validate_validation

__all__ = ["CrdDecodeError", "prepare", "validate_crd", "validate_prepared"]

_MISSING: Any = object()
_MOVED = ("schema", "subresources", "additionalPrinterColumns", "selectableFields")


class CrdDecodeError(ValueError):
    """The body is not a CustomResourceDefinition the API server can decode (a 400)."""


def validate_crd(
    crd: Mapping[str, Any], *, old: Mapping[str, Any] | None = None
) -> list[FieldError]:
    """Decode (not strictly), prepare and validate `crd` as a create (or an update of `old`,
    a stored CRD)."""
    decoded = crdtypes.decode_crd(dict(crd), strict=False)
    if decoded.error is not None:
        raise CrdDecodeError(decoded.error_message)
    return validate_prepared(prepare(decoded.value, old=old), old=old)


def prepare(crd: Mapping[str, Any], *, old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The decoded CRD after the v1 defaults and PrepareForCreate/PrepareForUpdate: names
    singular and listKind, conversion strategy None, status reset on create (kept from
    `old` on update) with the storage version recorded."""
    out = copy.deepcopy(dict(crd))
    spec = out.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if not names.get("singular"):
        names["singular"] = str(names.get("kind") or "").lower()
    if not names.get("listKind") and names.get("kind"):
        names["listKind"] = names["kind"] + "List"
    spec.setdefault("conversion", {"strategy": "None"})
    service = ((spec["conversion"].get("webhook") or {}).get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", 443)
    status = copy.deepcopy(dict(old.get("status") or {})) if old is not None else {}
    stored = list(status.get("storedVersions") or [])
    storage = next(
        (v.get("name", "") for v in spec.get("versions") or () if v.get("storage")), None
    )
    if storage is not None and storage not in stored:
        stored.append(storage)
    status["storedVersions"] = stored or None
    out["status"] = status
    return out


@dataclass(slots=True)
class _Internal:
    """The parts of the internal CRD spec that differ from v1."""

    spec: Mapping[str, Any]
    versions: list[dict[str, Any]]
    top: dict[str, Any] = field(default_factory=dict)  # validation, subresources, ...
    version: str = ""
    conversion: dict[str, Any] | None = None


def _equal(a: Any, b: Any, key: str) -> bool:
    if a is _MISSING or b is _MISSING:
        if key in ("additionalPrinterColumns", "selectableFields"):
            return not (a if a is not _MISSING else None) and not (b if b is not _MISSING else None)
        return a is b
    encoded_a = crdtypes.encode_crd({"spec": {"versions": [{key: a}]}})
    encoded_b = crdtypes.encode_crd({"spec": {"versions": [{key: b}]}})
    return bool(encoded_a == encoded_b)


def _internal(spec: Mapping[str, Any]) -> _Internal:
    """Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_CustomResourceDefinitionSpec."""
    versions = [dict(v) for v in spec.get("versions") or ()]
    internal = _Internal(spec=spec, versions=versions, conversion=_internal_conversion(spec))
    if not versions:
        return internal
    internal.version = str(versions[0].get("name") or "")
    for key in _MOVED:
        first = versions[0].get(key, _MISSING)
        if all(_equal(v.get(key, _MISSING), first, key) for v in versions):
            internal.top[key] = None if first is _MISSING else first
            for version in versions:
                version.pop(key, None)
    return internal


def _internal_conversion(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    conversion = spec.get("conversion")
    if not isinstance(conversion, Mapping):
        return None
    out: dict[str, Any] = {"strategy": conversion.get("strategy", "")}
    webhook = conversion.get("webhook")
    if isinstance(webhook, Mapping):
        if webhook.get("clientConfig") is not None:
            out["webhookClientConfig"] = webhook["clientConfig"]
        out["conversionReviewVersions"] = webhook.get("conversionReviewVersions")
    return out


def validate_prepared(
    crd: Mapping[str, Any], *, old: Mapping[str, Any] | None = None
) -> list[FieldError]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    internal = _internal(spec)
    unchanged = _unchanged_schemas(internal, _internal(old.get("spec") or {})) if old else set()
    errors = crdobject.object_meta(
        crd.get("metadata") or {}, f"{names.get('plural', '')}.{spec.get('group', '')}"
    )
    errors += _spec(internal, unchanged)
    if old is not None:
        errors += crdobject.immutable(
            spec, old.get("spec") or {}, established=crdobject.established(old)
        )
    errors += crdobject.stored_versions(
        (crd.get("status") or {}).get("storedVersions"), internal.versions
    )
    errors += crdobject.approval(crd, old)
    if spec.get("preserveUnknownFields") and not (
        old and (old.get("spec") or {}).get("preserveUnknownFields")
    ):
        detail = "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
        errors.append(FieldError.invalid("spec.preserveUnknownFields", True, detail))
    return errors


def _spec(internal: _Internal, unchanged: set[str]) -> list[FieldError]:
    spec = internal.spec
    errors = _group(str(spec.get("group") or ""))
    scope = str(spec.get("scope") or "")
    if not scope:
        errors.append(FieldError.required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        errors.append(FieldError.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    validation = internal.top.get("schema")
    if not isinstance(validation, Mapping) or validation.get("openAPIV3Schema") is None:
        for index, version in enumerate(internal.versions):
            if (
                not isinstance(version.get("schema"), Mapping)
                or version["schema"].get("openAPIV3Schema") is None
            ):
                errors.append(
                    FieldError.required(
                        f"spec.versions[{index}].schema.openAPIV3Schema", "schemas are required"
                    )
                )
    if spec.get("preserveUnknownFields") and _has_defaults(spec):
        detail = "must be false in order to use defaults in the schema"
        errors.append(FieldError.invalid("spec.preserveUnknownFields", True, detail))
    errors += _versions(internal, unchanged)
    errors += _names(spec.get("names") or {})
    errors += _top_level(internal, unchanged)
    conversion = internal.conversion
    if (
        conversion is not None
        and conversion.get("strategy") != "None"
        and spec.get("preserveUnknownFields")
    ):
        detail = "must be None if spec.preserveUnknownFields is true"
        errors.append(
            FieldError.invalid("spec.conversion.strategy", conversion.get("strategy", ""), detail)
        )
    return errors + crdspec.validate_conversion(conversion, "spec.conversion")


def _group(group: str) -> list[FieldError]:
    if not group:
        return [FieldError.required("spec.group")]
    if problems := meta.dns1123_subdomain(group):
        return [FieldError.invalid("spec.group", group, ",".join(problems))]
    if "." not in group:
        return [FieldError.invalid("spec.group", group, "should be a domain with at least one dot")]
    return []


def _versions(internal: _Internal, unchanged: set[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    per_version_status = "subresources" not in internal.top
    for index, version in enumerate(internal.versions):
        at = f"spec.versions[{index}]"
        name = str(version.get("name") or "")
        if problems := crdspec.dns1035_label(name):
            errors.append(FieldError.invalid(f"{at}.name", name, ",".join(problems)))
        subresources = (
            version.get("subresources") if per_version_status else internal.top.get("subresources")
        )
        errors += crdspec.validate_deprecation(version, at)
        errors += validate_validation(
            version.get("schema"), f"{at}.schema", status_enabled=_status(subresources),
            suppress_per_expression_cost=name in unchanged,
        )  # fmt: skip
        errors += crdspec.validate_subresources(version.get("subresources"), f"{at}.subresources")
        errors += crdspec.validate_columns(
            version.get("additionalPrinterColumns"), f"{at}.additionalPrinterColumns"
        )
        errors += crdspec.selectable_fields_errors(
            version.get("selectableFields"), version.get("schema"), f"{at}.selectableFields",
            schema_path=f"{at}.schema.openAPIV3Schema", per_version=True,
        )  # fmt: skip
    names = [str(v.get("name") or "") for v in internal.versions]
    rendered = gorepr.versions(internal.versions if "versions" in internal.spec else None)
    if len(set(names)) != len(names):
        errors.append(
            invalid_rendered("spec.versions", rendered, "must contain unique version names")
        )
    if sum(1 for v in internal.versions if v.get("storage")) != 1:
        detail = "must have exactly one version marked as storage version"
        errors.append(invalid_rendered("spec.versions", rendered, detail))
    if internal.version and (problems := crdspec.dns1035_label(internal.version)):
        errors.append(FieldError.invalid("spec.version", internal.version, ",".join(problems)))
    return errors


def _names(names: Mapping[str, Any]) -> list[FieldError]:
    errors = [
        FieldError.required(f"spec.names.{key}")
        for key in ("plural", "singular", "kind", "listKind")
        if not names.get(key)
    ]
    return errors + crdspec.validate_names(names, "spec.names")


def _top_level(internal: _Internal, unchanged: set[str]) -> list[FieldError]:
    top = internal.top
    any_status = _status(top.get("subresources")) or any(
        _status(v.get("subresources")) for v in internal.versions
    )
    errors = validate_validation(
        top.get("schema"), "spec.validation", status_enabled=any_status,
        suppress_per_expression_cost=internal.version in unchanged,
    )  # fmt: skip
    errors += crdspec.validate_subresources(top.get("subresources"), "spec.subresources")
    errors += crdspec.validate_columns(
        top.get("additionalPrinterColumns"), "spec.additionalPrinterColumns"
    )
    return errors + crdspec.selectable_fields_errors(
        top.get("selectableFields"), top.get("schema"), "spec.selectableFields",
        schema_path="spec.schema.openAPIV3Schema", per_version=False,
    )  # fmt: skip


def _status(subresources: Any) -> bool:
    return isinstance(subresources, Mapping) and subresources.get("status") is not None


def _schema_has_default(schema: Any) -> bool:
    """SchemaHas(s, default != nil), over every subschema."""
    if not isinstance(schema, Mapping):
        return False
    if schema.get("default") is not None:
        return True
    children: list[Any] = [
        schema.get(k) for k in ("items", "not", "additionalProperties", "additionalItems")
    ]
    for key in ("allOf", "anyOf", "oneOf"):
        children += list(schema.get(key) or ())
    if isinstance(schema.get("items"), list):
        children += schema["items"]
    for key in ("properties", "patternProperties", "definitions", "dependencies"):
        children += list((schema.get(key) or {}).values())
    return any(_schema_has_default(child) for child in children)


def _has_defaults(spec: Mapping[str, Any]) -> bool:
    return any(
        _schema_has_default((v.get("schema") or {}).get("openAPIV3Schema"))
        for v in spec.get("versions") or ()
    )


def _unchanged_schemas(new: _Internal, old: _Internal) -> set[str]:
    """findVersionsWithUnchangedSchemas: versions whose schema is what it was."""

    def schema_of(internal: _Internal, name: str) -> Any:
        if "schema" in internal.top:
            return internal.top["schema"]
        for version in internal.versions:
            if version.get("name") == name:
                return version.get("schema")
        return _MISSING

    names = [str(v.get("name") or "") for v in new.versions]
    return {
        n for n in names
        if (a := schema_of(new, n)) is not _MISSING and (b := schema_of(old, n)) is not _MISSING
        and _equal(a, b, "schema")
    }  # fmt: skip
