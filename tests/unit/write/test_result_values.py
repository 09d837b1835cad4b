"""desired_state with `{{.Result}}` values: rendered, refused, kept, recorded, cleaned up."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.api.rules import TOTAL_ANNOTATION_BYTES
from probemarker.watch.annotations import annotations_size
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import Decided, InvalidValue, desired_state
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record
from probemarker.write.patch import build_patch
from probemarker.write.room import annotation_bytes
from probemarker.write.tokens import value_token
from tests.unit.write.helpers import NOW, UID, F, S, apply, owner, raw_pod, spec, view

MAP = spec(ok={"game/map": "{{.Result}}", "game/up": "yes"}, bad={"game/map": "down-{{ .Result }}"})
ROLE = spec(ok={"db/role": "{{.Result}}"})
NOTE = spec(ok_annotations={"game/note": "players: {{.Result}} |"})
M = "m#p"


def writes(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A patch's operations but its guards (tests): nothing to write when empty."""
    return [op for op in ops if op["op"] != "test"]


def result(state: ProbeState, probe: ProbeSpec, value: str | None) -> Decided:
    return Decided(owner(M), probe, state, "", value)


@pytest.mark.parametrize(
    ("state", "value", "labels"),
    [
        pytest.param(S, "de_dust2", {"game/map": "de_dust2", "game/up": "yes"}, id="succeeded"),
        pytest.param(F, "maintenance", {"game/map": "down-maintenance"}, id="failed"),
        pytest.param(S, "", {"game/map": "", "game/up": "yes"}, id="empty-is-a-label-value"),
    ],
)
def test_values_are_rendered_and_recorded(
    state: ProbeState, value: str, labels: dict[str, str]
) -> None:
    desired = desired_state(pod=view(), decided=[result(state, MAP, value)], live={})
    assert dict(desired.labels) == labels
    assert desired.record[owner(M)].labels == labels
    assert desired.invalid == ()


def test_a_new_result_is_a_new_value() -> None:
    pod = view(labels={"game/map": "a"}, record={M: Owned(S, labels={"game/map": "a"})})
    desired = desired_state(pod=pod, decided=[result(S, MAP, "b")], live={})
    assert desired.labels["game/map"] == "b"
    ops = build_patch(pod=pod, desired=desired, now=NOW)
    assert {"op": "add", "path": "/metadata/labels/game~1map", "value": "b"} in ops


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("de dust2", "a label value must be empty or alphanumerics", id="space"),
        pytest.param(
            "x" * 64,
            "a label value must be no more than 63 characters (this one renders to 64)",
            id="too-long",
        ),
        pytest.param("-1", "a label value must be empty or alphanumerics", id="leading-dash"),
    ],
)
def test_an_invalid_value_is_not_written_and_the_last_valid_one_stays(
    value: str, problem: str
) -> None:
    shown = {
        "labels": {"db/role": "primary"},
        "record": {M: Owned(S, labels={"db/role": "primary"})},
    }
    pod = view(**shown)
    desired = desired_state(pod=pod, decided=[result(S, ROLE, value)], live={})
    assert desired.labels == {"db/role": "primary"}  # kept, not removed
    assert desired.record[owner(M)].labels == {"db/role": "primary"}
    [bad] = desired.invalid
    if len(value) <= 63:
        assert bad == InvalidValue(owner(M), "label", "db/role", value, bad.problem)
    else:  # refused from its size, never built (test_render_size.py)
        unbuilt = InvalidValue(
            owner(M), "label", "db/role", None, bad.problem, template="{{.Result}}", result=value
        )
        assert bad == unbuilt
    assert "".join(bad.pieces()) == value
    assert bad.token == value_token(value)
    assert bad.problem.startswith(problem)
    # The one write is the record noting the Warning (so a restart raises none again).
    ops = writes(build_patch(pod=pod, desired=desired, now=NOW))
    assert [op["path"] for op in ops] == ["/metadata/annotations/probemarker.io~1owned"]
    assert desired.record[owner(M)].warned == {"l:db/role": value_token(value)}
    after = pod_view(pod_projection(apply(raw_pod(**shown), ops)))
    again = desired_state(pod=after, decided=[result(S, ROLE, value)], live={})
    assert [b.recorded for b in again.invalid] == [True]
    assert writes(build_patch(pod=after, desired=again, now=NOW)) == []


