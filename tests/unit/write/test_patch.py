"""build_patch: minimal guarded RFC 6902 ops, checked op by op and by applying them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from probemarker.sim.errors import PatchFailed
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import DesiredCondition, DesiredPod
from probemarker.write.ownership import OWNED_KEY
from probemarker.write.patch import build_patch, changes_of, escape_pointer
from tests.unit.write.helpers import EARLIER, NOW, apply, condition, raw_pod, view

T = "example.com/Idle"
UP = DesiredCondition(T, "True", "ProbeSucceeded", "up")
DOWN = DesiredCondition(T, "False", "ProbeFailed", "down")


def desired(
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str | None] | None = None,
    conditions: Mapping[str, DesiredCondition | None] | None = None,
) -> DesiredPod:
    return DesiredPod(
        labels=labels or {},
        annotations=annotations or {},
        conditions=conditions or {},
        record={},
        conflicts=(),
    )


def at(i: int, type_: str = T) -> dict[str, Any]:
    return {"op": "test", "path": f"/status/conditions/{i}/type", "value": type_}


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def new(want: DesiredCondition) -> dict[str, Any]:
    return condition(want.type, want.status, reason=want.reason, message=want.message, at=NOW)


KUBELET = condition("Ready", reason="", at=EARLIER)

CASES = [
    pytest.param({"labels": {"a": "1"}}, desired({"a": "1"}), [], id="steady-labels"),
    pytest.param({}, desired({"a": None}, {"b": None}, {T: None}), [], id="steady-nothing-to-remove"),
    pytest.param(
        {"labels": {"a": "1"}},
        desired({"a": "2", "b": "3"}),
        [add("/metadata/labels/a", "2"), add("/metadata/labels/b", "3")],
        id="set-and-replace-labels",
    ),
    pytest.param(
        {"labels": {"a": "1", "keep": "x"}},
        desired({"a": None, "gone": None}),
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
        id="remove-only-present-keys-while-they-hold-what-was-seen",
    ),
    pytest.param(
        {},
        desired({"a": "1", "b": None}, {"n": "v"}),
        [
            {"op": "test", "path": "/metadata/labels", "value": None},
            add("/metadata/labels", {"a": "1"}),
            {"op": "test", "path": "/metadata/annotations", "value": None},
            add("/metadata/annotations", {"n": "v"}),
        ],
        id="no-maps-at-all-one-guarded-add-each",
    ),
    pytest.param(
        {"labels": {"x": "1"}, "annotations": {"y": "1"}},
        desired({"example.com/idle": "true", "a~b/c": "1"}, {"example.com/x": None}),
        [add("/metadata/labels/a~0b~1c", "1"), add("/metadata/labels/example.com~1idle", "true")],
        id="pointer-escaping",
    ),
    pytest.param(
        {"annotations": {"example.com/x": "1"}},
        desired(annotations={"example.com/x": None}),
        # A value the view did not keep (not in the record: never a removal of the
        # daemon's own) is not tested.
        [{"op": "remove", "path": "/metadata/annotations/example.com~1x"}],
        id="remove-escaped",
    ),
    pytest.param(
        {"annotations": {"example.com/x": "1", OWNED_KEY: '{"#uid":"uid-1","m#p":{"s":"S","a":{"example.com/x":"1"}}}'}},
        desired(annotations={"example.com/x": None}),
        [
            {"op": "test", "path": "/metadata/annotations/example.com~1x", "value": "1"},
            {"op": "remove", "path": "/metadata/annotations/example.com~1x"},
        ],
        id="remove-a-recorded-annotation-while-it-holds-what-was-seen",
    ),
    pytest.param(
        {"labels": {"a": ""}}, desired({"a": ""}), [], id="empty-label-value-is-a-value"
    ),
    pytest.param(
        {},
        desired(conditions={T: UP}),
        [{"op": "test", "path": "/status/conditions", "value": None}, add("/status/conditions", [new(UP)])],
        id="first-condition-guarded-add-of-the-list",
    ),
    pytest.param(
        {"conditions": [KUBELET]},
        desired(conditions={T: UP}),
        [add("/status/conditions/-", new(UP))],
        id="new-condition-appended",
    ),
    pytest.param(
        {"conditions": [KUBELET, condition(T, message="up")]},
        desired(conditions={T: UP}),
        [],
        id="unchanged-condition-untouched",
    ),
    pytest.param(
        {"conditions": [condition(T, message="up", lastProbeTime=None)]},
        desired(conditions={T: UP}),
        [],
        id="unchanged-condition-times-not-refreshed",
    ),
    pytest.param(
        {"conditions": [KUBELET, condition(T, message="old")]},
        desired(conditions={T: UP}),
        [
            at(1),
            add("/status/conditions/1/message", "up"),
            add("/status/conditions/1/lastProbeTime", NOW),
        ],
        id="message-change-moves-probe-time-not-transition-time",
    ),
    pytest.param(
        {"conditions": [condition(T, message="down")]},
        desired(conditions={T: DOWN}),
        [
            at(0),
            add("/status/conditions/0/status", "False"),
            add("/status/conditions/0/reason", "ProbeFailed"),
            add("/status/conditions/0/lastProbeTime", NOW),
            add("/status/conditions/0/lastTransitionTime", NOW),
        ],
        id="status-change-updates-status-reason-times",
    ),
    pytest.param(
        {"conditions": [condition(T, reason="Edited", message="up")]},
        desired(conditions={T: UP}),
        [at(0), add("/status/conditions/0/reason", "ProbeSucceeded")],
        id="reason-alone-restored-times-kept",
    ),
    pytest.param(
        {"conditions": [condition(T, message="was")]},
        desired(conditions={T: DesiredCondition(T, "True", "ProbeSucceeded", "")}),
        [
            at(0),
            add("/status/conditions/0/message", ""),
            add("/status/conditions/0/lastProbeTime", NOW),
        ],
        id="message-cleared",
    ),
    pytest.param(
        {"conditions": [condition(T)]},
        desired(conditions={T: DesiredCondition(T, "True", "ProbeSucceeded", "")}),
        [],
        id="absent-message-equals-empty",
    ),
    pytest.param(
        {"conditions": [condition("a.io/A"), KUBELET, condition("a.io/B"), condition("a.io/C")]},
        desired(conditions={"a.io/A": None, "a.io/C": None, "a.io/D": None}),
        [
            at(3, "a.io/C"),
            {"op": "remove", "path": "/status/conditions/3"},
            at(0, "a.io/A"),
            {"op": "remove", "path": "/status/conditions/0"},
        ],
        id="removals-highest-index-first",
    ),
    pytest.param(
        {"conditions": [condition("a.io/A"), condition("a.io/B", message="x")]},
        desired(conditions={"a.io/A": None, "a.io/B": DesiredCondition("a.io/B", "True", "ProbeSucceeded", "y"), T: UP}),
        [
            at(1, "a.io/B"),
            add("/status/conditions/1/message", "y"),
            add("/status/conditions/1/lastProbeTime", NOW),
            at(0, "a.io/A"),
            {"op": "remove", "path": "/status/conditions/0"},
            add("/status/conditions/-", new(UP)),
        ],
        id="update-then-remove-then-append",
    ),
    pytest.param(
        {"conditions": [condition(T, message="up"), KUBELET, condition(T, message="dup")]},
        desired(conditions={T: UP}),
        [at(2), {"op": "remove", "path": "/status/conditions/2"}],
        id="duplicate-of-our-type-removed",
    ),
]  # fmt: skip


# Every patch of the pods above (uid-1, Running, not deleting) starts with these.
GUARDS = [
    {"op": "test", "path": "/metadata/uid", "value": "uid-1"},
    {"op": "test", "path": "/metadata/deletionTimestamp", "value": None},
    {"op": "test", "path": "/status/phase", "value": "Running"},
]


@pytest.mark.parametrize(("pod", "want", "ops"), CASES)
def test_build_patch(pod: dict[str, Any], want: DesiredPod, ops: list[dict[str, Any]]) -> None:
    assert build_patch(pod=view(**pod), desired=want, now=NOW) == (GUARDS + ops if ops else [])


def _elsewhere(raw: dict[str, Any], change: str) -> dict[str, Any]:
    if change == "recreated":
        raw["metadata"]["uid"] = "uid-2"
    elif change == "deleting":
        raw["metadata"]["deletionTimestamp"] = NOW
    else:
        raw["status"]["phase"] = change
    return raw


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("recreated", id="same-name-other-uid"),
        pytest.param("deleting", id="deletion-started"),
        pytest.param("Succeeded", id="finished"),
        pytest.param("Failed", id="failed"),
    ],
)
def test_a_patch_never_lands_on_another_pod_or_a_terminating_one(change: str) -> None:
    """Planned for uid-1 while Running: refused by the server (a failed test) once the
    name holds another pod, or the pod started terminating or finished."""
    ops = build_patch(pod=view(), desired=desired({"idle": "true"}, conditions={T: UP}), now=NOW)
    with pytest.raises(PatchFailed):
        apply(_elsewhere(raw_pod(), change), ops)
    assert apply(raw_pod(), ops)["metadata"]["labels"] == {"idle": "true"}


def test_a_pod_without_a_phase_is_guarded_by_uid_and_deletion_only() -> None:
    raw = raw_pod()
    del raw["status"]
    ops = build_patch(pod=pod_view(pod_projection(raw)), desired=desired({"idle": "true"}), now=NOW)
    assert ops[:2] == GUARDS[:2]
    assert all(op["path"] != "/status/phase" for op in ops)


@pytest.mark.parametrize(
    ("pod", "want", "changes"),
    [
        pytest.param({"labels": {"a": "1"}}, desired({"a": "1"}), {}, id="nothing"),
        pytest.param(
            {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "1", OWNED_KEY: "{}"}},
            desired({"a": "9", "b": None, "c": None}, {"x": None, "y": "v", OWNED_KEY: "{...}"}),
            {
                "labels_set": {"a": "9"},
                "labels_removed": ["b"],
                "annotations_set": ["y"],
                "annotations_removed": ["x"],
            },
            id="keys-set-and-removed-record-not-listed",
        ),
        pytest.param(
            {"conditions": [condition(T, message="up"), condition("a.io/B")]},
            desired(conditions={T: DOWN, "a.io/B": None, "a.io/C": None}),
            {"conditions": {T: "False", "a.io/B": "removed"}},
            id="conditions",
        ),
    ],
)
def test_changes_of_a_write_for_its_log_line(
    pod: dict[str, Any], want: DesiredPod, changes: dict[str, Any]
) -> None:
    assert changes_of(view(**pod), want) == changes


@pytest.mark.parametrize(("pod", "want", "ops"), CASES)
def test_applied_patch_is_steady(
    pod: dict[str, Any], want: DesiredPod, ops: list[dict[str, Any]]
) -> None:
    """Applied by the sim's JSON patch (evanphx semantics), the pod then matches."""
    raw = raw_pod(**pod)
    patched = apply(raw, build_patch(pod=view(**pod), desired=want, now=NOW))
    assert build_patch(pod=pod_view(pod_projection(patched)), desired=want, now=NOW) == []


