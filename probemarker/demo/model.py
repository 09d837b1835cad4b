"""What the demo shows, as values: pods and events in, a snapshot and its changes out.

Stage: demo model (pure; no I/O, no clock). Input: pod objects and core/v1 Event
objects as the sim's store holds them. Output: a `Snapshot` (per pod, the fields the
markers write, the Ready condition, and the last event the daemon wrote about it) and
the `Change`s between two snapshots, in the cast's order.

Only the daemon's events (`reportingComponent` probemarker.io/daemon) count as a pod's
last event: the kubelet's Scheduled/Pulled/Created/Started say nothing about probes.
A probe event is shown as its reason and the probe's message (`ProbeFailed: match:
busy`), without the head that names the marker, probe, container and state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from probemarker.api.rules import REPORTING_CONTROLLER
from probemarker.demo.examples import Mark

EVENT = "event"  # what a Change of the last event names
# The head of the daemon's probe events (engine/report.py): `marker/probe on container c: State`.
# The table's section already names the marker, and the reason says the state.
_PROBE_NOTE_HEAD = re.compile(r"^\S+/\S+ on container [^:]+: (?:Succeeded|Failed)(?:: |$)")


@dataclass(frozen=True, slots=True)
class PodState:
    """The marks a pod carries (absent ones left out) and its last daemon event."""

    marks: Mapping[Mark, str] = field(default_factory=lambda: MappingProxyType({}))
    event: str | None = None


Snapshot = Mapping[str, PodState]  # "namespace/name" -> state


@dataclass(frozen=True, slots=True)
class Change:
    """`what` (a mark's text, or "event") of `pod` went from `old` to `new` (None: absent)."""

    pod: str
    what: str
    old: str | None
    new: str | None


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def read_marks(pod: Mapping[str, Any], marks: Iterable[Mark]) -> dict[Mark, str]:
    """The values of `marks` on `pod` (a condition's value is its status)."""
    meta = pod.get("metadata") or {}
    sources = {
        "label": meta.get("labels") or {},
        "annotation": meta.get("annotations") or {},
        "condition": {
            c.get("type"): c.get("status")
            for c in (pod.get("status") or {}).get("conditions") or []
            if isinstance(c, Mapping)
        },
    }
    out: dict[Mark, str] = {}
    for mark in marks:
        value = sources[mark.kind].get(mark.key)
        if isinstance(value, str):
            out[mark] = value
    return out


def daemon_event(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pod key, text) of an event the daemon wrote about a pod; None for any other."""
    if event.get("reportingComponent") != REPORTING_CONTROLLER:
        return None
    about = event.get("involvedObject") or {}
    if about.get("kind") != "Pod":
        return None
    message = _PROBE_NOTE_HEAD.sub("", str(event.get("message", "")), count=1)
    text = f"{event.get('reason', '')}: {message}" if message else str(event.get("reason", ""))
    count = (event.get("series") or {}).get("count") or event.get("count") or 1
    if isinstance(count, int) and count > 1:
        text = f"{text} (x{count})"
    return f"{about.get('namespace', '')}/{about.get('name', '')}", text


def changes(before: Snapshot, after: Snapshot, order: Sequence[str]) -> list[Change]:
    """What differs from `before` to `after`, pod by pod in `order`, marks first."""
    found: list[Change] = []
    for key in order:
        old, new = before.get(key, PodState()), after.get(key, PodState())
        for mark in sorted(old.marks.keys() | new.marks.keys()):
            if old.marks.get(mark) != new.marks.get(mark):
                found.append(Change(key, str(mark), old.marks.get(mark), new.marks.get(mark)))
        if old.event != new.event:
            found.append(Change(key, EVENT, old.event, new.event))
    return found


class Board:
    """The latest state of the demo's pods, fed with watch events of pods and events."""

    def __init__(self, columns: Mapping[str, tuple[Mark, ...]], order: Sequence[str]) -> None:
        self._columns = columns  # per namespace
        self.order = tuple(order)
        self._marks: dict[str, Mapping[Mark, str]] = {}
        self._events: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Board(pods={len(self._marks)}, events={len(self._events)})"

    def see_pod(self, pod: Mapping[str, Any], *, deleted: bool = False) -> None:
        key = pod_key(pod)
        if key not in self.order:
            return
        if deleted:
            self._marks.pop(key, None)
            return
        namespace = key.split("/", 1)[0]
        self._marks[key] = MappingProxyType(read_marks(pod, self._columns.get(namespace, ())))

    def see_event(self, event: Mapping[str, Any]) -> None:
        found = daemon_event(event)
        if found is not None and found[0] in self.order:
            self._events[found[0]] = found[1]

    def snapshot(self) -> Snapshot:
        return MappingProxyType(
            {
                key: PodState(self._marks.get(key, MappingProxyType({})), self._events.get(key))
                for key in self.order
                if key in self._marks or key in self._events
            }
        )
