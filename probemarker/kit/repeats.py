"""At most one log line per kind of problem per interval: the rest are counted.

Stage: logging, used where a condition repeats while the daemon retries (the API
server unreachable, a CRD not installed, a LIST refused). Input: a key naming the
problem and the current time (monotonic seconds, from the caller's injected clock).
Output: whether to log now, and how many lines were held back since the last one
(`due`), or the same as the fields of the line (`fields`: `held_back` when any were).

The first occurrence of a key is logged at once; later ones at most every
`interval` seconds, each saying how many were held back in between. `clear(key)`
forgets a key once the problem is over, so its next occurrence is logged at once.
`max_keys` (None: no bound) bounds the keys remembered, for keys a tenant can
multiply (a namespace): past it the key logged least recently is forgotten, so its
next occurrence is logged at once, as a new problem's would be.
Pure: no clock of its own, no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["Repeats"]


@dataclass(slots=True)
class Repeats:
    interval: float = 60.0
    max_keys: int | None = None
    _last: dict[Hashable, float] = field(default_factory=dict)
    _held: dict[Hashable, int] = field(default_factory=dict)

    def due(self, key: Hashable, now: float) -> int | None:
        """None: hold this occurrence back (it is counted). Otherwise log it now,
        saying that the returned number of occurrences were held back before it."""
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last.pop(key, None)
        self._last[key] = now  # the most recently logged last
        if self.max_keys is not None:
            while len(self._last) > self.max_keys:
                self.clear(next(iter(self._last)))
        return self._held.pop(key, 0)

    def fields(self, key: Hashable, now: float) -> dict[str, int] | None:
        """`due` as the extra fields of the line to log: None holds this occurrence back;
        else `{}`, or `{"held_back": N}` when N were held back before it."""
        held = self.due(key, now)
        if held is None:
            return None
        return {"held_back": held} if held else {}

    def clear(self, key: Hashable) -> None:
        self._last.pop(key, None)
        self._held.pop(key, None)
