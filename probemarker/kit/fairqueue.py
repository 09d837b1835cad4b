"""Fair queuing by flow: a FIFO per flow, the flows served in turn.

Stage: ground floor (pure; no clock, no I/O). Used wherever namespaces share one
budget (the status writes' queue, write/queue.py; the events' queue,
kube/write/events.py): the flow is the namespace. Input: `push(flow, item)`.
Output: `pop()` hands out one item at a time, taking the flows in turn (round
robin), each flow's items in the order they came.

Why round robin: every item costs the same (one request, one token of a budget), so
deficit round robin with a quantum of one item is plain round robin. With N flows
waiting, each gets at least one item in every N popped, whatever the others hold:
an item waits at most (the items of its own flow ahead of it + 1) turns of N items,
never behind everything a busy flow queued before it. A flow that empties leaves
the turn; when it has an item again it joins at the end of the turn, as the API
server's priority and fairness gives each flow its own queue.

Bounds (both optional; None: none):
- `per_flow`: a flow holds at most this many items; a push beyond it is refused;
- `total`: all flows together hold at most this many. When full, a push from a flow
  that holds at least two items fewer than the longest flow pushes out the newest
  item of the longest one (the flow that took the most room gives it back first);
  any other push is refused (the pusher holds about as much as anyone). So with k
  flows, a flow can always queue at least `total // k - 1` items, whatever the
  others push.
`push` returns what was dropped, (flow, item): the refused item itself, or the item
pushed out; None when nothing was. The caller counts it against that flow.

Invariants: `len()` is the sum of the flows' depths; a flow with no item is not
kept (no memory for idle flows); `pop` returns None only when empty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

F = TypeVar("F", bound=Hashable)
T = TypeVar("T")


class FairQueue(Generic[F, T]):
    """See the module docstring."""

    def __init__(self, *, per_flow: int | None = None, total: int | None = None) -> None:
        if (per_flow is not None and per_flow < 1) or (total is not None and total < 1):
            raise ValueError(f"bounds must be at least 1: per_flow={per_flow}, total={total}")
        self.per_flow = per_flow
        self.total = total
        self._flows: dict[F, deque[T]] = {}
        self._turn: deque[F] = deque()  # flows with an item, in the order they are served
        self._len = 0

    def __repr__(self) -> str:
        return f"FairQueue(items={self._len}, flows={len(self._flows)})"

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[tuple[F, T]]:
        """Every (flow, item) queued, flow by flow (not in the order `pop` gives)."""
        for flow, items in self._flows.items():
            for item in items:
                yield flow, item

    def depth(self, flow: F) -> int:
        """Items `flow` holds now."""
        items = self._flows.get(flow)
        return 0 if items is None else len(items)

    def depths(self) -> dict[F, int]:
        """Items held now, by flow (flows holding none are not listed)."""
        return {flow: len(items) for flow, items in self._flows.items()}

    def push(self, flow: F, item: T) -> tuple[F, T] | None:
        """Queue `item` at the end of `flow`; what was dropped to keep the bounds, if
        anything (see the module docstring)."""
        held = self.depth(flow)
        if self.per_flow is not None and held >= self.per_flow:
            return flow, item
        dropped: tuple[F, T] | None = None
        if self.total is not None and self._len >= self.total:
            longest = max(self._flows, key=lambda f: len(self._flows[f]))
            if len(self._flows[longest]) <= held + 1:
                return flow, item  # the pusher holds about as much as the longest
            dropped = longest, self._flows[longest].pop()
            self._shrunk(longest)
        self._append(flow, item)
        return dropped

    def pop(self) -> tuple[F, T] | None:
        """The next flow's first item, or None when nothing is queued."""
        if not self._turn:
            return None
        flow = self._turn.popleft()
        items = self._flows[flow]
        item = items.popleft()
        self._len -= 1
        if items:
            self._turn.append(flow)  # its next item waits for every other flow's turn
        else:
            del self._flows[flow]
        return flow, item

    def remove(self, flow: F, item: T) -> bool:
        """Take `item` out of `flow` (it went away while queued); False if not there."""
        items = self._flows.get(flow)
        if items is None or item not in items:
            return False
        items.remove(item)
        self._shrunk(flow)
        return True

    def _append(self, flow: F, item: T) -> None:
        items = self._flows.get(flow)
        if items is None:
            items = self._flows[flow] = deque()
            self._turn.append(flow)  # a flow with an item again joins at the end
        items.append(item)
        self._len += 1

    def _shrunk(self, flow: F) -> None:
        """One item of `flow` was taken out other than by `pop`."""
        self._len -= 1
        if not self._flows[flow]:
            del self._flows[flow]
            self._turn.remove(flow)
