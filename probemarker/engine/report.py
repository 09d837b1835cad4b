"""Report: the events and log lines the engine emits, one place for their wording.

Stage: decide/write -> the user (I/O through the `EventSink`, the client layer's
`EventRecorder`). Events only on transitions (docs/engine.md): `ProbeSucceeded` (Normal) and
`ProbeFailed` (Warning) on the pod, naming marker and probe, with the probe's message;
`ConflictingMarkers` (Warning) on the pod naming both owners of a key;
`InvalidResultValue` (Warning) on the pod, once per distinct value rendered from
`{{.Result}}` that cannot go on it;
`InvalidMarker` (Warning) on the marker; `PortNotFound` and `ProbeUnsupported`
(Warning) on the pod when a probe cannot run there (once per cause, not per run);
`WriteRefused` (Warning) on the pod when the API server refuses part of a write.
The recorder counts repeats into a series instead of creating new events. One log line per event, never one per probe run.

A value rendered from `{{.Result}}` is the marker author's and the container's to
make long (a 4 KiB template that repeats the action renders hundreds of KB): a log
line and a note carry it as `kit.text.shown` shows it, its first characters with its
size and digest, so neither grows with what a template renders.
"""

from __future__ import annotations

from typing import Literal, Protocol

import structlog

from probemarker.api import rules
from probemarker.api.model import MarkerRef, ProbeState
from probemarker.identity.probes import ProbeKey
from probemarker.kit.text import shown, trim_utf8
from probemarker.kube.write.events import ObjectRef
from probemarker.watch.pods import PodView
from probemarker.write.desired import Conflict, InvalidValue

log = structlog.get_logger("probemarker.engine")

EventType = Literal["Normal", "Warning"]

SHOWN_TEXT = 1024  # bytes of an error text a line carries (a note is cut to 1024 anyway)


class EventSink(Protocol):
    def record(
        self, *, regarding: ObjectRef, type: EventType, reason: str, note: str, action: str
    ) -> None: ...


def pod_ref(pod: PodView) -> ObjectRef:
    return ObjectRef(kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid)


def marker_ref(ref: MarkerRef, *, uid: str = "", api_version: str = rules.API_VERSION) -> ObjectRef:
    return ObjectRef(
        kind="PodProbeMarker",
        namespace=ref.namespace,
        name=ref.name,
        uid=uid,
        api_version=api_version,
    )


