"""Desired pod state: what the decided probes want on the pod, and what to clean up.

Stage: decide -> **write** (pure). Input: the pod as it is (`PodView`, whose ownership
record says what each owner wrote, and with which value), the decided results of the
probes matched to it (`Decided`; Unknown never gets here), the owners currently
matched with the spec each runs (`live`), and the markers whose recorded owners are
held as they are (`held_markers`: a marker that is invalid with no valid spec known,
or deleted less than the clean-up delay ago). Output: `DesiredPod`: per label,
annotation and condition either a value, None (remove it) or nothing (not ours to
touch); the new ownership record (its annotation is among the annotations); the
conflicts to report. SPEC §3.

Owners fall in three groups: *decided* (a live owner with a published result),
*holding* (live but undecided, or of a held marker) and *departed* (recorded, but
neither live nor held: its marker or probe is gone, or the pod no longer matches).

Rules, in one pass over decided and holding owners in OwnerRef order (marker name,
then probe name), then one over departed owners:
- a decided owner claims the keys of its policy for its state and its condition
  (True/False, ProbeSucceeded/ProbeFailed, its message);
- a policy value with `{{.Result}}` is rendered with the decided result
  (api/template.py). A rendered value that cannot go on the pod (`value_problem`:
  not a label value, or past the pod's annotation room) is not written: the owner
  keeps the key at the value it last wrote, where the pod still shows it, and the
  value is reported in `invalid`. So is a result not known yet (a restarted daemon
  before its first run): the pod's value is taken as the current one;
- a holding owner keeps what the record says it wrote, at the pod's current values,
  as long as they are still the values it wrote: nothing changes until it decides
  (no flap while a restarted container is probed again);
- hand-over: a departed owner's key that a holding owner with a spec *will* write
  (the key is in one of its policies, or the condition is its type) is kept, still
  recorded under the departed owner, until that owner decides: a renamed probe, or a
  marker re-created under another name, takes its keys over without a gap;
- the first claim of a key wins; a later claim with the same value shares it (both
  record it, so either one alone keeps it); a different value loses: a `Conflict`.
  For conditions the compared value is the status; the winner's message is shown;
- removal candidates: the recorded keys of decided owners (each removes what it no
  longer sets: the other policy's keys, keys edited out of its policy, a condition
  type it no longer has) and of departed owners (their entry is dropped), but only
  those that still hold the recorded value (`ownership.holds`; a condition only with
  one of our reasons). A candidate is removed only when nobody claims it. Keys not in
  the record, or changed since, are never removed.
- the new record: per owner the keys it holds after this pass (won, shared, held or
  handed over) with the value it wrote; a loser records nothing for the key.
- the record annotation itself is never a policy's: such a claim is a Conflict won
  by `RECORD_OWNER`.
- a live owner's command that may still run (`held_commands`) is recorded in its
  entry (member `h`), an entry of its own if it has none; a hold the record names
  that is not in `held_commands` has ended and is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.api.names import label_value_problems
from probemarker.api.rules import TOTAL_ANNOTATION_BYTES
from probemarker.api.template import render, uses_result
from probemarker.identity import HeldCommand, OwnerRef
from probemarker.kube.events import trim_utf8
from probemarker.pods import PodView
from probemarker.write.ownership import (
    OUR_REASONS,
    OWNED_KEY,
    Owned,
    OwnershipRecord,
    fit_record,
    holds,
    owners_text,
    parse_record,
    render_record,
    value_token,
    with_held,
)

__all__ = [
    "MESSAGE_LIMIT",
    "RECORD_OWNER",
    "Conflict",
    "Decided",
    "DesiredCondition",
    "DesiredPod",
    "InvalidValue",
    "desired_state",
    "our_condition",
    "value_problem",
]

MESSAGE_LIMIT: Final = 1024  # bytes of a condition message (SPEC §3)
# Stands for the ownership record in a Conflict; no marker has an empty name.
RECORD_OWNER: Final = OwnerRef("", OWNED_KEY)
_RECORD_VALUE: Final = "(the ownership record)"
_REASONS: Final = {ProbeState.SUCCEEDED: "ProbeSucceeded", ProbeState.FAILED: "ProbeFailed"}
_STATUS: Final = {ProbeState.SUCCEEDED: "True", ProbeState.FAILED: "False"}


@dataclass(frozen=True, slots=True)
class Decided:
    """One probe's published result on this pod. `result`: what `{{.Result}}` stands
    for (`decide.Decision.result`); None: not known yet, the values the pod shows for
    keys rendered from it are kept."""

    owner: OwnerRef
    spec: ProbeSpec
    state: ProbeState
    message: str
    result: str | None = ""


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
class InvalidValue:
    """A value rendered from `{{.Result}}` that cannot go on the pod: not written."""

    owner: OwnerRef
    kind: str  # "label" | "annotation"
    key: str
    value: str
    problem: str


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
    # Seconds after which this plan may change with nothing else changing (a held
    # marker's clean-up delay ends): the writer plans the pod again then.
    revisit_after: float | None = None
    # Rendered values refused (their keys keep the last valid value): one Warning each.
    invalid: tuple[InvalidValue, ...] = ()


def our_condition(pod: PodView, type_: str) -> Mapping[str, Any] | None:
    """The pod's condition of `type_` if it is one the daemon writes (by its reason)."""
    found = pod.condition(type_)
    return found if found is not None and found.get("reason") in OUR_REASONS else None


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


