"""The client-side rate limit of writes: a token bucket (QPS and burst), FIFO.

Stage: in front of every write the daemon sends. The daemon keeps two buckets: one for
status patches, one for event writes, so an event never delays a status write.
Input: `acquire()` calls. Output: each call returns when its token is granted.

The bucket holds at most `burst` tokens and refills at `qps` tokens per second, as
client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)` (golang.org/x/time/rate)
does: an idle daemon may send `burst` writes at once, then `qps` per second. A
client-side limit keeps one node's daemon from spending the API server's
priority-and-fairness share on a burst of probe results; 429s are the server's
limit, this is ours.

Invariants:
- over any interval of length T, at most `burst + qps * T` tokens are granted;
- waiters are served in arrival order (FIFO): a late caller never overtakes one
  already waiting, so no busy caller starves another;
- a cancelled waiter takes no token and leaves the queue, and the next one moves up;
- a token taken for a request that is not sent after all is given back (`refund`):
  a caller that takes its token before it knows what it sends (the writer takes it
  before it picks whose turn it is, so the turn goes to whoever waits when the
  budget has room) spends none on nothing;
- time comes only from the injected `Clock` (kit/clock.py: monotonic seconds, and its `sleep`), so
  tests drive it with a fake clock and assert nothing about wall-clock time.

The arithmetic is pure (`refill`, `delay_for_token`) and tested on its own.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass

from probemarker.kit.clock import MONOTONIC, Clock

__all__ = [
    "BucketState",
    "TokenBucket",
    "delay_for_token",
    "refill",
]


@dataclass(frozen=True, slots=True)
class BucketState:
    """`tokens` available at time `at` (monotonic seconds)."""

    tokens: float
    at: float


def refill(state: BucketState, *, now: float, qps: float, burst: int) -> BucketState:
    """The bucket at `now`: tokens grow by `qps` per elapsed second, capped at `burst`.

    A clock that went backwards (it should not: it is monotonic) adds nothing.
    """
    elapsed = max(0.0, now - state.at)
    return BucketState(tokens=min(float(burst), state.tokens + elapsed * qps), at=now)


# Rounding slack: after sleeping exactly the computed delay, the refill may come out at
# 0.9999999999 tokens; without the slack the waiter would sleep again for a delay too
# small to move a float clock at all, and spin.
_EPSILON = 1e-9


def delay_for_token(tokens: float, *, qps: float) -> float:
    """Seconds until one whole token is available, given `tokens` now (0.0 if one is)."""
    if tokens >= 1.0 - _EPSILON:
        return 0.0
    return (1.0 - tokens) / qps


class TokenBucket:
    """A token bucket for one kind of write; see the module docstring."""

    def __init__(self, *, qps: float, burst: int, clock: Clock = MONOTONIC) -> None:
        if not (qps > 0 and math.isfinite(qps)):
            raise ValueError(f"qps must be a positive number, not {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._state = BucketState(tokens=float(burst), at=clock.now())
        # Each waiter's future is set when it reaches the head of the queue.
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.granted = 0  # tokens handed out, for the metrics
        self.waited = 0  # of which after a wait

    def __repr__(self) -> str:
        return (
            f"TokenBucket(qps={self.qps}, burst={self.burst}, "
            f"tokens={self.tokens:.2f}, waiting={len(self._waiters)})"
        )

    @property
    def tokens(self) -> float:
        """Tokens available now (fractional)."""
        return refill(self._state, now=self._clock.now(), qps=self.qps, burst=self.burst).tokens

    @property
    def waiting(self) -> int:
        """Callers queued for a token."""
        return len(self._waiters)

    def _take(self) -> float:
        """Take a token if one is available now; else the seconds until one is."""
        self._state = refill(self._state, now=self._clock.now(), qps=self.qps, burst=self.burst)
        delay = delay_for_token(self._state.tokens, qps=self.qps)
        if delay == 0.0:
            self._state = BucketState(tokens=self._state.tokens - 1.0, at=self._state.at)
            self.granted += 1
        return delay

    def refund(self) -> None:
        """Give back a token taken by `acquire` for a request that was not sent."""
        self._state = refill(self._state, now=self._clock.now(), qps=self.qps, burst=self.burst)
        tokens = min(float(self.burst), self._state.tokens + 1.0)
        self._state = BucketState(tokens=tokens, at=self._state.at)
        self.granted -= 1

    async def acquire(self) -> None:
        """Wait for a token, behind every caller already waiting (FIFO)."""
        if not self._waiters and self._take() == 0.0:
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:
            if self._waiters[0] is not turn:
                await turn
            while (delay := self._take()) > 0.0:
                await self._clock.sleep(delay)
            self.waited += 1
        finally:
            # Leave the queue (granted or cancelled) and hand the head to the next one.
            self._waiters.remove(turn)
            if self._waiters and not self._waiters[0].done():
                self._waiters[0].set_result(None)
