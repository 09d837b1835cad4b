"""Properties, by applying patches with the sim's JSON patch (evanphx semantics):
a built patch always applies, the pod then matches (building again gives []), only
our keys and conditions change; and a whole cycle through desired_state is steady."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import DesiredCondition, DesiredPod, desired_state
from probemarker.write.ours import still_ours
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record, render_record
from probemarker.write.patch import build_patch, changes_of
from probemarker.write.restrict import Scope, restrict
from tests.unit.write.helpers import NOW, UID, F, S, apply, decided, owner, raw_pod, spec

SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
KEYS = ["a", "b", "example.com/idle", "x~y", "a.io/c"]
VALUES = ["", "1", "2"]
TYPES = ["a.io/A", "a.io/B", "example.com/Idle"]
OWNERS = ["a#p", "a#q", "b#p"]


def maps(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from([*TYPES, "Ready"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
            "reason": st.sampled_from(["", "ProbeSucceeded", "ProbeFailed"]),
            "message": st.sampled_from(["", "up", "down"]),
            "lastTransitionTime": st.just("2026-01-01T00:00:00Z"),
        },
        optional={"observedGeneration": st.integers(0, 3)},
    ),
    max_size=5,
)
pods = st.builds(
    raw_pod,
    labels=maps(KEYS, st.sampled_from(VALUES)),
    annotations=maps(KEYS, st.sampled_from(VALUES)),
    conditions=st.none() | conditions,
)
wanted_conditions = st.builds(
    DesiredCondition,
    type=st.just("placeholder"),
    status=st.sampled_from(["True", "False"]),
    reason=st.sampled_from(["ProbeSucceeded", "ProbeFailed"]),
    message=st.sampled_from(["", "up", "down"]),
)


@st.composite
def desired_pods(draw: st.DrawFn) -> DesiredPod:
    value = st.none() | st.sampled_from(VALUES)
    conds = draw(st.dictionaries(st.sampled_from(TYPES), st.none() | wanted_conditions))
    return DesiredPod(
        labels=draw(st.dictionaries(st.sampled_from(KEYS), value)),
        annotations=draw(st.dictionaries(st.sampled_from(KEYS), value)),
        conditions={
            t: None if c is None else DesiredCondition(t, c.status, c.reason, c.message)
            for t, c in conds.items()
        },
        record={},
        conflicts=(),
    )


def _check_map(before: dict[str, str], after: dict[str, str], want: Any) -> None:
    for key in before.keys() | after.keys():
        if key not in want:
            assert before.get(key) == after.get(key), key
    for key, value in want.items():
        assert after.get(key) == value, key


@SETTINGS
@given(pod=pods, want=desired_pods())
def test_patch_applies_is_idempotent_and_touches_only_our_keys(
    pod: dict[str, Any], want: DesiredPod
) -> None:
    ops = build_patch(pod=pod_view(pod_projection(pod)), desired=want, now=NOW)
    after = apply(pod, ops)
    assert build_patch(pod=pod_view(pod_projection(after)), desired=want, now=NOW) == []
    before_meta, after_meta = pod["metadata"], after["metadata"]
    _check_map(before_meta.get("labels", {}), after_meta.get("labels", {}), want.labels)
    _check_map(
        before_meta.get("annotations", {}), after_meta.get("annotations", {}), want.annotations
    )
    before_conds = pod["status"].get("conditions", [])
    after_conds = after["status"].get("conditions", [])
    # Conditions that are not ours are kept, in order, untouched.
    assert [c for c in after_conds if c["type"] not in want.conditions] == [
        c for c in pod["status"].get("conditions", []) if c["type"] not in want.conditions
    ]
    for type_, w in want.conditions.items():
        mine = [c for c in after_conds if c["type"] == type_]
        if w is None:
            assert mine == []
        else:
            (c,) = mine
            assert (c["status"], c["reason"], c.get("message", "")) == (
                w.status,
                w.reason,
                w.message,
            )
    if not ops:
        assert before_conds == after_conds


def _spec(data: st.DataObject, name: str) -> Any:
    draw = data.draw
    labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
    return spec(
        name=name,
        ok=draw(labels),
        bad=draw(labels),
        ok_annotations=draw(labels),
        bad_annotations=draw(labels),
        condition=draw(st.none() | st.sampled_from(TYPES)),
    )


owned = st.builds(
    Owned,
    state=st.sampled_from([S, F]),
    labels=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    annotations=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    condition=st.none() | st.sampled_from(TYPES),
)


def _cycle_inputs(data: st.DataObject, pod: dict[str, Any]) -> dict[str, Any]:
    """A record on `pod`, decided results, live owners (some with a spec that wants
    keys), frozen markers: the arguments of desired_state but the pod."""
    record = data.draw(st.dictionaries(st.sampled_from(OWNERS), owned, max_size=3))
    text = render_record({owner(k): v for k, v in record.items()}, pod_uid=UID)
    if text is not None:
        pod["metadata"].setdefault("annotations", {})[OWNED_KEY] = text
    results = [
        decided(
            o,
            data.draw(st.sampled_from([S, F])),
            _spec(data, o),
            data.draw(st.sampled_from(["", "up"])),
        )
        for o in data.draw(st.lists(st.sampled_from(OWNERS), unique=True))
    ]
    live = {
        owner(o): data.draw(st.none() | st.just(_spec(data, o)))
        for o in data.draw(st.lists(st.sampled_from(OWNERS), unique=True))
    }
    held = data.draw(st.lists(st.sampled_from(["a", "b"]), unique=True))
    return {"decided": results, "live": live, "frozen_markers": held}


@SETTINGS
@given(data=st.data(), pod=pods)
def test_desired_state_cycle_is_steady(data: st.DataObject, pod: dict[str, Any]) -> None:
    """Compute, patch, apply; computing again on the patched pod writes nothing; and
    the record names only keys that hold the recorded value afterwards."""
    inputs = _cycle_inputs(data, pod)
    first = desired_state(pod=pod_view(pod_projection(pod)), **inputs)
    after = apply(pod, build_patch(pod=pod_view(pod_projection(pod)), desired=first, now=NOW))
    second = desired_state(pod=pod_view(pod_projection(after)), **inputs)
    assert second.record == first.record
    assert build_patch(pod=pod_view(pod_projection(after)), desired=second, now=NOW) == []
    _assert_record_is_true(after)
    # Keys nobody recorded or set are never touched.
    touched = set(first.labels)
    for key in pod["metadata"].get("labels", {}).keys() - touched:
        assert after["metadata"]["labels"][key] == pod["metadata"]["labels"][key]


def _assert_record_is_true(pod: dict[str, Any]) -> None:
    """Every key the pod's record names holds the value recorded for it."""
    labels = pod["metadata"].get("labels") or {}
    annotations = pod["metadata"].get("annotations") or {}
    # (KEYS has one the daemon can never have written, "x~y": parsing drops its entry.)
    record, _ = parse_record(annotations.get(OWNED_KEY), pod_uid=UID)
    for owned_entry in record.values():
        for key, token in owned_entry.labels.items():
            assert still_ours(labels.get(key), token), key
        for key, token in owned_entry.annotations.items():
            assert still_ours(annotations.get(key), token), key