def test_unknown_condition_fields_are_kept() -> None:
    raw = raw_pod(conditions=[condition(T, message="old", observedGeneration=3, extra={"a": 1})])
    patched = apply(
        raw,
        build_patch(
            pod=view(conditions=raw["status"]["conditions"]),
            desired=desired(conditions={T: UP}),
            now=NOW,
        ),
    )
    (got,) = patched["status"]["conditions"]
    assert got == {
        "type": T,
        "status": "True",
        "reason": "ProbeSucceeded",
        "message": "up",
        "lastProbeTime": NOW,
        "lastTransitionTime": EARLIER,  # a message change is not a transition
        "observedGeneration": 3,
        "extra": {"a": 1},
    }


def test_shifted_conditions_fail_the_patch_instead_of_hitting_the_wrong_one() -> None:
    before = raw_pod(conditions=[condition(T, message="old")])
    ops = build_patch(
        pod=view(conditions=before["status"]["conditions"]),
        desired=desired(conditions={T: None}),
        now=NOW,
    )
    meanwhile = raw_pod(conditions=[KUBELET, condition(T, message="old")])
    with pytest.raises(PatchFailed):
        apply(meanwhile, ops)


def test_labels_added_meanwhile_are_never_wiped() -> None:
    ops = build_patch(pod=view(), desired=desired({"idle": "true"}), now=NOW)
    with pytest.raises(PatchFailed):
        apply(raw_pod(labels={"app": "web"}), ops)


def test_conditions_added_meanwhile_are_never_wiped() -> None:
    ops = build_patch(pod=view(), desired=desired(conditions={T: UP}), now=NOW)
    with pytest.raises(PatchFailed):
        apply(raw_pod(conditions=[KUBELET]), ops)


@pytest.mark.parametrize(
    ("key", "token"),
    [
        pytest.param("idle", "idle", id="plain"),
        pytest.param("example.com/idle", "example.com~1idle", id="slash"),
        pytest.param("a~b", "a~0b", id="tilde"),
        pytest.param("~1", "~01", id="tilde-one-literal"),
        pytest.param("/~", "~1~0", id="both"),
    ],
)
def test_escape_pointer(key: str, token: str) -> None:
    assert escape_pointer(key) == token
    raw = raw_pod(labels={"x": "1"})
    patched = apply(raw, [add(f"/metadata/labels/{token}", "v")])
    assert patched["metadata"]["labels"][key] == "v"