def test_an_invalid_first_value_writes_nothing() -> None:
    desired = desired_state(pod=view(), decided=[result(S, ROLE, "not valid")], live={})
    assert "db/role" not in desired.labels
    assert owner(M) in desired.record
    assert desired.record[owner(M)].labels == {}
    assert len(desired.invalid) == 1


def test_an_unknown_result_keeps_what_the_pod_shows() -> None:
    """A restarted daemon before its first run: the pod's value is the current one."""
    pod = view(labels={"db/role": "replica"}, record={M: Owned(S, labels={"db/role": "replica"})})
    desired = desired_state(pod=pod, decided=[result(S, ROLE, None)], live={})
    assert desired.labels == {"db/role": "replica"}
    assert desired.invalid == ()
    assert writes(build_patch(pod=pod, desired=desired, now=NOW)) == []


def test_a_value_changed_by_someone_else_is_not_taken_as_ours() -> None:
    pod = view(labels={"db/role": "edited"}, record={M: Owned(S, labels={"db/role": "primary"})})
    desired = desired_state(pod=pod, decided=[result(S, ROLE, None)], live={})
    assert "db/role" not in desired.labels  # neither kept nor removed
    assert desired.record[owner(M)].labels == {}


def test_a_rendered_value_is_cleaned_up_with_its_owner() -> None:
    shown = {
        "labels": {"db/role": "primary"},
        "record": {M: Owned(S, labels={"db/role": "primary"})},
    }
    pod = view(**shown)
    desired = desired_state(pod=pod, decided=[], live={})  # the marker is gone
    assert desired.labels == {"db/role": None}
    after = apply(raw_pod(**shown), build_patch(pod=pod, desired=desired, now=NOW))
    assert "db/role" not in after["metadata"].get("labels", {})


def test_annotations_render_and_record_their_token() -> None:
    desired = desired_state(pod=view(), decided=[result(S, NOTE, "12")], live={})
    assert desired.annotations["game/note"] == "players: 12 |"
    assert desired.record[owner(M)].annotations == {"game/note": value_token("players: 12 |")}


def test_an_annotation_past_the_pods_room_is_not_written() -> None:
    filler = "x" * (TOTAL_ANNOTATION_BYTES - 300)  # room for the record and a short note
    pod = view(annotations={"big": filler})
    desired = desired_state(pod=pod, decided=[result(S, NOTE, "y" * 200)], live={})
    assert "game/note" not in desired.annotations
    [bad] = desired.invalid
    assert bad.kind == "annotation"
    assert bad.key == "game/note"
    assert f"limit of {TOTAL_ANNOTATION_BYTES}" in bad.problem
    fits = desired_state(pod=pod, decided=[result(S, NOTE, "y")], live={})
    assert fits.annotations["game/note"] == "players: y |"
    assert fits.invalid == ()


def test_the_record_survives_a_round_trip_with_rendered_values() -> None:
    raw = raw_pod()
    desired = desired_state(pod=view(), decided=[result(S, MAP, "de_dust2")], live={})
    after = apply(raw, build_patch(pod=view(), desired=desired, now=NOW))
    record, problem = parse_record(after["metadata"]["annotations"][OWNED_KEY], pod_uid=UID)
    assert problem is None
    assert record[owner(M)].labels == {"game/map": "de_dust2", "game/up": "yes"}


BOTH = spec(ok={"db/role": "{{.Result}}"}, bad={"db/role": "{{.Result}}"})


def test_an_invalid_value_across_a_transition_removes_the_key() -> None:
    """Defect 7: `primary` while Succeeded; the probe fails printing a sentence. A
    Service selecting role=primary must not keep choosing a pod whose probe failed."""
    shown = {
        "labels": {"db/role": "primary"},
        "record": {M: Owned(S, labels={"db/role": "primary"})},
    }
    pod = view(**shown)
    desired = desired_state(
        pod=pod, decided=[result(F, BOTH, "connection refused: db down")], live={}
    )
    assert desired.labels == {"db/role": None}  # removed, not left at the other state's value
    assert desired.record[owner(M)] == Owned(
        F, warned={"l:db/role": value_token("connection refused: db down")}
    )
    [bad] = desired.invalid
    assert bad.value == "connection refused: db down"
    after = apply(raw_pod(**shown), build_patch(pod=pod, desired=desired, now=NOW))
    assert "db/role" not in after["metadata"].get("labels", {})


