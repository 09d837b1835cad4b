"""Watches on the sim's store: the per-watch event queue and the kept event history.

A :class:`Watch` is what ``Store.watch`` returns: an async iterator of
:class:`WatchEvent` fed synchronously by the store on every write. Its queue is
unbounded, so a slow reader never loses or reorders events. Bookmarks are produced by
the iterator itself when no event arrived for ``bookmark_interval`` seconds and the
queue is empty, carrying the store's current resourceVersion (safe: every event up to
that version has been delivered). An ERROR event ends the watch.

:class:`History` keeps the last ``limit`` events across all resources, like an etcd
compaction window; ``floor`` is the newest resourceVersion that can no longer be
resumed from (a watch from ``rv < floor`` gets 410 ``too old resource version``).

:func:`open_watch` starts a watch as the watch cache does: the current state as ADDED
(then, if asked, a bookmark annotated ``k8s.io/initial-events-end``), or the kept
events after a version, or one ERROR event (410 Expired) when that version has left
the history; :func:`failed_watch` only sends an ERROR event. A filtered watcher sees
an object start or cease to match as ADDED or DELETED (:func:`transition`); bookmarks
never go back before the watch's start.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from probemarker.sim.errors import Expired
from probemarker.sim.store.listopts import WatchStart
from probemarker.sim.store.resourcetype import ResourceType, bucket_of, present

__all__ = [
    "History",
    "HistoryEntry",
    "Watch",
    "WatchEvent",
    "failed_watch",
    "open_watch",
    "transition",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event. ``object`` is shared with the store and other watchers: treat it
    as read-only (serialize it, never mutate it)."""

    type: EventType
    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One write: ``obj`` the new state (for DELETED: the last state with the deletion
    resourceVersion), ``prev`` the state before (None for creations)."""

    rv: int
    type: EventType
    bucket: tuple[str, str]
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class History:
    """The kept window of writes, oldest first."""

    def __init__(self, limit: int) -> None:
        self._entries: collections.deque[HistoryEntry] = collections.deque()
        self._limit = max(0, limit)
        self.floor = 0

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = max(0, value)
        self._trim()

    def append(self, entry: HistoryEntry) -> None:
        self._entries.append(entry)
        self._trim()

    def drop(self, current_rv: int) -> None:
        """Forget every kept event: any resume older than ``current_rv`` gets 410."""
        self._entries.clear()
        self.floor = current_rv

    def since(self, rv: int) -> Iterator[HistoryEntry]:
        return (e for e in self._entries if e.rv > rv)

    def _trim(self) -> None:
        while len(self._entries) > self._limit:
            self.floor = self._entries.popleft().rv


_CLOSE = object()


class Watch:
    """An open watch. Iterate with ``async for``; ``close()`` ends it from outside."""

    def __init__(
        self,
        *,
        bucket: tuple[str, str],
        accept: Callable[[HistoryEntry], WatchEvent | None],
        bookmark: Callable[[], WatchEvent | None] | None,
        bookmark_interval: Callable[[], float],
        on_close: Callable[[Watch], None],
    ) -> None:
        self.bucket = bucket
        self._accept = accept
        self._bookmark = bookmark
        self._bookmark_interval = bookmark_interval
        self._on_close = on_close
        self._queue: asyncio.Queue[WatchEvent | object] = asyncio.Queue()
        self._closed = False
        self._ended = False

    def __repr__(self) -> str:
        return f"Watch(bucket={self.bucket!r}, queued={self._queue.qsize()}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        return self._closed

    def offer(self, entry: HistoryEntry) -> None:
        """Called by the store for every write in this watch's bucket, in order."""
        if self._closed:
            return
        event = self._accept(entry)
        if event is not None:
            self._queue.put_nowait(event)

    def push(self, event: WatchEvent) -> None:
        if not self._closed:
            self._queue.put_nowait(event)

    def fail(self, status: dict[str, Any]) -> None:
        """Send an ERROR event carrying ``status``; the watch ends after it."""
        self.push(WatchEvent("ERROR", status))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put_nowait(_CLOSE)
        self._on_close(self)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchEvent:
        if self._ended or (self._closed and self._queue.empty()):
            raise StopAsyncIteration
        item = await self._next_item()
        if item is _CLOSE or not isinstance(item, WatchEvent):
            self._ended = True
            raise StopAsyncIteration
        if self._closed:
            # close() was called while events were queued: stop now, as a cut stream does.
            self._ended = True
            raise StopAsyncIteration
        if item.type == "ERROR":
            self._ended = True
            self.close()
        return item

    async def _next_item(self) -> WatchEvent | object:
        if not self._queue.empty():
            return self._queue.get_nowait()
        if self._bookmark is None:
            return await self._queue.get()
        while True:
            try:
                return await asyncio.wait_for(self._queue.get(), self._bookmark_interval())
            except TimeoutError:
                if self._queue.empty():
                    event = self._bookmark()
                    if event is not None:
                        return event


