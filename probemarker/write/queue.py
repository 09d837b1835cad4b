"""The writer's queue: when each pod is flushed next, and whose turn it is.

Stage: write (no I/O; time only from the injected clock). Input: marks (a pod's
desired state may have changed), flushes asked for at a time (`at`: a deferred
message, the end of a clean-up delay or of a smaller patch's backoff), deferrals (a pod
backing off after an error), and the start and end of each flush. Output: the next
pod to flush when the write budget has room (`pop_next`), and when the next one is
due (`next_due`).

Rules:
- coalescing: a mark is due `coalesce` seconds after it; an earlier due stands, so
  results arriving together become one flush;
- a deferred pod is due no sooner than its deferral ends, whatever the marks;
- one flush per pod at a time: a mark during a flush makes the pod due again as soon
  as it ends, and a flush asked for at a time during a flush is booked when it ends;
- fair by namespace (docs/security.md): a pod that is due waits in its namespace's line
  (`kit/fairqueue.py`, the flow given at its first mark), and the lines take turns,
  one flush each, whenever the writer has a token of the write budget and a slot.
  With N namespaces waiting, each gets at least one flush in every N: a due pod waits
  for the pods of its own namespace due before it, each followed by at most one of
  every other namespace, never for every pod another namespace has due;
- `finish_now`: at shutdown every marked pod is due at once, deferrals are lifted and
  later flushes are no longer booked.

Invariants: a pod is due at most once (a heap entry superseded by a sooner one is
skipped when it surfaces) and in its namespace's line at most once; `pop_next` hands
out each pod once until `done`; the lines hold only pods that are due.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from probemarker.kit.clock import Clock
from probemarker.kit.fairqueue import FairQueue
from probemarker.write.pending import FlushState

__all__ = ["FlushQueue"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry:
    flow: str  # the pod's namespace: whose turn its flush takes
    due: float | None = None  # when the pending flush is due
    lined: bool = False  # due, and in its namespace's line
    flushing: bool = False
    again: bool = False  # marked while flushing
    later: float | None = None  # a flush asked for at this time while flushing
    deferred_until: float = 0.0


class FlushQueue(Generic[K]):
    """See the module docstring."""

    def __init__(self, *, clock: Clock, coalesce: float) -> None:
        self._clock = clock
        self._coalesce = coalesce
        self._entries: dict[K, _Entry] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._lines: FairQueue[str, K] = FairQueue()  # due pods, by namespace
        self._seq = 0
        self._final = False

    def __repr__(self) -> str:
        return (
            f"FlushQueue(pods={len(self._entries)}, waiting={self.waiting}, "
            f"lined={len(self._lines)})"
        )

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def waiting(self) -> int:
        """Pods with a flush pending (due, or marked while flushing)."""
        return sum(1 for e in self._entries.values() if e.due is not None or e.again)

    @property
    def busy(self) -> bool:
        """Any pod pending or being flushed."""
        return any(e.due is not None or e.flushing or e.again for e in self._entries.values())

    def state(self, key: K) -> FlushState | None:
        """Where `key` stands (a copy), or None when it is not queued; for `status`."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        return FlushState(entry.due, entry.flushing or entry.again, entry.deferred_until)

    def lined(self) -> dict[str, int]:
        """Pods due and waiting for their turn, by namespace (namespaces with none are
        not listed); for the metrics."""
        self._line_due()
        return self._lines.depths()

    def mark(self, key: K, *, flow: str = "") -> bool:
        """A change: flush after the coalescing window. True when a sooner due was booked
        (the caller wakes whoever sleeps until the next due). `flow`: the pod's
        namespace, taken at its first mark (a pod never changes namespace)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(flow)
        if entry.flushing:
            entry.again = True
            return False
        return self._book(key, entry, self._clock.now() + self._coalesce)

    def at(self, key: K, when: float) -> bool:
        """A flush at `when` (or sooner if one is due sooner); booked when the pod's
        current flush ends if it is being flushed. Ignored after `finish_now`."""
        entry = self._entries.get(key)
        if entry is None or self._final:
            return False
        if entry.flushing:
            entry.later = when if entry.later is None else min(entry.later, when)
            return False
        return self._book(key, entry, when)

    def defer(self, key: K, until: float) -> None:
        """No flush of `key` before `until` (0: no deferral)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.deferred_until = until

    def forget(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.lined:
            self._lines.remove(entry.flow, key)

    def has_due(self) -> bool:
        """Whether a pod is due now (it waits for its turn)."""
        self._line_due()
        return len(self._lines) > 0

    def pop_next(self) -> K | None:
        """The next namespace's first pod due, now being flushed; None when none is due.
        Call it when a flush can start at once (a token of the budget is in hand), so
        the turn goes to whoever waits at that moment."""
        self._line_due()
        popped = self._lines.pop()
        if popped is None:
            return None
        key = popped[1]
        entry = self._entries[key]
        entry.due, entry.lined, entry.flushing = None, False, True
        return key

    def pop_due(self) -> list[K]:
        """Every pod due now, in turn order, each now being flushed (tests, tools)."""
        due = []
        while (key := self.pop_next()) is not None:
            due.append(key)
        return due

    def _line_due(self) -> None:
        """Move the pods whose due has come into their namespaces' lines."""
        now = self._clock.now()
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            entry = self._entries.get(key)
            if entry is None or entry.due != at or entry.lined:
                continue  # superseded by a sooner due, or forgotten
            entry.lined = True
            self._lines.push(entry.flow, key)

    def next_due(self) -> float | None:
        """When the earliest pending flush is due (perhaps a superseded one: waking
        early costs one empty `pop_due`), or None."""
        return self._heap[0][0] if self._heap else None

    def done(self, key: K) -> bool:
        """`key`'s flush ended: book what was asked for meanwhile. True when booked."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        entry.flushing = False
        booked = False
        if entry.again:
            entry.again = False
            booked = self._book(key, entry, self._clock.now() + self._coalesce)
        if entry.later is not None:
            when, entry.later = entry.later, None
            booked = (not self._final and self._book(key, entry, when)) or booked
        return booked

    def finish_now(self) -> None:
        """Shutdown: every pod with a pending flush is due now; no deferral, nothing later."""
        self._final = True
        now = self._clock.now()
        for key, entry in self._entries.items():
            entry.deferred_until = 0.0
            entry.later = None
            if entry.due is not None and not entry.lined:
                entry.due = None
                self._book(key, entry, now)

    def _book(self, key: K, entry: _Entry, due: float) -> bool:
        due = max(due, entry.deferred_until)
        if entry.lined or (entry.due is not None and entry.due <= due):
            return False
        entry.due = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))
        return True
