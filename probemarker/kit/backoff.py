"""Capped exponential backoff with jitter, as client-go's reflector waits between failures.

Stage: used by the informer between a failed list or watch and the next attempt.
Input: the settings (`BackoffSettings`), a random number per step. Output: delays.

client-go's reflector uses `wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0,
1.0)`: start at 0.8 s, double each failure, up to 30 s, add up to 100 % random
jitter so that many clients failing at once (every node's daemon when the API
server restarts) do not come back in lock step. Here the jitter is added before
the cap, so no delay ever exceeds `maximum`.

Invariants: pure arithmetic (`backoff_delay`); `Backoff` only counts failures and
takes its randomness from the injected `random.Random`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffSettings", "backoff_delay"]


@dataclass(frozen=True, slots=True)
class BackoffSettings:
    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0  # up to +100 % of the delay, at random

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if self.factor < 1 or self.jitter < 0:
            raise ValueError("backoff needs factor >= 1 and jitter >= 0")


def backoff_delay(failures: int, *, settings: BackoffSettings, rand: float) -> float:
    """The delay after the `failures`-th failure in a row (1 = the first); `rand` in [0, 1)."""
    if failures < 1:
        return 0.0
    base = settings.initial * settings.factor ** min(failures - 1, 64)
    return min(settings.maximum, min(base, settings.maximum) * (1.0 + settings.jitter * rand))


class Backoff:
    """Failures in a row and the delay they earn; `reset()` after a success."""

    def __init__(self, settings: BackoffSettings, *, rng: random.Random) -> None:
        self.settings = settings
        self._rng = rng
        self.failures = 0

    def __repr__(self) -> str:
        return f"Backoff(failures={self.failures})"

    def next_delay(self, *, at_least: float = 0.0) -> float:
        """Count a failure and return how long to wait (never less than `at_least`,
        e.g. a 429's Retry-After)."""
        self.failures += 1
        delay = backoff_delay(self.failures, settings=self.settings, rand=self._rng.random())
        return max(delay, at_least)

    def reset(self) -> None:
        self.failures = 0
