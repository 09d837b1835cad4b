"""The sim's in-memory object world: CRUD, LIST and WATCH with Kubernetes semantics.

Objects live in buckets keyed by (group, plural); within a bucket, by their etcd-like
key ``<namespace>/<name>`` (or ``<name>``), which is also the LIST order. A single
cluster-wide resourceVersion counter orders every write; each write is appended to a
bounded :class:`~probemarker.sim.store.watchcache.History` and offered, synchronously, to the
open watches of its bucket, so watches never miss or reorder events.

Kubernetes behaviour followed (generic registry + :mod:`probemarker.sim.store.strategy`):
create sets uid/creationTimestamp/resourceVersion and generation 1 where tracked, fills
generateName with 5 random chars, refuses duplicates (409) and missing namespaces (404);
update enforces resourceVersion preconditions (409) and AllowUnconditionalUpdate, keeps
system metadata, keeps status on main writes and spec on ``status`` writes, bumps
generation on spec changes and skips no-op writes; every write is validated
(:mod:`probemarker.sim.store.validation`: labels, annotations, pod spec immutability, pod
condition types) with a 422 Invalid; delete is graceful for pods and
honours finalizers; watch replays kept history or answers 410 Expired.

Invariants: stored objects are never mutated in place (every write stores a new dict),
so ``list()`` items and watch event objects are shared and read-only for callers;
``get``/``create``/``update``/``delete``/``remove`` return private copies. Core objects
are stored pruned (:func:`prune_empty`), custom resources as given. Single-threaded
asyncio: no locks.
"""

from __future__ import annotations

import asyncio
import builtins
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from probemarker.sim.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    TooLargeResourceVersion,
)
from probemarker.sim.store import strategy
from probemarker.sim.store.listing import (
    decode_continue,
    encode_continue,
    first_at,
    key_range,
    make_matcher,
    state_at,
)
from probemarker.sim.store.listopts import FRESH_WAIT, WatchStart, legacy_watch_start
from probemarker.sim.store.objmeta import (
    copy_json,
    format_time,
    name_causes,
    parse_time,
    prune_empty,
)
from probemarker.sim.store.resourcetype import NAMESPACES, ResourceType
from probemarker.sim.store.selectors import FieldSelector, LabelSelector
from probemarker.sim.store.validation import validate_write
from probemarker.sim.store.watchcache import History, HistoryEntry, Watch, WatchEvent, transition

__all__ = [
    "NAMESPACES",
    "ListResult",
    "ResourceType",
    "Store",
    "Watch",
    "WatchEvent",
    "prune_empty",
]

