"""Desired pod state: what the decided probes want on the pod, and what to clean up.

Stage: decide -> **write** (pure). Input: the pod as it is (`PodView`, whose ownership
record says what each owner wrote, and with which value), the decided results of the
probes matched to it (`Decided`; Unknown never gets here), the owners currently
matched with the spec each runs (`live`), and the markers whose recorded owners are
kept as they are (`frozen_markers`: a marker that is invalid with no valid spec known,
or deleted less than the clean-up delay ago). Output: `DesiredPod`: per label,
annotation and condition either a value, None (remove it) or nothing (not ours to
touch); the new ownership record (its annotation is among the annotations); the
conflicts to report. docs/engine.md.

Owners fall in three groups: *decided* (a live owner with a published result),
*waiting* (live but undecided, or of a frozen marker) and *departed* (recorded, but
neither live nor frozen: its marker or probe is gone, or the pod no longer matches).

One pass goes over decided and waiting owners in OwnerRef order (marker name, then
probe name), then over departed owners: they claim, keep and hand over keys on the
claims board (write/claims.py, whose docstring states those rules). The pass is
repeated while its write does not fit the pod's annotations (write/room.py:
`within_room`). Here, the rules of what a pass yields:
- the new record: per owner the keys it holds after this pass (won, shared, kept or
  handed over) with the value it wrote; a loser records nothing for the key. A
  waiting owner keeps its entry (its state seeds a restarted daemon) even with no key
  left; a departed one only while it hands keys over. A record over
  `ownership.RECORD_LIMIT` keeps the owners that fit (`ownership.fit_record`): the
  rest are named in `record_problem`, and their keys are never removed;
- Warnings stand in the record (`Owned.warned`): each invalid label value's key with
  the first such value, each lost key with its winner (not an annotation refused for
  room: noting it would take room). `InvalidValue.recorded` and
  `Conflict.recorded` say the pod's record already names them (a restarted daemon
  raises nothing for them again). A record that differs from the pod's only by slots
  that ended is not rewritten for them: an ended Warning costs no write;
- a live owner's command that may still run (`held_commands`) is recorded in its
  entry (member `h`), an entry of its own if it has none; a hold the record names
  that is not in `held_commands` has ended and is left out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType

from probemarker.api.model import ProbeSpec
from probemarker.identity.commands import HeldCommand
from probemarker.identity.probes import OwnerRef
from probemarker.watch.pods import PodView
from probemarker.write.claims import (
    Claims,
    Conflict,
    Decided,
    DesiredCondition,
    InvalidValue,
    Wants,
    candidates,
)
from probemarker.write.ours import StillOwned, still_owned
from probemarker.write.ownership import (
    OWNED_KEY,
    Owned,
    OwnershipRecord,
    fit_record,
    owners_text,
    parse_record,
    render_record,
    warned_slot,
    with_held,
)
from probemarker.write.room import Claim, within_room
from probemarker.write.tokens import value_token

# The stage's words: its input (`Decided`), its output (`DesiredPod`, with its
# `DesiredCondition`s) and what it reports (`Conflict`, `InvalidValue`).
__all__ = [
    "Conflict",
    "Decided",
    "DesiredCondition",
    "DesiredPod",
    "InvalidValue",
    "desired_state",
]


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
    # Seconds after which this plan may change with nothing else changing (a frozen
    # marker's clean-up delay ends): the writer plans the pod again then.
    revisit_after: float | None = None
    # Rendered values refused (their keys keep the last valid value): one Warning each.
    invalid: tuple[InvalidValue, ...] = ()


def _warned(owner: OwnerRef, owned: Owned, work: Claims) -> dict[str, str]:
    """The Warnings `owner` stands under after the pass (`Owned.warned`): an invalid
    label value's key keeps the token of the first value of its streak, so an answer
    that is a new invalid value every run does not rewrite the record every run. An
    annotation refused for room is not noted: the note would take the room it lacks."""
    out: dict[str, str] = {}
    if not work.notes:
        return out
    for bad in work.invalid:
        if bad.owner == owner and bad.kind == "label" and not bad.room:
            slot = warned_slot(bad.kind, bad.key)
            out[slot] = owned.warned.get(slot) or bad.token
    for lost in work.conflicts():
        if lost.loser == owner:
            out[warned_slot(lost.kind, lost.key, lost=True)] = value_token(str(lost.winner))
    return dict(sorted(out.items()))


def _entry(
    owner: OwnerRef, owned: Owned, work: Claims, decided: Decided | None, *, departed: bool
) -> Owned | None:
    """`owner`'s record entry after the pass: the keys it holds, with what it wrote. A
    waiting owner keeps its entry (its state seeds a restarted daemon) even with no
    key left; a departed one only while it hands keys over."""
    label_keys = work.labels.keys_of(owner)
    annotation_keys = work.annotations.keys_of(owner)
    conditions = work.conditions.keys_of(owner)
    condition = next(iter(conditions)) if conditions else None
    warned = _warned(owner, owned, work)
    if decided is not None:
        return Owned(
            state=decided.state,
            labels={k: work.label_values[k] for k in sorted(label_keys)},
            annotations={
                k: value_token(work.annotation_values[k]) for k in sorted(annotation_keys)
            },
            condition=condition,
            warned=warned,
        )
    if departed and not (label_keys or annotation_keys or condition):
        return None
    return Owned(
        state=owned.state,
        labels={k: owned.labels[k] for k in sorted(label_keys)},
        annotations={k: owned.annotations[k] for k in sorted(annotation_keys)},
        condition=condition,
        warned=warned,
    )


def desired_state(
    *,
    pod: PodView,
    decided: Iterable[Decided],
    live: Mapping[OwnerRef, ProbeSpec | None],
    frozen_markers: Collection[str] = (),
    held_commands: Mapping[OwnerRef, HeldCommand] | None = None,
) -> DesiredPod:
    """See the module docstring. `live`: the owners matched to the pod, with the spec
    each runs (None: unknown, it will write nothing); a decided owner counts as live;
    of two results for one owner the first is used. `held_commands`: the owners whose
    command may still run in the container (probe/holds.py), recorded in their entries
    (`ownership.with_held`)."""
    # The pod's record, and what each of its owners still holds, are the same in every
    # pass: read once.
    old, problem = parse_record(pod.annotations.value(OWNED_KEY), pod_uid=pod.uid)
    plan = partial(
        _desired,
        pod,
        _Recorded(old, problem, still_owned(pod, old)),
        tuple(decided),
        live,
        frozen_markers,
        held_commands or {},
    )
    return within_room(pod, plan)


@dataclass(frozen=True, slots=True)
class _Recorded:
    """The pod's ownership record as read (`parse_record`), and the ownership rule's answer
    for each of its owners (`still_owned`)."""

    old: Mapping[OwnerRef, Owned]
    problem: str | None
    still: Mapping[OwnerRef, StillOwned]


def _desired(
    pod: PodView,
    recorded: _Recorded,
    by_order: Iterable[Decided],
    live: Mapping[OwnerRef, ProbeSpec | None],
    frozen_markers: Collection[str],
    held_commands: Mapping[OwnerRef, HeldCommand],
    *,
    refused: Mapping[Claim, str],
    notes: bool = True,
) -> tuple[DesiredPod, list[Claim]]:
    """One pass with the rendered values in `refused` refused for room (and, without
    `notes`, no Warnings noted in the record); and the rendered values it claimed that
    the pod does not show yet."""
    old, problem = recorded.old, recorded.problem
    by_owner: dict[OwnerRef, Decided] = {}
    for result in by_order:
        by_owner.setdefault(result.owner, result)
    present = live.keys() | by_owner.keys() | {o for o in old if o.marker in frozen_markers}
    departed = sorted(old.keys() - present)
    wants = Wants()
    for owner, spec in live.items():
        if spec is not None and owner not in by_owner:
            wants.add(spec)
    work = Claims(pod, old, recorded.still, refused=refused, notes=notes)
    waiting: dict[OwnerRef, Owned] = {}
    for owner in sorted(by_owner.keys() | (old.keys() & present)):
        if owner in by_owner:
            work.claim(by_owner[owner])
        else:
            waiting[owner] = old[owner]
            work.keep(owner)
    for owner in departed:
        work.keep(owner, only=wants)
    drop_labels, drop_annotations, drop_conditions = candidates(
        [work.still[o] for o in old if o in by_owner or o in departed]
    )
    entries = {
        owner: _entry(
            owner,
            old.get(owner) or Owned(by_owner[owner].state),
            work,
            by_owner.get(owner),
            departed=owner not in present,
        )
        for owner in sorted(by_owner.keys() | waiting.keys() | set(departed))
    }
    record, overflow = fit_record(
        _ended_warnings_kept(with_held(entries, held_commands), old)
        if notes
        else with_held(entries, held_commands),
        pod_uid=pod.uid,
    )
    if overflow:
        problem = _join(
            problem,
            f"annotation {OWNED_KEY} is full: not recorded (their keys are never removed): "
            + owners_text(overflow),
        )
    annotations = work.annotations.desired(by_owner, drop_annotations, work.annotation_values)
    annotations[OWNED_KEY] = render_record(record, pod_uid=pod.uid)
    conflicts = tuple(_recorded(c, old) for c in work.conflicts())
    desired = DesiredPod(
        labels=MappingProxyType(work.labels.desired(by_owner, drop_labels, work.label_values)),
        annotations=MappingProxyType(annotations),
        conditions=MappingProxyType(
            work.conditions.desired(by_owner, drop_conditions, work.wanted)
        ),
        record=MappingProxyType(record),
        conflicts=conflicts,
        record_problem=problem,
        invalid=tuple(work.invalid),
    )
    return desired, work.rendered


def _recorded(conflict: Conflict, old: Mapping[OwnerRef, Owned]) -> Conflict:
    """`conflict`, marked `recorded` when the loser's entry on the pod names it."""
    owned = old.get(conflict.loser)
    slot = warned_slot(conflict.kind, conflict.key, lost=True)
    if owned is None or owned.warned.get(slot) != value_token(str(conflict.winner)):
        return conflict
    return replace(conflict, recorded=True)


def _ended_warnings_kept(
    new: dict[OwnerRef, Owned], old: Mapping[OwnerRef, Owned]
) -> dict[OwnerRef, Owned]:
    """`new`, or the pod's record where the two differ only by Warnings that ended:
    an ended Warning is dropped from the record at the next write, never by one."""
    if new.keys() != old.keys():
        return new
    for owner, entry in new.items():
        before = old[owner]
        if replace(entry, warned=before.warned) != before:
            return new
        if not entry.warned.items() <= before.warned.items():
            return new
    return dict(old)


def _join(first: str | None, second: str) -> str:
    return second if first is None else f"{first}; {second}"
