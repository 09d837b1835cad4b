"""The informer: one generic LIST+WATCH loop per scope unit, as client-go's reflector.

Stage: the daemon's input. Input: a `ListWatchClient` (the `KubeClient`), what to
watch (`Resource`, namespaces, selectors), a projection function. Output: a store of
projections (`get`, `list`), the `Change`s on a memory object stream (`changes`), a
`synced` event, and `counters` for the metrics.

Each scope unit (all namespaces, or one namespace of a set) runs its own loop:

1. LIST (paged with `limit` where the server pages, following `metadata.continue`;
   every answer read item by item as it arrives, each item projected at once, and an
   unchanged projection shared with the store, so a re-list never holds the raw list
   nor two copies of the store):
   the first from `resourceVersion=0`, served from the API server's watch cache, so
   thousands of daemons starting at once do not read etcd; after a 410 on the watch,
   from the last seen resourceVersion (not older than what we saw, still from the
   cache: reflector.go keeps `isLastSyncResourceVersionUnavailable` false there);
   after a 410 on that list, or a "too large resource version", `resourceVersion=""`
   (a consistent read). An expired continue token (410) restarts as one unpaged
   consistent LIST (the pager's FullListIfExpired). The unit's part of the store is
   replaced atomically and exactly the changes a watch would have emitted are sent.
2. WATCH from the last seen resourceVersion, with bookmarks and a random
   `timeoutSeconds`; a client-side read deadline of that timeout plus a margin (no
   byte at all, bookmarks included, means a half-open connection); a normal close
   resumes from the last seen resourceVersion (a bookmark's included).
3. Errors: 410 Gone (HTTP or an ERROR event) re-lists at once; anything else (the
   server unreachable, 429, 5xx, the read deadline, a malformed line, a watch closed
   within a second without a line) waits a capped, jittered backoff (at least a 429's
   Retry-After), then resumes the watch, or retries the list if it never succeeded.
   Failures are logged once per kind at most once a minute (`describe_failure`,
   `kit.repeats`): an unreachable server names its address, a resource the server
   does not serve (a CRD not installed) says so and what to do.

Liveness (`overdue`, `problem`): each loop notes the time by which its current wait
must end on its own: a LIST page's deadline, a watch's read deadline (timeoutSeconds
plus the margin, from its last line), a backoff's end. A loop past that time by much
is hung (a deadline that did not fire), which a restart of the process fixes; a loop
that keeps failing and retrying is not hung (a restart would not bring the API server
back), it says why in `problem` until the server answers again. Waiting for its own
consumer to take changes is not a hang either: no deadline applies then.

Invariants: per key, changes reach the stream in the order the server made them;
a re-list emits only differences (cache.py); the store holds projections only;
every task lives in `run`'s task group, and cancelling `run` closes the stream.
"""

from __future__ import annotations

import builtins
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import structlog

from probemarker.kit.backoff import Backoff
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kit.repeats import Repeats
from probemarker.kube.connect.errors import ApiError, ApiGone, ApiMalformed, KubeError, RequestInfo
from probemarker.kube.watch.cache import Change, Entry, ObjectKey, Store, entry_of
from probemarker.kube.watch.informerfailures import Failure, describe_failure
from probemarker.kube.watch.informertypes import (
    PODS,
    InformerCounters,
    InformerSettings,
    ListWatchClient,
    Resource,
)
from probemarker.kube.watch.watchevents import BookmarkEvent, ErrorEvent, parse_watch_line

__all__ = [
    "PODS",
    "Failure",
    "Informer",
    "InformerCounters",
    "InformerSettings",
    "ListWatchClient",
    "Resource",
    "ShortWatch",
    "describe_failure",
]

T = TypeVar("T")
log = structlog.get_logger(__name__)


class ShortWatch(KubeError):
    """A watch the server closed within `short_watch` seconds without sending a line."""


@dataclass(slots=True)
class _Unit:
    """One LIST+WATCH loop's state."""

    namespace: str | None
    backoff: Backoff
    resource_version: str = ""  # the last seen one
    list_from: str | None = "0"  # the resourceVersion to LIST from next; None: watch
    synced: bool = False
    # Clock time by which the current wait ends by a deadline of its own (see the module
    # docstring); inf while no deadline applies (not started, or waiting for the consumer).
    due_by: float = math.inf


