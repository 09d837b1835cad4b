"""Due-time arithmetic: the spread offset, the first run, the next run and missed slots."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from probemarker.schedule.timing import first_due, next_due, spread_offset

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


def test_offset_is_stable_across_processes() -> None:
    # hash() of a str differs between processes (PYTHONHASHSEED); ours must not.
    code = (
        "from probemarker.schedule.timing import spread_offset;"
        f"print(repr(spread_offset({IDENTITY!r}, 10.0)))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        ).stdout
        assert float(out) == spread_offset(IDENTITY, 10.0)


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


@pytest.mark.parametrize("now", [0.0, 3.3, 1234.5678, 1e9 + 0.1])
def test_first_due_keeps_the_phase_after_a_restart(now: float) -> None:
    period = 10.0
    due = first_due(IDENTITY, period, now)
    assert now <= due < now + period
    periods = (due - spread_offset(IDENTITY, period)) / period
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