@dataclass(slots=True)
class _Pass:
    """The state of one computation: the boards and the values decided owners set."""

    pod: PodView
    old: Mapping[OwnerRef, Owned] = field(default_factory=dict)
    labels: _Board = field(default_factory=lambda: _Board("label"))
    annotations: _Board = field(default_factory=lambda: _Board("annotation"))
    conditions: _Board = field(default_factory=lambda: _Board("condition"))
    label_values: dict[str, str] = field(default_factory=dict)
    annotation_values: dict[str, str] = field(default_factory=dict)
    wanted: dict[str, DesiredCondition] = field(default_factory=dict)
    record_conflicts: list[Conflict] = field(default_factory=list)
    invalid: list[InvalidValue] = field(default_factory=list)

    def claim(self, decided: Decided) -> None:
        policy = decided.spec.policy_for(decided.state)
        if policy is not None:
            for key, template in sorted(policy.labels.items()):
                value = self._render(decided, "label", key, template)
                if value is not None and self.labels.claim(decided.owner, key, value):
                    self.label_values.setdefault(key, value)
            for key, template in sorted(policy.annotations.items()):
                if key == OWNED_KEY:
                    self.record_conflicts.append(
                        Conflict(
                            "annotation", key, RECORD_OWNER, decided.owner, _RECORD_VALUE, template
                        )
                    )
                    continue
                value = self._render(decided, "annotation", key, template)
                if value is not None and self.annotations.claim(decided.owner, key, value):
                    self.annotation_values.setdefault(key, value)
        type_ = decided.spec.condition_type
        status = _STATUS[decided.state]
        if type_ is not None and self.conditions.claim(decided.owner, type_, status):
            self.wanted.setdefault(
                type_,
                DesiredCondition(
                    type=type_,
                    status=status,
                    reason=_REASONS[decided.state],
                    message=trim_utf8(decided.message, MESSAGE_LIMIT),
                ),
            )

    def _render(self, decided: Decided, kind: str, key: str, template: str) -> str | None:
        """The value `decided` sets for `key`; None when it keeps what it last wrote
        instead (its result is not known yet, or renders a value that cannot go on
        the pod, which is then reported in `invalid`)."""
        if not uses_result(template):
            return template
        if decided.result is not None:
            value = render(template, decided.result)
            problem = value_problem(self.pod, kind, key, value)
            if problem is None:
                return value
            self.invalid.append(InvalidValue(decided.owner, kind, key, value, problem))
        self._keep_last(decided.owner, kind, key)
        return None

    def _keep_last(self, owner: OwnerRef, kind: str, key: str) -> None:
        """`owner` keeps `key` at the value it last wrote, if the pod still shows it
        (`_keep`, for one key of a decided owner: its value is then the one set)."""
        owned = self.old.get(owner)
        if owned is None:
            return
        if kind == "label":
            board, values, recorded = self.labels, self.label_values, owned.labels
            current: Callable[[str], str | None] = self.pod.labels.get
        else:
            board, values, recorded = self.annotations, self.annotation_values, owned.annotations
            current = self.pod.annotations.value
        if key in recorded:
            _keep(board, owner, {key: recorded[key]}, current, None)
        if key in board.keys_of(owner) and (value := current(key)) is not None:
            values.setdefault(key, value)

    def hold(self, owner: OwnerRef, owned: Owned, only: _Wants | None = None) -> None:
        """Keep what `owner` wrote, where it still holds the value written; `only`:
        just the keys in it, and only those nobody has claimed (a hand-over)."""
        pod = self.pod
        labels, annotations, conditions = (
            (None, None, None) if only is None else (only.labels, only.annotations, only.conditions)
        )
        _keep(self.labels, owner, owned.labels, pod.labels.get, labels)
        _keep(self.annotations, owner, owned.annotations, pod.annotations.value, annotations)
        type_ = owned.condition
        if type_ is None or not _wanted(self.conditions, type_, conditions):
            return
        found = our_condition(pod, type_)
        if found is not None:
            self.conditions.claim(owner, type_, str(found.get("status")))