def test_an_invalid_value_within_the_state_keeps_the_last_valid_one() -> None:
    pod = view(labels={"db/role": "replica"}, record={M: Owned(F, labels={"db/role": "replica"})})
    desired = desired_state(pod=pod, decided=[result(F, BOTH, "garbled: x")], live={})
    assert desired.labels == {"db/role": "replica"}


def test_an_unknown_result_on_a_transition_renders_empty() -> None:
    """`probemarker check` hands a run with no answer over as None: the daemon would
    decide the new state with an empty result (decide.step)."""
    pod = view(labels={"db/role": "primary"}, record={M: Owned(S, labels={"db/role": "primary"})})
    desired = desired_state(pod=pod, decided=[result(F, BOTH, None)], live={})
    assert desired.labels == {"db/role": ""}


TWO_NOTES = spec(ok_annotations={"game/a": "{{.Result}}", "game/b": "{{.Result}}"})


def test_room_is_counted_over_the_whole_write() -> None:
    """Defect 1: room for one of two rendered annotations. Before: both were judged
    alone, both written, and the API server refused the write (422, `Too long`)."""
    answer = "y" * 1000
    filler = "x" * (TOTAL_ANNOTATION_BYTES - 1500)  # room for one value and the record
    shown = {"annotations": {"big": filler}}
    pod = view(**shown)
    desired = desired_state(pod=pod, decided=[result(S, TWO_NOTES, answer)], live={})
    assert desired.annotations["game/a"] == answer  # the first claim fits
    assert "game/b" not in desired.annotations
    [bad] = desired.invalid
    assert (bad.key, bad.kind) == ("game/b", "annotation")
    assert f"over the API server's limit of {TOTAL_ANNOTATION_BYTES}" in bad.problem
    after = apply(raw_pod(**shown), build_patch(pod=pod, desired=desired, now=NOW))
    assert annotations_size(after["metadata"]["annotations"]) <= TOTAL_ANNOTATION_BYTES


def test_the_record_counts_towards_the_room() -> None:
    """A value that fits by a few bytes alone goes over once the record names it."""
    value = "players: y |"
    alone = len("game/note") + len(value)
    filler = "x" * (TOTAL_ANNOTATION_BYTES - len("big") - alone - 10)
    pod = view(annotations={"big": filler})
    desired = desired_state(pod=pod, decided=[result(S, NOTE, "y")], live={})
    assert "game/note" not in desired.annotations
    assert [b.key for b in desired.invalid] == ["game/note"]


def test_a_value_the_pod_shows_already_needs_no_room() -> None:
    value = "players: y |"
    record = {M: Owned(S, annotations={"game/note": value_token(value)})}
    base = view(annotations={"game/note": value}, record=record)
    filler = "x" * (TOTAL_ANNOTATION_BYTES - base.annotations.total_bytes - len("big"))
    pod = view(annotations={"game/note": value, "big": filler}, record=record)
    assert pod.annotations.total_bytes == TOTAL_ANNOTATION_BYTES
    desired = desired_state(pod=pod, decided=[result(S, NOTE, "y")], live={})
    assert desired.invalid == ()
    assert writes(build_patch(pod=pod, desired=desired, now=NOW)) == []


def test_a_marker_rendering_many_values_past_the_room_costs_a_few_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile marker (32 probes x 32 annotations, each a 1 KiB answer) on a pod
    near its room: the plan takes a few passes, not one per value."""
    import probemarker.write.desired as desired_module

    probes = [
        Decided(
            owner(f"m#p{p}"),
            spec(name=f"p{p}", ok_annotations={f"a.io/p{p}-{k}": "{{.Result}}" for k in range(32)}),
            S,
            "",
            "z" * 1000,
        )
        for p in range(32)
    ]
    passes = 0
    real = desired_module._desired

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal passes
        passes += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(desired_module, "_desired", counted)
    pod = view(annotations={"big": "x" * (TOTAL_ANNOTATION_BYTES - 50_000)})
    desired = desired_state(pod=pod, decided=probes, live={})
    assert passes <= 4
    written = [k for k in desired.annotations if k.startswith("a.io/")]
    assert 40 <= len(written) < 50  # about 49 KiB of room for 1 KiB values and the record
    assert len(desired.invalid) == 1024 - len(written)
    assert annotation_bytes(pod, desired.annotations) <= TOTAL_ANNOTATION_BYTES
