"""The room for annotations, counted over the whole write (issue 29, found in review)."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.rules import TOTAL_ANNOTATION_BYTES
from probemarker.write.desired import Decided, desired_state
from probemarker.write.room import annotation_bytes
from tests.unit.write.helpers import S, owner, spec, view

# A 243-character DNS prefix: a key of 250 bytes, which the record repeats in full.
PREFIX = ("a" * 60 + ".") * 3 + "b" * 60


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import probemarker.write.desired as desired_module

    passes = [0]
    real = desired_module._desired

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(desired_module, "_desired", counted)
    return passes


def test_long_keys_with_short_answers_cost_a_few_passes_not_one_per_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs (desired_state): "a few passes at most, whatever a marker renders (a hostile
    one must not make a plan cost a pass per value)". A value's share is counted
    without its record entry (key + token), which for a long key and a one-byte
    answer is as much again as the value's own share: the greedy admission overshoots
    by half the admitted values, and the loop then gives them back one pass at a
    time. 32 probes x 32 annotations, 1-byte answer, 50 KB of room: ~100 passes of
    1,024 values each (about a second of the event loop blocked, at the pod's first
    write and again whenever the values cannot be kept, e.g. a transition)."""
    passes = _count_passes(monkeypatch)
    probes = [
        Decided(
            owner(f"m#p{p}"),
            spec(
                name=f"p{p}",
                ok_annotations={f"{PREFIX}/p{p}-{k}": "{{.Result}}" for k in range(32)},
            ),
            S,
            "",
            "z",
        )
        for p in range(32)
    ]
    pod = view(annotations={"big": "x" * (TOTAL_ANNOTATION_BYTES - 50_000)})
    desired = desired_state(pod=pod, decided=probes, live={})
    assert annotation_bytes(pod, desired.annotations) <= TOTAL_ANNOTATION_BYTES
    assert passes[0] <= 4, passes[0]


ROLE = spec(ok={"db/role": "{{.Result}}"})
M = "m#p"


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("p" * 63, id="a-longer-valid-label-value"),
        pytest.param("connection refused: the database is down", id="an-invalid-label-value"),
    ],
)
def test_a_rendered_label_never_takes_the_record_past_the_room(answer: str) -> None:
    """docs/api.md (the probe's answer as a value): room for annotations is judged over
    the whole write (every value rendered into it, plus the ownership record as it
    will be), so the API server never answers 422 for a value the daemon rendered. Only rendered *annotations* are
    admitted against the room: a rendered label grows the record too (its value in
    `l`), and an invalid one that is not even written grows it by its `w` note. On a
    pod near its 256 KiB (the pod may fill its own annotations) the write is over
    the limit: 422, a WriteRefused Warning, and the narrowed patch writes the label
    without recording it (never removed later), retried in full every scope backoff."""
    from probemarker.write.ownership import Owned

    record = {M: Owned(S, labels={"db/role": "primary"})}
    base = view(labels={"db/role": "primary"}, record=record)
    filler = "x" * (TOTAL_ANNOTATION_BYTES - base.annotations.total_bytes - len("big") - 8)
    pod = view(labels={"db/role": "primary"}, annotations={"big": filler}, record=record)
    decided = Decided(owner(M), ROLE, S, "", answer)
    desired = desired_state(pod=pod, decided=[decided], live={})
    assert annotation_bytes(pod, desired.annotations) <= TOTAL_ANNOTATION_BYTES


NOTE = spec(ok_annotations={"game/note": "players: {{.Result}} |"})


def test_a_value_replacing_a_large_one_the_daemon_did_not_write_is_not_refused() -> None:
    """docs/api.md: a value is refused only when it does not fit. The pod carries a
    200 KB `game/note` written by someone else (or by an owner whose record entry was
    dropped: `fit_record` overflow). The marker now renders `game/note` from its
    answer: 13 bytes replacing 200 KB, which leaves the pod far under 256 KiB. The pod
    projection did not keep that value (the record does not name the key), and
    `annotation_bytes` then counts the old value as staying: the value is refused for
    room, and every run re-renders and re-refuses it."""
    used = 200_000 + len("game/note") + len("big")
    filler = "y" * (TOTAL_ANNOTATION_BYTES - used - 100)
    pod = view(annotations={"game/note": "x" * 200_000, "big": filler})
    desired = desired_state(pod=pod, decided=[Decided(owner(M), NOTE, S, "", "1")], live={})
    assert desired.invalid == ()
    assert desired.annotations.get("game/note") == "players: 1 |"


def test_a_conflict_loser_that_takes_over_a_refused_key_is_counted_too() -> None:
    """docs/api.md: the API server never answers 422 for a value the daemon rendered.
    Markers a and b render one key with different values; a wins the key, b loses it
    (a conflict), so only a's claim is among the values admitted against the room.
    a's value does not fit and is refused; in the pass that refuses it b's claim no
    longer loses: b takes the key with its own rendered 900 bytes, which nobody
    counted. The write is over 256 KiB (422), and the ConflictingMarkers Warning is
    gone too."""
    a = spec(name="p", ok_annotations={"game/note": "a-{{.Result}}"})
    b = spec(name="p", ok_annotations={"game/note": "b-{{.Result}}"})
    pod = view(annotations={"big": "x" * (TOTAL_ANNOTATION_BYTES - 600)})
    desired = desired_state(
        pod=pod,
        decided=[
            Decided(owner("a#p"), a, S, "", "y" * 900),
            Decided(owner("b#p"), b, S, "", "z" * 900),
        ],
        live={},
    )
    assert annotation_bytes(pod, desired.annotations) <= TOTAL_ANNOTATION_BYTES
