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

The offsets are spread in steps (`step`, --probe-phase-step-seconds, 0.25 s by default):
a period holds floor(period / step) evenly spaced phases (at least one), and every
probe takes one of them. A step is a whole fraction of a second (1/n s, at most 0.5 s:
`step_problem`), so for the whole-second periods of the API every phase is a multiple
of the step, and the probes of every period share one grid: the runs of a node come
due in groups, at most `1 / step` times a second, not each at a moment of its own, and
the daemon wakes once for a group. On an idle node a wake-up costs far more than a
run's own work (docs/engine.md, "CPU per run": bench/wakeups.py). A flip still waits
for the probe's next run, which is uniform over the period whatever its phase, so the
delay from a flip to its label is the same. Step 0 gives every probe a phase of its
own (the spread before issue 43). A 1 s period keeps at least two phases, so no step
fires every probe at once.

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

__all__ = ["MAX_STEP", "first_due", "next_due", "phases", "spread_offset", "step_problem"]

_HASH_BITS = 53  # a float holds 53 bits exactly: the fraction below is < 1.0 exactly


def _check_period(period: float) -> None:
    if not (period > 0 and math.isfinite(period)):
        raise ValueError(f"period must be a positive number of seconds, not {period!r}")


MAX_STEP = 0.5  # a 1 s period keeps two phases at least
_MIN_STEP = 0.001  # finer than the timer wheel's tick anyway


def step_problem(step: float) -> str:
    """Why `step` cannot be a phase step, or "": 0 (no steps), or a whole fraction of a
    second (1/n s) from 0.001 to 0.5 s."""
    if step == 0:
        return ""
    if not (math.isfinite(step) and _MIN_STEP <= step <= MAX_STEP):
        return f"must be 0, or from {_MIN_STEP:g} to {MAX_STEP:g} seconds"
    n = 1 / step
    if abs(n - round(n)) > 1e-9 * n:
        return (
            f"must divide a second into whole steps (1/n s: 0.5, 0.25, 0.2, 0.1, ...), not {step:g}"
        )
    return ""


def phases(period: float, step: float) -> int:
    """How many phases a period of `period` s holds in steps of `step` s (0: no steps,
    every probe its own phase; returned as 0)."""
    _check_period(period)
    if problem := step_problem(step):
        raise ValueError(f"step {problem}")
    # period / step is a whole number for whole-second periods, up to float rounding
    # (3 / 0.1 is 29.999999999999996).
    return 0 if step == 0 else max(1, math.floor(period / step + 1e-9))


def spread_offset(identity: str, period: float, step: float = 0.0) -> float:
    """The probe's phase within `period`, in [0, period), the same in every process: one
    of `phases(period, step)` evenly spaced ones (any, for step 0)."""
    count = phases(period, step)
    digest = hashlib.blake2b(identity.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    fraction = (int.from_bytes(digest, "big") >> (64 - _HASH_BITS)) / (1 << _HASH_BITS)
    if count:
        offset = min(math.floor(fraction * count), count - 1) * period / count
    else:
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


def first_due(identity: str, period: float, now: float, step: float = 0.0) -> float:
    """The first time t >= now with t = spread_offset(identity, period, step) mod period."""
    offset = spread_offset(identity, period, step)
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
