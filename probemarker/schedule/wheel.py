"""A hashed timing wheel: keyed entries, each due at a time; O(1) add, cancel, replace.

Stage: schedule (pure data structure; no I/O, no clock of its own: time comes in as
arguments). Input: `add(key, due)` / `cancel(key)`; output: `pop_due(now)`, the entries
that have come due, and `next_deadline()`, how long the dispatcher may sleep.

Layout. Time is cut into ticks of `tick` seconds counted from `start`; tick number `n`
lives in slot `n % slots`. Each slot is a plain dict key -> due, and one more dict maps
every key to its due, so an entry costs two dict items and a float: no object per
entry, no task, no timer handle: 100,000 entries with period 10 s hold about 15 MB
once they have fired a few times (150 B each), where 100,000 sleeping asyncio tasks
hold about 150 MB (bench/wheel_bench.py).

Entries due further out than one revolution (`tick * slots` seconds, 51.2 s by default)
simply stay in their slot: every time the cursor passes the slot they are compared with
`now` and left in place. We compare the stored due instead of keeping a rounds counter,
because the due is stored anyway and a counter would need a per-entry object. The price
is one comparison per revolution for each such entry, and for the kubelet's default
period (10 s) there are none.

What one namespace can do to it (issue 40): the wheel holds one entry per probe on the
node, so a namespace adds (its pods on the node) x (its markers selecting them) x (their
probes, at most 32 a marker by the CRD) entries, about 150 B each; pods on a node are
bounded by its max-pods (110 by default), markers in a namespace only by a
ResourceQuota on `count/podprobemarkers.probemarker.io`. An entry never delays another:
each sits in the slot of its own due, `pop_due` returns every entry due whoever added
it, and what waits after that (the cap) is shared by namespace in the dispatcher. What
a namespace with very many probes does cost the others is the loop's time: `pop_due`
is one dict operation per entry due, and each run costs its own CPU.

Invariants:
- every entry in a slot has tick(due) >= the cursor (the tick of the last `pop_due`);
  an entry added with an earlier due goes to `_overdue`, which the next `pop_due`
  drains whole, so no entry is ever skipped by the cursor;
- `pop_due(now)` returns exactly the entries with due <= now, sorted by due;
- `next_deadline()` is never later than the earliest due (exact unless only entries
  beyond one revolution remain; then it is the start of the wheel's last tick);
  `boundary(t)` rounds it up to the tick grid, so a caller wakes once per tick.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["TimerWheel"]

K = TypeVar("K", bound=Hashable)


class TimerWheel(Generic[K]):
    """See the module docstring."""

    __slots__ = ("_cursor", "_due", "_overdue", "_slots", "slots", "start", "tick")

    def __init__(self, *, tick: float = 0.05, slots: int = 1024, start: float) -> None:
        if not (tick > 0 and math.isfinite(tick)):
            raise ValueError(f"tick must be a positive number, not {tick!r}")
        if slots < 2:
            raise ValueError(f"slots must be at least 2, not {slots!r}")
        if not math.isfinite(start):
            raise ValueError(f"start must be a finite time, not {start!r}")
        self.tick = tick
        self.slots = slots
        self.start = start
        self._slots: list[dict[K, float]] = [{} for _ in range(slots)]
        self._due: dict[K, float] = {}
        self._overdue: dict[K, float] = {}
        self._cursor = 0  # every tick before this one has been emptied of due entries

    def __repr__(self) -> str:
        return (
            f"TimerWheel(tick={self.tick}, slots={self.slots}, entries={len(self._due)}, "
            f"cursor={self._time_of(self._cursor):.3f})"
        )

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: object) -> bool:
        return key in self._due

    def due(self, key: K) -> float | None:
        """When `key` is due, or None if it has no entry."""
        return self._due.get(key)

    def _tick_of(self, t: float) -> int:
        return math.floor((t - self.start) / self.tick)

    def _time_of(self, n: int) -> float:
        return self.start + n * self.tick

    def boundary(self, t: float) -> float:
        """The first tick boundary at or after `t`.

        A caller that sleeps until `boundary(next_deadline())` and then pops takes every
        entry of that tick at once: one wake-up per tick, however many entries share it.
        """
        n = math.ceil((t - self.start) / self.tick)
        # The division may round across a boundary either way; `_time_of` decides.
        if self._time_of(n) < t:
            n += 1
        elif self._time_of(n - 1) >= t:
            n -= 1
        return self._time_of(n)

    def add(self, key: K, due: float) -> None:
        """Schedule `key` at `due`, replacing its entry if it has one. O(1)."""
        if not math.isfinite(due):
            raise ValueError(f"due must be a finite time, not {due!r}")
        if key in self._due:
            self.cancel(key)
        self._due[key] = due
        n = self._tick_of(due)
        if n < self._cursor:
            self._overdue[key] = due  # the cursor has passed its slot: due at the next pop
        else:
            self._slots[n % self.slots][key] = due

    def cancel(self, key: K) -> bool:
        """Remove `key`'s entry; False if it had none. O(1)."""
        due = self._due.pop(key, None)
        if due is None:
            return False
        # The slot is found again from the due; an entry that is not there was overdue.
        slot = self._slots[self._tick_of(due) % self.slots]
        if slot.pop(key, None) is None:
            del self._overdue[key]
        return True

    def pop_due(self, now: float) -> list[tuple[K, float]]:
        """Remove and return every entry with due <= now, sorted by due.

        Visits the slots from the cursor up to `now`'s tick (at most one revolution,
        however long the caller slept), so the cost is the ticks elapsed plus the
        entries in the visited slots.
        """
        fired = list(self._overdue.items())
        self._overdue.clear()
        target = max(self._tick_of(now), self._cursor)  # a clock never runs backwards
        for n in range(self._cursor, self._cursor + min(target - self._cursor + 1, self.slots)):
            slot = self._slots[n % self.slots]
            if not slot:
                continue
            ready = [(key, due) for key, due in slot.items() if due <= now]
            if len(ready) == len(slot):
                # The common case: a fresh dict, because an emptied one keeps its table,
                # and every slot would end up holding the table of its busiest tick.
                self._slots[n % self.slots] = {}
            else:
                for key, _ in ready:
                    del slot[key]
            fired.extend(ready)
        for key, _ in fired:
            del self._due[key]
        self._cursor = target
        fired.sort(key=_by_due)
        return fired

    def next_deadline(self) -> float | None:
        """A time at or before the earliest due entry (None when empty).

        Exact for entries within one revolution of the cursor. Cost: the empty slots
        from the cursor to the first slot holding an entry of this revolution, plus the
        entries of the slots looked at (one slot's worth, `len / slots`, in the common
        case); never a scan of every entry unless they all sit in a few slots.
        """
        if self._overdue:
            return min(self._overdue.values())  # only between an add and the next pop
        if not self._due:
            return None
        for n in range(self._cursor, self._cursor + self.slots):
            slot = self._slots[n % self.slots]
            if not slot:
                continue
            # Entries of later revolutions share the slot; the due tells them apart.
            # (The same arithmetic as `_tick_of`, so float rounding cannot disagree.)
            start, tick, floor = self.start, self.tick, math.floor
            earliest = min(
                (due for due in slot.values() if floor((due - start) / tick) <= n), default=None
            )
            if earliest is not None:
                return earliest
        # Only entries beyond one revolution: none is due before the revolution's last tick.
        return self._time_of(self._cursor + self.slots - 1)


def _by_due(entry: tuple[object, float]) -> float:
    return entry[1]
