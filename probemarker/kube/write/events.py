"""Kubernetes Events for the daemon's decisions, written as client-go's events recorder does.

Stage: beside the writer; a probe loop calls `record(...)`, one task runs `run()`.
Input: (regarding object, type, reason, note, action) observations. Output:
`events.k8s.io/v1` Events, created and then updated with a `series`.

What is written (k8s.io/client-go tools/events, pkg/apis/core/validation/events.go):
- `reportingController` `probemarker.io/daemon`, `reportingInstance` the node name
  (cut to the API's 128 bytes), `action` and `reason` (required, at most 128 bytes),
  `note` cut to the API's 1024 bytes at a character boundary, `type` Normal/Warning,
  `eventTime` now, `regarding` the object reference; the event lives in the object's
  namespace (`default` for a cluster-scoped object, as client-go does);
- the name is `<object name>.<unix nanoseconds in hex>` (client-go's
  GenerateEventName), a random UUID when that is not a valid DNS subdomain;
- a repeat of the same (object, type, reason, note, action) within `window`
  (client-go: 6 minutes) of the last one is the same event: its `series`
  (count, lastObservedTime) is sent as a JSON merge patch; RBAC allows events
  `create` and `patch`, nothing else. A patch that finds the event gone (the API
  server's event TTL is 1 hour) creates it again, as client-go does. A repeat after
  the window, or with another note, is a new event.

Invariants:
- `record()` never blocks and never raises for a write: observations go to a
  queue per namespace (the event's), `kit/fairqueue.py`, all of them together at most
  `max_queued` series (client-go: 1000 events); repeats of a series already queued
  only bump its count, so they take no room. A namespace alone may fill every place;
  when they are all taken, a series of a namespace that holds fewer than the one
  holding the most takes that one's newest place (it is dropped), and any other is
  dropped itself: with N namespaces queuing, each keeps at least 1000 / N - 1
  places, whatever another floods. (`max_queued_per_namespace` can bound one
  namespace's share further; by default only the total does.) Drops are counted, in
  all and by namespace (`stats.dropped`, `stats.dropped_by_namespace`).
- fair by namespace (docs/security.md): one sender (`run()`) takes a token of its bucket,
  then the next namespace's oldest series, the namespaces in turn: with N
  namespaces waiting, each gets at least one write in every N, so a namespace that
  floods the budget spends its own share (qps / the namespaces waiting, and what
  the others leave) and another's event waits for at most one write of each other
  namespace per series of its own ahead of it. The daemon gives events a bucket of
  their own, so an event never takes a token a status write needs.
- write failures are logged and counted (`stats.failed`), never retried here (the
  next repeat writes the series again) and never raised; cancellation is.
- log lines a namespace can cause (`event.dropped`, `event.write_failed`): at most
  one a minute per namespace and kind (kit/repeats.py, saying how many were held
  back), the server's message cut to `NOTE_LIMIT` bytes.
- the cache of series holds at most `max_cached` entries (least recently seen
  evicted first); counters and log-line limits by namespace are kept for at most
  `COUNTED_NAMESPACES` namespaces (the least recently counted forgotten first); time
  comes from the injected clocks.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
import structlog

from probemarker.api.rules import REPORTING_CONTROLLER
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kit.fairqueue import FairQueue
from probemarker.kit.repeats import Repeats
from probemarker.kit.text import trim_utf8
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import ApiConflict, ApiNotFound, KubeError
from probemarker.kube.connect.resources import EVENTS
from probemarker.kube.write.ratelimit import TokenBucket

__all__ = [
    "COUNTED_NAMESPACES",
    "FIELD_LIMIT",
    "NOTE_LIMIT",
    "EventRecorder",
    "EventStats",
    "EventType",
    "ObjectRef",
    "RecorderSettings",
    "event_name",
    "micro_time",
]

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]

# pkg/apis/core/validation/events.go; Go's len() counts bytes.
NOTE_LIMIT = 1024
FIELD_LIMIT = 128  # reason, action, reportingInstance
_NAME_LIMIT = 253
# Namespaces whose counters (dropped, sent) are kept: more than a node's pods can
# spread over, so only a cluster with this many namespaces of events on one node
# forgets the least recently counted.
COUNTED_NAMESPACES = 1024
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MERGE_PATCH = "application/merge-patch+json"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about (an `ObjectReference`)."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = "v1"
    resource_version: str = ""

    @property
    def identity(self) -> tuple[str, str, str, str, str]:
        """The object itself, whatever its resourceVersion (which changes on every write)."""
        return (self.kind, self.namespace, self.name, self.uid, self.api_version)

    def as_json(self) -> dict[str, str]:
        ref = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "apiVersion": self.api_version,
        }
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        return ref


@dataclass(frozen=True, slots=True)
class RecorderSettings:
    window: float = 360.0  # seconds; client-go tools/events finishTime
    max_cached: int = 4096  # series remembered for repeats
    max_queued: int = 1000  # series waiting to be written; client-go maxQueuedEvents
    max_queued_per_namespace: int | None = None  # of which one namespace's (None: all)
    request_timeout: float = 10.0  # each write
    log_interval: float = 60.0  # one line per namespace and kind of trouble, at most


@dataclass(slots=True)
class EventStats:
    """Counters for the metrics."""

    recorded: int = 0  # observations accepted by record()
    created: int = 0
    patched: int = 0
    # observations dropped (their namespace's queue, or the whole queue, was full) and
    # queued series pushed out for another namespace's
    dropped: int = 0
    queued_max: int = 0  # the most series ever waiting at once (the queue holds max_queued)
    failed: int = 0  # writes the API server refused or that got no answer
    evicted: int = 0  # series forgotten to keep the cache bounded
    # By the event's namespace (at most COUNTED_NAMESPACES of each): drops, requests sent.
    dropped_by_namespace: dict[str, int] = field(default_factory=dict)
    sent_by_namespace: dict[str, int] = field(default_factory=dict)


def _count(counts: dict[str, int], namespace: str) -> None:
    """One more for `namespace`, which becomes the most recently counted."""
    counts[namespace] = counts.pop(namespace, 0) + 1
    while len(counts) > COUNTED_NAMESPACES:
        del counts[next(iter(counts))]


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime's JSON form (RFC 3339, microseconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(object_name: str, unix_nanos: int) -> str:
    """client-go's GenerateEventName: `<name>.<nanos in hex>`, or a UUID if not valid."""
    name = f"{object_name}.{unix_nanos:x}"
    if len(name) > _NAME_LIMIT or not _DNS_SUBDOMAIN.fullmatch(name):
        return str(uuid.uuid4())
    return name


