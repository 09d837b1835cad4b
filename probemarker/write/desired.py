"""Desired pod state: what the decided probes want on the pod, and what to clean up.

Stage: decide -> **write** (pure). Input: the pod as it is (`PodView`, whose ownership
record says what each owner wrote), the decided results of the probes matched to it
(`Decided`; Unknown never gets here) and the owners currently matched (`live`).
Output: `DesiredPod`: per label, annotation and condition either a value, None
(remove it if present) or nothing (not ours to touch); the new ownership record (its
annotation is among the annotations); the conflicts to report. SPEC §3.

Rules, in one pass over the owners in OwnerRef order (marker name, then probe name):
- a decided owner claims the keys of its policy for its state and its condition
  (True/False, ProbeSucceeded/ProbeFailed, its message);
- a live owner not decided yet holds what the record says it wrote, at the pod's
  current values: nothing it wrote changes until it is decided (no flap while a
  restarted container is probed again);
- the first claim of a key wins; a later claim with the same value shares it (both
  record it, so either one alone keeps it); a different value loses: a `Conflict`.
  For conditions the compared value is the status; the winner's message is shown;
- removal candidates: every recorded key of an owner that is decided (it removes
  what it no longer sets: the other policy's keys, keys edited out of its policy, a
  condition type it no longer has) or no longer live (marker deleted, probe removed,
  pod relabelled out: its entry is dropped). A candidate is removed only when nobody
  claims it. Keys not in the record are never removed.
- the new record: per decided owner its state and the keys it holds (won or shared;
  a loser records nothing for the key, it never wrote it), so when the winner goes
  away its keys, recorded under it, become candidates, and the loser's claim takes
  them over in the same computation; live undecided owners keep their entry as is.
- the record annotation itself is never a policy's: such a claim is a Conflict won
  by `RECORD_OWNER`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.identity import OwnerRef
from probemarker.kube.events import trim_utf8
from probemarker.pods import PodView
from probemarker.write.ownership import (
    OWNED_KEY,
    Owned,
    OwnershipRecord,
    fit_record,
    owners_text,
    parse_record,
    render_record,
)

__all__ = [
    "MESSAGE_LIMIT",
    "RECORD_OWNER",
    "Conflict",
    "Decided",
    "DesiredCondition",
    "DesiredPod",
    "desired_state",
]

MESSAGE_LIMIT: Final = 1024  # bytes of a condition message (SPEC §3)
# Stands for the ownership record in a Conflict; no marker has an empty name.
RECORD_OWNER: Final = OwnerRef("", OWNED_KEY)
_RECORD_VALUE: Final = "(the ownership record)"
_REASONS: Final = {ProbeState.SUCCEEDED: "ProbeSucceeded", ProbeState.FAILED: "ProbeFailed"}
_STATUS: Final = {ProbeState.SUCCEEDED: "True", ProbeState.FAILED: "False"}


@dataclass(frozen=True, slots=True)
class Decided:
    """One probe's published result on this pod."""

    owner: OwnerRef
    spec: ProbeSpec
    state: ProbeState
    message: str


