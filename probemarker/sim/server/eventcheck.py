"""Validation of Events on create, as kube-apiserver's ValidateEventCreate does it.

Every event gets the legacy checks (pkg/apis/core/validation/events.go
legacyValidateEvent): without `eventTime`, the involved object's namespace
must match the event's; with `eventTime`, reportingController (a qualified
name), reportingInstance, action and reason are required and length-limited.
Events created through events.k8s.io/v1 are also checked strictly: eventTime
required, type Normal or Warning, the deprecated fields unset, a series with
count >= 2 and lastObservedTime.  Field paths are the internal (core) names, as
kube-apiserver reports them.  Input is the core/v1 form the store keeps.  Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.errors import Invalid, StatusCause
from probemarker.sim.store.selectors import qualified_name_errors

_LIMITS = {"reportingInstance": 128, "action": 128, "reason": 128}
NOTE_LIMIT = 1024


def _required(path: str) -> StatusCause:
    return StatusCause("FieldValueRequired", "Required value", path)


def _invalid(path: str, value: str, detail: str) -> StatusCause:
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return StatusCause("FieldValueInvalid", f"Invalid value: {quoted}: {detail}", path)


def _legacy(event: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    namespace = str(event.get("metadata", {}).get("namespace", ""))
    involved_ns = str((event.get("involvedObject") or {}).get("namespace", ""))
    mismatch = _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not event.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (
            involved_ns and namespace != involved_ns
        ):
            causes.append(mismatch)
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    controller = str(event.get("reportingComponent") or "")
    if not controller:
        causes.append(_required("reportingController"))
    causes += [
        _invalid("reportingController", controller, m) for m in qualified_name_errors(controller)
    ]
    for field, limit in _LIMITS.items():
        value = str(event.get(field) or "")
        if not value:
            causes.append(_required(field))
        elif len(value) > limit:
            causes.append(_invalid(field, "", f"can have at most {limit} characters"))
    if len(str(event.get("message") or "")) > NOTE_LIMIT:
        causes.append(_invalid("message", "", f"can have at most {NOTE_LIMIT} characters"))
    return causes


def _strict(event: Mapping[str, Any]) -> list[StatusCause]:
    causes: list[StatusCause] = []
    series = event.get("series")
    if isinstance(series, Mapping):
        if int(series.get("count") or 0) < 2:
            causes.append(_invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(_required("series.lastObservedTime"))
    if not event.get("eventTime"):
        causes.append(_required("eventTime"))
    if event.get("type") not in ("Normal", "Warning"):
        causes.append(_invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for field in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(field):
            causes.append(_invalid(field, "", "needs to be unset"))
    source = event.get("source") or {}
    if source.get("component") or source.get("host"):
        causes.append(_invalid("source", "", "needs to be unset"))
    return causes


def check_event_create(event: Mapping[str, Any], *, strict: bool) -> None:
    """Raise the 422 Invalid kube-apiserver gives for this new core/v1-shaped event;
    `strict` for events created through events.k8s.io/v1."""
    causes = _legacy(event) + (_strict(event) if strict else [])
    if causes:
        name = str(event.get("metadata", {}).get("name") or "")
        raise Invalid("Event", "events.k8s.io" if strict else "", name, causes)
