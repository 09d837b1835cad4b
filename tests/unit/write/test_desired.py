"""desired_state: the set / remove / clean-up / conflict rules of docs/engine.md (Writing), one row each."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.identity.probes import OwnerRef
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.claims import MESSAGE_LIMIT, RECORD_OWNER
from probemarker.write.desired import (
    Conflict,
    Decided,
    DesiredCondition,
    DesiredPod,
    desired_state,
)
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record, render_record
from probemarker.write.patch import build_patch
from probemarker.write.tokens import value_token
from tests.unit.write.helpers import (
    NOW,
    F,
    S,
    apply,
    condition,
    decided,
    owner,
    raw_pod,
    spec,
    view,
)

IDLE = spec(ok={"idle": "true"}, bad={"busy": "yes"})
ONLY_OK = spec(ok={"idle": "true"})
T = "example.com/Idle"


def cond(type_: str, state: ProbeState, message: str = "") -> DesiredCondition:
    ok = state is S
    return DesiredCondition(
        type_, "True" if ok else "False", "ProbeSucceeded" if ok else "ProbeFailed", message
    )


@dataclass(frozen=True)
class Row:
    decided: tuple[Decided, ...] = ()
    live: tuple[str, ...] = ()  # live owners not decided, without a spec
    live_specs: Mapping[str, ProbeSpec] = field(default_factory=dict)  # ... with one
    frozen_markers: tuple[str, ...] = ()
    record: Mapping[str, Owned] | None = None  # the pod's record
    labels: Mapping[str, str] | None = None  # the pod's labels
    annotations: Mapping[str, str] | None = None
    conditions: list[dict[str, Any]] | None = None
    # expected:
    want_labels: Mapping[str, str | None] = field(default_factory=dict)
    want_annotations: Mapping[str, str | None] = field(default_factory=dict)
    want_conditions: Mapping[str, DesiredCondition | None] = field(default_factory=dict)
    want_record: Mapping[str, Owned] = field(default_factory=dict)
    want_conflicts: tuple[Conflict, ...] = ()


def compute(row: Row) -> DesiredPod:
    pod = view(
        labels=row.labels,
        annotations=row.annotations,
        conditions=row.conditions,
        record=row.record,
    )
    live: dict[OwnerRef, ProbeSpec | None] = {owner(o): None for o in row.live}
    live.update({owner(o): s for o, s in row.live_specs.items()})
    return desired_state(pod=pod, decided=row.decided, live=live, frozen_markers=row.frozen_markers)


def rec(
    state: ProbeState,
    labels: Mapping[str, str] = {},
    annotations: Mapping[str, str] = {},
    condition: str | None = None,
    warned: Mapping[str, str] = {},
) -> Owned:
    """A record entry; annotation values are given as written (tokens made here)."""
    return Owned(
        state,
        labels=dict(labels),
        annotations={k: value_token(v) for k, v in annotations.items()},
        condition=condition,
        warned=dict(warned),
    )


LONG = "v" * 300

ROWS = [
    pytest.param(
        Row(
            decided=(decided("w#p", S, IDLE),),
            want_labels={"idle": "true"},
            want_record={"w#p": rec(S, {"idle": "true"})},
        ),
        id="succeeded-sets-its-policy",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", F, IDLE),),
            record={"w#p": rec(S, {"idle": "true"})},
            labels={"idle": "true", "app": "web"},
            want_labels={"idle": None, "busy": "yes"},
            want_record={"w#p": rec(F, {"busy": "yes"})},
        ),
        id="failed-removes-recorded-keys-of-the-other-policy",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", F, IDLE),),
            labels={"idle": "true"},
            want_labels={"busy": "yes"},
            want_record={"w#p": rec(F, {"busy": "yes"})},
        ),
        id="other-policy-keys-not-recorded-are-never-removed",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", F, IDLE),),
            record={"w#p": rec(S, {"idle": "true"})},
            labels={"idle": "edited"},
            want_labels={"busy": "yes"},
            want_record={"w#p": rec(F, {"busy": "yes"})},
        ),
        id="a-recorded-key-whose-value-changed-since-is-never-removed",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", F, ONLY_OK),),
            record={"w#p": rec(S, {"idle": "true"})},
            labels={"idle": "true"},
            want_labels={"idle": None},
            want_record={"w#p": Owned(F)},
        ),
        id="only-succeeded-policy-removes-on-failed",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, spec(ok={"new": "1"}, ok_annotations={"n": "v"})),),
            record={"w#p": rec(S, {"old": "1"}, {"o": "v"})},
            labels={"old": "1"},
            annotations={"o": "v"},
            want_labels={"new": "1", "old": None},
            want_annotations={"n": "v", "o": None},
            want_record={"w#p": rec(S, {"new": "1"}, {"n": "v"})},
        ),
        id="policy-edited-removes-keys-no-longer-in-it",
    ),
    pytest.param(
        Row(
            record={"gone#p": rec(S, {"idle": "true"}, {"x": "1", "long": LONG}, condition=T)},
            labels={"idle": "true", "app": "web"},
            annotations={"x": "1", "y": "2", "long": LONG},
            conditions=[condition(T), condition("Ready")],
            want_labels={"idle": None},
            want_annotations={"x": None, "long": None},
            want_conditions={T: None},
        ),
        id="owner-gone-removes-everything-it-wrote",
    ),
    pytest.param(
        Row(
            record={"ghost#p": rec(S, {"app": "web", "tier": "db"}, {"note": LONG}, condition=T)},
            labels={"app": "api", "tier": "web"},
            annotations={"note": LONG + "!"},
            conditions=[condition(T, reason="TheirReason")],
        ),
        id="a-copied-record-never-removes-keys-with-other-values-or-foreign-conditions",
    ),
    pytest.param(
        Row(
            live=("w#p",),
            record={"w#p": rec(F, {"busy": "yes"}, condition=T)},
            labels={"busy": "yes"},
            conditions=[condition(T, "False", reason="ProbeFailed")],
            want_record={"w#p": rec(F, {"busy": "yes"}, condition=T)},
        ),
        id="live-undecided-owner-is-left-alone",
    ),
    pytest.param(
        Row(
            live=("w#p",),
            record={"w#p": rec(F, {"busy": "yes", "gone": "1"}, condition=T)},
            labels={"busy": "edited"},
            want_record={"w#p": Owned(F)},
        ),
        id="live-undecided-owner-keeps-its-state-but-not-keys-it-no-longer-holds",
    ),
    pytest.param(
        Row(
            frozen_markers=("w",),
            record={"w#p": rec(S, {"idle": "true"}, condition=T), "x#p": rec(S, {"x": "1"})},
            labels={"idle": "true", "x": "1"},
            conditions=[condition(T)],
            want_labels={"x": None},
            want_record={"w#p": rec(S, {"idle": "true"}, condition=T)},
        ),
        id="a-held-markers-owners-keep-what-they-wrote",
    ),
    pytest.param(
        Row(
            live_specs={"w#new": spec(ok={"idle": "true"}, bad={"idle": "false"}, condition=T)},
            record={"w#old": rec(S, {"idle": "true", "extra": "1"}, condition=T)},
            labels={"idle": "true", "extra": "1"},
            conditions=[condition(T)],
            want_labels={"extra": None},
            want_record={"w#old": rec(S, {"idle": "true"}, condition=T)},
        ),
        id="renamed-probe-undecided-keys-it-will-write-are-held-for-it",
    ),
    pytest.param(
        Row(
            decided=(decided("w#new", S, spec(ok={"idle": "true"}, condition=T), "up"),),
            record={"w#old": rec(S, {"idle": "true"}, condition=T)},
            labels={"idle": "true"},
            conditions=[condition(T, message="up")],
            want_labels={"idle": "true"},
            want_conditions={T: cond(T, S, "up")},
            want_record={"w#new": rec(S, {"idle": "true"}, condition=T)},
        ),
        id="renamed-probe-decided-hands-over-in-one-write",
    ),
    pytest.param(
        Row(
            decided=(decided("w#new", F, spec(ok={"idle": "true"}, condition=T), "down"),),
            record={"w#old": rec(S, {"idle": "true"}, condition=T)},
            labels={"idle": "true"},
            conditions=[condition(T)],
            want_labels={"idle": None},
            want_conditions={T: cond(T, F, "down")},
            want_record={"w#new": rec(F, condition=T)},
        ),
        id="renamed-probe-decided-otherwise-removes-the-handed-over-key",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, IDLE),),
            live=(),
            want_labels={"idle": "true"},
            want_record={"w#p": rec(S, {"idle": "true"})},
        ),
        id="decided-counts-as-live",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, IDLE), decided("w#p", F, IDLE)),
            want_labels={"idle": "true"},
            want_record={"w#p": rec(S, {"idle": "true"})},
        ),
        id="two-results-for-one-owner-first-is-used",
    ),
    pytest.param(
        Row(
            decided=(decided("b#p", S, spec(ok={"k": "2"})), decided("a#p", S, spec(ok={"k": "1"}))),
            want_labels={"k": "1"},
            want_record={"a#p": rec(S, {"k": "1"}), "b#p": Owned(S, warned={"xl:k": "a#p"})},
            want_conflicts=(Conflict("label", "k", owner("a#p"), owner("b#p"), "1", "2"),),
        ),
        id="conflict-first-in-owner-order-wins",
    ),
    pytest.param(
        Row(
            decided=(
                decided("a#p", S, spec(ok_annotations={"cost": "10"})),
                decided("a#q", F, spec(bad_annotations={"cost": "-10"})),
            ),
            want_annotations={"cost": "10"},
            want_record={
                "a#p": rec(S, annotations={"cost": "10"}),
                "a#q": Owned(F, warned={"xa:cost": "a#p"}),
            },
            want_conflicts=(Conflict("annotation", "cost", owner("a#p"), owner("a#q"), "10", "-10"),),
        ),
        id="conflict-probe-name-breaks-the-tie",
    ),
    pytest.param(
        Row(
            decided=(decided("a#p", S, spec(ok={"k": "1"})), decided("b#p", S, spec(ok={"k": "1"}))),
            want_labels={"k": "1"},
            want_record={"a#p": rec(S, {"k": "1"}), "b#p": rec(S, {"k": "1"})},
        ),
        id="same-value-is-shared-not-a-conflict",
    ),
    pytest.param(
        Row(
            decided=(decided("b#p", S, spec(ok={"k": "2"})),),
            record={"a#p": rec(S, {"k": "1"}), "b#p": Owned(S)},
            labels={"k": "1"},
            want_labels={"k": "2"},
            want_record={"b#p": rec(S, {"k": "2"})},
        ),
        id="winner-deleted-hands-the-key-to-the-loser",
    ),
    pytest.param(
        Row(
            live=("a#p",),
            record={"a#p": rec(S, {"k": "1"})},
            labels={"k": "1"},
            decided=(decided("b#p", S, spec(ok={"k": "2"})),),
            want_record={"a#p": rec(S, {"k": "1"}), "b#p": Owned(S, warned={"xl:k": "a#p"})},
            want_conflicts=(Conflict("label", "k", owner("a#p"), owner("b#p"), "1", "2"),),
        ),
        id="undecided-earlier-owner-keeps-its-key",
    ),
    pytest.param(
        Row(
            live=("b#p",),
            record={"b#p": rec(S, {"k": "2"})},
            labels={"k": "2"},
            decided=(decided("a#p", S, spec(ok={"k": "1"})),),
            want_labels={"k": "1"},
            want_record={"a#p": rec(S, {"k": "1"}), "b#p": Owned(S, warned={"xl:k": "a#p"})},
            want_conflicts=(Conflict("label", "k", owner("a#p"), owner("b#p"), "1", "2"),),
        ),
        id="decided-earlier-owner-takes-the-key-from-an-undecided-one",
    ),
    pytest.param(
        Row(
            record={"gone#p": rec(S, {"k": "1"})},
            labels={"k": "1"},
            decided=(decided("a#p", S, spec(ok={"k": "1"})),),
            want_labels={"k": "1"},
            want_record={"a#p": rec(S, {"k": "1"})},
        ),
        id="gone-owners-key-kept-when-a-decided-owner-sets-it",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, spec(condition=T), "hello"),),
            want_conditions={T: cond(T, S, "hello")},
            want_record={"w#p": Owned(S, condition=T)},
        ),
        id="condition-true-on-succeeded",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", F, spec(condition=T), "boom"),),
            want_conditions={T: cond(T, F, "boom")},
            want_record={"w#p": Owned(F, condition=T)},
        ),
        id="condition-false-on-failed",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, spec(condition="example.com/New")),),
            record={"w#p": Owned(S, condition=T)},
            conditions=[condition(T)],
            want_conditions={"example.com/New": cond("example.com/New", S), T: None},
            want_record={"w#p": Owned(S, condition="example.com/New")},
        ),
        id="condition-type-edited-removes-the-old-one",
    ),
    pytest.param(
        Row(
            decided=(
                decided("b#p", S, spec(condition=T), "up"),
                decided("a#p", F, spec(condition=T), "down"),
            ),
            want_conditions={T: cond(T, F, "down")},
            want_record={
                "a#p": Owned(F, condition=T),
                "b#p": Owned(S, warned={f"xc:{T}": "a#p"}),
            },
            want_conflicts=(Conflict("condition", T, owner("a#p"), owner("b#p"), "False", "True"),),
        ),
        id="condition-conflict-on-status",
    ),
    pytest.param(
        Row(
            decided=(
                decided("b#p", S, spec(condition=T), "b says"),
                decided("a#p", S, spec(condition=T), "a says"),
            ),
            want_conditions={T: cond(T, S, "a says")},
            want_record={"a#p": Owned(S, condition=T), "b#p": Owned(S, condition=T)},
        ),
        id="condition-same-status-shared-winner-message",
    ),
    pytest.param(
        Row(
            decided=(decided("w#p", S, spec(ok_annotations={OWNED_KEY: "mine", "x": "1"})),),
            want_annotations={"x": "1"},
            want_record={
                "w#p": rec(
                    S, annotations={"x": "1"}, warned={f"xa:{OWNED_KEY}": value_token("#" + OWNED_KEY)}
                )
            },
            want_conflicts=(
                Conflict(
                    "annotation", OWNED_KEY, RECORD_OWNER, owner("w#p"),
                    "(the ownership record)", "mine",
                ),
            ),
        ),
        id="a-policy-never-sets-the-record-annotation",
    ),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS)
def test_desired_state(row: Row) -> None:
    got = compute(row)
    assert dict(got.labels) == row.want_labels
    annotations = dict(got.annotations)
    record_text = annotations.pop(OWNED_KEY)
    assert annotations == row.want_annotations
    assert dict(got.conditions) == row.want_conditions
    want_record = {owner(k): v for k, v in row.want_record.items()}
    assert dict(got.record) == want_record
    assert parse_record(record_text, pod_uid="uid-1") == (want_record, None)
    assert got.conflicts == row.want_conflicts
    assert got.record_problem is None


# Two results for one owner: the first counts by design, so order matters there.
def _distinct_owners(param: Any) -> bool:
    row: Row = param.values[0]
    return len({d.owner for d in row.decided}) == len(row.decided)


DISTINCT_OWNERS = [p for p in ROWS if _distinct_owners(p)]


@pytest.mark.parametrize("row", DISTINCT_OWNERS)
def test_input_order_does_not_matter(row: Row) -> None:
    reversed_row = dataclasses.replace(row, decided=tuple(reversed(row.decided)))
    assert compute(reversed_row) == compute(row)


def test_empty_record_removes_the_annotation() -> None:
    got = desired_state(pod=view(record={"gone#p": Owned(S)}), decided=(), live={})
    assert got.annotations == {OWNED_KEY: None}
    assert got.record == {}


def test_pod_with_nothing_at_all() -> None:
    pod = view()
    assert (pod.labels, pod.conditions) == ({}, ())
    assert (pod.annotations.present, pod.annotations.value(OWNED_KEY)) == (False, None)
    got = desired_state(
        pod=pod, decided=[decided("w#p", S, spec(ok={"idle": "true"}, condition=T))], live={}
    )
    assert got.labels == {"idle": "true"}
    assert got.conditions == {T: cond(T, S)}


def test_message_is_trimmed_to_one_kib() -> None:
    got = desired_state(
        pod=view(), decided=[decided("w#p", F, spec(condition=T), "é" * 2000)], live={}
    )
    message = got.conditions[T]
    assert message is not None
    assert message.message == "é" * (MESSAGE_LIMIT // 2)


def test_malformed_record_is_reported_and_good_entries_kept() -> None:
    text = '{"#uid":"uid-1","gone#p":{"s":"S","l":{"idle":"true"}},"bad":1}'
    pod = view(labels={"idle": "true"}, annotations={OWNED_KEY: text})
    got = desired_state(pod=pod, decided=(), live={})
    assert got.labels == {"idle": None}
    assert got.annotations == {OWNED_KEY: None}  # rewritten: nothing left to record
    assert got.record_problem is not None
    assert "'bad'" in got.record_problem


def test_unparseable_record_is_replaced() -> None:
    pod = view(labels={"idle": "true"}, annotations={OWNED_KEY: "{oops"})
    got = desired_state(pod=pod, decided=[decided("w#p", S, ONLY_OK)], live={})
    assert got.labels == {"idle": "true"}
    assert parse_record(got.annotations[OWNED_KEY], pod_uid="uid-1") == (
        {owner("w#p"): rec(S, {"idle": "true"})},
        None,
    )
    assert got.record_problem is not None
    assert "not JSON" in got.record_problem


def test_record_overflow_keeps_the_first_owners_and_says_so() -> None:
    long_keys = {f"example.com/key-{i:02}-{'x' * 40}": "v" for i in range(32)}
    results = [decided(f"m{i:03}#p", S, spec(ok_annotations=long_keys)) for i in range(60)]
    got = desired_state(pod=view(), decided=results, live={})
    assert 0 < len(got.record) < 60
    assert list(got.record) == sorted(got.record)
    assert got.record_problem is not None
    assert "is full" in got.record_problem
    text = got.annotations[OWNED_KEY]
    assert text is not None
    assert len(text) <= 64 * 1024


def test_winner_deleted_hands_key_to_loser_end_to_end() -> None:
    """Two computations on the same pod: both markers, then the winner deleted."""
    a = decided("a#p", S, spec(ok_annotations={"cost": "10"}))
    b = decided("b#p", S, spec(ok_annotations={"cost": "-10"}))
    pod = raw_pod()
    first = desired_state(pod=pod_view(pod_projection(pod)), decided=[a, b], live={})
    pod = apply(pod, build_patch(pod=pod_view(pod_projection(pod)), desired=first, now=NOW))
    assert pod["metadata"]["annotations"]["cost"] == "10"
    second = desired_state(pod=pod_view(pod_projection(pod)), decided=[b], live={})
    pod = apply(pod, build_patch(pod=pod_view(pod_projection(pod)), desired=second, now=NOW))
    assert pod["metadata"]["annotations"]["cost"] == "-10"
    assert second.conflicts == ()
    # b now holds it: deleting b removes it.
    third = desired_state(pod=pod_view(pod_projection(pod)), decided=[], live={})
    pod = apply(pod, build_patch(pod=pod_view(pod_projection(pod)), desired=third, now=NOW))
    assert "metadata" in pod
    assert "annotations" not in pod["metadata"]


def test_a_record_copied_from_another_pod_removes_nothing_even_where_values_match() -> None:
    """`kubectl get pod a -o yaml`, renamed, applied: same labels, same record, but
    the record names pod a's UID. Nothing is removed; the record is dropped."""
    copied = render_record({owner("ghost#p"): rec(S, {"app": "game", "tier": "db"})}, pod_uid="a")
    pod = view(labels={"app": "game", "tier": "db"}, annotations={OWNED_KEY: copied or ""})
    got = desired_state(pod=pod, decided=(), live={})
    assert got.labels == {}
    assert got.annotations == {OWNED_KEY: None}
    assert got.record_problem is not None
    assert "copied from another pod?" in got.record_problem
