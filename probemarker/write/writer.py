"""The writer: coalesced, guarded, retried status patches, one pod at a time.

Stage: decide -> **write** (I/O). Input: the UIDs of pods whose desired state may
have changed, on a memory stream (the engine sends one whenever a probe's decided
result changes, a probe starts or stops, or the pod itself changes). Output: at most
one `pods/status` JSON patch per pod per flush, built by `patch.build_patch` from the
engine's `plan` (desired state) and the freshest view of the pod.

Rules (SPEC §3):
- coalescing: a pod is flushed `coalesce` seconds after its first mark, so results
  arriving together (five probes flipping at once) become one request;
- steady state is zero writes: no request when the pod already matches, and none for
  a pod the plan leaves alone (None: terminating, finished or unknown);
- the newest desired state always wins: the plan is computed when the request is
  built, never queued; a mark during a flush flushes the pod again afterwards;
- a message-only change (`restrict.hold_messages` leaves nothing to send) waits until
  `message_refresh` seconds after the pod's last write, or after the daemon first saw
  the pod when it has not written it yet (`restrict.message_due`: a restart writes
  only where a state differs); a transition goes at once and carries every message
  with it. The shutdown flush keeps a message-only change held too, so a restart
  (stop, then start) writes only where a state differs;
- a failed `test` (422) or a 409: re-read the pod (GET) and recompute at once, up to
  `reread_limit` times in a row, then back off. A re-read that finds another UID
  means the pod was re-created under the same name: everything kept for the old UID
  is forgotten, and nothing planned for it is sent again (the uid `test` in every
  patch made the server refuse it). 429 waits at least `Retry-After`; 5xx and an
  unreachable server back off (capped, jittered) and retry; a pod that is gone (404)
  is forgotten;
- any other 422 (the patched pod would be invalid, e.g. past the 256 KiB annotation
  total): a Warning event on the pod with the server's cause, and at once a smaller
  patch (`restrict.Scope`: without new annotations, without annotations, conditions
  only), so one refused key never blocks the pod's conditions; the full patch is
  tried again after `scope_backoff`. Other refusals (403, 400) are logged with the
  pod and retried with backoff, since they can only be fixed from outside;
- one flush per pod at a time, at most `concurrency` pods at once, and every request
  takes a token of the status writes' rate limit first (events have a budget of
  their own, so they never delay a status write); each write is one log
  line at info (pod, keys set and removed, conditions).

Freshness: after a write, the API server's answer is the newest pod. Until the watch
delivers that version, the writer plans against the answer rather than the informer's
older copy, so a kubelet status update racing with our write does not make us send
the same change twice. Versions are compared as integers (etcd revisions; Kubernetes
1.34 made resourceVersions comparable, KEP-5504); a server whose versions are not
integers gets the informer's copy, at worst one redundant, idempotent write.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
from anyio.abc import ObjectReceiveStream

from probemarker.kit.backoff import Backoff, BackoffSettings
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import (
    ApiConflict,
    ApiError,
    ApiInvalid,
    ApiMalformed,
    ApiNotFound,
    ApiPatchTestFailed,
    ApiServerError,
    ApiTooManyRequests,
    ApiUnreachable,
    KubeError,
)
from probemarker.kube.connect.resources import PODS
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.kube.write.statuswrite import patch_pod_status
from probemarker.watch.pods import PodUID, PodView, pod_view
from probemarker.write.desired import DesiredPod
from probemarker.write.ownership import pod_projection
from probemarker.write.patch import build_patch, changes_of
from probemarker.write.pending import FlushState, PendingWrite, why_waiting
from probemarker.write.queue import FlushQueue
from probemarker.write.restrict import Scope, hold_messages, message_due, restrict

log = structlog.get_logger(__name__)

Lookup = Callable[[PodUID], "tuple[PodView, str] | None"]
# The desired state of a pod, or None: write nothing to it (terminating or finished).
Plan = Callable[[PodView], "DesiredPod | None"]
# A refused write, for a Warning event on the pod: (pod, what the server said).
Refused = Callable[[PodView, str], None]


def _ignore_refusal(pod: PodView, cause: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WriterSettings:
    coalesce: float = 0.05  # seconds from a pod's first mark to its flush
    concurrency: int = 8  # pods flushed at once
    request_timeout: float = 10.0
    reread_limit: int = 5  # re-reads in a row after a failed test or 409, then back off
    backoff: BackoffSettings = field(
        default_factory=lambda: BackoffSettings(initial=0.5, maximum=30.0)
    )
    retry_after_max: float = 60.0
    message_refresh: float = 10.0  # seconds between message-only changes of one pod
    # After a refused (422) write: how long the smaller patch is kept before the full
    # one is tried again.
    scope_backoff: BackoffSettings = field(
        default_factory=lambda: BackoffSettings(initial=30.0, maximum=600.0)
    )

    def __post_init__(self) -> None:
        if self.coalesce < 0 or self.concurrency < 1 or self.request_timeout <= 0:
            raise ValueError("writer needs coalesce >= 0, concurrency >= 1, deadline > 0")
        if self.message_refresh < 0:
            raise ValueError("writer needs message_refresh >= 0")


@dataclass(slots=True)
class WriterStats:
    """What the writer did, for the metrics."""

    flushes: int = 0  # plans computed
    writes: int = 0  # patches the API server accepted
    unchanged: int = 0  # flushes that needed no request
    rereads: int = 0  # GETs after a failed test or a 409
    retries: int = 0  # flushes scheduled again after an error
    failures: dict[str, int] = field(default_factory=dict)  # by error class
    replaced: int = 0  # pods found re-created under the same name (another UID)
    messages_held: int = 0  # flushes whose only change, a message, was held back
    narrowed: int = 0  # refused (422) writes answered with a smaller patch


def _version(text: str) -> int | None:
    return int(text) if text.isdigit() else None


@dataclass(slots=True)
class _PodState:
    """What the writer keeps of one pod between flushes (when it is flushed next is
    the queue's)."""

    seen: float  # when the writer first saw the pod (its first mark)
    rereads: int = 0
    backoff: Backoff | None = None
    fresh: tuple[int, PodView] | None = None  # the API server's answer to our last write
    written: float | None = None  # when our last write to it was accepted
    scope: Scope = Scope.FULL  # how much a patch carries after a refusal
    scope_until: float = 0.0  # when the full patch is tried again
    scope_backoff: Backoff | None = None


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
        refused: Refused = _ignore_refusal,
    ) -> None:
        self._client = client
        self._limiter = limiter
        self._lookup = lookup
        self._plan = plan
        self._refused = refused
        self._marks = marks
        self._now_text = now_text
        self._clock = clock
        self.settings = settings or WriterSettings()
        self._rng = rng or random.Random()
        self._pods: dict[PodUID, _PodState] = {}
        self._queue: FlushQueue[PodUID] = FlushQueue(clock=clock, coalesce=self.settings.coalesce)
        self._wake = anyio.Event()
        self._settled = anyio.Event()
        self._slots = anyio.Semaphore(self.settings.concurrency)
        self.stats = WriterStats()

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
            current = self._lookup(uid)  # as `_base`: our last write's answer if newer
            seen = None if current is None else _version(current[1])
            if seen is not None and state.fresh[0] > seen:
                view = state.fresh[1]
        now = self._clock.now()
        scope = Scope.FULL if state is None or now >= state.scope_until else state.scope
        target = restrict(desired, view, scope)
        if not build_patch(pod=view, desired=target, now=""):
            return None
        message_until = None
        if state is not None and not build_patch(
            pod=view, desired=hold_messages(target, view), now=""
        ):
            message_until = message_due(
                seen=state.seen, written=state.written, refresh=self.settings.message_refresh
            )
        flush = self._queue.state(uid) or FlushState()
        waits, until = why_waiting(
            flush, now=now, message_until=message_until, budget_waiters=self._limiter.waiting
        )
        return PendingWrite(changes_of(view, target), waits, until, scope.name)

    # -- marks ---------------------------------------------------------------------------

    def mark(self, uid: PodUID) -> None:
        """Flush `uid` after the coalescing window (or its backoff hold), unless sooner."""
        if uid not in self._pods:
            self._pods[uid] = _PodState(seen=self._clock.now())
        if self._queue.mark(uid):
            self._wake.set()

    def _forget(self, uid: PodUID) -> None:
        self._pods.pop(uid, None)
        self._queue.forget(uid)

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
                for uid in self._queue.pop_due():
                    await self._slots.acquire()
                    group.start_soon(self._flush_slot, uid)
                await self._sleep_until_due()

    async def _take_marks(self) -> None:
        async with self._marks:
            async for uid in self._marks:
                self.mark(uid)

    async def _sleep_until_due(self) -> None:
        """Until the earliest flush is due, or a mark arrives (it may be sooner)."""
        self._wake = anyio.Event()
        due = self._queue.next_due()
        delay = math.inf if due is None else due - self._clock.now()
        if delay <= 0:
            return
        async with anyio.create_task_group() as group:

            async def sleeper() -> None:
                await self._clock.sleep(delay)
                group.cancel_scope.cancel()

            async def waker() -> None:
                await self._wake.wait()
                group.cancel_scope.cancel()

            if not math.isinf(delay):
                group.start_soon(sleeper)
            group.start_soon(waker)

    async def _flush_slot(self, uid: PodUID) -> None:
        try:
            await self._flush(uid)
        finally:
            self._slots.release()
            if self._queue.done(uid):
                self._wake.set()
            self._settled.set()

    # -- one flush -----------------------------------------------------------------------

    def _base(self, uid: PodUID, state: _PodState) -> PodView | None:
        """The freshest view of the pod: the informer's, or our last write's answer."""
        current = self._lookup(uid)
        if current is None:
            return None
        view, resource_version = current
        if state.fresh is not None:
            seen = _version(resource_version)
            if seen is not None and state.fresh[0] > seen:
                return state.fresh[1]
            state.fresh = None
        return view

    async def _flush(self, uid: PodUID) -> None:
        state = self._pods.get(uid)
        if state is None:
            return
        view = self._base(uid, state)
        if view is None:
            self._forget(uid)
            return
        self.stats.flushes += 1
        desired = self._plan(view)
        now = self._clock.now()
        if desired is not None and desired.revisit_after is not None:
            self._queue.at(uid, now + desired.revisit_after)
        to_send = None if desired is None else self._to_send(uid, state, view, desired, now)
        if to_send is None or not to_send[1]:
            self.stats.unchanged += 1
            state.rereads = 0
            self._queue.hold(uid, 0.0)
            return
        target, ops = to_send
        try:
            answer = await patch_pod_status(
                self._client,
                namespace=view.namespace,
                name=view.name,
                ops=ops,
                limiter=self._limiter,
                wait=self.settings.request_timeout,
            )
        except KubeError as err:
            await self._failed(uid, state, view, err, ops)
            return
        self._written(uid, state, view, target, answer)

    def _to_send(
        self, uid: PodUID, state: _PodState, view: PodView, desired: DesiredPod, now: float
    ) -> tuple[DesiredPod, list[dict[str, Any]]] | None:
        """What to send of `desired` now, and its patch: within the scope a refusal left,
        and without a message-only change before its time (then None, and a flush at
        that time)."""
        if state.scope is not Scope.FULL and now >= state.scope_until:
            state.scope = Scope.FULL  # time to try the full patch again
        target = restrict(desired, view, state.scope)
        ops = build_patch(pod=view, desired=target, now=self._now_text())
        due = message_due(
            seen=state.seen, written=state.written, refresh=self.settings.message_refresh
        )
        if not ops or now >= due:
            return target, ops
        if build_patch(pod=view, desired=hold_messages(target, view), now=""):
            return target, ops  # a real change goes now, with every message
        self.stats.messages_held += 1
        self._queue.at(uid, due)
        return None

    def _written(
        self,
        uid: PodUID,
        state: _PodState,
        view: PodView,
        target: DesiredPod,
        answer: Mapping[str, Any],
    ) -> None:
        now = self._clock.now()
        self.stats.writes += 1
        state.rereads = 0
        self._queue.hold(uid, 0.0)
        state.written = now
        if state.backoff is not None:
            state.backoff.reset()
        if state.scope is Scope.FULL and state.scope_backoff is not None:
            state.scope_backoff.reset()
        elif state.scope is not Scope.FULL:
            self._queue.at(uid, state.scope_until)  # the full patch is still owed
        self._remember(state, answer)
        log.info(
            "write.patched",
            pod=f"{view.namespace}/{view.name}",
            **changes_of(view, target),
            **({} if state.scope is Scope.FULL else {"scope": state.scope.name}),
        )

    def _remember(self, state: _PodState, raw: Mapping[str, Any]) -> None:
        meta = raw.get("metadata")
        version = _version(str(meta.get("resourceVersion", ""))) if isinstance(meta, dict) else None
        if version is not None:
            state.fresh = (version, pod_view(pod_projection(raw)))

    async def _failed(
        self,
        uid: PodUID,
        state: _PodState,
        view: PodView,
        err: KubeError,
        ops: list[dict[str, Any]],
    ) -> None:
        name = type(err).__name__
        self.stats.failures[name] = self.stats.failures.get(name, 0) + 1
        pod = f"{view.namespace}/{view.name}"
        if isinstance(err, ApiNotFound):
            self._forget(uid)  # the pod is gone: nothing to write
            return
        if isinstance(err, ApiPatchTestFailed | ApiConflict) and state.rereads < (
            self.settings.reread_limit
        ):
            state.rereads += 1
            self.stats.rereads += 1
            reread = await self._reread(uid, state, view)
            if reread is _Reread.REPLACED:
                return
            if reread is _Reread.READ:
                self._queue.mark(uid)  # flushed again as soon as this flush ends
                return
        if (
            isinstance(err, ApiInvalid)
            and not isinstance(err, ApiPatchTestFailed)
            and self._narrow(uid, state, view, err)
        ):
            return  # a refused write: a smaller one goes at once
        backoff = state.backoff or Backoff(self.settings.backoff, rng=self._rng)
        state.backoff = backoff
        retry_after = err.retry_after if isinstance(err, ApiError) else None
        delay = backoff.next_delay(at_least=min(retry_after or 0.0, self.settings.retry_after_max))
        self.stats.retries += 1
        transient = isinstance(
            err, ApiTooManyRequests | ApiServerError | ApiUnreachable | ApiMalformed
        )
        (log.info if transient else log.error)(
            "write.retry",
            pod=pod,
            reason=name,
            error=str(err),
            retry_in=round(delay, 3),
            failures=backoff.failures,
            **({} if transient else {"patch": ops}),
        )
        self._queue.hold(uid, self._clock.now() + delay)
        self._queue.mark(uid)  # flushed again when the hold ends, with the newest plan

    def _narrow(self, uid: PodUID, state: _PodState, view: PodView, err: ApiInvalid) -> bool:
        """A refused write: step down to a smaller patch, flushed again at once; False
        when there is none smaller (then the caller backs off as for any error)."""
        narrower = state.scope.narrower
        if narrower is None:
            return False
        if state.scope is Scope.FULL:
            backoff = state.scope_backoff or Backoff(self.settings.scope_backoff, rng=self._rng)
            state.scope_backoff = backoff
            state.scope_until = self._clock.now() + backoff.next_delay()
            self._refused(view, refusal_cause(err))
        state.scope = narrower
        self.stats.narrowed += 1
        log.warning(
            "write.refused",
            pod=f"{view.namespace}/{view.name}",
            error=str(err),
            next_scope=narrower.name,
        )
        self._queue.mark(uid)
        return True

    async def _reread(self, uid: PodUID, state: _PodState, view: PodView) -> _Reread:
        """GET the pod, so the next plan starts from what the server holds now. Another
        UID under the name: the pod was re-created, and this one is forgotten."""
        pod = f"{view.namespace}/{view.name}"
        try:
            raw = await self._client.request(
                "GET",
                PODS.path(view.namespace, view.name),
                info=PODS.info("get", view.namespace, view.name),
                wait=self.settings.request_timeout,
            )
        except ApiNotFound:
            self._forget(uid)
            return _Reread.REPLACED
        except KubeError as err:
            log.info("write.reread_failed", pod=pod, error=str(err))
            return _Reread.FAILED
        meta = raw.get("metadata")
        found = meta.get("uid") if isinstance(meta, dict) else None
        if found != uid:
            self._forget(uid)
            self.stats.replaced += 1
            log.info("write.pod_replaced", pod=pod, uid=uid, found_uid=found)
            return _Reread.REPLACED
        self._remember(state, raw)
        return _Reread.READ


class _Reread(enum.Enum):
    READ = "read"
    FAILED = "failed"
    REPLACED = "replaced"  # gone, or another pod under the name: forgotten


def refusal_cause(err: ApiInvalid) -> str:
    """The server's reason for refusing a write, for the pod's Warning event."""
    # A real API server may list one cause several times (1.32 gives the annotation
    # total three times, from the metadata and the pod status validations): once each.
    causes = dict.fromkeys(
        f"{c.field}: {c.message}" if c.field else c.message for c in err.causes if c.message
    )
    return "; ".join(causes) or err.message
