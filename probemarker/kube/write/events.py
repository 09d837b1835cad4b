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
  queue of at most `max_queued` series (client-go: 1000 events); repeats of a
  series already queued only bump its count, so they take no room; when the queue
  is full the observation is dropped and counted (`stats.dropped`). One sender
  (`run()`) writes in order, each write after a token of its bucket: the daemon gives
  events a bucket of their own, so an event never takes a token a status write needs.
- write failures are logged and counted (`stats.failed`), never retried here (the
  next repeat writes the series again) and never raised; cancellation is.
- the cache of series holds at most `max_cached` entries (least recently seen
  evicted first); time comes from the injected clocks.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
import structlog

from probemarker.api.rules import REPORTING_CONTROLLER
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kit.text import trim_utf8
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import ApiConflict, ApiNotFound, KubeError
from probemarker.kube.connect.resources import EVENTS
from probemarker.kube.write.ratelimit import TokenBucket

__all__ = [
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
    request_timeout: float = 10.0  # each write


@dataclass(slots=True)
class EventStats:
    """Counters for the metrics."""

    recorded: int = 0  # observations accepted by record()
    created: int = 0
    patched: int = 0
    dropped: int = 0  # observations dropped: the queue was full
    queued_max: int = 0  # the most series ever waiting at once (the queue holds max_queued)
    failed: int = 0  # writes the API server refused or that got no answer
    evicted: int = 0  # series forgotten to keep the cache bounded


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
        self._queue: asyncio.Queue[_Series] = asyncio.Queue(self.settings.max_queued)
        self._last_nanos = 0
        self._dropping = False

    def __repr__(self) -> str:
        return f"EventRecorder({self._instance!r}, queued={self.queued}, {self.stats})"

    @property
    def queued(self) -> int:
        """Series waiting to be written now (the queue holds `settings.max_queued`)."""
        return self._queue.qsize()

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
        try:
            self._queue.put_nowait(series)
        except asyncio.QueueFull:
            self.stats.dropped += 1
            if not self._dropping:
                log.warning("event.dropped", reason="queue full", limit=self._queue.maxsize)
            self._dropping = True
            return
        self._dropping = False
        series.queued = True
        self.stats.queued_max = max(self.stats.queued_max, self._queue.qsize())

    # -- the sender ---------------------------------------------------------------------

    async def run(self) -> None:
        """Write queued events, one at a time, until cancelled."""
        while True:
            series = await self._queue.get()
            try:
                series.queued = False  # repeats from now on queue it again
                await self._write(series)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued event has been written (or has failed)."""
        await self._queue.join()

    async def _write(self, series: _Series) -> None:
        count, seen = series.count, series.seen_wall
        if count == series.written:
            return
        try:
            if series.created:
                try:
                    await self._send("patch", series, count, seen)
                except ApiNotFound:
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
            log.warning(
                "event.write_failed",
                name=f"{series.namespace}/{series.name}",
                reason=series.body["reason"],
                count=count,
                error=str(error),
            )
            return
        series.written = count

    async def _send(self, verb: str, series: _Series, count: int, seen: datetime) -> None:
        """`create` the event (with its series if repeated already), or `patch` its series."""
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
        await self._limiter.acquire()
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
