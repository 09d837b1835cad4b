"""When a probe runs: its phase within the period, its first run and each next run.

Stage: schedule (pure; time comes in as arguments). Inputs: a probe's identity (its
`str(ProbeKey)`), its period and the clock's `now`. Outputs: due times on the probe's
grid, `offset + k * period`.

Every probe gets a fixed offset within its period from a hash of its identity, so the
probes of a node are spread evenly over the period and a restarted daemon does not fire
them all at once (the kubelet sleeps a random fraction of the period before a worker's
first run for the same reason; ours is derived, not random, so a restart keeps each
probe's phase on the same monotonic time line). The hash is blake2b, not `hash()`, whose
value changes from process to process.

A run that starts late never shifts the grid: the next run is due one period after the
previous due, not after the previous start. When that time has already passed (the run
overran the period, or the daemon was stalled), the missed slots are skipped, not run
back to back, and counted, like a kubelet ticker that drops the ticks its receiver was
too slow for.

Invariants: offsets lie in [0, period); every due returned is >= now and on the grid of
the previous due (or of the offset).
"""

from __future__ import annotations

import hashlib
import math

__all__ = ["first_due", "next_due", "spread_offset"]

_HASH_BITS = 53  # a float holds 53 bits exactly: the fraction below is < 1.0 exactly


def _check_period(period: float) -> None:
    if not (period > 0 and math.isfinite(period)):
        raise ValueError(f"period must be a positive number of seconds, not {period!r}")


def spread_offset(identity: str, period: float) -> float:
    """The probe's phase within `period`, in [0, period), the same in every process."""
    _check_period(period)
    digest = hashlib.blake2b(identity.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    fraction = (int.from_bytes(digest, "big") >> (64 - _HASH_BITS)) / (1 << _HASH_BITS)
    offset = fraction * period
    # fraction < 1, but the product may still round up to `period` itself.
    return offset if offset < period else 0.0


def _grid_at_or_after(anchor: float, period: float, now: float) -> tuple[float, int]:
    """The first `anchor + k * period >= now` with k >= 0, and that k."""
    k = max(0, math.ceil((now - anchor) / period))
    due = anchor + k * period
    while due < now:  # float rounding may leave it a hair short
        k += 1
        due = anchor + k * period
    return due, k


def first_due(identity: str, period: float, now: float) -> float:
    """The first time t >= now with t = spread_offset(identity, period) mod period."""
    offset = spread_offset(identity, period)
    anchor = offset + math.floor((now - offset) / period) * period
    return _grid_at_or_after(anchor, period, now)[0]


def next_due(previous_due: float, period: float, now: float) -> tuple[float, int]:
    """The run after the one due at `previous_due`, and how many slots were missed.

    `previous_due + period` when that is not in the past; otherwise the first slot of
    the same grid at or after `now`, with the number of slots skipped on the way.
    """
    _check_period(period)
    due, k = _grid_at_or_after(previous_due, period, now)
    if k <= 1:
        return previous_due + period, 0
    return due, k - 1
