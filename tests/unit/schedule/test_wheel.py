"""The timer wheel: add, cancel, replace, pop order, entries beyond one revolution,
`next_deadline` never late; and a property test against a sorted reference model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probemarker.schedule.wheel import TimerWheel

START = 1000.0


def wheel(*, tick: float = 1.0, slots: int = 8) -> TimerWheel[str]:
    """A small wheel (one revolution = 8 s), so tests cross revolutions cheaply."""
    return TimerWheel(tick=tick, slots=slots, start=START)


def test_add_cancel_contains_len() -> None:
    w = wheel()
    w.add("a", START + 3)
    w.add("b", START + 5)
    assert len(w) == 2
    assert "a" in w
    assert "c" not in w
    assert w.due("a") == START + 3
    assert w.due("c") is None
    assert w.cancel("a") is True
    assert w.cancel("a") is False
    assert "a" not in w
    assert len(w) == 1
    assert w.pop_due(START + 10) == [("b", START + 5)]
    assert len(w) == 0


def test_add_replaces_the_entry_of_the_key() -> None:
    w = wheel()
    w.add("a", START + 2)
    w.add("a", START + 30)  # another slot, another revolution
    assert len(w) == 1
    assert w.due("a") == START + 30
    assert w.pop_due(START + 29) == []
    assert w.pop_due(START + 30) == [("a", START + 30)]


@pytest.mark.parametrize(
    ("dues", "now", "popped", "left"),
    [
        pytest.param({"a": 1.5, "b": 0.5, "c": 3.0}, 2.0, ["b", "a"], {"c"}, id="sorted-by-due"),
        pytest.param({"a": 2.0}, 2.0, ["a"], set(), id="due-equal-to-now-pops"),
        pytest.param({"a": 2.25, "b": 2.75}, 2.5, ["a"], {"b"}, id="same-tick-later-stays"),
        pytest.param(
            {"a": 1.0, "b": 9.5, "c": 17.0}, 9.5, ["a", "b"], {"c"}, id="revolution-apart"
        ),
        pytest.param({"a": 5.0, "b": 30.0}, 100.0, ["a", "b"], set(), id="slept-many-revolutions"),
        pytest.param({"a": 40.0}, 39.99, [], {"a"}, id="far-future-stays"),
        pytest.param({}, 10.0, [], set(), id="empty"),
    ],
)
def test_pop_due(dues: dict[str, float], now: float, popped: list[str], left: set[str]) -> None:
    w = wheel()
    for key, due in dues.items():
        w.add(key, START + due)
    assert w.pop_due(START + now) == [(key, START + dues[key]) for key in popped]
    assert {key for key in dues if key in w} == left


def test_far_future_entry_survives_revolutions_and_fires_on_time() -> None:
    w = wheel()
    w.add("far", START + 35.5)  # four revolutions out, slot 3
    w.add("near", START + 3.5)  # same slot, this revolution
    for step in range(1, 35):
        popped = w.pop_due(START + step)
        assert popped == ([("near", START + 3.5)] if step == 4 else [])
        deadline = w.next_deadline()
        assert deadline is not None
        assert START + step < deadline <= START + 35.5
    assert w.pop_due(START + 35.5) == [("far", START + 35.5)]
    assert w.next_deadline() is None


def test_entry_added_behind_the_cursor_pops_next() -> None:
    w = wheel()
    assert w.pop_due(START + 20) == []
    w.add("late", START + 4)  # its slot's tick is long past
    assert w.next_deadline() == START + 4
    assert w.pop_due(START + 20) == [("late", START + 4)]
    w.add("late", START + 4)
    assert w.cancel("late") is True
    assert w.pop_due(START + 21) == []


@pytest.mark.parametrize(
    ("dues", "now", "deadline"),
    [
        pytest.param([5.5, 2.25], 0.0, 2.25, id="exact-earliest"),
        pytest.param([2.25, 2.75], 2.5, 2.75, id="rest-of-current-tick"),
        pytest.param([30.0], 0.0, 7.0, id="only-far-wakes-within-a-revolution"),
        pytest.param([30.0, 6.0], 0.0, 6.0, id="far-and-near-in-one-revolution"),
        pytest.param([], 0.0, None, id="empty"),
    ],
)
def test_next_deadline(dues: list[float], now: float, deadline: float | None) -> None:
    w = wheel()
    for i, due in enumerate(dues):
        w.add(str(i), START + due)
    w.pop_due(START + now)
    assert w.next_deadline() == (None if deadline is None else START + deadline)


@pytest.mark.parametrize(
    ("tick", "t", "expected"),
    [
        pytest.param(1.0, 10.25, 11.0, id="inside-a-tick"),
        pytest.param(1.0, 10.0, 10.0, id="on-a-boundary"),
        pytest.param(1.0, -0.5, 0.0, id="before-start"),
        pytest.param(0.05, 0.3, 0.3, id="decimal-tick-on-boundary"),
        pytest.param(0.05, 0.31, 0.35, id="decimal-tick-inside"),
    ],
)
def test_boundary(tick: float, t: float, expected: float) -> None:
    boundary = wheel(tick=tick).boundary(START + t)
    assert boundary >= START + t
    assert boundary == pytest.approx(START + expected)


@given(t=st.floats(-1e6, 1e6), tick=st.sampled_from([0.05, 0.1, 0.3, 1.0, 7.0]))
@settings(max_examples=300, derandomize=True)
@example(t=-1.9, tick=0.05)  # the quotient rounds to just below -38: ceil says -37
def test_boundary_is_never_before_and_within_a_tick(t: float, tick: float) -> None:
    boundary = wheel(tick=tick).boundary(START + t)
    assert START + t <= boundary < START + t + tick


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"tick": 0.0}, "tick", id="zero-tick"),
        pytest.param({"tick": float("nan")}, "tick", id="nan-tick"),
        pytest.param({"slots": 1}, "slots", id="one-slot"),
        pytest.param({"start": float("inf")}, "start", id="infinite-start"),
    ],
)
def test_bad_arguments(kwargs: dict[str, float], message: str) -> None:
    arguments = {"tick": 1.0, "slots": 8, "start": START} | kwargs
    with pytest.raises(ValueError, match=message):
        TimerWheel(**arguments)  # type: ignore[arg-type]


def test_infinite_due_is_refused() -> None:
    with pytest.raises(ValueError, match="due"):
        wheel().add("a", float("inf"))


# --- property: the wheel agrees with a sorted reference model -------------------------

_KEYS = st.sampled_from("abcdefgh")
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), _KEYS, st.floats(-5.0, 60.0)),
        st.tuples(st.just("cancel"), _KEYS, st.just(0.0)),
        st.tuples(st.just("pop"), st.just(""), st.floats(0.0, 20.0)),
    ),
    max_size=60,
)


@settings(max_examples=300, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, tick=st.sampled_from([0.1, 0.5, 1.0, 3.0]))
def test_wheel_matches_reference(ops: list[tuple[str, str, float]], tick: float) -> None:
    w: TimerWheel[str] = TimerWheel(tick=tick, slots=8, start=START)
    model: dict[str, float] = {}
    now = START
    for op, key, value in ops:
        if op == "add":
            w.add(key, now + value)  # negative: behind the cursor
            model[key] = now + value
        elif op == "cancel":
            assert w.cancel(key) is (model.pop(key, None) is not None)
        else:
            now += value
            popped = w.pop_due(now)
            expected = sorted((d, k) for k, d in model.items() if d <= now)
            assert sorted((d, k) for k, d in popped) == expected
            assert [d for _, d in popped] == sorted(d for _, d in popped)
            for _, k in expected:
                del model[k]
        assert len(w) == len(model)
        assert all(w.due(k) == d for k, d in model.items())
        deadline = w.next_deadline()
        if not model:
            assert deadline is None
        else:
            assert deadline is not None
            assert deadline <= min(model.values())  # never late
            if min(model.values()) > now:
                assert deadline > now  # and never a wake-up with nothing to do
