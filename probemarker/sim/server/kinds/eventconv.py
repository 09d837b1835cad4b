"""Conversion between core/v1 Events and events.k8s.io/v1 Events.

Kubernetes stores one kind of event and serves it through both APIs, so an
event written as events.k8s.io/v1 shows in `kubectl describe` (which reads
core/v1) and the other way round.  The sim stores core/v1 events and converts
at the edge, with the field renames of k8s.io/kubernetes
pkg/apis/events/v1/conversion.go: regarding <-> involvedObject,
note <-> message, deprecatedSource <-> source, deprecatedFirstTimestamp <->
firstTimestamp, deprecatedLastTimestamp <-> lastTimestamp, deprecatedCount
<-> count, reportingController <-> reportingComponent; everything else keeps
its name.  Field selectors in events.k8s.io/v1 terms are renamed the same way.
Pure functions; inputs are never mutated.
"""

from __future__ import annotations

from typing import Any

_V1_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
_CORE_TO_V1 = {core: v1 for v1, core in _V1_TO_CORE.items()}
_SHARED = (
    "metadata",
    "eventTime",
    "series",
    "reportingInstance",
    "action",
    "reason",
    "related",
    "type",
)


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as the core/v1 Event the store keeps."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    for key, value in event.items():
        if key in ("apiVersion", "kind"):
            continue
        out[_V1_TO_CORE.get(key, key)] = value
    return out


def from_core(event: dict[str, Any]) -> dict[str, Any]:
    """A stored core/v1 Event as events.k8s.io/v1 serves it."""
    out: dict[str, Any] = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key, value in event.items():
        if key in ("apiVersion", "kind"):
            continue
        if key in _CORE_TO_V1:
            out[_CORE_TO_V1[key]] = value
        elif key in _SHARED:
            out[key] = value
    return out


def field_selector_to_core(selector: str) -> str:
    """Rename events.k8s.io/v1 field labels (`regarding.name`) to core ones."""
    terms = []
    for term in selector.split(","):
        for v1, core in _V1_TO_CORE.items():
            if term.startswith((v1 + ".", v1 + "=", v1 + "!")):
                term = core + term[len(v1) :]
                break
        terms.append(term)
    return ",".join(terms)