_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True, slots=True)
class ListResult:
    """One LIST page. ``items`` are shared, read-only store objects."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _bucket(rt: ResourceType) -> tuple[str, str]:
    return (rt.group, rt.plural)


def _key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _selector_empty(selector: str | LabelSelector | FieldSelector | None) -> bool:
    if selector is None or isinstance(selector, str):
        return not selector
    return selector.empty


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
        self._fresh_waiters: builtins.list[tuple[int, asyncio.Future[None]]] = []
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
        return self._present(rt, copy_json(self._lookup(rt, namespace, name)))

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
        matches = make_matcher(rt, namespace, label_selector, field_selector)
        list_rv, start = self._rv, ""
        if continue_token:
            token_rv, start = decode_continue(continue_token, floor=self._history.floor)
            if token_rv > 0:
                exact_rv = token_rv
        bucket = _bucket(rt)
        objects = self._buckets.get(bucket, {})
        keys = self._keys_in(rt, namespace)
        if exact_rv is not None and exact_rv != self._rv:
            objects, keys = self._state_at(rt, namespace, exact_rv)
            list_rv = exact_rv
        filtered = not (_selector_empty(label_selector) and _selector_empty(field_selector))
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        remaining: int | None = None
        last_key = ""
        for index in range(first_at(keys, start), len(keys)):
            obj = objects[keys[index]]
            if not matches(obj):
                continue
            if limit is not None and len(items) >= limit:
                token = encode_continue(list_rv, last_key)
                remaining = None if filtered else len(keys) - index
                break
            items.append(self._present(rt, obj, share=True))
            last_key = keys[index]
        return ListResult(items, str(list_rv), token, remaining)

    def _state_at(
        self, rt: ResourceType, namespace: str | None, rv: int
    ) -> tuple[dict[str, dict[str, Any]], builtins.list[str]]:
        if rv > self._rv:
            raise TooLargeResourceVersion(rv, self._rv, retry_after=0)
        if rv < self._history.floor:
            raise Expired("The resourceVersion for the provided list is too old.")
        bucket = _bucket(rt)
        later = (e for e in self._history.since(rv) if e.bucket == bucket)
        state = state_at(self._buckets.get(bucket, {}), later, lambda o: self._key_of(rt, o))
        keys = sorted(state)
        if namespace and rt.namespaced:
            keys = key_range(keys, namespace + "/")
        return state, keys

    async def wait_fresh(self, rv: int, *, within: float | None = None) -> None:
        """Wait until the store reached ``rv`` (a read "not older than" it), at most
        ``within`` seconds (default ``fresh_wait``), else 504 Too large resource version
        (watchCache.waitUntilFreshAndBlock; ``within=0``: at once and without a retry
        hint, as etcd3's validateMinimumResourceVersion answers)."""
        if rv <= self._rv:
            return
        if within is not None and within <= 0:
            raise TooLargeResourceVersion(rv, self._rv, retry_after=0)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fresh_waiters.append((rv, waiter))
        try:
            await asyncio.wait_for(
                asyncio.shield(waiter), self.fresh_wait if within is None else within
            )
        except TimeoutError:
            raise TooLargeResourceVersion(rv, self._rv) from None
        finally:
            if (rv, waiter) in self._fresh_waiters:
                self._fresh_waiters.remove((rv, waiter))

    # ------------------------------------------------------------------ writes

    def create(
        self, rt: ResourceType, obj: Mapping[str, Any], *, namespace: str | None
    ) -> dict[str, Any]:
        new: dict[str, Any] = copy_json(dict(obj))
        meta = new["metadata"] = dict(new.get("metadata") or {})
        ns = self._create_namespace(rt, meta, namespace)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(rt, ns, str(meta["generateName"]))
        name = str(meta.get("name") or "")
        causes = name_causes(name, namespace_like=rt.group == "" and rt.plural == "namespaces")
        causes += validate_write(rt, new, old=None)
        if causes:
            raise Invalid(rt.kind, rt.group, name, causes)
        key = _key(ns, name)
        if key in self._buckets.get(_bucket(rt), {}):
            raise AlreadyExists(rt.qualified, name)
        for system_field in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "resourceVersion",
        ):
            meta.pop(system_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = format_time(self._clock())
        if strategy.has_generation(rt, pods=self._pod_generation):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.is_custom and "status" in rt.subresources:
            new.pop("status", None)  # customResourceStrategy.PrepareForCreate
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        return self._present(rt, copy_json(self._commit(rt, key, new, prev=None)))

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
        new: dict[str, Any] = copy_json(dict(obj))
        meta = new["metadata"] = dict(new.get("metadata") or {})
        if meta.get("name") and meta["name"] != name:
            raise BadRequest(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        strategy.check_preconditions(rt, old, meta, name)
        if subresource == "status":
            new = strategy.status_write(rt, old, new)
        elif subresource is None:
            new = strategy.main_write(rt, old, new)
        else:
            raise BadRequest(f"the server does not support updating the {subresource} subresource")
        new = strategy.keep_system_meta(rt, old, new)
        if (
            subresource is None
            and strategy.has_generation(rt, pods=self._pod_generation)
            and strategy.spec_view(rt, new) != strategy.spec_view(rt, old)
        ):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        if not rt.is_custom:
            new = prune_empty(new)
        causes = validate_write(rt, new, old=old, subresource=subresource)
        if causes:
            raise Invalid(rt.kind, rt.group, name, causes)
        new_meta = new["metadata"]
        if (
            new_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and not new_meta.get("deletionGracePeriodSeconds")
        ):
            # registry.Store: removing the last finalizer of a deleted object deletes it.
            return self.remove(rt, namespace, name)
        if new == old:
            return self._present(rt, copy_json(old))  # no-op: no write, no new resourceVersion
        return self._present(rt, copy_json(self._commit(rt, self._key_of(rt, old), new, prev=old)))

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
        new_meta = dict(meta)
        new_meta["deletionTimestamp"] = format_time(
            (now or self._clock()) + timedelta(seconds=period)
        )
        new_meta["deletionGracePeriodSeconds"] = period
        if int(new_meta.get("generation") or 0) > 0:
            new_meta["generation"] = int(new_meta["generation"]) + 1  # rest.BeforeDelete
        new = dict(old, metadata=new_meta)
        return self._present(rt, copy_json(self._commit(rt, self._key_of(rt, old), new, prev=old)))

    def finalize_pod_deletion(self, namespace: str, name: str) -> dict[str, Any]:
        """The kubelet's final ``DELETE gracePeriodSeconds=0`` of a terminating pod: removes
        it unless finalizers remain."""
        pods = ResourceType(group="", version="v1", plural="pods", kind="Pod", namespaced=True)
        return self.delete(pods, namespace, name, grace_period_seconds=0)

    def remove(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """Final removal: the object disappears, watchers get DELETED."""
        old = self._lookup(rt, namespace, name)
        bucket = _bucket(rt)
        del self._buckets[bucket][self._key_of(rt, old)]
        self._sorted.pop(bucket, None)
        self._rv += 1
        gone = dict(old, metadata=dict(old["metadata"], resourceVersion=str(self._rv)))
        self._publish(HistoryEntry(self._rv, "DELETED", bucket, gone, old))
        return self._present(rt, copy_json(gone))

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
        bucket = _bucket(rt)
        matches = make_matcher(rt, namespace, label_selector, field_selector)
        from_rv = self._rv if start.from_rv is None else start.from_rv

        def present(obj: dict[str, Any]) -> dict[str, Any]:
            return self._present(rt, obj, share=True)

        def bookmark(initial_end: bool = False) -> WatchEvent | None:
            if self._rv < from_rv:
                return None  # never a bookmark older than where the watch starts
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return WatchEvent(
                "BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
            )

        def accept(entry: HistoryEntry) -> WatchEvent | None:
            return None if entry.rv <= from_rv else transition(entry, matches, present)

        watch = Watch(
            bucket=bucket,
            accept=accept,
            bookmark=bookmark if start.allow_bookmarks else None,
            bookmark_interval=lambda: self.bookmark_interval,
            on_close=self._forget_watch,
        )
        if start.initial:
            for key in self._keys_in(rt, namespace):
                obj = self._buckets[bucket][key]
                if matches(obj):
                    watch.push(WatchEvent("ADDED", present(obj)))
            end = bookmark(initial_end=True) if start.initial_end_bookmark else None
            if end is not None:
                watch.push(end)
        elif from_rv < self._history.floor:
            watch.fail(
                Expired(f"too old resource version: {from_rv} ({self._history.floor})").to_status()
            )
            return watch
        else:
            for entry in self._history.since(from_rv):
                if entry.bucket == bucket:
                    watch.offer(entry)
        self._watches.setdefault(bucket, set()).add(watch)
        return watch

    def error_watch(self, rt: ResourceType, error: ApiError) -> Watch:
        """A watch that only sends ``error`` as an ERROR event (the cacher's errWatcher)."""
        watch = Watch(
            bucket=_bucket(rt),
            accept=lambda entry: None,
            bookmark=None,
            bookmark_interval=lambda: self.bookmark_interval,
            on_close=self._forget_watch,
        )
        watch.fail(error.to_status())
        return watch

    # ------------------------------------------------------------------ internals

    def _forget_watch(self, watch: Watch) -> None:
        self._watches.get(watch.bucket, set()).discard(watch)

    def _lookup(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._buckets.get(_bucket(rt), {}).get(
            _key(namespace if rt.namespaced else None, name)
        )
        if obj is None:
            raise NotFound(rt.qualified, name)
        return obj

    @staticmethod
    def _key_of(rt: ResourceType, obj: Mapping[str, Any]) -> str:
        meta = obj["metadata"]
        return _key(meta.get("namespace") if rt.namespaced else None, meta["name"])

    @staticmethod
    def _present(rt: ResourceType, obj: dict[str, Any], *, share: bool = False) -> dict[str, Any]:
        """The object as served at ``rt``'s version (a CR may be served at several)."""
        if obj.get("apiVersion") == rt.api_version or rt.plural == "events":
            return obj
        out = dict(obj) if share else obj
        out["apiVersion"] = rt.api_version
        return out

    def _keys_in(self, rt: ResourceType, namespace: str | None) -> builtins.list[str]:
        bucket = _bucket(rt)
        keys = self._sorted.get(bucket)
        if keys is None:
            keys = self._sorted[bucket] = sorted(self._buckets.get(bucket, {}))
        return key_range(keys, namespace + "/") if namespace and rt.namespaced else keys

    def _create_namespace(
        self, rt: ResourceType, meta: dict[str, Any], namespace: str | None
    ) -> str | None:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return None
        ns = str(namespace or meta.get("namespace") or "")
        if meta.get("namespace") and meta["namespace"] != ns:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if not ns:
            raise BadRequest("an empty namespace may not be set during creation")
        meta["namespace"] = ns
        ns_obj = self._buckets.get(_bucket(NAMESPACES), {}).get(ns)
        if ns_obj is None:
            raise NotFound("namespaces", ns)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise Forbidden(
                rt.qualified,
                str(meta.get("name") or ""),
                f"unable to create new content in namespace {ns} because it is being terminated",
            )
        return ns

    def _generate_name(self, rt: ResourceType, namespace: str | None, base: str) -> str:
        existing = self._buckets.get(_bucket(rt), {})
        name = ""
        for _ in range(8):  # kube-apiserver retries a colliding generated name
            name = base[:58] + "".join(self._rng.choice(_GENERATE_CHARS) for _ in range(5))
            if _key(namespace, name) not in existing:
                break
        return name

    def _commit(
        self, rt: ResourceType, key: str, obj: dict[str, Any], *, prev: dict[str, Any] | None
    ) -> dict[str, Any]:
        if not rt.is_custom:
            obj = prune_empty(obj)
        self._rv += 1
        obj["metadata"] = dict(obj["metadata"], resourceVersion=str(self._rv))
        bucket = _bucket(rt)
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
        if self._fresh_waiters:
            for rv, waiter in self._fresh_waiters:
                if rv <= self._rv and not waiter.done():
                    waiter.set_result(None)

    def _shorten_grace(self, rt: ResourceType, old: dict[str, Any], period: int) -> dict[str, Any]:
        """A second DELETE may only shorten a pending grace period (rest.BeforeDelete)."""
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if current is None or period >= int(current):
            return self._present(rt, copy_json(old))
        if period == 0 and not meta.get("finalizers"):
            return self.remove(rt, meta.get("namespace"), meta["name"])
        deadline = parse_time(meta["deletionTimestamp"]) - timedelta(seconds=int(current) - period)
        new = dict(
            old,
            metadata=dict(
                meta, deletionTimestamp=format_time(deadline), deletionGracePeriodSeconds=period
            ),
        )
        return self._present(rt, copy_json(self._commit(rt, self._key_of(rt, old), new, prev=old)))
