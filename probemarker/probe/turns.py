"""Turns: one run at a time per key, the others waiting in order (FIFO).

Stage: probe (owned by probe/holds.py, `CommandHolds.turn`). Input: `turn(key)`, an
async context entered around a run. Output: nothing but the waiting: a second `turn`
of a key waits until the first has left. The api exec handler takes a turn for each
run of a command in a container, so that two probes with the same argv on the same
container never run it at once (issue 40): the second waits for the first run to end,
then finds the command held if it outlived that run.

Invariant: a key is kept only while a run holds its turn or waits for one, so what is
kept is bounded by the runs in progress and waiting (the dispatcher's slots).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Turns"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Turn:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # the run that holds it and those waiting


class Turns(Generic[K]):
    """See the module docstring."""

    def __init__(self) -> None:
        self._turns: dict[K, _Turn] = {}

    def __len__(self) -> int:
        """Keys whose turn is held or waited for."""
        return len(self._turns)

    @contextlib.asynccontextmanager
    async def turn(self, key: K) -> AsyncIterator[None]:
        """Wait for `key`'s earlier turns to end, then hold it until the block ends."""
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = _Turn()
        turn.users += 1
        try:
            async with turn.lock:
                yield
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[key]
