"""The claims board: who claims which keys of a pod, who keeps them, who loses them.

Stage: write (pure), one pass of `desired.desired_state`. Input: the pod as it is
(`PodView`), its ownership record and the ownership rule's answer for each of its
owners (`ours.still_owned`), the decided owners in OwnerRef order (`Decided`),
then the waiting and departed owners, and the rendered values refused for room
(write/room.py). Output: per kind of key (label, annotation, condition) a board of
claims (`Board`): the winner of each key, the keys each owner holds, the conflicts;
the values decided owners set, the conditions they want, the rendered values refused
(`InvalidValue`), and the removal candidates (`candidates`).

Rules:
- a decided owner claims the keys of its policy for its state and its condition
  (True/False, ProbeSucceeded/ProbeFailed, its message, at most `MESSAGE_LIMIT` bytes);
- a policy value with `{{.Result}}` is rendered with the decided result
  (api/template.py). A rendered value that cannot go on the pod (not a label value,
  too large, or no room: write/room.py) is not written and is reported in `invalid`.
  Within the state the owner last wrote in (its record entry's state) it keeps the
  key at the value it last wrote, where the pod still shows it (a garbled answer does
  not wipe a good value); across a transition it keeps nothing, so the key is
  removed: never left at the other state's value. A result not known yet (None: a
  restarted daemon before its first run) keeps the pod's value within the state; on
  a transition it renders "" (a run with no answer, as `decide.step` renders it); for
  an owner that never wrote, nothing;
- a waiting owner keeps what the record says it wrote, at the pod's current values,
  as long as they are still the values it wrote: nothing changes until it decides
  (no flap while a restarted container is probed again);
- hand-over: a departed owner's key that a waiting owner with a spec *will* write
  (the key is in one of its policies, or the condition is its type: `Wants`) is kept,
  still recorded under the departed owner, until that owner decides: a renamed probe,
  or a marker re-created under another name, takes its keys over without a gap;
- the first claim of a key wins; a later claim with the same value shares it (both
  record it, so either one alone keeps it); a different value loses: a `Conflict`.
  For conditions the compared value is the status; the winner's message is shown;
- removal candidates: the recorded keys of decided owners (each removes what it no
  longer sets: the other policy's keys, keys edited out of its policy, a condition
  type it no longer has) and of departed owners (their entry is dropped), but only
  those that still hold the recorded value (the ownership rule, `ours.still_owned`,
  asked once per owner and pass: a condition only with one of our reasons). A
  candidate is removed only when nobody claims it (`Board.desired`). Keys not in the
  record, or changed since, are never removed;
- the record annotation itself is never a policy's: such a claim is a Conflict won
  by `RECORD_OWNER`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.api.template import render, render_pieces, uses_result
from probemarker.identity.probes import OwnerRef
from probemarker.kit.text import trim_utf8
from probemarker.watch.pods import PodView
from probemarker.write.ours import StillOwned
from probemarker.write.ownership import OWNED_KEY, Owned, warned_slot
from probemarker.write.room import Claim, label_problem, size_problem
from probemarker.write.tokens import pieces_token, value_token

__all__ = [
    "MESSAGE_LIMIT",
    "RECORD_OWNER",
    "Board",
    "Claims",
    "Conflict",
    "Decided",
    "DesiredCondition",
    "InvalidValue",
    "Wants",
    "candidates",
]

MESSAGE_LIMIT: Final = 1024  # bytes of a condition message (docs/engine.md)
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
    recorded: bool = False  # the pod's record names it already (Owned.warned)

    @property
    def identity(self) -> tuple[str, str, OwnerRef, OwnerRef]:
        """What makes it one conflict while it lasts: a changed value is the same one."""
        return self.kind, self.key, self.winner, self.loser


@dataclass(frozen=True, slots=True)
class InvalidValue:
    """A value rendered from `{{.Result}}` that cannot go on the pod: not written.

    `value` is the rendered value; None for a value refused from its size alone
    (`size_problem`), which is never built: it is `template` rendered with `result`.
    Read it through `pieces()` (`kit.text.shown`) and `token` (`value_token`)."""

    owner: OwnerRef
    kind: str  # "label" | "annotation"
    key: str
    value: str | None
    problem: str
    recorded: bool = False  # the pod's record notes its key as warned of (Owned.warned)
    room: bool = False  # refused for room (a valid value the whole write has no room for)
    template: str = ""  # with `result`, the value when `value` is None
    result: str = ""

    @property
    def slot(self) -> tuple[OwnerRef, str, str]:
        return self.owner, self.kind, self.key

    def pieces(self) -> Iterator[str]:
        """The value as the pieces it joins (`api.template.render_pieces`)."""
        if self.value is not None:
            yield self.value
        else:
            yield from render_pieces(self.template, self.result)

    @property
    def token(self) -> str:
        """`value_token` of the value, the same whether it was built or not."""
        return value_token(self.value) if self.value is not None else pieces_token(self.pieces())


@dataclass(slots=True)
class Board:
    """Claims on one kind of key: the first wins, equal values share, others lose."""

    kind: str
    winners: dict[str, tuple[OwnerRef, str]] = field(default_factory=dict)
    claimed: dict[OwnerRef, set[str]] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)

    def claim(self, owner: OwnerRef, key: str, value: str) -> bool:
        """True when `owner` now has `key` (won it or shares the winner's value)."""
        current = self.winners.setdefault(key, (owner, value))
        if current[1] != value:
            self.conflicts.append(Conflict(self.kind, key, current[0], owner, current[1], value))
            return False
        self.claimed.setdefault(owner, set()).add(key)
        return True

    def keys_of(self, owner: OwnerRef) -> frozenset[str]:
        return frozenset(self.claimed.get(owner, ()))

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
class Claims:
    """The claims of one pass: the boards, and the values decided owners set."""

    pod: PodView
    old: Mapping[OwnerRef, Owned] = field(default_factory=dict)
    still: Mapping[OwnerRef, StillOwned] = field(default_factory=dict)  # `still_owned(old)`
    labels: Board = field(default_factory=lambda: Board("label"))
    annotations: Board = field(default_factory=lambda: Board("annotation"))
    conditions: Board = field(default_factory=lambda: Board("condition"))
    label_values: dict[str, str] = field(default_factory=dict)
    annotation_values: dict[str, str] = field(default_factory=dict)
    wanted: dict[str, DesiredCondition] = field(default_factory=dict)
    record_conflicts: list[Conflict] = field(default_factory=list)
    invalid: list[InvalidValue] = field(default_factory=list)
    # (owner, kind, key) of rendered values refused for room -> why
    refused: Mapping[Claim, str] = field(default_factory=dict)
    # rendered values claimed that the pod does not show yet, in claim order
    rendered: list[Claim] = field(default_factory=list)
    notes: bool = True  # whether the record notes Warnings (`Owned.warned`)

    def conflicts(self) -> list[Conflict]:
        boards = (self.labels, self.annotations, self.conditions)
        return self.record_conflicts + [c for b in boards for c in b.conflicts]

    def claim(self, decided: Decided) -> None:
        policy = decided.spec.policy_for(decided.state)
        if policy is not None:
            for key, template in sorted(policy.labels.items()):
                value = self._render(decided, "label", key, template)
                if value is not None and self.labels.claim(decided.owner, key, value):
                    self.label_values.setdefault(key, value)
                    if uses_result(template) and self.pod.labels.get(key) != value:
                        self.rendered.append((decided.owner, "label", key))
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
                    if uses_result(template) and not self.pod.annotations.carries(key, value):
                        self.rendered.append((decided.owner, "annotation", key))
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
        """The value `decided` sets for `key`; None when it does not set one: within
        its last written state it keeps what it last wrote (its result is not known
        yet, or renders a value that cannot go on the pod, reported in `invalid`);
        across a transition it keeps nothing (see the module docstring)."""
        if not uses_result(template):
            return template
        owner, old = decided.owner, self.old.get(decided.owner)
        same_state = old is not None and old.state is decided.state
        result = decided.result
        if result is None and old is not None and old.state is not None and not same_state:
            result = ""  # a new state decided with no answer (decide.step)
        if result is not None:
            recorded = old is not None and warned_slot(kind, key) in old.warned
            if (too_large := size_problem(kind, key, template, result)) is not None:
                self.invalid.append(
                    InvalidValue(
                        owner,
                        kind,
                        key,
                        None,
                        too_large,
                        recorded,
                        room=kind == "annotation",
                        template=template,
                        result=result,
                    )
                )
            else:
                value = render(template, result)
                problem = label_problem(value) if kind == "label" else None
                room = problem is None and (owner, kind, key) in self.refused
                if room:
                    problem = self.refused[(owner, kind, key)]
                if problem is None:
                    return value
                self.invalid.append(InvalidValue(owner, kind, key, value, problem, recorded, room))
        if same_state:
            self._keep_last(owner, kind, key)
        return None

    def _keep_last(self, owner: OwnerRef, kind: str, key: str) -> None:
        """`owner` keeps `key` at the value it last wrote, if the pod still shows it
        (`_keep`, for one key of a decided owner: its value is then the one set)."""
        still = self.still.get(owner)
        if still is None:
            return
        if kind == "label":
            board, values, shown = self.labels, self.label_values, still.labels
        else:
            board, values, shown = self.annotations, self.annotation_values, still.annotations
        if key in shown and board.claim(owner, key, shown[key]):
            values.setdefault(key, shown[key])

    def keep(self, owner: OwnerRef, only: Wants | None = None) -> None:
        """Keep what `owner` wrote, where it still holds the value written
        (`ours.still_owned`); `only`: just the keys in it, and only those nobody
        has claimed (a hand-over)."""
        still = self.still[owner]
        labels, annotations, conditions = (
            (None, None, None) if only is None else (only.labels, only.annotations, only.conditions)
        )
        _keep(self.labels, owner, still.labels, labels)
        _keep(self.annotations, owner, still.annotations, annotations)
        if still.condition is not None and _wanted(self.conditions, still.condition[0], conditions):
            self.conditions.claim(owner, *still.condition)


def _wanted(board: Board, key: str, only: set[str] | None) -> bool:
    """Whether a waiting owner keeps `key`: always, or in a hand-over (`only`) when
    the key is to be handed over and nobody has claimed it."""
    return only is None or (key in only and key not in board.winners)


def _keep(board: Board, owner: OwnerRef, shown: Mapping[str, str], only: set[str] | None) -> None:
    """`owner` claims the keys the pod still shows as it wrote them (`shown`: key ->
    the pod's value) that it keeps."""
    for key, value in sorted(shown.items()):
        if _wanted(board, key, only):
            board.claim(owner, key, value)


@dataclass(slots=True)
class Wants:
    """The keys that waiting owners will write once they decide (hand-over targets)."""

    labels: set[str] = field(default_factory=set)
    annotations: set[str] = field(default_factory=set)
    conditions: set[str] = field(default_factory=set)

    def add(self, spec: ProbeSpec) -> None:
        for policy in spec.policies:
            self.labels |= policy.labels.keys()
            self.annotations |= policy.annotations.keys()
        if spec.condition_type is not None:
            self.conditions.add(spec.condition_type)


def candidates(owners: Iterable[StillOwned]) -> tuple[set[str], set[str], set[str]]:
    """Recorded keys of `owners` that still hold what was written: removed unless claimed."""
    labels: set[str] = set()
    annotations: set[str] = set()
    conditions: set[str] = set()
    for still in owners:
        labels |= still.labels.keys()
        annotations |= still.annotations.keys()
        if still.condition is not None:
            conditions.add(still.condition[0])
    return labels, annotations, conditions