def transition(
    entry: HistoryEntry,
    matches: Callable[[Mapping[str, Any]], bool],
    present: Callable[[dict[str, Any]], dict[str, Any]],
) -> WatchEvent | None:
    """What one write means to a watcher with a filter (cacheWatcher.convertToWatchEvent):
    starting to match is ADDED, ceasing to match is DELETED carrying the last matching
    state with the write's resourceVersion, no match either side is nothing."""
    cur = entry.type != "DELETED" and matches(entry.obj)
    prev = entry.prev is not None and matches(entry.prev)
    if cur:
        return WatchEvent("MODIFIED" if prev else "ADDED", present(entry.obj))
    if not prev or entry.prev is None:
        return None
    if entry.type == "DELETED":
        return WatchEvent("DELETED", present(entry.obj))
    last = dict(entry.prev)
    last["metadata"] = dict(entry.prev["metadata"], resourceVersion=str(entry.rv))
    return WatchEvent("DELETED", present(last))


def open_watch(
    rt: ResourceType,
    start: WatchStart,
    *,
    matches: Callable[[Mapping[str, Any]], bool],
    initial: Iterable[dict[str, Any]],
    current_rv: Callable[[], int],
    history: History,
    bookmark_interval: Callable[[], float],
    on_close: Callable[[Watch], None],
    register: Callable[[Watch], None],
) -> Watch:
    """A new watch on ``rt``'s bucket, started as ``start`` says. ``initial``: the
    bucket's objects in the watch's namespace, in key order (read only when the watch
    starts with the state); ``current_rv``: the store's resourceVersion now;
    ``register`` is called with the watch unless it failed at once (410)."""
    from_rv = current_rv() if start.from_rv is None else start.from_rv

    def present_shared(obj: dict[str, Any]) -> dict[str, Any]:
        return present(rt, obj, share=True)

    def bookmark(initial_end: bool = False) -> WatchEvent | None:
        if current_rv() < from_rv:
            return None  # never a bookmark older than where the watch starts
        meta: dict[str, Any] = {"resourceVersion": str(current_rv())}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return WatchEvent(
            "BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
        )

    def accept(entry: HistoryEntry) -> WatchEvent | None:
        return None if entry.rv <= from_rv else transition(entry, matches, present_shared)

    bucket = bucket_of(rt)
    watch = Watch(
        bucket=bucket,
        accept=accept,
        bookmark=bookmark if start.allow_bookmarks else None,
        bookmark_interval=bookmark_interval,
        on_close=on_close,
    )
    if start.initial:
        for obj in initial:
            if matches(obj):
                watch.push(WatchEvent("ADDED", present_shared(obj)))
        end = bookmark(initial_end=True) if start.initial_end_bookmark else None
        if end is not None:
            watch.push(end)
    elif from_rv < history.floor:
        watch.fail(Expired(f"too old resource version: {from_rv} ({history.floor})").to_status())
        return watch
    else:
        for entry in history.since(from_rv):
            if entry.bucket == bucket:
                watch.offer(entry)
    register(watch)
    return watch


def failed_watch(
    bucket: tuple[str, str],
    status: dict[str, Any],
    *,
    bookmark_interval: Callable[[], float],
    on_close: Callable[[Watch], None],
) -> Watch:
    """A watch that only sends ``status`` as an ERROR event (the cacher's errWatcher)."""
    watch = Watch(
        bucket=bucket,
        accept=lambda entry: None,
        bookmark=None,
        bookmark_interval=bookmark_interval,
        on_close=on_close,
    )
    watch.fail(status)
    return watch