@dataclass(frozen=True, slots=True)
class DesiredCondition:
    type: str
    status: str  # "True" / "False"
    reason: str  # "ProbeSucceeded" / "ProbeFailed"
    message: str  # clean, at most MESSAGE_LIMIT bytes


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two owners want different values for one key; `winner` comes first in order."""

    kind: str  # "label" | "annotation" | "condition"
    key: str
    winner: OwnerRef
    loser: OwnerRef
    winner_value: str
    loser_value: str


@dataclass(frozen=True, slots=True)
class DesiredPod:
    labels: Mapping[str, str | None]
    annotations: Mapping[str, str | None]  # includes OWNED_KEY
    conditions: Mapping[str, DesiredCondition | None]
    record: OwnershipRecord
    conflicts: tuple[Conflict, ...]
    # What was wrong with the pod's record or what did not fit in it (one log line
    # or Warning event); None when all is well.
    record_problem: str | None = None


@dataclass(slots=True)
class _Board:
    """Claims on one kind of key: the first wins, equal values share, others lose."""

    kind: str
    winners: dict[str, tuple[OwnerRef, str]] = field(default_factory=dict)
    held: dict[OwnerRef, set[str]] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)

    def claim(self, owner: OwnerRef, key: str, value: str) -> bool:
        """True when `owner` now holds `key` (won it or shares the winner's value)."""
        current = self.winners.setdefault(key, (owner, value))
        if current[1] != value:
            self.conflicts.append(Conflict(self.kind, key, current[0], owner, current[1], value))
            return False
        self.held.setdefault(owner, set()).add(key)
        return True

    def keys_of(self, owner: OwnerRef) -> frozenset[str]:
        return frozenset(self.held.get(owner, ()))

    def desired(
        self, decided: Mapping[OwnerRef, Any], candidates: set[str], values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Keys won by decided owners -> `values[key]`; unclaimed candidates -> None."""
        out: dict[str, Any] = {k: None for k in sorted(candidates) if k not in self.winners}
        for key, (owner, _) in sorted(self.winners.items()):
            if owner in decided:
                out[key] = values[key]
        return out


def _hold(owner: OwnerRef, owned: Owned, pod: PodView, boards: tuple[_Board, ...]) -> None:
    """A live, undecided owner keeps what it wrote, at the pod's current values."""
    labels, annotations, conditions = boards
    for key in sorted(owned.labels & pod.labels.keys()):
        labels.claim(owner, key, pod.labels[key])
    for key in sorted(owned.annotations & pod.annotations.keys()):
        annotations.claim(owner, key, pod.annotations[key])
    if owned.condition is not None:
        found = pod.condition(owned.condition)
        if found is not None:
            conditions.claim(owner, owned.condition, str(found.get("status")))


def _claim(
    decided: Decided,
    boards: tuple[_Board, ...],
    wanted: dict[str, DesiredCondition],
    values: tuple[dict[str, str], dict[str, str]],
) -> list[Conflict]:
    labels, annotations, conditions = boards
    label_values, annotation_values = values
    record_conflicts: list[Conflict] = []
    policy = decided.spec.policy_for(decided.state)
    if policy is not None:
        for key, value in sorted(policy.labels.items()):
            if labels.claim(decided.owner, key, value):
                label_values.setdefault(key, value)
        for key, value in sorted(policy.annotations.items()):
            if key == OWNED_KEY:
                record_conflicts.append(
                    Conflict("annotation", key, RECORD_OWNER, decided.owner, _RECORD_VALUE, value)
                )
            elif annotations.claim(decided.owner, key, value):
                annotation_values.setdefault(key, value)
    type_ = decided.spec.condition_type
    if type_ is not None and conditions.claim(decided.owner, type_, _STATUS[decided.state]):
        wanted.setdefault(
            type_,
            DesiredCondition(
                type=type_,
                status=_STATUS[decided.state],
                reason=_REASONS[decided.state],
                message=trim_utf8(decided.message, MESSAGE_LIMIT),
            ),
        )
    return record_conflicts


def _candidates(
    old: Mapping[OwnerRef, Owned], decided: Mapping[OwnerRef, Decided], live: set[OwnerRef]
) -> tuple[set[str], set[str], set[str]]:
    """Recorded keys of owners that are decided or gone: removed unless claimed."""
    labels: set[str] = set()
    annotations: set[str] = set()
    conditions: set[str] = set()
    for owner, owned in old.items():
        if owner in live and owner not in decided:
            continue
        labels |= owned.labels
        annotations |= owned.annotations
        if owned.condition is not None:
            conditions.add(owned.condition)
    return labels, annotations, conditions


def _new_record(
    old: Mapping[OwnerRef, Owned],
    decided: Mapping[OwnerRef, Decided],
    live: set[OwnerRef],
    boards: tuple[_Board, ...],
) -> dict[OwnerRef, Owned]:
    labels, annotations, conditions = boards
    record: dict[OwnerRef, Owned] = {}
    for owner in sorted(decided.keys() | (old.keys() & live)):
        if owner not in decided:
            record[owner] = old[owner]
            continue
        held = conditions.keys_of(owner)
        record[owner] = Owned(
            state=decided[owner].state,
            labels=labels.keys_of(owner),
            annotations=annotations.keys_of(owner),
            condition=next(iter(held)) if held else None,
        )
    return record


def desired_state(
    *, pod: PodView, decided: Iterable[Decided], live: Collection[OwnerRef]
) -> DesiredPod:
    """See the module docstring. A decided owner counts as live; of two results for
    one owner the first is used."""
    old, problem = parse_record(pod.annotations.get(OWNED_KEY))
    by_owner: dict[OwnerRef, Decided] = {}
    for result in decided:
        by_owner.setdefault(result.owner, result)
    live_set = set(live) | by_owner.keys()
    boards = (_Board("label"), _Board("annotation"), _Board("condition"))
    wanted: dict[str, DesiredCondition] = {}
    values: tuple[dict[str, str], dict[str, str]] = ({}, {})
    record_conflicts: list[Conflict] = []
    for owner in sorted(by_owner.keys() | (old.keys() & live_set)):
        if owner in by_owner:
            record_conflicts += _claim(by_owner[owner], boards, wanted, values)
        else:
            _hold(owner, old[owner], pod, boards)
    drop_labels, drop_annotations, drop_conditions = _candidates(old, by_owner, live_set)
    record, overflow = fit_record(_new_record(old, by_owner, live_set, boards))
    if overflow:
        problem = _join(
            problem,
            f"annotation {OWNED_KEY} is full: not recorded (their keys are never removed): "
            + owners_text(overflow),
        )
    annotations = boards[1].desired(by_owner, drop_annotations, values[1])
    annotations[OWNED_KEY] = render_record(record)
    return DesiredPod(
        labels=MappingProxyType(boards[0].desired(by_owner, drop_labels, values[0])),
        annotations=MappingProxyType(annotations),
        conditions=MappingProxyType(boards[2].desired(by_owner, drop_conditions, wanted)),
        record=MappingProxyType(record),
        conflicts=tuple(record_conflicts + [c for b in boards for c in b.conflicts]),
        record_problem=problem,
    )


def _join(first: str | None, second: str) -> str:
    return second if first is None else f"{first}; {second}"
