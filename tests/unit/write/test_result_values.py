"""desired_state with `{{.Result}}` values: rendered, refused, kept, recorded, cleaned up."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.model import ProbeSpec, ProbeState
from probemarker.api.rules import TOTAL_ANNOTATION_BYTES
from probemarker.write.desired import Decided, InvalidValue, desired_state
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record, value_token
from probemarker.pods import pod_view as view_of
from probemarker.write.patch import build_patch
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
        pytest.param("x" * 64, "a label value must be no more than 63 characters", id="too-long"),
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
    assert bad == InvalidValue(owner(M), "label", "db/role", value, bad.problem)
    assert bad.problem.startswith(problem)
    # The one write is the record noting the Warning (so a restart raises none again).
    ops = writes(build_patch(pod=pod, desired=desired, now=NOW))
    assert [op["path"] for op in ops] == ["/metadata/annotations/probemarker.io~1owned"]
    assert desired.record[owner(M)].warned == {"l:db/role": value_token(value)}
    after = view_of(apply(raw_pod(**shown), ops))
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