def _wanted(board: _Board, key: str, only: set[str] | None) -> bool:
    """Whether a holding owner keeps `key`: always, or in a hand-over (`only`) when
    the key is to be handed over and nobody has claimed it."""
    return only is None or (key in only and key not in board.winners)


def _keep(
    board: _Board,
    owner: OwnerRef,
    recorded: Mapping[str, str],
    current: Callable[[str], str | None],
    only: set[str] | None,
) -> None:
    """`owner` claims the recorded keys it keeps that still hold the value written
    (`current`: a key's value on the pod, None when absent)."""
    for key, token in sorted(recorded.items()):
        if not _wanted(board, key, only):
            continue
        value = current(key)
        if value is not None and holds(value, token):
            board.claim(owner, key, value)


@dataclass(slots=True)
class _Wants:
    """The keys that holding owners will write once they decide (hand-over targets)."""

    labels: set[str] = field(default_factory=set)
    annotations: set[str] = field(default_factory=set)
    conditions: set[str] = field(default_factory=set)

    def add(self, spec: ProbeSpec) -> None:
        for policy in spec.policies:
            self.labels |= policy.labels.keys()
            self.annotations |= policy.annotations.keys()
        if spec.condition_type is not None:
            self.conditions.add(spec.condition_type)


def _candidates(pod: PodView, owners: Iterable[Owned]) -> tuple[set[str], set[str], set[str]]:
    """Recorded keys of `owners` that still hold what was written: removed unless claimed."""
    labels: set[str] = set()
    annotations: set[str] = set()
    conditions: set[str] = set()
    for owned in owners:
        labels |= {k for k, t in owned.labels.items() if holds(pod.labels.get(k), t)}
        annotations |= {
            k for k, t in owned.annotations.items() if holds(pod.annotations.value(k), t)
        }
        if owned.condition is not None and our_condition(pod, owned.condition) is not None:
            conditions.add(owned.condition)
    return labels, annotations, conditions


def _entry(
    owner: OwnerRef, owned: Owned, work: _Pass, decided: Decided | None, *, departed: bool
) -> Owned | None:
    """`owner`'s record entry after the pass: the keys it holds, with what it wrote. A
    holding owner keeps its entry (its state seeds a restarted daemon) even with no
    key left; a departed one only while it hands keys over."""
    label_keys = work.labels.keys_of(owner)
    annotation_keys = work.annotations.keys_of(owner)
    conditions = work.conditions.keys_of(owner)
    condition = next(iter(conditions)) if conditions else None
    if decided is not None:
        return Owned(
            state=decided.state,
            labels={k: work.label_values[k] for k in sorted(label_keys)},
            annotations={
                k: value_token(work.annotation_values[k]) for k in sorted(annotation_keys)
            },
            condition=condition,
        )
    if departed and not (label_keys or annotation_keys or condition):
        return None
    return Owned(
        state=owned.state,
        labels={k: owned.labels[k] for k in sorted(label_keys)},
        annotations={k: owned.annotations[k] for k in sorted(annotation_keys)},
        condition=condition,
    )


