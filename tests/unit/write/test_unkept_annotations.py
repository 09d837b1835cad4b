"""Writes computed from a pod whose annotation values the daemon did not keep (issue 22):
only the record and the keys it names keep their values; every other annotation is a
fingerprint. Each case runs on the projection (what the informer stores) and checks
the patch against the whole pod: the same ops as from the whole pod, and applying them
gives what the policy asks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probemarker.sim.errors import PatchFailed
from probemarker.watch.annotations import summarize
from probemarker.watch.pods import pod_projection, pod_view, read_keys
from probemarker.write.desired import desired_state
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record
from probemarker.write.patch import build_patch
from probemarker.write.restrict import Scope, restrict
from tests.unit.write.helpers import NOW, UID, S, apply, decided, owner, raw_pod, spec


def whole_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The whole pod, every field as the API server sent it, with its annotations
    summarized keeping the values the record names: what a view of the unprojected pod
    holds, to compare a write from the projection with."""
    meta = pod["metadata"]
    return {
        **pod,
        "metadata": {**meta, "annotations": summarize(meta.get("annotations"), read_keys(meta))},
    }


BIG = "kubectl.kubernetes.io/last-applied-configuration"
USER = {BIG: "{" + "x" * 20_000 + "}", "team.io/owner": "games"}
NEW = "example.com/new"


def plan(pod: dict[str, Any], policy: dict[str, str], scope: Scope = Scope.FULL) -> Any:
    view = pod_view(pod_projection(pod))
    assert view.annotations.kept(OWNED_KEY)
    want = desired_state(
        pod=view, decided=[decided("m#p", S, spec(ok_annotations=policy))], live={}
    )
    return view, restrict(want, view, scope)


@pytest.mark.parametrize(
    ("annotations", "policy", "after"),
    [
        pytest.param(USER, {NEW: "1"}, {NEW: "1"}, id="new-key"),
        pytest.param({**USER, NEW: "1"}, {NEW: "1"}, {NEW: "1"}, id="already-holds-it"),
        pytest.param({**USER, NEW: "0"}, {NEW: "1"}, {NEW: "1"}, id="holds-another-value"),
        pytest.param(USER, {BIG: "mine"}, {BIG: "mine"}, id="a-big-users-key"),
        pytest.param({}, {NEW: "1"}, {NEW: "1"}, id="no-annotations-at-all"),
    ],
)
def test_a_write_from_the_projection_is_the_write_from_the_whole_pod(
    annotations: dict[str, str], policy: dict[str, str], after: dict[str, str]
) -> None:
    pod = raw_pod(annotations=annotations or None)
    view, want = plan(pod, policy)
    assert not view.annotations.kept(BIG)  # never a value the daemon does not own
    whole = pod_view(whole_pod(pod))
    ops = build_patch(pod=view, desired=want, now=NOW)
    assert ops == build_patch(pod=whole, desired=want, now=NOW)
    written = apply(pod, ops)
    notes = written["metadata"]["annotations"]
    assert {k: notes[k] for k in after} == after
    assert all(notes[k] == v for k, v in annotations.items() if k not in after)
    record, problem = parse_record(notes[OWNED_KEY], pod_uid=UID)
    assert problem is None
    assert record[owner("m#p")].annotations.keys() == after.keys()
    # Steady: the next plan, from the next projection, writes nothing.
    view, want = plan(written, policy)
    assert build_patch(pod=view, desired=want, now=NOW) == []


def test_a_key_the_daemon_wrote_and_a_user_changed_is_not_removed() -> None:
    """The record names the key, so its value is kept; the value no longer is the one
    written: the marker gone, the key stays."""
    written = {NEW: "1", "example.com/other": "2"}
    pod = raw_pod(
        annotations={**USER, NEW: "changed by a user", "example.com/other": "2"},
        record={"m#p": Owned(S, annotations=written)},
    )
    view = pod_view(pod_projection(pod))
    assert view.annotations.value(NEW) == "changed by a user"
    want = desired_state(pod=view, decided=[], live={})
    assert dict(want.annotations) == {"example.com/other": None, OWNED_KEY: None}
    notes = apply(pod, build_patch(pod=view, desired=want, now=NOW))["metadata"]["annotations"]
    assert notes == {**USER, NEW: "changed by a user"}


def test_a_removal_planned_from_a_stale_view_fails_rather_than_lose_a_users_value() -> None:
    """The user changed the key after the view the plan saw (the watch has not brought
    the change yet): the patch's test fails (a 422, re-read and planned again)."""
    seen = raw_pod(annotations={**USER, NEW: "1"}, record={"m#p": Owned(S, annotations={NEW: "1"})})
    view = pod_view(pod_projection(seen))
    want = desired_state(pod=view, decided=[], live={})  # the marker is gone
    ops = build_patch(pod=view, desired=want, now=NOW)
    assert {"op": "remove", "path": "/metadata/annotations/example.com~1new"} in ops
    now = copy.deepcopy(seen)
    now["metadata"]["annotations"][NEW] = "changed by a user"
    with pytest.raises(PatchFailed):  # the test op fails: a 422, re-read
        apply(now, ops)
    assert apply(seen, ops)["metadata"]["annotations"] == USER


@pytest.mark.parametrize(
    ("annotations", "recorded"),
    [
        pytest.param({**USER, NEW: "1"}, {NEW: "1"}, id="holds-it-so-recorded"),
        pytest.param({**USER, NEW: "0"}, {}, id="not-written-so-not-recorded"),
        pytest.param(USER, {}, id="absent-so-not-recorded"),
    ],
)
def test_without_new_annotations_the_record_names_only_what_holds(
    annotations: dict[str, str], recorded: dict[str, str]
) -> None:
    """After a refusal (422: no room), no annotation is added or changed; the record
    keeps a key new to it only where the pod already holds the value."""
    pod = raw_pod(annotations=annotations)
    view, smaller = plan(pod, {NEW: "1"}, Scope.NO_NEW_ANNOTATIONS)
    notes = apply(pod, build_patch(pod=view, desired=smaller, now=NOW))["metadata"]["annotations"]
    assert notes.get(NEW) == annotations.get(NEW)  # nothing added or changed
    record = parse_record(notes.get(OWNED_KEY), pod_uid=UID)[0]
    assert dict(record[owner("m#p")].annotations) == recorded
