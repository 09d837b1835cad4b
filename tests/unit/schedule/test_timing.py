"""Due-time arithmetic: the spread offset, the first run, the next run and missed slots."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from probemarker.schedule.timing import first_due, next_due, phases, spread_offset, step_problem

IDENTITY = "default/web#ready@0b7c6a52-uid/app"


@pytest.mark.parametrize(
    "period",
    [
        pytest.param(10.0, id="default-period"),
        pytest.param(1.0, id="one-second"),
        pytest.param(0.001, id="tiny"),
        pytest.param(86400.0, id="a-day"),
    ],
)
def test_offset_within_period(period: float) -> None:
    offsets = [spread_offset(f"{IDENTITY}-{i}", period) for i in range(200)]
    assert all(0.0 <= offset < period for offset in offsets)
    assert len(set(offsets)) == 200
    stepped = [spread_offset(f"{IDENTITY}-{i}", period, 0.25) for i in range(200)]
    assert all(0.0 <= offset < period for offset in stepped)


@pytest.mark.parametrize("step", [0.0, 0.25])
def test_offset_is_stable_across_processes(step: float) -> None:
    # hash() of a str differs between processes (PYTHONHASHSEED); ours must not.
    code = (
        "from probemarker.schedule.timing import spread_offset;"
        f"print(repr(spread_offset({IDENTITY!r}, 10.0, {step!r})))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        ).stdout
        assert float(out) == spread_offset(IDENTITY, 10.0, step)


def test_offsets_spread_evenly() -> None:
    # 10,000 probes with period 10 s: each second of the period gets about a tenth.
    buckets = [0] * 10
    for i in range(10_000):
        buckets[int(spread_offset(f"ns/pod-{i}#probe@uid-{i}/c", 10.0))] += 1
    assert all(900 <= count <= 1100 for count in buckets), buckets


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param(0.0, 0.0, id="at-origin"),
        pytest.param(1000.0, 1000.0, id="on-grid"),
        pytest.param(1000.5, 1010.0, id="just-after-grid"),
        pytest.param(1009.999, 1010.0, id="just-before-grid"),
        pytest.param(-15.0, -10.0, id="negative-time"),
    ],
)
def test_first_due_on_the_probes_grid(now: float, expected: float) -> None:
    offset = spread_offset(IDENTITY, 10.0)
    assert first_due(IDENTITY, 10.0, now + offset) == pytest.approx(expected + offset)


@pytest.mark.parametrize("step", [0.0, 0.25])
@pytest.mark.parametrize("now", [0.0, 3.3, 1234.5678, 1e9 + 0.1])
def test_first_due_keeps_the_phase_after_a_restart(now: float, step: float) -> None:
    period = 10.0
    due = first_due(IDENTITY, period, now, step)
    assert now <= due < now + period
    periods = (due - spread_offset(IDENTITY, period, step)) / period
    assert periods == pytest.approx(round(periods), abs=1e-6)


@pytest.mark.parametrize(
    ("previous", "period", "now", "expected", "missed"),
    [
        pytest.param(100.0, 10.0, 100.0, 110.0, 0, id="on-time"),
        pytest.param(100.0, 10.0, 105.0, 110.0, 0, id="run-took-half-the-period"),
        pytest.param(100.0, 10.0, 110.0, 110.0, 0, id="next-due-exactly-now"),
        pytest.param(100.0, 10.0, 110.5, 120.0, 1, id="overran-one-slot"),
        pytest.param(100.0, 10.0, 125.0, 130.0, 2, id="overran-two-slots"),
        pytest.param(100.0, 10.0, 130.0, 130.0, 2, id="lands-on-a-slot"),
        pytest.param(100.0, 10.0, 90.0, 110.0, 0, id="clock-before-previous-due"),
        pytest.param(100.0, 5.0, 100.0, 105.0, 0, id="period-changed-applies-from-next"),
        pytest.param(0.1, 0.1, 0.7, 0.7, 5, id="float-grid"),
    ],
)
def test_next_due(previous: float, period: float, now: float, expected: float, missed: int) -> None:
    due, skipped = next_due(previous, period, now)
    assert due == pytest.approx(expected)
    assert skipped == missed
    assert due >= now


@pytest.mark.parametrize("period", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_period(period: float) -> None:
    with pytest.raises(ValueError, match="period"):
        spread_offset(IDENTITY, period)
    with pytest.raises(ValueError, match="period"):
        next_due(0.0, period, 1.0)


@pytest.mark.parametrize(
    ("period", "step", "expected"),
    [
        pytest.param(1.0, 0.25, 4, id="one-second-quarters"),
        pytest.param(10.0, 0.25, 40, id="ten-seconds"),
        pytest.param(3.0, 0.1, 30, id="float-rounding-of-3-by-0.1"),
        pytest.param(1.0, 0.5, 2, id="the-longest-step-keeps-two"),
        pytest.param(86400.0, 0.25, 345_600, id="a-day"),
        pytest.param(0.001, 0.25, 1, id="period-shorter-than-the-step"),
        pytest.param(10.0, 0.0, 0, id="no-steps"),
    ],
)
def test_phases(period: float, step: float, expected: int) -> None:
    assert phases(period, step) == expected


@pytest.mark.parametrize(
    ("period", "step"), [(1.0, 0.25), (10.0, 0.25), (3.0, 0.1), (7.0, 0.5), (2.0, 0.001)]
)
def test_stepped_offsets_are_multiples_of_the_step_and_take_every_phase(
    period: float, step: float
) -> None:
    count = phases(period, step)
    offsets = [spread_offset(f"ns/pod-{i}#probe@uid-{i}/c", period, step) for i in range(20_000)]
    assert all(0.0 <= offset < period for offset in offsets)
    steps = {round(offset / step) for offset in offsets}
    assert all(offset == pytest.approx(round(offset / step) * step, abs=1e-9) for offset in offsets)
    if count <= 100:
        assert steps == set(range(count))  # every phase used, and no other moment


def test_stepped_offsets_spread_evenly_over_the_phases() -> None:
    # 10,000 probes with period 1 s in 4 phases: each phase gets about a quarter.
    counts = Counter(spread_offset(f"ns/pod-{i}#probe@uid-{i}/c", 1.0, 0.25) for i in range(10_000))
    assert sorted(counts) == [0.0, 0.25, 0.5, 0.75]
    assert all(2_300 <= n <= 2_700 for n in counts.values()), counts


def test_a_stepped_phase_is_the_unstepped_one_rounded_down() -> None:
    # The same hash decides both: a probe keeps the phase it had, rounded to its step.
    for i in range(500):
        identity = f"ns/pod-{i}#probe@uid-{i}/c"
        free, stepped = spread_offset(identity, 10.0), spread_offset(identity, 10.0, 0.25)
        assert stepped <= free < stepped + 0.25


def test_stepped_first_dues_of_different_periods_share_one_grid() -> None:
    # Dues lie on the step's grid whatever the whole-second period, so runs of 1, 7 and
    # 10 s probes come due together: 3,000 probes' dues fall on 4 moments a second.
    now = 1000.0
    dues = [
        first_due(f"ns/pod-{i}#probe@uid-{i}/c", float((1, 7, 10)[i % 3]), now, 0.25)
        for i in range(3_000)
    ]
    assert all(now <= due < now + 10 for due in dues)
    assert {(due - now) % 0.25 for due in dues} == {0.0}
    assert {due % 1 for due in dues} == {0.0, 0.25, 0.5, 0.75}


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        pytest.param(-0.25, "from 0.001 to 0.5", id="negative"),
        pytest.param(float("inf"), "from 0.001 to 0.5", id="inf"),
        pytest.param(float("nan"), "from 0.001 to 0.5", id="nan"),
        pytest.param(1.0, "from 0.001 to 0.5", id="a-whole-second"),
        pytest.param(5e-324, "from 0.001 to 0.5", id="denormal"),
        pytest.param(0.3, "whole steps", id="not-dividing-a-second"),
        pytest.param(0.4, "whole steps", id="two-and-a-half-a-second"),
    ],
)
def test_bad_step(step: float, problem: str) -> None:
    assert problem in step_problem(step)
    with pytest.raises(ValueError, match="step"):
        spread_offset(IDENTITY, 10.0, step)


@pytest.mark.parametrize("step", [0.0, 0.5, 0.25, 0.2, 0.1, 0.05, 1 / 3, 0.001])
def test_good_steps(step: float) -> None:
    assert step_problem(step) == ""
