"""The JSON patch that takes a pod from what it is to its desired state.

Stage: write (pure). Input: the pod (`PodView`), its `DesiredPod`, the time to stamp
on changed conditions (RFC 3339 UTC). Output: RFC 6902 operations for the pod's
`status` subresource (the API server keeps label and annotation changes made there),
or `[]` when the pod already matches: steady state is zero writes.

How the API server applies them (evanphx/json-patch v4, as kube-apiserver uses it, to
the pod as stored at that moment, all or nothing):
- `add` on an object member sets or replaces it, but needs the parent: a pod without
  `metadata.labels` (omitempty drops an empty map, so an empty map is never seen)
  gets one `add` of the whole map, after a `test` that the map is still absent (a
  missing member tests equal to null), so a label added meanwhile is never wiped;
- `remove` fails on a missing member, so it is sent only for keys present, and it
  follows a `test` that the key still holds the value the plan saw: the plan removes a
  key only while it holds what the daemon wrote (ours.py, the ownership rule), and a user who changed it
  since (a change the daemon's watch has not brought yet) fails the patch, which is
  re-read and planned again, instead of losing the value;
- of the annotations the view has a summary (watch/annotations.py): whether a key
  is there and whether it holds the value to write are answered for any key without
  its value, and whether the map is there by its count;
- `status.conditions` is a list the kubelet writes too, so ops address it by index,
  each element's ops preceded by a `test` of its `type`: a shifted list fails the
  patch (a 422: re-read and recompute) instead of changing the wrong condition.
  Changed fields are set one by one, so fields we do not know are kept. Removals go
  from the highest index down (earlier ones do not shift them); new conditions are
  appended with `/-`, or the whole list is added, guarded by `test`, when absent.
- A condition is changed only when status, reason or message differ; its
  lastTransitionTime moves to `now` only when its status does (Kubernetes' API
  convention: the time of the last transition from one status to another), its
  lastProbeTime when status or message do (docs/engine.md). A second condition of one of our
  types (never written by us) is removed.
- Every patch starts with guards (`guards`): a `test` of `metadata.uid`, so a patch
  planned for one pod never lands on a pod re-created under the same name meanwhile
  (a failed test is a 422: the writer re-reads and finds another UID), a `test` that
  `metadata.deletionTimestamp` is still absent and one that `status.phase` is still
  the phase the plan saw, so nothing is written to a pod that started terminating or
  finished while the request was on its way (docs/engine.md: such a pod keeps what it shows).

Invariants: ops are ordered deterministically (sorted keys); applying the patch and
building it again gives `[]`; keys and condition types absent from `desired` are
never touched; a non-empty patch always starts with the guards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from probemarker.watch.annotations import AnnotationSummary
from probemarker.watch.pods import PodView
from probemarker.write.desired import DesiredCondition, DesiredPod
from probemarker.write.ownership import OWNED_KEY

__all__ = ["build_patch", "changes_of", "condition_text", "escape_pointer", "guards"]

_CONDITIONS: Final = "/status/conditions"
Op = dict[str, Any]


def escape_pointer(token: str) -> str:
    """One JSON-pointer reference token (RFC 6901): `~` -> `~0`, `/` -> `~1`."""
    return token.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True, slots=True)
class _Current:
    """What a patch needs of a pod's labels or annotations: whether the map is there at
    all, whether a key carries a value, whether a key to remove is there."""

    present: bool
    carries: Callable[[str, str], bool]
    has: Callable[[str], bool]
    value: Callable[[str], str | None]  # None: not known (or absent)


def _labels(labels: Mapping[str, str]) -> _Current:
    return _Current(bool(labels), lambda k, v: labels.get(k) == v, labels.__contains__, labels.get)


def _annotations(annotations: AnnotationSummary) -> _Current:
    return _Current(
        annotations.present,
        annotations.carries,
        annotations.has,
        lambda k: annotations.value(k) if annotations.kept(k) else None,
    )


def _map_ops(path: str, current: _Current, desired: Mapping[str, str | None]) -> list[Op]:
    changed = {
        key: value
        for key, value in sorted(desired.items())
        if value is not None and not current.carries(key, value)
    }
    if not current.present:  # absent map (nothing to remove either)
        if not changed:
            return []
        return [
            {"op": "test", "path": path, "value": None},
            {"op": "add", "path": path, "value": changed},
        ]
    ops: list[Op] = [
        {"op": "add", "path": f"{path}/{escape_pointer(key)}", "value": value}
        for key, value in changed.items()
    ]
    for key, value in sorted(desired.items()):
        if value is None and current.has(key):
            member = f"{path}/{escape_pointer(key)}"
            seen = current.value(key)
            if seen is not None:  # removed only while it holds what the plan saw
                ops.append({"op": "test", "path": member, "value": seen})
            ops.append({"op": "remove", "path": member})
    return ops


def condition_text(condition: Mapping[str, Any], name: str) -> str:
    """A string field; absent reads as "" (the API server drops empty reason/message)."""
    value = condition.get(name)
    return value if isinstance(value, str) else ""


def _test(index: int, type_: str) -> Op:
    return {"op": "test", "path": f"{_CONDITIONS}/{index}/type", "value": type_}


def _new_condition(want: DesiredCondition, now: str) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": want.type,
        "status": want.status,
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": want.reason,
    }
    if want.message:  # omitempty: an empty message would be dropped anyway
        condition["message"] = want.message
    return condition


def _update_ops(
    index: int, current: Mapping[str, Any], want: DesiredCondition, now: str
) -> list[Op]:
    fields = {"status": want.status, "reason": want.reason, "message": want.message}
    status_changed = condition_text(current, "status") != want.status
    if status_changed or condition_text(current, "message") != want.message:
        fields["lastProbeTime"] = now
    if status_changed:
        fields["lastTransitionTime"] = now
    changed = {
        name: value
        for name, value in fields.items()
        if (condition_text(current, name) if name in ("reason", "message") else current.get(name))
        != value
    }
    if not changed:
        return []
    return [_test(index, want.type)] + [
        {"op": "add", "path": f"{_CONDITIONS}/{index}/{name}", "value": value}
        for name, value in changed.items()
    ]


def _condition_ops(
    current: tuple[Mapping[str, Any], ...],
    desired: Mapping[str, DesiredCondition | None],
    now: str,
) -> list[Op]:
    first: dict[str, int] = {}
    removals: list[int] = []
    for index, condition in enumerate(current):
        type_ = condition.get("type")
        if isinstance(type_, str) and type_ in desired:
            if type_ in first:
                removals.append(index)  # a duplicate of a type we manage
            else:
                first[type_] = index
    ops: list[Op] = []
    added: list[dict[str, Any]] = []
    for type_, want in sorted(desired.items()):
        at = first.get(type_)
        if want is None:
            if at is not None:
                removals.append(at)
        elif at is None:
            added.append(_new_condition(want, now))
        else:
            ops += _update_ops(at, current[at], want, now)
    for index in sorted(removals, reverse=True):
        ops += [
            _test(index, condition_text(current[index], "type")),
            {"op": "remove", "path": f"{_CONDITIONS}/{index}"},
        ]
    if added and not current:
        ops += [
            {"op": "test", "path": _CONDITIONS, "value": None},
            {"op": "add", "path": _CONDITIONS, "value": added},
        ]
    else:
        ops += [{"op": "add", "path": f"{_CONDITIONS}/-", "value": c} for c in added]
    return ops


def guards(pod: PodView) -> list[Op]:
    """The tests every patch starts with: the same pod (UID), still not terminating,
    still in the phase the plan saw (see the module docstring)."""
    ops: list[Op] = [
        {"op": "test", "path": "/metadata/uid", "value": pod.uid},
        {"op": "test", "path": "/metadata/deletionTimestamp", "value": None},
    ]
    if pod.phase:
        ops.append({"op": "test", "path": "/status/phase", "value": pod.phase})
    return ops


def build_patch(*, pod: PodView, desired: DesiredPod, now: str) -> list[dict[str, Any]]:
    """RFC 6902 ops for pods/status; `[]` when the pod already matches `desired`."""
    ops = (
        _map_ops("/metadata/labels", _labels(pod.labels), desired.labels)
        + _map_ops("/metadata/annotations", _annotations(pod.annotations), desired.annotations)
        + _condition_ops(pod.conditions, desired.conditions, now)
    )
    return guards(pod) + ops if ops else []


def changes_of(pod: PodView, desired: DesiredPod) -> dict[str, Any]:
    """What a write of `desired` changes on `pod`, for its log line: label and
    annotation keys set and removed (values of labels only: annotation values may be
    long), condition types with their new status (or `removed`). Empty parts are left
    out; the ownership record is not listed (it changes with the rest)."""
    labels, annotations = pod.labels, pod.annotations
    changes: dict[str, Any] = {
        "labels_set": {
            k: v for k, v in sorted(desired.labels.items()) if v is not None and labels.get(k) != v
        },
        "labels_removed": sorted(k for k, v in desired.labels.items() if v is None and k in labels),
        "annotations_set": sorted(
            k
            for k, v in desired.annotations.items()
            if v is not None and k != OWNED_KEY and not annotations.carries(k, v)
        ),
        "annotations_removed": sorted(
            k
            for k, v in desired.annotations.items()
            if v is None and k != OWNED_KEY and annotations.has(k)
        ),
        "conditions": {
            type_: "removed" if want is None else want.status
            for type_, want in sorted(desired.conditions.items())
            if _condition_changes(pod.condition(type_), want)
        },
    }
    return {name: part for name, part in changes.items() if part}


def _condition_changes(current: Mapping[str, Any] | None, want: DesiredCondition | None) -> bool:
    if want is None:
        return current is not None
    return current is None or any(
        condition_text(current, name) != value
        for name, value in (
            ("status", want.status),
            ("reason", want.reason),
            ("message", want.message),
        )
    )