def _too_large(err: ApiError) -> bool:
    """apierrors' "Too large resource version" (504 with a ResourceVersionTooLarge cause)."""
    details = (err.status or {}).get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    if isinstance(causes, list) and any(
        isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge" for c in causes
    ):
        return True
    return "Too large resource version" in err.message


class Informer(Generic[T]):
    """See the module docstring. Build it, start `run()` in a task group, read `changes`."""

    def __init__(
        self,
        *,
        client: ListWatchClient,
        resource: Resource,
        project: Callable[[Mapping[str, Any]], T],
        namespaces: Iterable[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        settings: InformerSettings | None = None,
        clock: Clock = MONOTONIC,
        rng: random.Random | None = None,
        name: str | None = None,
        server: str = "",
        missing_hint: str = "",
        repeats: Repeats | None = None,
    ) -> None:
        self._client = client
        self.resource = resource
        self._project = project
        self.settings = settings or InformerSettings()
        self._clock = clock
        self._rng = rng or random.Random()
        units = (None,) if namespaces is None else tuple(sorted(set(namespaces)))
        if not units:
            raise ValueError("namespaces: give at least one, or None for all")
        if not resource.namespaced and units != (None,):
            raise ValueError(f"{resource.plural} are cluster-scoped: namespaces must be None")
        self.namespaces = units
        self._selectors: list[tuple[str, str]] = []
        if label_selector:
            self._selectors.append(("labelSelector", label_selector))
        if field_selector:
            self._selectors.append(("fieldSelector", field_selector))
        self.name = name or resource.plural
        # For the failure lines: the API server's address, what to do when the resource
        # is not served (a CRD not installed), and the once-a-minute limit (one can be
        # shared by several informers, so an outage is one line a minute, not one each).
        self._server = server
        self._missing_hint = missing_hint
        self._repeats = repeats if repeats is not None else Repeats()
        self._failure_keys: set[tuple[str, ...]] = set()
        self._store: Store[T] = Store()
        self._send, self.changes = anyio.create_memory_object_stream[Change[T]](
            self.settings.buffer
        )
        self._emitting = True
        self.synced = anyio.Event()
        self.counters = InformerCounters()
        self._started = False
        self._synced_units = 0
        self._units: builtins.list[_Unit] = []
        # Why the last LIST or WATCH failed, as its log line says; None once the server
        # answers again. For the readiness endpoint: what a daemon not ready waits for.
        self.problem: str | None = None

    def __repr__(self) -> str:
        return f"Informer({self.name!r}, units={len(self.namespaces)}, {self._store!r})"

    # -- reading -----------------------------------------------------------------------

    def get(self, key: ObjectKey) -> T | None:
        entry = self._store.get(key)
        return None if entry is None else entry.obj

    def entry(self, key: ObjectKey) -> Entry[T] | None:
        """The projection with its key, uid and resourceVersion."""
        return self._store.get(key)

    def entries(self, namespace: str | None = None) -> builtins.list[Entry[T]]:
        """Every entry (or those of one namespace), in key order."""
        return self._store.entries(namespace)

    def list(self, namespace: str | None = None) -> builtins.list[T]:
        """Every projection (or those of one namespace), in key order."""
        return [entry.obj for entry in self._store.entries(namespace)]

    async def wait_synced(self) -> None:
        """Return once the store holds the first LIST of every scope unit."""
        await self.synced.wait()

    def overdue(self) -> float:
        """Seconds the most overdue loop is past the time its wait should have ended by
        a deadline of its own (negative: none is); see the module docstring."""
        now = self._clock.now()
        return max((now - unit.due_by for unit in self._units), default=-math.inf)

    def close(self) -> None:
        """Close both ends of `changes`: for an owner that stops before `run()` ran or
        before it read them (idempotent; `run()` and the consumer close their own)."""
        self._send.close()
        self.changes.close()

    def _expect(self, unit: _Unit, seconds: float) -> None:
        """The wait starting now ends by its own deadline within `seconds`."""
        unit.due_by = self._clock.now() + seconds

    # -- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """Run every unit's loop until cancelled; the `changes` stream ends then."""
        if self._started:
            raise RuntimeError(f"{self!r} runs only once")
        self._started = True
        async with self._send, anyio.create_task_group() as group:
            for namespace in self.namespaces:
                unit = _Unit(namespace, Backoff(self.settings.backoff, rng=self._rng))
                self._units.append(unit)
                group.start_soon(self._run_unit, unit, name=f"informer {self.name} {namespace}")

    async def _run_unit(self, unit: _Unit) -> None:
        while True:
            try:
                if unit.list_from is not None:
                    await self._list(unit)
                await self._watch(unit)
            except KubeError as err:
                await self._recover(unit, err)

    async def _recover(self, unit: _Unit, err: KubeError) -> None:
        """The one decision point after a failed LIST or WATCH."""
        listing = unit.list_from is not None
        self.counters.errors[type(err).__name__] += 1
        context = {**self._where(unit), "error": str(err)}
        too_large = isinstance(err, ApiError) and _too_large(err)
        if isinstance(err, ApiGone) or too_large:
            self.counters.gone += 1
            if not listing:
                # A watch too old for the server's history: LIST not older than what we
                # saw, from the watch cache (reflector.go); a version the server has not
                # reached yet (another replica behind a load balancer): a consistent LIST.
                unit.list_from = "" if too_large else unit.resource_version
                self.counters.restarts += 1
                log.info("informer.gone", **context, relist_from=unit.list_from)
                return
            if unit.list_from not in ("", "0"):
                unit.list_from = ""  # that version is unavailable: a consistent read
                log.info("informer.gone", **context, relist_from="")
                return
        retry_after = err.retry_after if isinstance(err, ApiError) else None
        delay = unit.backoff.next_delay(
            at_least=min(retry_after or 0.0, self.settings.retry_after_max)
        )
        if not listing:
            self.counters.restarts += 1
        self._log_failure(unit, err, listing=listing, delay=delay)
        self._expect(unit, delay)
        await self._clock.sleep(delay)

    def _where(self, unit: _Unit) -> dict[str, str]:
        """The informer, and the namespace when the unit watches one (not all)."""
        where = {"informer": self.name}
        if unit.namespace is not None:
            where["namespace"] = unit.namespace
        return where

    def _log_failure(self, unit: _Unit, err: KubeError, *, listing: bool, delay: float) -> None:
        """One line per kind of failure at most once a minute, not one per retry."""
        failure = describe_failure(
            err,
            listing=listing,
            resource=self.resource,
            server=self._server,
            missing_hint=self._missing_hint,
        )
        key = failure.key or (self.name, str(unit.namespace), failure.event, type(err).__name__)
        self._failure_keys.add(key)
        self.problem = failure.fields.get("message") or f"{failure.event}: {err}"
        held = self._repeats.fields(key, self._clock.now())
        if held is None:
            return
        log.warning(
            failure.event,
            **self._where(unit),
            **failure.fields,
            retry_in=round(delay, 3),
            failures=unit.backoff.failures,
            **held,
        )

    def _recovered(self) -> None:
        """The server answered: the next failure of any kind is logged at once."""
        for key in self._failure_keys:
            self._repeats.clear(key)
        self._failure_keys.clear()
        self.problem = None

    # -- LIST --------------------------------------------------------------------------

    async def _list(self, unit: _Unit) -> None:
        assert unit.list_from is not None
        entries, resource_version = await self._list_all(unit, unit.list_from)
        changes = self._store.replace(
            entries.values(), namespace=unit.namespace, resource_version=resource_version
        )
        first = not unit.synced
        unit.resource_version, unit.list_from, unit.synced = resource_version, None, True
        unit.backoff.reset()
        self._recovered()
        self.counters.lists += 1
        self.counters.last_progress = self._clock.now()
        if first:
            # Synced means the store holds every unit's first LIST; the changes of that
            # LIST may still be on their way to the consumer (it need not read them first).
            self._synced_units += 1
            if self._synced_units == len(self.namespaces):
                self.synced.set()
        log.info(
            "informer.listed" if first else "informer.relisted",
            **self._where(unit),
            objects=len(entries),
            changes=len(changes),
            resource_version=resource_version,
        )
        await self._emit(unit, changes)

    def _listed(self, raw: Mapping[str, Any], into: dict[ObjectKey, Entry[T]]) -> None:
        """One listed object, projected at once (its raw form is dropped) into `into`.
        A projection equal to the stored one is the stored one: a re-list of unchanged
        objects holds one copy of each, not two."""
        entry = entry_of(raw, self._project)
        stored = self._store.get(entry.key)
        if stored is not None and stored.uid == entry.uid and stored.obj == entry.obj:
            entry = Entry(entry.key, entry.uid, entry.resource_version, stored.obj)
        into[entry.key] = entry

    async def _list_all(
        self, unit: _Unit, resource_version: str
    ) -> tuple[dict[ObjectKey, Entry[T]], str]:
        """Every object of a unit, following continue tokens; the list's resourceVersion.
        The answers are read item by item (`list_page`): never a whole page in memory."""
        namespace = unit.namespace
        path, info = self.resource.path(namespace), self.resource.info("list", namespace)
        # Page where the server pages: a list from a given version (not ""/"0") is sent
        # whole, so the watch cache serves it (reflector.go sets PageSize 0 there).
        paged = resource_version in ("", "0") and self.settings.page_size > 0
        limit = [("limit", str(self.settings.page_size))] if paged else []
        version = [("resourceVersion", resource_version)] if resource_version else []
        params = [*self._selectors, *version, *limit]
        entries: dict[ObjectKey, Entry[T]] = {}

        def item(raw: dict[str, Any]) -> None:
            try:
                self._listed(raw, entries)
            except (KeyError, TypeError, AttributeError) as err:
                raise ApiMalformed(
                    f"a listed item is not an object: {err!r}", request=info
                ) from err

        while True:
            try:
                self._expect(unit, self.settings.list_timeout)
                page = await self._client.list_page(
                    path, info=info, item=item, params=params, wait=self.settings.list_timeout
                )
            except ApiGone:
                if not any(k == "continue" for k, _ in params):
                    raise
                # The continue token expired between pages: one whole consistent LIST.
                where = {"namespace": namespace} if namespace is not None else {}
                log.info("informer.continue_expired", informer=self.name, **where)
                params = list(self._selectors)
                entries.clear()
                continue
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return entries, str(meta.get("resourceVersion") or "")
            params = [*self._selectors, *limit, ("continue", str(token))]

    # -- WATCH -------------------------------------------------------------------------

    async def _watch(self, unit: _Unit) -> None:
        settings = self.settings
        timeout = int(self._rng.uniform(settings.watch_timeout_min, settings.watch_timeout_max))
        params = [
            *self._selectors,
            ("watch", "true"),
            ("resourceVersion", unit.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        path, info = self.resource.path(unit.namespace), self.resource.info("watch", unit.namespace)
        started, lines = self._clock.now(), 0
        # The connection, the answer's head and every line after it: each within the
        # client's read deadline (timeoutSeconds + margin) of the previous one.
        self._expect(unit, timeout + settings.read_margin)
        async with self._client.stream_lines(
            path, info=info, params=params, read_timeout=timeout + settings.read_margin
        ) as stream:
            self.counters.watches += 1
            self.counters.last_progress = self._clock.now()
            async for line in stream:
                lines += 1
                await self._handle_line(unit, line, info)
                self._expect(unit, timeout + settings.read_margin)
        if not lines and self._clock.now() - started < settings.short_watch:
            raise ShortWatch("the server closed the watch at once without a line", request=info)
        # A normal close (the server's timeoutSeconds): resume where we are.
        self.counters.restarts += 1
        self.counters.last_progress = self._clock.now()
        log.debug(
            "informer.watch_restarted",
            **self._where(unit),
            reason="closed",
            resource_version=unit.resource_version,
        )

    async def _handle_line(self, unit: _Unit, line: bytes, info: RequestInfo) -> None:
        self.counters.last_progress = self._clock.now()
        event = parse_watch_line(line, request=info)
        if isinstance(event, ErrorEvent):
            raise event.error
        if unit.backoff.failures:
            unit.backoff.reset()  # the server talks again
            self._recovered()
        if isinstance(event, BookmarkEvent):
            self.counters.bookmarks += 1
            unit.resource_version = event.resource_version
            return
        self.counters.events += 1
        try:
            entry = entry_of(event.object, self._project)
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            # As for a listed item: the projection cannot read this object.
            raise ApiMalformed(
                f"a watched object cannot be projected: {err!r}", request=info
            ) from err
        changes = self._store.apply(event.type, entry)
        unit.resource_version = entry.resource_version
        await self._emit(unit, changes)

    async def _emit(self, unit: _Unit, changes: builtins.list[Change[T]]) -> None:
        self.counters.changes += len(changes)
        if not self._emitting:
            return
        unit.due_by = math.inf  # waiting for our own consumer: no deadline of ours applies
        try:
            for change in changes:
                await self._send.send(change)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # The consumer closed `changes`: it reads the store only.
            self._emitting = False
