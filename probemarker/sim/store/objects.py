"""The sim's in-memory object world: CRUD, LIST and WATCH with Kubernetes semantics.

:class:`Store` holds the state: objects in buckets keyed by (group, plural), within a
bucket by their etcd-like key (:mod:`~probemarker.sim.store.resourcetype`), a single
cluster-wide resourceVersion counter that orders every write, the open watches. Each
write is appended to a bounded :class:`~probemarker.sim.store.watchcache.History` and
offered, synchronously, to the open watches of its bucket, so watches never miss or
reorder events. What a write stores is computed in :mod:`~probemarker.sim.store.writes`
(create, update, delete marking), LIST pages in :mod:`~probemarker.sim.store.listing`,
watch starts in :mod:`~probemarker.sim.store.watchcache`. Delete is graceful for pods
and honours finalizers; removing the last finalizer of a deleted object removes it;
no-op updates write nothing.

Invariants: stored objects are never mutated in place (every write stores a new dict),
so ``list()`` items and watch event objects are shared and read-only for callers;
``get``/``create``/``update``/``delete``/``remove`` return private copies. Core objects
are stored pruned (:func:`prune_empty`), custom resources as given. Single-threaded
asyncio: no locks.
"""

from __future__ import annotations

import builtins
import random
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from probemarker.sim.errors import ApiError, NotFound
from probemarker.sim.store import strategy, watchcache, writes
from probemarker.sim.store.freshness import FreshWaiters
from probemarker.sim.store.listing import ListResult, keys_in, list_page, make_matcher
from probemarker.sim.store.listopts import FRESH_WAIT, WatchStart, legacy_watch_start
from probemarker.sim.store.objmeta import copy_json, prune_empty
from probemarker.sim.store.resourcetype import (
    NAMESPACES,
    ResourceType,
    bucket_of,
    key_of,
    object_key,
    present,
)
from probemarker.sim.store.selectors import FieldSelector, LabelSelector
from probemarker.sim.store.watchcache import History, HistoryEntry, Watch, WatchEvent

__all__ = [
    "NAMESPACES",
    "ListResult",
    "ResourceType",
    "Store",
    "Watch",
    "WatchEvent",
    "prune_empty",
]

