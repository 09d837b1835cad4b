"""Reads that must be "not older than" a resourceVersion the store has not reached yet.

:class:`FreshWaiters` is watchCache.waitUntilFreshAndBlock: a read for a version newer
than the store's waits until a write reaches it, or answers 504 ``Too large resource
version`` after the wait (with ``within=0``: at once and without a retry hint, as
etcd3's validateMinimumResourceVersion answers). The store calls :meth:`release` after
every write.

Invariants: a waiter is forgotten when its wait ends, however it ends; single-threaded
asyncio, no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from probemarker.sim.errors import TooLargeResourceVersion

__all__ = ["FreshWaiters"]


class FreshWaiters:
    """The reads waiting for the store (whose version ``current_rv`` tells) to catch up."""

    def __init__(self, current_rv: Callable[[], int]) -> None:
        self._current_rv = current_rv
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def __repr__(self) -> str:
        return f"FreshWaiters(waiting={len(self._waiters)})"

    async def wait(self, rv: int, *, within: float | None, default: float) -> None:
        """Wait until the store reached ``rv``, at most ``within`` seconds (``default``
        when None), else 504 Too large resource version."""
        if rv <= self._current_rv():
            return
        if within is not None and within <= 0:
            raise TooLargeResourceVersion(rv, self._current_rv(), retry_after=0)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((rv, waiter))
        try:
            await asyncio.wait_for(asyncio.shield(waiter), default if within is None else within)
        except TimeoutError:
            raise TooLargeResourceVersion(rv, self._current_rv()) from None
        finally:
            if (rv, waiter) in self._waiters:
                self._waiters.remove((rv, waiter))

    def release(self) -> None:
        """Wake the waiters whose version the store has now reached."""
        if self._waiters:
            for rv, waiter in self._waiters:
                if rv <= self._current_rv() and not waiter.done():
                    waiter.set_result(None)
