"""The writer: when each pod is flushed, and whose turn it is under the write budget.

Stage: decide -> **write** (I/O). Input: the UIDs of pods whose desired state may
have changed, on a memory stream (the engine sends one whenever a probe's decided
result changes, a probe starts or stops, or the pod itself changes). Output: flushes,
each done by write/flush.py (at most one `pods/status` JSON patch per pod per flush,
with the newest desired state; retries, re-reads and refusals are its).

Rules (docs/engine.md, docs/security.md):
- coalescing: a pod is flushed `coalesce` seconds after its first mark, so results
  arriving together (five probes flipping at once) become one request
  (write/queue.py); a mark during a flush flushes the pod again afterwards;
- one flush per pod at a time, at most `concurrency` pods at once, and every request
  takes a token of the status writes' rate limit first (events have a budget of
  their own, so they never delay a status write);
- fair by namespace: one loop starts the flushes. It waits for a pod to be due, a
  free slot and a token, in that order, and only then asks the queue whose turn it
  is (the namespaces with a pod due take turns, one flush each). So a namespace with
  many pods due takes its share of the budget (qps / the namespaces waiting, and
  whatever the others leave), and a pod of another namespace waits for at most one
  flush of each other namespace per pod of its own ahead of it, never behind every
  pod a busy namespace has due. The flush is planned in the same step
  (synchronously, with the newest desired state); when it sends nothing the token
  goes back (`TokenBucket.refund`), so a deferred message or an unchanged pod spends none;
- shutdown (`flush_pending`): every marked pod is flushed at once, no coalescing, no
  hold, still in turn under the budget.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import anyio
from anyio.abc import ObjectReceiveStream

from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.watch.pods import PodUID, PodView
from probemarker.write.desired import DesiredPod
from probemarker.write.flush import (
    Flusher,
    Lookup,
    Plan,
    Refused,
    Send,
    WriterSettings,
    WriterStats,
    ignore_refusal,
    revision,
)
from probemarker.write.patch import build_patch, changes_of
from probemarker.write.pending import FlushState, PendingWrite, why_waiting
from probemarker.write.queue import FlushQueue
from probemarker.write.restrict import Scope, defer_messages, message_due, restrict

__all__ = ["PodWriter", "WriterSettings", "WriterStats"]


class PodWriter:
    """See the module docstring; `run()` consumes the marks until cancelled."""

    def __init__(
        self,
        *,
        client: KubeClient,
        limiter: TokenBucket,
        lookup: Lookup,
        plan: Plan,
        marks: ObjectReceiveStream[PodUID],
        now_text: Callable[[], str],
        clock: Clock = MONOTONIC,
        settings: WriterSettings | None = None,
        rng: random.Random | None = None,
        refused: Refused = ignore_refusal,
    ) -> None:
        self._limiter = limiter
        self._lookup = lookup
        self._marks = marks
        self._clock = clock
        self.settings = settings or WriterSettings()
        self._queue: FlushQueue[PodUID] = FlushQueue(clock=clock, coalesce=self.settings.coalesce)
        self._flusher = Flusher(
            client=client,
            lookup=lookup,
            plan=plan,
            queue=self._queue,
            now_text=now_text,
            clock=clock,
            settings=self.settings,
            rng=rng or random.Random(),
            refused=refused,
        )
        self._pods = self._flusher.pods
        self.stats = self._flusher.stats
        self._wake = anyio.Event()
        self._settled = anyio.Event()
        self._slots = anyio.Semaphore(self.settings.concurrency)

    def __repr__(self) -> str:
        return f"PodWriter(pods={len(self._pods)}, queued={self.depth}, {self.stats})"

    @property
    def depth(self) -> int:
        """Pods waiting for a flush (the write queue depth metric)."""
        return self._queue.waiting

    @property
    def tracked(self) -> int:
        """Pods the writer keeps state for (a pod that is gone is dropped at its flush)."""
        return len(self._pods)

    def waiting_by_namespace(self) -> dict[str, int]:
        """Pods whose write is due and waits for its namespace's turn, by namespace
        (for the metrics; only namespaces of pods the writer tracks)."""
        return self._queue.lined()

    def pending(
        self, uid: PodUID, view: PodView, desired: DesiredPod | None
    ) -> PendingWrite | None:
        """What a write of `desired` would change on the pod and why it has not gone out;
        None when nothing differs (or nothing is written to the pod). For `probemarker
        status`: reads the writer's state, changes nothing."""
        if desired is None:
            return None
        state = self._pods.get(uid)
        if state is not None and state.fresh is not None:
            current = self._lookup(uid)  # as `Flusher.base`: our last write's answer if newer
            seen = None if current is None else revision(current[1])
            if seen is not None and state.fresh[0] > seen:
                view = state.fresh[1]
        now = self._clock.now()
        scope = Scope.FULL if state is None or now >= state.scope_until else state.scope
        target = restrict(desired, view, scope)
        if not build_patch(pod=view, desired=target, now=""):
            return None
        message_until = None
        if state is not None and not build_patch(
            pod=view, desired=defer_messages(target, view), now=""
        ):
            message_until = message_due(
                seen=state.seen, written=state.written, refresh=self.settings.message_refresh
            )
        flush = self._queue.state(uid) or FlushState()
        waits, until = why_waiting(flush, now=now, message_until=message_until)
        return PendingWrite(changes_of(view, target), waits, until, scope.name)

    # -- marks ---------------------------------------------------------------------------

    def mark(self, uid: PodUID) -> None:
        """Flush `uid` after the coalescing window (or its backoff hold), unless sooner."""
        state = self._flusher.track(uid)
        if self._queue.mark(uid, flow=state.namespace):
            self._wake.set()

    async def flush_pending(self) -> None:
        """Shutdown: flush every marked pod now (no coalescing, no hold) and return when
        none is marked or being flushed; `run()` must be running. The caller bounds it.
        A message-only change stays held: the next run publishes it once its refresh
        interval has passed, so a restart (stop and start) writes only where a state
        differs."""
        self._queue.finish_now()
        self._wake.set()
        while self._queue.busy:
            self._settled = anyio.Event()
            await self._settled.wait()

    # -- running -------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._take_marks)
            while True:
                if not self._queue.has_due():
                    await self._sleep_until_due()
                    continue
                await self._slots.acquire()
                try:
                    await self._limiter.acquire()
                except BaseException:
                    self._slots.release()
                    raise
                # Whose turn: asked only now, with a token and a slot in hand.
                uid = self._queue.pop_next()
                send = None if uid is None else self._flusher.prepare(uid)
                if uid is None or send is None:
                    self._limiter.refund()
                    self._slots.release()
                    if uid is not None:
                        self._ended(uid)
                    continue
                group.start_soon(self._send_slot, uid, send)

    async def _take_marks(self) -> None:
        async with self._marks:
            async for uid in self._marks:
                self.mark(uid)

    async def _sleep_until_due(self) -> None:
        """Until the earliest flush is due, or a mark arrives (it may be sooner)."""
        self._wake = anyio.Event()
        due, now = self._queue.next_due(), self._clock.now()
        delay = math.inf if due is None else due - now
        if delay <= 0:
            return
        async with anyio.create_task_group() as group:

            async def sleeper() -> None:
                # Counted from when the sleep starts: the task starts a step later.
                left = delay - (self._clock.now() - now)
                if left > 0:
                    await self._clock.sleep(left)
                group.cancel_scope.cancel()

            async def waker() -> None:
                await self._wake.wait()
                group.cancel_scope.cancel()

            if not math.isinf(delay):
                group.start_soon(sleeper)
            group.start_soon(waker)

    async def _send_slot(self, uid: PodUID, send: Send) -> None:
        try:
            await self._flusher.send(uid, send)
        finally:
            self._slots.release()
            self._ended(uid)

    def _ended(self, uid: PodUID) -> None:
        """`uid`'s flush ended: what was asked for meanwhile is booked."""
        if self._queue.done(uid):
            self._wake.set()
        self._settled.set()
