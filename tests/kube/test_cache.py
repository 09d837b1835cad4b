"""The informer's store: the changes of one watch event, of a re-list, and the atomic replace."""

from __future__ import annotations

import random
from typing import Any

import pytest

from probemarker.kube.watch.cache import (
    Change,
    ChangeKind,
    Entry,
    ObjectKey,
    Store,
    diff,
    entry_of,
    step,
)

ADDED, MODIFIED, DELETED = ChangeKind.ADDED, ChangeKind.MODIFIED, ChangeKind.DELETED
A = ObjectKey("ns", "a")
B = ObjectKey("ns", "b")
C = ObjectKey("other", "c")


def e(key: ObjectKey, rv: int, obj: str, uid: str = "u1") -> Entry[str]:
    return Entry(key=key, uid=uid, resource_version=str(rv), obj=obj)


def c(kind: ChangeKind, key: ObjectKey, obj: str, rv: int) -> Change[str]:
    return Change(kind, key, obj, str(rv))


@pytest.mark.parametrize(
    ("old", "event", "new", "changes"),
    [
        pytest.param(None, "ADDED", e(A, 2, "x"), [c(ADDED, A, "x", 2)], id="added"),
        pytest.param(None, "MODIFIED", e(A, 2, "x"), [c(ADDED, A, "x", 2)], id="modified-unknown"),
        pytest.param(
            e(A, 1, "x"), "MODIFIED", e(A, 2, "y"), [c(MODIFIED, A, "y", 2)], id="modified"
        ),
        pytest.param(e(A, 1, "x"), "MODIFIED", e(A, 2, "x"), [], id="projection-unchanged"),
        pytest.param(e(A, 1, "x"), "ADDED", e(A, 2, "x"), [], id="added-again-unchanged"),
        pytest.param(
            e(A, 1, "x"), "DELETED", e(A, 3, "x2"), [c(DELETED, A, "x2", 3)], id="deleted"
        ),
        pytest.param(None, "DELETED", e(A, 3, "x"), [], id="deleted-unknown"),
        pytest.param(
            e(A, 1, "x", uid="old"),
            "MODIFIED",
            e(A, 5, "x", uid="new"),
            [c(DELETED, A, "x", 5), c(ADDED, A, "x", 5)],
            id="replaced-uid",
        ),
        pytest.param(
            e(A, 1, "x", uid=""),
            "MODIFIED",
            e(A, 2, "y", uid="new"),
            [c(MODIFIED, A, "y", 2)],
            id="no-uid-is-the-same-object",
        ),
    ],
)
def test_step(
    old: Entry[str] | None, event: str, new: Entry[str], changes: list[Change[str]]
) -> None:
    assert step(old, event, new) == changes


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        pytest.param([], [], [], id="empty"),
        pytest.param([e(A, 1, "x")], [e(A, 1, "x")], [], id="same"),
        pytest.param([e(A, 1, "x")], [e(A, 4, "x")], [], id="newer-but-same-projection"),
        pytest.param(
            [e(A, 1, "x"), e(B, 2, "y")],
            [e(B, 3, "y2"), e(C, 4, "z")],
            [c(DELETED, A, "x", 9), c(MODIFIED, B, "y2", 3), c(ADDED, C, "z", 4)],
            id="deleted-modified-added",
        ),
        pytest.param(
            [e(A, 1, "x", uid="old")],
            [e(A, 4, "x", uid="new")],
            [c(DELETED, A, "x", 9), c(ADDED, A, "x", 4)],
            id="replaced-uid",
        ),
        pytest.param(
            [e(B, 1, "b"), e(A, 1, "a")],
            [],
            [c(DELETED, A, "a", 9), c(DELETED, B, "b", 9)],
            id="all-gone-in-key-order",
        ),
    ],
)
def test_diff(old: list[Entry[str]], new: list[Entry[str]], changes: list[Change[str]]) -> None:
    assert diff({x.key: x for x in old}, {x.key: x for x in new}, resource_version="9") == changes


def _replay(changes: list[Change[str]], start: dict[ObjectKey, str]) -> dict[ObjectKey, str]:
    state = dict(start)
    for change in changes:
        if change.kind is DELETED:
            del state[change.key]
        else:
            state[change.key] = change.obj
    return state


@pytest.mark.parametrize("seed", range(20))
def test_replaying_a_diff_gives_the_new_state(seed: int) -> None:
    rng = random.Random(seed)
    keys = [ObjectKey(ns, n) for ns in ("a", "b") for n in "pqrs"]
    old = {k: e(k, 1, rng.choice("xy"), rng.choice("uv")) for k in keys if rng.random() < 0.6}
    new = {k: e(k, 2, rng.choice("xy"), rng.choice("uv")) for k in keys if rng.random() < 0.6}
    changes = diff(old, new, resource_version="3")
    assert _replay(changes, {k: x.obj for k, x in old.items()}) == {
        k: x.obj for k, x in new.items()
    }
    assert len({ch.key for ch in changes if ch.kind is not DELETED}) == sum(
        ch.kind is not DELETED for ch in changes
    )


def test_replace_one_namespace_leaves_the_others() -> None:
    store: Store[str] = Store()
    store.apply("ADDED", e(A, 1, "a"))
    store.apply("ADDED", e(C, 2, "c"))
    changes = store.replace([e(B, 3, "b")], namespace="ns", resource_version="5")
    assert changes == [c(DELETED, A, "a", 5), c(ADDED, B, "b", 3)]
    assert [x.key for x in store.entries()] == [B, C]
    assert store.replace([], namespace="other", resource_version="6") == [c(DELETED, C, "c", 6)]
    assert [x.key for x in store.entries()] == [B]
    assert store.entries("other") == []


def test_replace_all_namespaces() -> None:
    store: Store[str] = Store()
    store.apply("ADDED", e(A, 1, "a"))
    store.apply("ADDED", e(C, 2, "c"))
    changes = store.replace([e(A, 7, "a2"), e(B, 8, "b")], namespace=None, resource_version="9")
    assert changes == [c(DELETED, C, "c", 9), c(MODIFIED, A, "a2", 7), c(ADDED, B, "b", 8)]
    assert len(store) == 2
    assert store.entries("ns") == [e(A, 7, "a2"), e(B, 8, "b")]


def test_replace_refuses_an_entry_of_another_namespace() -> None:
    store: Store[str] = Store()
    with pytest.raises(ValueError, match="not in namespace"):
        store.replace([e(C, 1, "c")], namespace="ns", resource_version="1")


def test_apply_keeps_the_newest_resource_version_of_an_unchanged_projection() -> None:
    store: Store[str] = Store()
    store.apply("ADDED", e(A, 1, "a"))
    assert store.apply("MODIFIED", e(A, 2, "a")) == []
    entry = store.get(A)
    assert entry is not None
    assert entry.resource_version == "2"
    assert store.apply("DELETED", e(A, 3, "a")) == [c(DELETED, A, "a", 3)]
    assert store.get(A) is None
    assert len(store) == 0


def test_entry_of_reads_key_uid_and_version() -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "12"},
        "spec": {"nodeName": "n"},
    }
    entry = entry_of(raw, lambda obj: obj["spec"]["nodeName"])
    assert entry == Entry(ObjectKey("ns", "p"), "u", "12", "n")
    cluster_scoped = entry_of({"metadata": {"name": "node-1"}}, lambda obj: None)
    assert cluster_scoped.key == ObjectKey("", "node-1")
    assert str(cluster_scoped.key) == "node-1"
    assert str(entry.key) == "ns/p"
