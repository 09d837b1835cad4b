"""The object validation kube-apiserver applies to every write, as far as the sim needs it.

* ObjectMeta (all kinds, custom resources included): label keys and values, annotation
  keys and total annotation size (apimachinery ValidateLabels/ValidateAnnotations);
* pods: a main-resource update may only change the mutable spec fields
  (ValidatePodUpdate), and condition types other than the kubelet's must be qualified
  names (validatePodConditions, whose field path really is ``status.conditions[i].Type``).

Each check returns :class:`~probemarker.sim.errors.StatusCause` values worded as
``field.Error`` words them; the store turns them into one 422 Invalid. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.errors import StatusCause
from probemarker.sim.store.resourcetype import ResourceType
from probemarker.sim.store.selectors import label_value_errors, qualified_name_errors

__all__ = ["validate_write"]

ANNOTATIONS_LIMIT = 256 * 1024
_SYSTEM_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized"})
POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _invalid(path: str, value: str, messages: list[str]) -> list[StatusCause]:
    return [
        StatusCause("FieldValueInvalid", f"Invalid value: {_quote(value)}: {m}", path)
        for m in messages
    ]


def validate_metadata(meta: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    labels = meta.get("labels") or {}
    if isinstance(labels, Mapping):
        for key in sorted(labels):
            causes += _invalid("metadata.labels", str(key), qualified_name_errors(str(key)))
            value = labels[key]
            if isinstance(value, str):
                causes += _invalid("metadata.labels", value, label_value_errors(value))
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, Mapping):
        size = 0
        for key in sorted(annotations):
            causes += _invalid(
                "metadata.annotations", str(key), qualified_name_errors(str(key).lower())
            )
            # Go's len() of a string: UTF-8 bytes (apimachinery ValidateAnnotationsSize).
            size += len(str(key).encode()) + len(str(annotations[key]).encode())
        if size > ANNOTATIONS_LIMIT:
            causes.append(
                StatusCause(
                    "FieldValueTooLong",
                    f"Too long: may not be more than {ANNOTATIONS_LIMIT} bytes",
                    "metadata.annotations",
                )
            )
    return causes


def _pod_conditions(pod: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    conditions = (pod.get("status") or {}).get("conditions") or []
    for i, condition in enumerate(conditions):
        ctype = str(condition.get("type", "")) if isinstance(condition, Mapping) else ""
        if ctype not in _SYSTEM_CONDITIONS:
            causes += _invalid(f"status.conditions[{i}].Type", ctype, qualified_name_errors(ctype))
    return causes


def _mutable_view(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec without the fields an update may change."""
    out = {k: v for k, v in spec.items() if k not in ("activeDeadlineSeconds", "tolerations",
                                                         "terminationGracePeriodSeconds")}  # fmt: skip
    for field in ("containers", "initContainers"):
        if isinstance(out.get(field), list):
            out[field] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, Mapping) else c
                for c in out[field]
            ]
    return out


def _pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[StatusCause]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _mutable_view(old_spec) != _mutable_view(new_spec):
        return [StatusCause("FieldValueForbidden", POD_UPDATE_FORBIDDEN, "spec")]
    return []


def validate_write(
    rt: ResourceType,
    new: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    subresource: str | None = None,
) -> list[StatusCause]:
    """Everything wrong with writing ``new`` (``old`` is None on create)."""
    causes = validate_metadata(new.get("metadata") or {})
    if rt.is_pod:
        if old is not None and subresource is None:
            causes += _pod_update(old, new)
        causes += _pod_conditions(new)
    return causes
