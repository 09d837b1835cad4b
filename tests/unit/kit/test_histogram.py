"""kit/histogram.py: Prometheus' `le` buckets as plain data."""

from __future__ import annotations

import math

import pytest

from probemarker.kit.histogram import PROBE_DURATION_BUCKETS, Histogram


@pytest.mark.parametrize(
    ("values", "cumulative"),
    [
        pytest.param([], [0, 0, 0], id="empty"),
        pytest.param([0.0], [1, 1, 1], id="zero"),
        pytest.param([1.0], [1, 1, 1], id="on-a-bound-is-le"),
        pytest.param([1.0000001], [0, 1, 1], id="just-above"),
        pytest.param([2.0, 5.0], [0, 1, 2], id="last-bound-and-above"),
    ],
)
def test_cumulative_counts(values: list[float], cumulative: list[int]) -> None:
    histogram = Histogram(bounds=(1.0, 2.0))
    for value in values:
        histogram.observe(value)
    assert histogram.cumulative() == list(zip((1.0, 2.0, math.inf), cumulative, strict=True))
    assert histogram.count == len(values)
    assert histogram.sum == pytest.approx(sum(values))


@pytest.mark.parametrize("bounds", [(2.0, 1.0), (1.0, 1.0), (1.0, math.inf), (math.nan,)])
def test_bounds_must_increase_and_be_finite(bounds: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="finite and increasing"):
        Histogram(bounds=bounds)


def test_probe_buckets_are_prometheus_defaults_and_more() -> None:
    defaults = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
    assert PROBE_DURATION_BUCKETS[: len(defaults)] == defaults
    assert PROBE_DURATION_BUCKETS[-1] == 60.0
