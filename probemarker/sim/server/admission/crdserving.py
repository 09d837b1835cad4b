"""Serving custom resources from CustomResourceDefinitions.

The sim's stand-in for apiextensions-apiserver's CRD handler and its
establishing/naming controllers, on top of the pure CRD checks and schemas of
probemarker.sim.crd:

* `check_crd` decodes a CRD write as kube-apiserver's codec does
  (`crd.validation.crdtypes`: a body that does not decode is a 400 BadRequest, unknown
  fields are a 400 under `fieldValidation=Strict` and warnings under `Warn`; on a patch
  both are a 422 on `patch`), applies the v1 defaults and the registry strategy,
  validates it (`crd.validation.definition`, 422 Invalid) and returns the object to
  store (unknown fields dropped, zero omitempty fields left out, as Go re-encodes it);
* `establish` (after the CRD is stored) marks it NamesAccepted and
  Established in its status (`acceptedNames`, `storedVersions`), then adds one
  `ResourceType` per served version to the catalog, so discovery and the
  resource routes serve it from then on;
* `admit` runs a custom resource through its version's
  `crd.schema.structural.StructuralSchema` (prune, default, validate incl. CEL) and
  raises the 422 Status kube-apiserver would send;
* `forget` removes a deleted CRD's resource types.

Invariant: a resource type is in the catalog exactly while its CRD exists
and was established; its schema is the one of the CRD's latest stored spec.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.crd.gotext.fielderr import FieldError, go_json, go_quote
from probemarker.sim.crd.schema.structural import (
    StructuralSchema,
    invalid_status_message,
    status_causes,
)
from probemarker.sim.crd.validation import crdtypes, definition
from probemarker.sim.server.discovery.catalog import CRDS, Catalog
from probemarker.sim.server.request.status import StatusError
from probemarker.sim.store.objects import ResourceType, Store


def _rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> StatusError:
    """The 422 Invalid Status kube-apiserver sends for these field errors."""
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": status_causes(errors)}
    if group:
        details["group"] = group
    return StatusError(
        422, "Invalid", invalid_status_message(kind, group, name, errors), details=details
    )


def _decode_error(message: str, body: dict[str, Any], *, patch: bool) -> StatusError:
    """A body that does not decode: 400 from create/update (transformDecodeError), 422 on
    `patch` from a patch (the patched object, as JSON, is the bad value)."""
    if patch:
        cause = f"Invalid value: {go_quote(go_json(body))}: {message}"
        return StatusError(
            422,
            "Invalid",
            f' "" is invalid: patch: {cause}',
            details={
                "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]
            },
        )
    version = str(body.get("apiVersion") or "").rpartition("/")[2] or "v1"
    kind = "CustomResourceDefinition"
    return StatusError(
        400,
        "BadRequest",
        f"{kind} in version {go_quote(version)} cannot be handled as a {kind}: {message}",
    )


class CrdController:
    """Keeps the catalog in step with the stored CRDs; see the module docstring."""

    def __init__(self, *, store: Store, catalog: Catalog, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._catalog = catalog
        self._clock = clock
        self._schemas: dict[tuple[str, str, str], StructuralSchema] = {}
        self._types: dict[str, list[ResourceType]] = {}
        self._columns: dict[tuple[str, str, str], list[dict[str, Any]]] = {}

    def check_crd(
        self,
        crd: dict[str, Any],
        *,
        old: dict[str, Any] | None = None,
        field_validation: str = "Ignore",
        warnings: list[str] | None = None,
        patch: bool = False,
    ) -> dict[str, Any]:
        """The CRD as kube-apiserver would store it from this create (or update of `old`,
        `patch` when the body is a patch result), or the Status it would refuse it with."""
        decoded = crdtypes.decode_crd(crd, strict=field_validation != "Ignore")
        if decoded.error is not None:
            raise _decode_error(decoded.error_message, crd, patch=patch)
        if decoded.strict and field_validation == "Strict":
            raise _decode_error(
                "strict decoding error: " + ", ".join(decoded.strict), crd, patch=patch
            )
        if warnings is not None:
            warnings.extend(decoded.strict)
        value = decoded.value
        meta = value.setdefault("metadata", {})
        if old is None and not meta.get("name") and meta.get("generateName"):
            suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            meta["name"] = str(meta["generateName"]) + suffix
        prepared = definition.prepare(value, old=old)
        errors = definition.validate_prepared(prepared, old=old)
        if errors:
            name = str(meta.get("name") or "")
            raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, errors)
        stored: dict[str, Any] = crdtypes.encode_crd(prepared)
        if not (stored.get("status") or {}).get("storedVersions"):
            stored.pop("status", None)
        return stored

    def establish(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Register the CRD's resource types and write its Established status."""
        name = crd["metadata"]["name"]
        self.forget(name)
        spec = crd["spec"]
        names = spec["names"]
        group = spec["group"]
        registered: list[ResourceType] = []
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            subresources = frozenset(
                sub for sub in ("status", "scale") if sub in (version.get("subresources") or {})
            )
            rt = ResourceType(
                group=group,
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                subresources=subresources,
                short_names=tuple(names.get("shortNames") or ()),
                singular=names.get("singular") or names["kind"].lower(),
                is_custom=True,
            )
            self._schemas[(group, version["name"], names["plural"])] = (
                StructuralSchema.from_crd_version(version)
            )
            self._columns[(group, version["name"], names["plural"])] = list(
                version.get("additionalPrinterColumns") or []
            )
            self._catalog.add(rt)
            registered.append(rt)
        self._types[name] = registered
        return self._write_status(crd)

    def _write_status(self, crd: dict[str, Any]) -> dict[str, Any]:
        now = _rfc3339(self._clock())
        spec = crd["spec"]
        accepted = copy.deepcopy(spec["names"])
        accepted.setdefault("singular", accepted["kind"].lower())
        accepted.setdefault("listKind", accepted["kind"] + "List")
        storage = [v["name"] for v in spec.get("versions", []) if v.get("storage")]
        old_status = crd.get("status") or {}
        stored = list(old_status.get("storedVersions") or [])
        for version in storage:
            if version not in stored:
                stored.append(version)
        status = {
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
            "acceptedNames": accepted,
            "storedVersions": stored,
        }
        if old_status.get("conditions"):
            status["conditions"] = old_status["conditions"]
        updated = copy.deepcopy(crd)
        updated["status"] = status
        return self._store.update(
            CRDS, updated, namespace=None, name=crd["metadata"]["name"], subresource="status"
        )

    def forget(self, crd_name: str) -> list[ResourceType]:
        """Stop serving the CRD's types; returns them (so their objects can be removed)."""
        removed = self._types.pop(crd_name, [])
        for rt in removed:
            self._catalog.remove(rt)
            self._schemas.pop((rt.group, rt.version, rt.plural), None)
            self._columns.pop((rt.group, rt.version, rt.plural), None)
        return removed

    def printer_columns(self, rt: ResourceType) -> list[dict[str, Any]]:
        """The additionalPrinterColumns of a served custom resource version."""
        return self._columns.get((rt.group, rt.version, rt.plural), [])

    def admit(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        old: dict[str, Any] | None,
        field_validation: str = "Ignore",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        """The custom resource as stored, or the Status kube-apiserver would give: 400 for
        unknown fields under `fieldValidation=Strict` (`Warn` adds warnings), 422 Invalid for
        schema and CEL errors."""
        schema = self._schemas.get((rt.group, rt.version, rt.plural))
        if schema is None:
            return obj
        if field_validation != "Ignore":
            unknown = [f'unknown field "{path}"' for path in schema.unknown_fields(obj)]
            if unknown and field_validation == "Strict":
                raise StatusError(400, "BadRequest", "strict decoding error: " + ", ".join(unknown))
            if warnings is not None:
                warnings.extend(unknown)
        admitted, errors = schema.admit(obj, old=old)
        if errors:
            name = str(obj.get("metadata", {}).get("name") or "")
            raise invalid(rt.kind, rt.group, name, errors)
        return admitted