def desired_state(
    *,
    pod: PodView,
    decided: Iterable[Decided],
    live: Mapping[OwnerRef, ProbeSpec | None],
    held_markers: Collection[str] = (),
    held_commands: Mapping[OwnerRef, HeldCommand] | None = None,
) -> DesiredPod:
    """See the module docstring. `live`: the owners matched to the pod, with the spec
    each runs (None: unknown, it will write nothing); a decided owner counts as live;
    of two results for one owner the first is used. `held_commands`: the owners whose
    command may still run in the container (probe/holds.py), recorded in their entries
    (`ownership.with_held`)."""
    old, problem = parse_record(pod.annotations.value(OWNED_KEY), pod_uid=pod.uid)
    by_owner: dict[OwnerRef, Decided] = {}
    for result in decided:
        by_owner.setdefault(result.owner, result)
    present = live.keys() | by_owner.keys() | {o for o in old if o.marker in held_markers}
    departed = sorted(old.keys() - present)
    wants = _Wants()
    for owner, spec in live.items():
        if spec is not None and owner not in by_owner:
            wants.add(spec)
    work = _Pass(pod, old)
    holding: dict[OwnerRef, Owned] = {}
    for owner in sorted(by_owner.keys() | (old.keys() & present)):
        if owner in by_owner:
            work.claim(by_owner[owner])
        else:
            holding[owner] = old[owner]
            work.hold(owner, old[owner])
    for owner in departed:
        work.hold(owner, old[owner], only=wants)
    drop_labels, drop_annotations, drop_conditions = _candidates(
        pod, [old[o] for o in old if o in by_owner or o in departed]
    )
    entries = {
        owner: _entry(
            owner,
            old.get(owner) or Owned(by_owner[owner].state),
            work,
            by_owner.get(owner),
            departed=owner not in present,
        )
        for owner in sorted(by_owner.keys() | holding.keys() | set(departed))
    }
    record, overflow = fit_record(with_held(entries, held_commands or {}), pod_uid=pod.uid)
    if overflow:
        problem = _join(
            problem,
            f"annotation {OWNED_KEY} is full: not recorded (their keys are never removed): "
            + owners_text(overflow),
        )
    annotations = work.annotations.desired(by_owner, drop_annotations, work.annotation_values)
    annotations[OWNED_KEY] = render_record(record, pod_uid=pod.uid)
    boards = (work.labels, work.annotations, work.conditions)
    return DesiredPod(
        labels=MappingProxyType(work.labels.desired(by_owner, drop_labels, work.label_values)),
        annotations=MappingProxyType(annotations),
        conditions=MappingProxyType(
            work.conditions.desired(by_owner, drop_conditions, work.wanted)
        ),
        record=MappingProxyType(record),
        conflicts=tuple(work.record_conflicts + [c for b in boards for c in b.conflicts]),
        record_problem=problem,
        invalid=tuple(work.invalid),
    )


def value_problem(pod: PodView, kind: str, key: str, value: str) -> str | None:
    """Why a rendered `value` cannot be `pod`'s label or annotation `key`; None if it can.
    A label value has the label alphabet and at most 63 characters; an annotation must
    fit the pod's annotations within the API server's 256 KiB (keys and values, in
    bytes, with `key`'s present value replaced; a value the daemon does not keep counts
    as kept, the safe side). Nothing is changed to make a value fit."""
    if kind == "label":
        problems = label_value_problems(value)
        return f"a label value {problems[0]}" if problems else None
    current = pod.annotations
    total = current.total_bytes + len(key.encode()) + len(value.encode())
    if current.kept(key) and (present := current.value(key)) is not None:
        total -= len(key.encode()) + len(present.encode())
    if total > TOTAL_ANNOTATION_BYTES:
        return (
            f"the pod's annotations would take {total} bytes, over the API server's "
            f"limit of {TOTAL_ANNOTATION_BYTES}"
        )
    return None


def _join(first: str | None, second: str) -> str:
    return second if first is None else f"{first}; {second}"
