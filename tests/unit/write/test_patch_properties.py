"""Properties, by applying patches with the sim's JSON patch (evanphx semantics):
a built patch always applies, the pod then matches (building again gives []), only
our keys and conditions change; and a whole cycle through desired_state is steady."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probemarker.pods import pod_view
from probemarker.write.desired import DesiredCondition, DesiredPod, desired_state
from probemarker.write.ownership import OWNED_KEY, Owned, render_record
from probemarker.write.patch import build_patch
from tests.unit.write.helpers import NOW, F, S, apply, decided, owner, raw_pod, spec

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
    ops = build_patch(pod=pod_view(pod), desired=want, now=NOW)
    after = apply(pod, ops)
    assert build_patch(pod=pod_view(after), desired=want, now=NOW) == []
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
    labels=st.frozensets(st.sampled_from(KEYS), max_size=2),
    annotations=st.frozensets(st.sampled_from(KEYS), max_size=2),
    condition=st.none() | st.sampled_from(TYPES),
)


@SETTINGS
@given(data=st.data(), pod=pods)
def test_desired_state_cycle_is_steady(data: st.DataObject, pod: dict[str, Any]) -> None:
    """Compute, patch, apply; computing again on the patched pod writes nothing."""
    record = data.draw(st.dictionaries(st.sampled_from(OWNERS), owned, max_size=3))
    text = render_record({owner(k): v for k, v in record.items()})
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
    live = [owner(o) for o in data.draw(st.lists(st.sampled_from(OWNERS), unique=True))]
    first = desired_state(pod=pod_view(pod), decided=results, live=live)
    after = apply(pod, build_patch(pod=pod_view(pod), desired=first, now=NOW))
    second = desired_state(pod=pod_view(after), decided=results, live=live)
    assert second.record == first.record
    assert build_patch(pod=pod_view(after), desired=second, now=NOW) == []
    # Keys nobody recorded or set are never touched.
    touched = set(first.labels)
    for key in pod["metadata"].get("labels", {}).keys() - touched:
        assert after["metadata"]["labels"][key] == pod["metadata"]["labels"][key]
