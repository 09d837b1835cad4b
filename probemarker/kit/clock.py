"""Time as the daemon reads it: a monotonic clock and a sleep on the same time line,
and the wall clock as RFC 3339 text.

Stage: ground floor (pure values and the real clock). Every timing rule of the daemon
(the write budget, the informer's backoff, the schedule, the holds, health) takes a
`Clock`, so tests drive it with a fake one (tests/fakes.py) and assert nothing about
wall-clock time; k8s.io/utils/clock plays this part for client-go.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["MONOTONIC", "Clock", "MonotonicClock", "rfc3339_now"]


class Clock(Protocol):
    """Monotonic time in seconds, and a sleep on the same time line."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: `time.monotonic()` and `asyncio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "MonotonicClock()"


MONOTONIC = MonotonicClock()


def rfc3339_now() -> str:
    """The wall clock now, to the second, as the API server writes times
    (`lastTransitionTime`, `lastProbeTime`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
