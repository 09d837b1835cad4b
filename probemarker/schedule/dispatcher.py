"""The dispatcher: one task that starts every probe run when it comes due, within a cap.

Stage: schedule. Inputs: `schedule(key, due)` / `cancel(key)` from the engine, and the
injected `Clock`. Output: calls of the engine's `run(key, due)` callback, each in a task
of the dispatcher's own task group, never more than `max_concurrent` at once.

One loop sleeps on the clock until the first tick boundary at or after the wheel's next
deadline, then starts every entry due by then: a run starts at most one tick (50 ms by
default) after its due, and the loop wakes at most once per tick however many probes
there are (waking for each due, as one sleeping task per probe does, costs more CPU
than the runs themselves; bench/wheel_bench.py). `schedule()` of an entry due before
that boundary, and a run ending while entries wait for a free slot, cut the sleep short
(the sleep runs in a cancel scope they cancel). Everything else is synchronous, so
nothing can change between the loop reading the deadline and starting its sleep: no
wake-up is lost.

Invariants:
- a key has at most one pending entry (scheduling it again replaces the entry) and is
  never run twice at once: an entry that comes due while its key is still running waits
  until that run ends;
- at most `max_concurrent` runs at once, shared by flow (`flow(key)`: the daemon's
  flows are namespaces, issue 40): one flow occupies at most `flow_limit` slots
  (`max_concurrent` less a quarter of it: 48 of 64), so a flow that floods the slots
  with slow or hanging runs always leaves a quarter to the others; entries held back
  (by the cap or by their flow's limit) wait in a queue per flow, in due order, and a
  slot that frees goes to the flow with the fewest runs in progress
  (`kit.shares.least_served`; ties in turn). So a flow below another's count never
  waits behind that other's backlog: at most for the next slot to free;
- how late each run starts is measured (`stats`), never hidden, in two parts:
  lateness until the run could start (`late`, `lateness_max`: the tick, a busy event
  loop, or the key's previous run overrunning into this slot) and the wait for a free
  slot under the cap or its flow's limit (`slot_waits`, `slot_wait_max`, and by flow:
  the node's load, or the flow's own, not the probe's doing). The callback starts
  when the run starts, so neither eats into the probe's own timeout;
- the callback cannot take the dispatcher down: an exception is logged and counted;
- `cancel(key)` removes a pending entry only; a run in progress is left to finish;
- `stop(grace=...)` starts nothing more, gives running runs `grace` seconds of the
  clock, then cancels them; `run()` returns with no task left behind, and cancelling
  `run()` cancels every run it started.

Runs are plain asyncio tasks in an `asyncio.TaskGroup`: starting one costs about a fifth
of anyio's `start_soon` (bench/wheel_bench.py counts CPU per run), and the daemon only
ever runs on asyncio (aiohttp).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

import anyio
import structlog

from probemarker.kit.clock import Clock
from probemarker.kit.shares import least_served
from probemarker.schedule.wheel import TimerWheel

__all__ = ["DispatchStats", "Dispatcher"]

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)


class _Item(NamedTuple, Generic[K]):
    """An entry that can start but for the cap. A tuple, so the heap compares it in C:
    by (due, seq), seq unique, so nothing after it is ever compared."""

    due: float
    seq: int
    key: K
    ready: float  # when it could have started, cap aside
    cap_hits: int  # the dispatcher's count when it was queued


@dataclass(slots=True)
class DispatchStats:
    """Counters for the metrics (mutable; the dispatcher updates them in place)."""

    runs_started: int = 0
    runs_finished: int = 0  # returned or raised; not the ones cancelled at stop
    # Lateness up to the moment a run could start (it was found due, or its key's
    # previous run ended), whatever the cap: the probe's own doing or a busy loop.
    late: int = 0  # runs that could start only more than `late_after` s after their due
    lateness_max: float = 0.0  # seconds, over all runs
    # Then the wait for a free slot under the cap (`max_concurrent`): the node's load.
    slot_waits: int = 0  # runs held back by the cap before they started
    slot_wait_max: float = 0.0  # seconds, over all runs
    errors: int = 0  # runs whose callback raised
    cancelled: int = 0  # runs cancelled because `stop`'s grace ran out
    # The waits for a slot by flow (the namespace); `Dispatcher.forget` drops a flow's.
    slot_waits_by_flow: Counter[str] = field(default_factory=Counter)
    slot_wait_max_by_flow: dict[str, float] = field(default_factory=dict)


def flow_limit(max_concurrent: int) -> int:
    """The slots one flow may occupy: all but a quarter of them (48 of 64; all of 1 to
    3, where no slot can be kept back)."""
    return max_concurrent - max_concurrent // 4


class Dispatcher(Generic[K]):
    """See the module docstring."""

    def __init__(
        self,
        *,
        run: Callable[[K, float], Awaitable[None]],
        clock: Clock,
        max_concurrent: int,
        tick: float = 0.05,
        late_after: float = 1.0,
        flow: Callable[[K], str] = lambda key: "",
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent!r}")
        self._callback = run
        self._clock = clock
        self.max_concurrent = max_concurrent
        self.flow_limit = flow_limit(max_concurrent)
        self._flow = flow
        self.late_after = late_after
        self.stats = DispatchStats()
        self._wheel: TimerWheel[K] = TimerWheel(tick=tick, start=clock.now())
        # Due, held back by the cap: a heap of items per flow and key -> its live item (a
        # replaced or cancelled entry stays in its heap, stale, until it surfaces); the
        # flows with live items, in the order they are served on a tie.
        self._queues: dict[str, list[_Item[K]]] = {}
        self._queued: dict[K, _Item[K]] = {}
        self._waiting_by_flow: Counter[str] = Counter()
        self._turns: dict[str, None] = {}
        self._running_by_flow: Counter[str] = Counter()
        self._seq = itertools.count()
        # Times the cap left live entries waiting; an entry queued before the last of
        # them and started after it waited for a slot (exact on a fake clock too).
        self._cap_hits = 0
        self._held: dict[K, float] = {}  # due while the key's previous run is still going
        self._running: dict[K, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._nap_scope: anyio.CancelScope | None = None
        self._sleep_until = -math.inf  # the deadline of the current sleep
        self._started = False
        self._stopping = False
        self._grace = 0.0
        self._done = asyncio.Event()

    def __repr__(self) -> str:
        return (
            f"Dispatcher(pending={self.pending}, waiting={self.waiting}, "
            f"running={self.running}/{self.max_concurrent})"
        )

    # -- the engine's side ----------------------------------------------------------

    @property
    def pending(self) -> int:
        """Entries not started yet (in the wheel, or due and waiting)."""
        return len(self._wheel) + self.waiting

    @property
    def waiting(self) -> int:
        """Entries due but not started: held back by the cap or by their key's run."""
        return len(self._queued) + len(self._held)

    @property
    def running(self) -> int:
        return len(self._running)

    def running_by_flow(self) -> dict[str, int]:
        """Runs in progress, by flow (those with any)."""
        return {flow: n for flow, n in self._running_by_flow.items() if n > 0}

    def waiting_by_flow(self) -> dict[str, int]:
        """Entries due and held back by the cap or their flow's limit, by flow."""
        return {flow: n for flow, n in self._waiting_by_flow.items() if n > 0}

    def forget(self, flow: str) -> None:
        """Drop what the stats keep of `flow` (its last key has gone)."""
        self.stats.slot_waits_by_flow.pop(flow, None)
        self.stats.slot_wait_max_by_flow.pop(flow, None)

    @property
    def asleep(self) -> bool:
        """The loop is waiting for its next deadline or a wake-up (and not woken yet)."""
        return self._nap_scope is not None and not self._nap_scope.cancel_called

    def is_running(self, key: K) -> bool:
        """A run of `key` is in progress."""
        return key in self._running

    def due(self, key: K) -> float | None:
        """When `key`'s pending entry is due, or None if it has none."""
        due = self._wheel.due(key)
        if due is None:
            due = self._held.get(key)
        if due is None and (item := self._queued.get(key)) is not None:
            due = item[0]
        return due

    def schedule(self, key: K, due: float) -> None:
        """Run `key` at `due`, replacing its pending entry if it has one."""
        self._drop(key)
        self._wheel.add(key, due)
        # Due within the last tick before the wake-up: that wake-up will start it anyway.
        if due <= self._sleep_until - self._wheel.tick:
            self._wake()

    def cancel(self, key: K) -> bool:
        """Drop `key`'s pending entry (a run in progress is left to finish)."""
        return self._drop(key)

    def _drop(self, key: K) -> bool:
        if self._wheel.cancel(key) or self._held.pop(key, None) is not None:
            return True
        item = self._queued.pop(key, None)
        if item is None:
            return False
        self._waiting_by_flow[self._flow(key)] -= 1
        return True

    # -- the loop -------------------------------------------------------------------

    async def run(self) -> None:
        """Start runs as they come due, until `stop()` (or cancellation)."""
        if self._started:
            raise RuntimeError(f"{self!r} runs only once")
        self._started = True
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                await self._dispatch_until_stopped()
                await self._drain()
        finally:
            # A run cancelled before its first step never reached its own `finally`.
            self._running.clear()
            self._running_by_flow.clear()
            self._group = None
            self._done.set()

    async def stop(self, *, grace: float) -> None:
        """Start nothing more; give running runs `grace` seconds, then cancel them.

        Returns when `run()` has returned (at once if it never started).
        """
        self._stopping = True
        self._grace = grace
        self._wake()
        if self._started:
            await self._done.wait()

    async def _dispatch_until_stopped(self) -> None:
        while not self._stopping:
            now = self._clock.now()
            for key, due in self._wheel.pop_due(now):
                if key in self._running:
                    self._held[key] = due
                else:
                    self._enqueue(key, due)
            self._start_queued(now)
            deadline = self._wheel.next_deadline()
            if deadline is None:
                await self._nap(None, until=math.inf)
                continue
            wake_at = self._wheel.boundary(deadline)
            if wake_at <= now:
                await asyncio.sleep(0)  # cannot happen after pop_due; never spin regardless
                continue
            await self._nap(wake_at - now, until=wake_at)

    async def _drain(self) -> None:
        deadline = self._clock.now() + self._grace
        while self._running and (left := deadline - self._clock.now()) > 0:
            await self._nap(left, until=-math.inf)
        for task in self._running.values():
            task.cancel()
        self.stats.cancelled += len(self._running)

    async def _nap(self, seconds: float | None, *, until: float) -> None:
        """Sleep `seconds` of the clock (None: until woken), unless `_wake()` comes first.

        `until`: the time the sleep ends; `schedule()` wakes the loop for anything due
        before it.
        """
        with anyio.CancelScope() as scope:
            self._nap_scope, self._sleep_until = scope, until
            try:
                if seconds is None:
                    await anyio.sleep_forever()
                else:
                    await self._clock.sleep(seconds)
            finally:
                self._nap_scope, self._sleep_until = None, -math.inf

    def _wake(self) -> None:
        if self._nap_scope is not None:
            self._nap_scope.cancel()

    # -- starting runs --------------------------------------------------------------

    def _enqueue(self, key: K, due: float) -> None:
        """`key` can start now (due, and its previous run over) but for the cap."""
        item = _Item(due, next(self._seq), key, self._clock.now(), self._cap_hits)
        flow = self._flow(key)
        self._queued[key] = item
        self._waiting_by_flow[flow] += 1
        heapq.heappush(self._queues.setdefault(flow, []), item)
        self._turns.setdefault(flow, None)

    def _start_queued(self, now: float) -> None:
        while len(self._running) < self.max_concurrent:
            flow = least_served(
                self._running_by_flow,
                (f for f in self._turns if self._running_by_flow[f] < self.flow_limit),
            )
            if flow is None:
                break  # nothing waits, or only flows at their limit
            item = self._pop(flow)
            if item is not None:
                self._start(item, now)
        if self._queued:
            self._cap_hits += 1

    def _pop(self, flow: str) -> _Item[K] | None:
        """`flow`'s earliest live item, taken off its queue; the flow goes to the end of
        the turns (or out of them, with nothing left)."""
        queue, found = self._queues[flow], None
        while queue and found is None:
            item = heapq.heappop(queue)
            if self._queued.get(item.key) is item:  # else replaced or cancelled meanwhile
                found = item
                del self._queued[item.key]
                self._waiting_by_flow[flow] -= 1
        del self._turns[flow]
        if self._waiting_by_flow[flow] > 0:
            self._turns[flow] = None
        else:
            del self._queues[flow], self._waiting_by_flow[flow]
        return found

    def _start(self, item: _Item[K], now: float) -> None:
        assert self._group is not None
        stats = self.stats
        stats.runs_started += 1
        lateness = item.ready - item.due
        if lateness > self.late_after:
            stats.late += 1
        stats.lateness_max = max(stats.lateness_max, lateness)
        key, due, flow = item.key, item.due, self._flow(item.key)
        if item.cap_hits != self._cap_hits:
            waited = now - item.ready
            stats.slot_waits += 1
            stats.slot_wait_max = max(stats.slot_wait_max, waited)
            stats.slot_waits_by_flow[flow] += 1
            most = stats.slot_wait_max_by_flow.get(flow, 0.0)
            stats.slot_wait_max_by_flow[flow] = max(most, waited)
        self._running_by_flow[flow] += 1
        self._running[key] = self._group.create_task(self._run_one(key, due))

    async def _run_one(self, key: K, due: float) -> None:
        try:
            await self._callback(key, due)
            self.stats.runs_finished += 1
        except Exception:
            # The engine's callback handles its own failures; this is a bug, not a
            # reason to stop probing every other pod on the node.
            self.stats.runs_finished += 1
            self.stats.errors += 1
            log.exception("schedule.run_failed", key=str(key), due=due)
        finally:
            del self._running[key]
            flow = self._flow(key)
            self._running_by_flow[flow] -= 1
            if not self._running_by_flow[flow]:
                del self._running_by_flow[flow]
            held = self._held.pop(key, None)
            if held is not None:
                self._enqueue(key, held)
            if self._queued or self._stopping:
                self._wake()
