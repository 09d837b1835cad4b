"""The checks of a CustomResourceDefinition outside its spec, as apiextensions validation
(Kubernetes 1.32) makes them: ObjectMeta with the CRD's name rule (`<plural>.<group>`),
status.storedVersions, the API approval annotation of protected groups (`*.k8s.io`,
`*.kubernetes.io`), and the fields an update may not change (group and plural always;
scope and kind once the CRD is Established).

Input: decoded parts of the CRD (`crdtypes`); output: field errors worded as the API server
words them. Not checked here: ownerReferences and managedFields of the CRD's own metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.schema import meta

__all__ = ["approval", "established", "immutable", "object_meta", "stored_versions"]

_APPROVAL = "api-approved.kubernetes.io"
_ENHANCEMENT = "see https://github.com/kubernetes/enhancements/pull/1111"


def object_meta(metadata: Mapping[str, Any], required: str) -> list[FieldError]:
    """ValidateObjectMeta with the CRD's name function (a DNS subdomain that is
    `<plural>.<group>`)."""
    errors: list[FieldError] = []

    def name_errors(name: str, prefix: bool) -> list[str]:
        masked = name[:-2] + "a" if prefix and len(name) > 1 and name.endswith("-") else name
        found = meta.dns1123_subdomain(masked)
        if name != required:
            found.append('must be spec.names.plural+"."+spec.group')
        return found

    generate = str(metadata.get("generateName") or "")
    if generate:
        errors += [
            FieldError.invalid("metadata.generateName", generate, m)
            for m in name_errors(generate, True)
        ]
    name = str(metadata.get("name") or "")
    if not name:
        errors.append(FieldError.required("metadata.name", "name or generateName is required"))
    else:
        errors += [FieldError.invalid("metadata.name", name, m) for m in name_errors(name, False)]
    if metadata.get("namespace"):
        errors.append(FieldError.forbidden("metadata.namespace", "not allowed on this type"))
    checked = meta.validate_metadata(
        {"metadata": {"name": "x", **_labels_only(metadata)}}, namespaced=False
    )
    return errors + checked + _finalizers(metadata.get("finalizers") or [])


def _labels_only(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {k: metadata[k] for k in ("labels", "annotations") if k in metadata}


def _finalizers(finalizers: list[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    for finalizer in finalizers:
        errors += [
            FieldError.invalid("metadata.finalizers", finalizer, m)
            for m in meta.qualified_name(finalizer)
        ]
    if {"orphan", "foregroundDeletion"} <= set(finalizers):
        detail = "finalizer orphan and foregroundDeletion cannot be both set"
        errors.append(invalid_rendered("metadata.finalizers", gorepr.strings(finalizers), detail))
    return errors


def established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def immutable(
    spec: Mapping[str, Any], old: Mapping[str, Any], *, established: bool
) -> list[FieldError]:
    pairs = [("spec.group", spec.get("group"), old.get("group"))]
    names, old_names = spec.get("names") or {}, old.get("names") or {}
    pairs.append(("spec.names.plural", names.get("plural"), old_names.get("plural")))
    if established:
        pairs[:0] = [("spec.scope", spec.get("scope"), old.get("scope")),
                     ("spec.names.kind", names.get("kind"), old_names.get("kind"))]  # fmt: skip
    return [
        FieldError.invalid(p, new or "", "field is immutable")
        for p, new, was in pairs
        if (new or "") != (was or "")
    ]


def stored_versions(stored: list[str] | None, versions: list[dict[str, Any]]) -> list[FieldError]:
    path = "status.storedVersions"
    if not stored:
        return [
            invalid_rendered(path, gorepr.strings(stored), "must have at least one stored version")
        ]
    errors: list[FieldError] = []
    remaining = {name: index for index, name in enumerate(stored)}
    for version in versions:
        name = str(version.get("name") or "")
        if version.get("storage") and name not in remaining:
            errors.append(
                invalid_rendered(
                    path, gorepr.strings(stored), f"must have the storage version {name}"
                )
            )
        remaining.pop(name, None)
    return errors + [
        FieldError.invalid(f"{path}[{i}]", v, "must appear in spec.versions")
        for v, i in remaining.items()
    ]


def _approval_state(annotations: Mapping[str, Any]) -> tuple[str, str]:
    value = str(annotations.get(_APPROVAL) or "")
    if not value:
        return (
            "missing",
            f'protected groups must have approval annotation "{_APPROVAL}", {_ENHANCEMENT}',
        )
    if value.startswith("unapproved"):
        return "bypassed", ""
    parts = _parse_request_uri(value)
    if parts is not None and parts[0] and parts[1]:
        return "approved", ""
    return "invalid", (
        f'protected groups must have approval annotation "{_APPROVAL}" with either a URL or a '
        f'reason starting with "unapproved", {_ENHANCEMENT}'
    )


def _parse_request_uri(value: str) -> tuple[str, str] | None:
    """url.ParseRequestURI, enough to tell scheme and host: (scheme, host) or None."""
    scheme, sep, rest = value.partition("://")
    if not sep or not scheme.isascii() or not scheme[:1].isalpha():
        return None
    return scheme, rest.split("/", 1)[0]


def approval(crd: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    group = str((crd.get("spec") or {}).get("group") or "")
    if not (group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))):
        return []
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    state, reason = _approval_state(annotations)
    if (
        old is not None
        and _approval_state((old.get("metadata") or {}).get("annotations") or {})[0] == state
    ):
        return []
    path = f"metadata.annotations[{_APPROVAL}]"
    if state == "missing":
        return [FieldError.required(path, reason)]
    if state == "invalid":
        return [FieldError.invalid(path, str(annotations.get(_APPROVAL)), reason)]
    return []