@SETTINGS
@given(data=st.data(), pod=pods, scope=st.sampled_from(list(Scope)))
def test_a_restricted_write_applies_is_steady_and_its_record_is_true(
    data: st.DataObject, pod: dict[str, Any], scope: Scope
) -> None:
    """What the writer sends after a refusal: it applies, changes a subset of what the
    full write changes, building it again on the result gives [], and the record
    written never names a key that does not hold its value."""
    inputs = _cycle_inputs(data, pod)
    before = pod_view(pod_projection(pod))
    full = desired_state(pod=before, **inputs)
    smaller = restrict(full, before, scope)
    after = apply(pod, build_patch(pod=before, desired=smaller, now=NOW))
    assert build_patch(
        pod=pod_view(pod_projection(after)), desired=restrict(full, before, scope), now=NOW
    ) == (build_patch(pod=pod_view(pod_projection(after)), desired=smaller, now=NOW))
    assert build_patch(pod=pod_view(pod_projection(after)), desired=smaller, now=NOW) == []
    full_changes = changes_of(before, full)
    for part, keys in changes_of(before, smaller).items():
        assert set(keys) <= set(full_changes.get(part, ())), part
    if scope >= Scope.NO_ANNOTATIONS:
        assert after["metadata"].get("annotations") == pod["metadata"].get("annotations")
    if scope is Scope.CONDITIONS_ONLY:
        assert after["metadata"].get("labels") == pod["metadata"].get("labels")
    if scope <= Scope.NO_NEW_ANNOTATIONS:
        _assert_record_is_true(after)