class Reporter:
    """Turns the engine's transitions into events and log lines."""

    def __init__(self, sink: EventSink) -> None:
        self._sink = sink

    def _say(
        self,
        regarding: ObjectRef,
        type: EventType,
        reason: str,
        action: str,
        note: str,
        line: str | None = None,
        level: Literal["warning", "info"] = "warning",
        /,
        **fields: object,
    ) -> None:
        """An event on `regarding`, after its log line `line` at `level` with `fields`
        when it has one: the shape of every event here."""
        if line is not None:
            (log.info if level == "info" else log.warning)(line, **fields)
        self._sink.record(regarding=regarding, type=type, reason=reason, note=note, action=action)

    def transition(
        self,
        pod: PodView,
        key: ProbeKey,
        state: ProbeState,
        message: str,
        *,
        previous: ProbeState | None,
    ) -> None:
        """A probe's decided state changed (not a message-only change)."""
        succeeded = state is ProbeState.SUCCEEDED
        note = f"{_probe_text(key)}: {state}"
        if message:
            note = f"{note}: {message}"
        self._say(
            pod_ref(pod),
            "Normal" if succeeded else "Warning",
            "ProbeSucceeded" if succeeded else "ProbeFailed",
            "Probe",
            note,
            "probe.decided",
            "info",
            pod=_pod_text(pod),
            **_probe_fields(key),
            state=str(state),
            previous=str(previous) if previous is not None else None,
            message=message,
        )

    def conflict(self, pod: PodView, conflict: Conflict) -> None:
        winner, loser = shown(conflict.winner_value), shown(conflict.loser_value)
        note = (
            f"{conflict.kind} {conflict.key!r}: {conflict.winner} sets {winner.quoted()}, "
            f"{conflict.loser} sets {loser.quoted()}; {conflict.winner} wins (owners are "
            "ordered by marker name, then probe name). Make the markers agree."
        )
        self._say(
            pod_ref(pod), "Warning", "ConflictingMarkers", "Mark", note, "write.conflict",
            pod=_pod_text(pod), detail=note,
        )  # fmt: skip

    def invalid_value(self, pod: PodView, bad: InvalidValue) -> None:
        """A value rendered from `{{.Result}}` cannot go on `pod`: its key keeps the
        last valid value (write/claims.py)."""
        value = shown(bad.pieces())
        note = (
            f"{bad.owner.marker}/{bad.owner.probe}: {bad.kind} {bad.key!r} would be "
            f"{value.quoted()} from the probe's answer, but {bad.problem}; not written, the key "
            "keeps its last valid value. Make the probe answer a valid value, or change the "
            "markerPolicy value."
        )
        self._say(
            pod_ref(pod), "Warning", "InvalidResultValue", "Mark", note,
            "write.invalid_result_value",
            pod=_pod_text(pod), owner=str(bad.owner), kind=bad.kind, key=bad.key,
            value=value.text, value_bytes=value.size, value_sha256=value.short_digest,
            problem=bad.problem,
        )  # fmt: skip

    def cannot_run(self, pod: PodView, key: ProbeKey, *, reason: str, problem: str) -> None:
        """A probe cannot be run on `pod` (see `Engine._blocked`): it decides nothing."""
        note = f"{_probe_text(key)}: {problem}. The probe decides nothing until this is fixed."
        self._say(
            pod_ref(pod), "Warning", reason, "Probe", note, "probe.cannot_run",
            pod=_pod_text(pod), **_probe_fields(key), reason=reason, problem=problem,
        )  # fmt: skip

    def invalid_marker(
        self, ref: MarkerRef, uid: str, api_version: str, error: str, *, kept: int | None
    ) -> None:
        """`ref`'s spec is invalid; `kept`: the generation of the last valid spec, which
        keeps running, or None (nothing runs; what its probes wrote is held)."""
        if kept is not None:
            effect = (
                f"The daemon keeps running its last valid spec (generation {kept}) until "
                "this is fixed; only deleting the marker removes what it wrote."
            )
        else:
            effect = (
                "The daemon runs none of its probes until this is fixed; what they wrote "
                "stays on the pods until the marker is fixed or deleted."
            )
        self._say(
            marker_ref(ref, uid=uid, api_version=api_version),
            "Warning", "InvalidMarker", "Validate", f"{error}. {effect}", "marker.invalid",
            marker=str(ref), error=trim_utf8(error, SHOWN_TEXT), kept_generation=kept,
        )  # fmt: skip

    def write_refused(self, pod: PodView, cause: str) -> None:
        """The API server refused a write to `pod` (a 422 that is not a failed test);
        the writer goes on with a smaller patch (write/restrict.py)."""
        note = (
            f"The API server refused the probe results for this pod: {cause}. "
            "Writing what it accepts (conditions first); the full write is tried "
            "again later. Make room, e.g. fewer or smaller annotations."
        )
        self._say(pod_ref(pod), "Warning", "WriteRefused", "Mark", note)


def _pod_text(pod: PodView) -> str:
    """A pod as log lines name it."""
    return f"{pod.namespace}/{pod.name}"


def _probe_text(key: ProbeKey) -> str:
    """A probe as a note names it."""
    return f"{key.marker.name}/{key.probe} on container {key.container}"


def _probe_fields(key: ProbeKey) -> dict[str, str]:
    """A probe as log lines name it."""
    return {"marker": str(key.marker), "probe": key.probe, "container": key.container}