@dataclass(frozen=True, slots=True)
class _Key:
    regarding: tuple[str, str, str, str, str]  # kind, namespace, name, uid, apiVersion
    type: str
    reason: str
    note: str
    action: str


@dataclass(slots=True, eq=False)
class _Series:
    """One event and its repeats; mutable, owned by the recorder."""

    name: str
    namespace: str
    body: dict[str, Any]  # the event as created, without `series`
    count: int
    seen: float  # monotonic time of the last observation
    seen_wall: datetime
    written: int = 0  # the count the API server has
    created: bool = False
    queued: bool = False


def _utcnow() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    """Records events without blocking the caller; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node_name: str,
        limiter: TokenBucket,
        clock: Clock = MONOTONIC,
        wall: Callable[[], datetime] = _utcnow,
        settings: RecorderSettings | None = None,
    ) -> None:
        if not node_name:
            raise ValueError("node_name is required (the events' reportingInstance)")
        self._client = client
        self._instance = trim_utf8(node_name, FIELD_LIMIT)
        self._limiter = limiter
        self._clock = clock
        self._wall = wall
        self.settings = settings or RecorderSettings()
        self.stats = EventStats()
        self._cache: OrderedDict[_Key, _Series] = OrderedDict()
        self._queue: FairQueue[str, _Series] = FairQueue(
            per_flow=self.settings.max_queued_per_namespace, total=self.settings.max_queued
        )
        self._queued = asyncio.Event()  # set when a series is queued
        self._progress = asyncio.Event()  # set when a write ends, for `drain`
        self._writing = False
        # (kind, namespace) -> when last logged: two kinds of trouble per namespace counted
        self._repeats = Repeats(self.settings.log_interval, max_keys=2 * COUNTED_NAMESPACES)
        self._last_nanos = 0

    def __repr__(self) -> str:
        return f"EventRecorder({self._instance!r}, queued={self.queued}, {self.stats})"

    @property
    def queued(self) -> int:
        """Series waiting to be written now (the queue holds `settings.max_queued`)."""
        return len(self._queue)

    def queued_by_namespace(self) -> dict[str, int]:
        """Series waiting to be written now, by namespace (namespaces with none are not
        listed); for the metrics."""
        return self._queue.depths()

    # -- the caller's side ------------------------------------------------------------

    def record(
        self, *, regarding: ObjectRef, type: EventType, reason: str, note: str, action: str
    ) -> None:
        """Note an event; it is written later by `run()`. Raises only for bad arguments."""
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        for name, value in (("reason", reason), ("action", action)):
            if not value or len(value.encode()) > FIELD_LIMIT:
                raise ValueError(f"event {name} must be 1 to {FIELD_LIMIT} bytes: {value!r}")
        note = trim_utf8(note, NOTE_LIMIT)
        key = _Key(regarding.identity, type, reason, note, action)
        now, wall = self._clock.now(), self._wall()
        series = self._cache.get(key)
        if series is not None and now - series.seen <= self.settings.window:
            series.count += 1
            series.seen, series.seen_wall = now, wall
            self._cache.move_to_end(key)
        else:
            series = self._new_series(key, regarding, now=now, wall=wall)
            self._cache[key] = series
            self._cache.move_to_end(key)
            while len(self._cache) > self.settings.max_cached:
                self._cache.popitem(last=False)
                self.stats.evicted += 1
        self.stats.recorded += 1
        self._enqueue(series)

    def _new_series(
        self, key: _Key, regarding: ObjectRef, *, now: float, wall: datetime
    ) -> _Series:
        nanos = (wall - _EPOCH) // timedelta(microseconds=1) * 1000
        # Two events of one object within one clock tick still get distinct names.
        self._last_nanos = max(nanos, self._last_nanos + 1)
        namespace = regarding.namespace or "default"
        name = event_name(regarding.name, self._last_nanos)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(wall),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": key.action,
            "reason": key.reason,
            "regarding": regarding.as_json(),
            "note": key.note,
            "type": key.type,
        }
        return _Series(name, namespace, body, count=1, seen=now, seen_wall=wall)

    def _enqueue(self, series: _Series) -> None:
        if series.queued:
            return  # the sender will write the newest count
        dropped = self._queue.push(series.namespace, series)
        if dropped is not None:
            namespace, lost = dropped
            lost.queued = False  # pushed out, or never in: its next repeat queues it again
            self._dropped(namespace)
            if lost is series:
                return
        series.queued = True
        self._queued.set()
        self.stats.queued_max = max(self.stats.queued_max, len(self._queue))

    def _dropped(self, namespace: str) -> None:
        self.stats.dropped += 1
        _count(self.stats.dropped_by_namespace, namespace)
        fields = self._repeats.fields(("dropped", namespace), self._clock.now())
        if fields is not None:
            log.warning(
                "event.dropped",
                namespace=namespace,
                reason="queue full",
                queued=self._queue.depth(namespace),
                limit=self.settings.max_queued,
                **fields,
            )

    # -- the sender ---------------------------------------------------------------------

    async def run(self) -> None:
        """Write queued events, one at a time, the namespaces in turn, until cancelled."""
        while True:
            while not self._queue:
                self._queued.clear()
                await self._queued.wait()
            await self._limiter.acquire()
            # Whose turn: asked only now, with the token in hand.
            popped = self._queue.pop()
            if popped is None:
                self._limiter.refund()
                continue
            series = popped[1]
            series.queued = False  # repeats from now on queue it again
            self._writing = True
            try:
                await self._write(series)
            finally:
                self._writing = False
                self._progress.set()

    async def drain(self) -> None:
        """Wait until every queued event has been written (or has failed)."""
        while self._queue or self._writing:
            await self._progress.wait()
            self._progress.clear()

    async def _write(self, series: _Series) -> None:
        """Write `series`, a token of the bucket in hand for its first request."""
        count, seen = series.count, series.seen_wall
        if count == series.written:
            self._limiter.refund()
            return
        try:
            if series.created:
                try:
                    await self._send("patch", series, count, seen)
                except ApiNotFound:
                    await self._limiter.acquire()  # a second request, a second token
                    await self._send("create", series, count, seen)
            else:
                await self._send("create", series, count, seen)
        except ApiConflict:
            # AlreadyExists: an earlier create got through although its answer did not
            # reach us. The event is there; the next repeat patches its series.
            series.created = True
            return
        except KubeError as error:
            self.stats.failed += 1
            fields = self._repeats.fields(("write_failed", series.namespace), self._clock.now())
            if fields is not None:
                log.warning(
                    "event.write_failed",
                    name=f"{series.namespace}/{series.name}",
                    reason=series.body["reason"],
                    count=count,
                    error=trim_utf8(str(error), NOTE_LIMIT),
                    **fields,
                )
            return
        series.written = count

    async def _send(self, verb: str, series: _Series, count: int, seen: datetime) -> None:
        """`create` the event (with its series if repeated already), or `patch` its
        series; the caller took its token."""
        repeats = {"series": {"count": count, "lastObservedTime": micro_time(seen)}}
        name: str | None = None
        if verb == "create":
            method, body, content_type = "POST", series.body, "application/json"
            if count > 1:
                body = body | repeats
        else:
            name, method, body, content_type = series.name, "PATCH", repeats, _MERGE_PATCH
        path = EVENTS.path(series.namespace, name)
        info = EVENTS.info(verb, series.namespace, name)
        _count(self.stats.sent_by_namespace, series.namespace)
        await self._client.request(
            method,
            path,
            info=info,
            body=orjson.dumps(body),
            content_type=content_type,
            wait=self.settings.request_timeout,
        )
        if verb == "create":
            series.created = True
            self.stats.created += 1
        else:
            self.stats.patched += 1