_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Store:
    """The object world. See the module docstring for semantics."""

    def __init__(
        self,
        *,
        history_limit: int = 10000,
        clock: Callable[[], datetime] = _utcnow,
        bookmark_interval: float = 60.0,
        pod_generation: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self.bookmark_interval = bookmark_interval
        self._pod_generation = pod_generation
        self._rng = rng or random.Random()
        self._rv = 0
        self._history = History(history_limit)
        self._buckets: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._sorted: dict[tuple[str, str], builtins.list[str]] = {}
        self._watches: dict[tuple[str, str], set[Watch]] = {}
        self._fresh = FreshWaiters(lambda: self._rv)
        self.fresh_wait = FRESH_WAIT
        for ns in _INITIAL_NAMESPACES:
            self.create(NAMESPACES, strategy.namespace_object(ns), namespace=None)

    def __repr__(self) -> str:
        count = sum(len(b) for b in self._buckets.values())
        return f"Store(resource_version={self._rv}, objects={count}, floor={self._history.floor})"

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def history_limit(self) -> int:
        return self._history.limit

    @history_limit.setter
    def history_limit(self, value: int) -> None:
        self._history.limit = value

    def drop_history(self) -> None:
        """Forget all kept events: resuming a watch from any older version gets 410."""
        self._history.drop(self._rv)

    def close_watches(self) -> int:
        """End every open watch (as a dropped connection would); returns how many."""
        watches = [w for ws in self._watches.values() for w in ws]
        for w in watches:
            w.close()
        return len(watches)

    # ------------------------------------------------------------------ reads

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return present(rt, copy_json(self._lookup(rt, namespace, name)))

    def list(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        exact_rv: int | None = None,
    ) -> ListResult:
        """A page of matching objects in key order; ``remaining`` (remainingItemCount) only
        for unfiltered lists, as the API server does. ``exact_rv`` (or a continue token's
        version) reads the state at that version, rebuilt from the kept history: older
        than the history is 410 Expired, newer than the store 504 (Too large)."""
        return list_page(
            rt,
            current=self._buckets.get(bucket_of(rt), {}),
            keys=self._keys_in(rt, namespace),
            store_rv=self._rv,
            history=self._history,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
            exact_rv=exact_rv,
        )

    async def wait_fresh(self, rv: int, *, within: float | None = None) -> None:
        """Wait until the store reached ``rv`` (a read "not older than" it), at most
        ``within`` seconds (default ``fresh_wait``), else 504 Too large resource version
        (watchCache.waitUntilFreshAndBlock; ``within=0``: at once and without a retry
        hint, as etcd3's validateMinimumResourceVersion answers)."""
        await self._fresh.wait(rv, within=within, default=self.fresh_wait)

    # ------------------------------------------------------------------ writes

    def create(
        self, rt: ResourceType, obj: Mapping[str, Any], *, namespace: str | None
    ) -> dict[str, Any]:
        key, new = writes.prepare_create(
            rt,
            obj,
            namespace=namespace,
            namespaces=self._buckets.get(bucket_of(NAMESPACES), {}),
            existing=self._buckets.get(bucket_of(rt), {}),
            clock=self._clock,
            rng=self._rng,
            pod_generation=self._pod_generation,
        )
        return present(rt, copy_json(self._commit(rt, key, new, prev=None)))

    def update(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any],
        *,
        namespace: str | None,
        name: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PUT of the object or of its ``status`` subresource."""
        old = self._lookup(rt, namespace, name)
        new = writes.prepare_update(
            rt, old, obj, name=name, subresource=subresource, pod_generation=self._pod_generation
        )
        new_meta = new["metadata"]
        if (
            new_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and not new_meta.get("deletionGracePeriodSeconds")
        ):
            # registry.Store: removing the last finalizer of a deleted object deletes it.
            return self.remove(rt, namespace, name)
        if new == old:
            return present(rt, copy_json(old))  # no-op: no write, no new resourceVersion
        return present(rt, copy_json(self._commit(rt, key_of(rt, old), new, prev=old)))

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """DELETE: pods get deletionTimestamp + grace period (gone at once when unscheduled,
        terminal or grace 0); objects with finalizers stay, marked; the rest disappear at
        once. Returns the object's resulting (or last) state."""
        old = self._lookup(rt, namespace, name)
        meta = old["metadata"]
        period = strategy.grace_period(rt, old, grace_period_seconds)
        if meta.get("deletionTimestamp"):
            return self._shorten_grace(rt, old, period)
        if period == 0 and not meta.get("finalizers"):
            return self.remove(rt, namespace, name)
        new = writes.deletion_marked(old, period, when=now or self._clock())
        return present(rt, copy_json(self._commit(rt, key_of(rt, old), new, prev=old)))

    def finalize_pod_deletion(self, namespace: str, name: str) -> dict[str, Any]:
        """The kubelet's final ``DELETE gracePeriodSeconds=0`` of a terminating pod: removes
        it unless finalizers remain."""
        pods = ResourceType(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
        return self.delete(pods, namespace, name, grace_period_seconds=0)

    def remove(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """Final removal: the object disappears, watchers get DELETED."""
        old = self._lookup(rt, namespace, name)
        bucket = bucket_of(rt)
        del self._buckets[bucket][key_of(rt, old)]
        self._sorted.pop(bucket, None)
        self._rv += 1
        gone = dict(old, metadata=dict(old["metadata"], resourceVersion=str(self._rv)))
        self._publish(HistoryEntry(self._rv, "DELETED", bucket, gone, old))
        return present(rt, copy_json(gone))

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        resource_version: str | None = None,
        allow_bookmarks: bool = False,
        send_initial_events: bool | None = None,
        start: WatchStart | None = None,
    ) -> Watch:
        """``start`` (from :func:`~probemarker.sim.store.listopts.watch_start`) says how
        the watch starts; without it, the legacy parameters: unset/"0" version: ADDED for
        the current state, then live; a version: the kept events after it, then live;
        ``send_initial_events``: the state, then a bookmark annotated
        ``k8s.io/initial-events-end`` (with bookmarks). Older than the kept history: one
        ERROR event (410 Expired, ``too old resource version: X (Y)``), then the end. A
        version newer than the store's: events after it only, as the watch cache does
        (the client waits). The caller awaits :meth:`wait_fresh` for ``start.wait_rv``."""
        if start is None:
            start = legacy_watch_start(resource_version, allow_bookmarks, send_initial_events)
        bucket = bucket_of(rt)
        return watchcache.open_watch(
            rt,
            start,
            matches=make_matcher(rt, namespace, label_selector, field_selector),
            initial=self._objects_in(rt, namespace),
            current_rv=lambda: self._rv,
            history=self._history,
            bookmark_interval=lambda: self.bookmark_interval,
            on_close=self._forget_watch,
            register=lambda watch: self._watches.setdefault(bucket, set()).add(watch),
        )

    def error_watch(self, rt: ResourceType, error: ApiError) -> Watch:
        """A watch that only sends ``error`` as an ERROR event (the cacher's errWatcher)."""
        return watchcache.failed_watch(
            bucket_of(rt),
            error.to_status(),
            bookmark_interval=lambda: self.bookmark_interval,
            on_close=self._forget_watch,
        )

    # ------------------------------------------------------------------ internals

    def _forget_watch(self, watch: Watch) -> None:
        self._watches.get(watch.bucket, set()).discard(watch)

    def _lookup(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._buckets.get(bucket_of(rt), {}).get(
            object_key(namespace if rt.namespaced else None, name)
        )
        if obj is None:
            raise NotFound(rt.qualified, name)
        return obj

    def _keys_in(self, rt: ResourceType, namespace: str | None) -> builtins.list[str]:
        bucket = bucket_of(rt)
        keys = self._sorted.get(bucket)
        if keys is None:
            keys = self._sorted[bucket] = sorted(self._buckets.get(bucket, {}))
        return keys_in(keys, rt, namespace)

    def _objects_in(self, rt: ResourceType, namespace: str | None) -> Iterator[dict[str, Any]]:
        """``rt``'s objects in ``namespace`` in key order, read lazily."""
        bucket = bucket_of(rt)
        for key in self._keys_in(rt, namespace):
            yield self._buckets[bucket][key]

    def _commit(
        self, rt: ResourceType, key: str, obj: dict[str, Any], *, prev: dict[str, Any] | None
    ) -> dict[str, Any]:
        if not rt.is_custom:
            obj = prune_empty(obj)
        self._rv += 1
        obj["metadata"] = dict(obj["metadata"], resourceVersion=str(self._rv))
        bucket = bucket_of(rt)
        objects = self._buckets.setdefault(bucket, {})
        if key not in objects:
            self._sorted.pop(bucket, None)
        objects[key] = obj
        self._publish(
            HistoryEntry(self._rv, "ADDED" if prev is None else "MODIFIED", bucket, obj, prev)
        )
        return obj

    def _publish(self, entry: HistoryEntry) -> None:
        self._history.append(entry)
        for w in list(self._watches.get(entry.bucket, ())):
            w.offer(entry)
        self._fresh.release()

    def _shorten_grace(self, rt: ResourceType, old: dict[str, Any], period: int) -> dict[str, Any]:
        """A second DELETE may only shorten a pending grace period (rest.BeforeDelete)."""
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if current is None or period >= int(current):
            return present(rt, copy_json(old))
        if period == 0 and not meta.get("finalizers"):
            return self.remove(rt, meta.get("namespace"), meta["name"])
        new = writes.grace_shortened(old, period, current=int(current))
        return present(rt, copy_json(self._commit(rt, key_of(rt, old), new, prev=old)))
