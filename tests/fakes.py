"""Hand-written fakes shared by the client layer's tests: a manual clock, and a helper
that lets other tasks run until a condition holds (event-loop turns, no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class FakeClock:
    """A manual clock: `sleep` waits until `advance` moves time past its deadline.

    With `auto=True`, `sleep(s)` moves time on by `s` itself and returns at once, so
    a loop of waiters runs through fake time as fast as the event loop allows.
    """

    def __init__(self, start: float = 1000.0, *, auto: bool = False) -> None:
        self.t = start
        self.auto = auto
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.auto:
            self.t += seconds
            await asyncio.sleep(0)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.t + seconds, done))
        try:
            await done
        finally:
            self._sleepers = [(at, f) for at, f in self._sleepers if f is not done]

    def advance(self, seconds: float) -> None:
        self.t += seconds
        for at, done in self._sleepers:
            if at <= self.t and not done.done():
                done.set_result(None)

    @property
    def sleeping(self) -> int:
        return len(self._sleepers)


async def until(condition: Callable[[], bool], *, turns: int = 200) -> None:
    """Let other tasks run (event-loop turns, no wall-clock sleep) until `condition`."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")
