"""Validation of Events, as kube-apiserver's ValidateEventCreate/ValidateEventUpdate do it
(pkg/apis/core/validation/events.go).

Every event gets the legacy checks (legacyValidateEvent): without `eventTime`, the
involved object's namespace must match the event's; with `eventTime`,
reportingController (a qualified name), reportingInstance, action and reason are
required and length-limited.  Events created through events.k8s.io/v1 are also
checked strictly: eventTime required, type Normal or Warning, the deprecated fields
unset, a series with count >= 2 and lastObservedTime.  Updates (`check_event_update`)
get the legacy checks of the new event; through events.k8s.io/v1 also a changed
series re-checked and every other field immutable ("field is immutable", the value
printed as Go's field.Invalid prints it), so a core/v1 PATCH of count/lastTimestamp
passes.  Field paths are the internal (core) names, as kube-apiserver reports them.
Input is the core/v1 form the store keeps.  Pure.
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
        elif len(value.encode()) > limit:  # Go's len(): bytes, not characters
            causes.append(_invalid(field, "", f"can have at most {limit} characters"))
    if len(str(event.get("message") or "").encode()) > NOTE_LIMIT:
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


# -- updates (ValidateEventUpdate) ---------------------------------------------------

_REF_FIELDS = (
    ("Kind", "kind"),
    ("Namespace", "namespace"),
    ("Name", "name"),
    ("UID", "uid"),
    ("APIVersion", "apiVersion"),
    ("ResourceVersion", "resourceVersion"),
    ("FieldPath", "fieldPath"),
)
_SOURCE_FIELDS = (("Component", "component"), ("Host", "host"))
_TIMES = ("firstTimestamp", "lastTimestamp", "eventTime")
# The fields ValidateEventUpdate holds immutable, in its order (reason twice, as there).
_IMMUTABLE = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "reason",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)
_PATHS = {"reportingComponent": "reportingController"}


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _go_struct(kind: str, fields: tuple[tuple[str, str], ...], value: Any) -> str:
    value = value if isinstance(value, Mapping) else {}
    body = ", ".join(f"{go}:{_go_quote(str(value.get(js) or ''))}" for go, js in fields)
    return f"{kind}{{{body}}}"


def _go_time(value: Any) -> str:
    """time.Time.String() of an RFC 3339 timestamp (UTC), as field.Invalid prints a Time."""
    text = str(value or "")
    if not text:
        return "0001-01-01 00:00:00 +0000 UTC"
    date, _, clock = text.rstrip("Z").partition("T")
    return f"{date} {clock.split('+')[0]} +0000 UTC"


def _go_value(field: str, value: Any) -> str:
    if field == "involvedObject":
        return _go_struct("core.ObjectReference", _REF_FIELDS, value)
    if field == "related":
        if not value:
            return "null"
        return "&" + _go_struct("core.ObjectReference", _REF_FIELDS, value)
    if field == "source":
        return _go_struct("core.EventSource", _SOURCE_FIELDS, value)
    if field in _TIMES:
        return _go_time(value)
    if field == "count":
        return str(int(value or 0))
    return _go_quote(str(value or ""))


def _normalized(field: str, value: Any) -> Any:
    return value or ({} if field in ("involvedObject", "source") else None)


def check_event_update(new: Mapping[str, Any], old: Mapping[str, Any], *, strict: bool) -> None:
    """Raise the 422 Invalid kube-apiserver gives for an update of an event (core/v1
    shapes): legacy checks of the new event always; through events.k8s.io/v1
    (`strict`) also a changed series re-checked and the fields above immutable."""
    causes = _legacy(new)
    if strict:
        if new.get("series") != old.get("series"):
            causes += _strict({"series": new.get("series"), "eventTime": True, "type": "Normal"})
        for field in _IMMUTABLE:
            now, before = _normalized(field, new.get(field)), _normalized(field, old.get(field))
            if now != before:
                path = _PATHS.get(field, field)
                detail = f"Invalid value: {_go_value(field, new.get(field))}: field is immutable"
                causes.append(StatusCause("FieldValueInvalid", detail, path))
    if causes:
        name = str(new.get("metadata", {}).get("name") or "")
        raise Invalid("Event", "events.k8s.io" if strict else "", name, causes)
