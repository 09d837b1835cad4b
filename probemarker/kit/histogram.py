"""A histogram as plain data: fixed bucket bounds, a count per bucket, a sum.

Stage: observation (pure). Input: observed values (seconds). Output: what the
Prometheus exposition of a histogram needs: cumulative counts per upper bound
(`cumulative`), the sum and the count. The engine keeps one per probe kind in its
stats; the metrics collector reads them at scrape time, so the engine never imports
the metrics library and a test reads the numbers directly.

Invariants: the bounds are sorted, finite and fixed for the histogram's life; a value
lands in the first bucket whose bound is >= it (Prometheus' `le`), or in +Inf.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["PROBE_DURATION_BUCKETS", "Histogram"]

# Prometheus' default buckets (client_golang DefBuckets, which the kubelet's
# prober_probe_duration_seconds uses), and 30 s and 60 s for slow exec probes whose
# timeoutSeconds is above 10.
PROBE_DURATION_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


@dataclass(slots=True)
class Histogram:
    """Counts of observed values by bucket; see the module docstring."""

    bounds: tuple[float, ...] = PROBE_DURATION_BUCKETS
    counts: list[int] = field(default_factory=list)  # one per bound, then +Inf
    sum: float = 0.0

    def __post_init__(self) -> None:
        if list(self.bounds) != sorted(set(self.bounds)) or not all(
            math.isfinite(b) for b in self.bounds
        ):
            raise ValueError(f"bucket bounds must be finite and increasing: {self.bounds}")
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> Sequence[tuple[float, int]]:
        """(upper bound, values <= it) for every bound, and (inf, all of them)."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out
