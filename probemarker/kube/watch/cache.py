"""The informer's store: projections keyed by (namespace, name), and the changes it emits.

Stage: behind the watch parser, in front of the informer's consumers. Input: one
`Entry` per watch event (`Store.apply`) or the whole listed state of one scope unit
(`Store.replace`). Output: the `Change`s a consumer sees.

Rules (the same for a watch event and for a re-list, so consumers never need to
know which one happened):
- a new key is ADDED; a gone key is DELETED, carrying the last projection;
- a key whose object was replaced (another uid: deleted and created again while we
  were not watching, or between two events) is DELETED then ADDED;
- MODIFIED only when the projection changed: a write to a field nobody projects
  updates the stored resourceVersion and emits nothing;
- every change carries a resourceVersion: the object's own, except a DELETED the
  store had to infer (a re-list that no longer has the key, or a replaced uid),
  which carries the version the absence was observed at (the list's, or the
  replacing object's). Per object (uid) the versions of its changes increase.

`Store.replace(namespace=...)` replaces only that namespace's keys (one scope unit
of the informer); `namespace=None` replaces everything. The new state is built
first and swapped in with one assignment: readers see the old or the new state,
never a mix. Pure in the sense of no I/O and no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "Change",
    "ChangeKind",
    "Entry",
    "ObjectKey",
    "Store",
    "diff",
    "entry_of",
    "step",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """(namespace, name); the namespace is "" for a cluster-scoped object."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ChangeKind(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """What the store keeps of one object: its key, uid, resourceVersion and projection."""

    key: ObjectKey
    uid: str
    resource_version: str
    obj: T


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """One change a consumer sees; `obj` is the projection (for DELETED: the last one)."""

    kind: ChangeKind
    key: ObjectKey
    obj: T
    resource_version: str


def entry_of(raw: Mapping[str, Any], project: Callable[[Mapping[str, Any]], T]) -> Entry[T]:
    """The entry for a whole object as the API server sent it."""
    meta = raw.get("metadata") or {}
    return Entry(
        key=ObjectKey(str(meta.get("namespace") or ""), str(meta["name"])),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        obj=project(raw),
    )


def _replaced(old: Entry[T], new: Entry[T]) -> bool:
    return bool(old.uid and new.uid and old.uid != new.uid)


def step(old: Entry[T] | None, event: str, new: Entry[T]) -> list[Change[T]]:
    """The changes one watch event (`ADDED`/`MODIFIED`/`DELETED` of `new`) makes over `old`."""
    key = new.key
    if event == "DELETED":
        if old is None:
            return []  # never seen (or already gone): nothing for a consumer to forget
        return [Change(ChangeKind.DELETED, key, new.obj, new.resource_version)]
    if old is None:
        return [Change(ChangeKind.ADDED, key, new.obj, new.resource_version)]
    if _replaced(old, new):
        return [
            Change(ChangeKind.DELETED, key, old.obj, new.resource_version),
            Change(ChangeKind.ADDED, key, new.obj, new.resource_version),
        ]
    if old.obj == new.obj:
        return []
    return [Change(ChangeKind.MODIFIED, key, new.obj, new.resource_version)]


def diff(
    old: Mapping[ObjectKey, Entry[T]],
    new: Mapping[ObjectKey, Entry[T]],
    *,
    resource_version: str,
) -> list[Change[T]]:
    """The changes a watch would have emitted between two listed states: deletions
    first (at the list's `resource_version`), then additions and modifications, each
    group in key order."""
    changes = [
        Change(ChangeKind.DELETED, key, old[key].obj, resource_version)
        for key in sorted(old.keys() - new.keys())
    ]
    for key in sorted(new):
        entry, before = new[key], old.get(key)
        if before is not None and _replaced(before, entry):
            changes.append(Change(ChangeKind.DELETED, key, before.obj, resource_version))
            changes.append(Change(ChangeKind.ADDED, key, entry.obj, entry.resource_version))
        else:
            changes.extend(step(before, "MODIFIED", entry))
    return changes


class Store(Generic[T]):
    """Entries by namespace, then key; see the module docstring."""

    def __init__(self) -> None:
        self._namespaces: dict[str, dict[ObjectKey, Entry[T]]] = {}

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._namespaces.values())

    def __repr__(self) -> str:
        return f"Store({len(self)} objects in {len(self._namespaces)} namespaces)"

    def get(self, key: ObjectKey) -> Entry[T] | None:
        return self._namespaces.get(key.namespace, {}).get(key)

    def entries(self, namespace: str | None = None) -> list[Entry[T]]:
        """Every entry (or those of one namespace), in key order."""
        if namespace is not None:
            bucket = self._namespaces.get(namespace, {})
            return [bucket[k] for k in sorted(bucket)]
        return sorted(
            (e for entries in self._namespaces.values() for e in entries.values()),
            key=lambda e: e.key,
        )

    def apply(self, event: str, entry: Entry[T]) -> list[Change[T]]:
        """Apply one watch event; return the changes it makes."""
        bucket = self._namespaces.setdefault(entry.key.namespace, {})
        changes = step(bucket.get(entry.key), event, entry)
        if event == "DELETED":
            bucket.pop(entry.key, None)
            if not bucket:
                del self._namespaces[entry.key.namespace]
        else:
            bucket[entry.key] = entry  # also when unchanged: keep the newest resourceVersion
        return changes

    def replace(
        self, entries: Iterable[Entry[T]], *, namespace: str | None, resource_version: str
    ) -> list[Change[T]]:
        """Replace one namespace's entries (all, for None) by a listed state, atomically."""
        new: dict[ObjectKey, Entry[T]] = {e.key: e for e in entries}
        if namespace is None:
            old = {k: e for bucket in self._namespaces.values() for k, e in bucket.items()}
        else:
            stray = [k for k in new if k.namespace != namespace]
            if stray:
                raise ValueError(f"{stray[0]} is not in namespace {namespace!r}")
            old = dict(self._namespaces.get(namespace, {}))
        changes = diff(old, new, resource_version=resource_version)
        if namespace is None:
            grouped: dict[str, dict[ObjectKey, Entry[T]]] = {}
            for key, entry in new.items():
                grouped.setdefault(key.namespace, {})[key] = entry
            self._namespaces = grouped
        elif new:
            self._namespaces[namespace] = new
        else:
            self._namespaces.pop(namespace, None)
        return changes
