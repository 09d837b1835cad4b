"""Pods with many annotations (issue 22), the real daemon against the sim: what the
daemon keeps of them, and that keeping only fingerprints of what it does not own
changes none of its writes.

The daemon keeps the values of its ownership record and of the keys the record names,
a 16-byte fingerprint of every other key and (key, value), and the annotations' total
size (watch/annotations.py); a re-list reads the answer item by item.
"""

from __future__ import annotations

from typing import Any

from probemarker.daemon.app import Daemon
from probemarker.sim.store.resourcetype import NAMESPACES
from probemarker.watch.annotations import AnnotationSummary
from tests.integration.world import (
    OWNED,
    World,
    annotations_of,
    eventually,
    labels_of,
    marker,
    probe,
    running_daemon,
)

BIG = "kubectl.kubernetes.io/last-applied-configuration"
BIG_VALUE = '{"apiVersion":"v1","kind":"Pod",' + '"x":"' + "y" * 30_000 + '"}'
NOTE = "example.com/note"


def long_strings(obj: Any, seen: set[int] | None = None) -> list[str]:
    """Every str of 1,000 characters or more reachable through dicts, lists, tuples and
    the fields of an annotation summary."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, str):
        return [obj] if len(obj) >= 1000 else []
    if isinstance(obj, AnnotationSummary):
        return long_strings(dict(obj.values), seen)
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in long_strings(k, seen) + long_strings(v, seen)]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in long_strings(v, seen)]
    return []


def held(daemon: Daemon) -> list[Any]:
    """What the daemon keeps of its pods: the informer's store, the engine's views, and
    the writer's views of its own writes' answers."""
    objects: list[Any] = [entry.obj for entry in daemon.pods.entries()]
    for entry in daemon.pods.entries():
        found = daemon.engine.lookup(entry.uid)  # type: ignore[arg-type]
        if found is not None:
            objects.append(found[0].annotations)
    objects += [
        state.fresh[1].annotations
        for state in daemon.writer._pods.values()
        if state.fresh is not None
    ]
    return objects


async def test_the_daemon_keeps_no_annotation_value_it_does_not_own(world: World) -> None:
    """Fails before the fix: the pod projection kept every annotation whole."""
    await world.create_pod("g", labels={"app": "game"}, annotations={BIG: BIG_VALUE})
    policy = probe("ready", succeeded={"labels": {"ready": "yes"}, "annotations": {NOTE: "up"}})
    await world.apply_marker(marker("m", probes=[policy]))
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("g", lambda p: annotations_of(p).get(NOTE) == "up")
        await eventually(lambda: daemon.writer.depth == 0 and daemon.pods.list() != [])
        await eventually(
            lambda: (
                daemon.pods.entries()[0].resource_version
                == world.pod("g")["metadata"]["resourceVersion"]
            )
        )
        assert long_strings(held(daemon)) == []
        summary = daemon.pods.list()[0]["metadata"]["annotations"]
        assert isinstance(summary, AnnotationSummary)
        assert sorted(summary.values) == sorted({OWNED, NOTE})  # the record and its keys
        on_pod = annotations_of(world.pod("g"))
        assert summary.total_bytes == sum(
            len(k.encode()) + len(v.encode()) for k, v in on_pod.items()
        )
        assert summary.carries(BIG, BIG_VALUE)
        assert not summary.carries(BIG, BIG_VALUE + " ")


async def test_a_new_annotation_key_of_a_marker_is_written_and_its_removal_checks_values(
    world: World,
) -> None:
    """A marker edited to set keys the daemon never kept a value of (one the pod already
    shows with the value to write, one with another value): the first is not rewritten,
    the second is; both are recorded. After the marker is deleted, a key a user changed
    since is kept, the others go.

    The user's change and the deletion are made while the daemon is down (docs/engine.md: the
    clean-up happens even so). While the marker is live, its decided policy sets the
    key: a running daemon sets a changed value back (the engine plans the pod on every
    change of it), so a change made while it runs is kept or set back depending on
    whether the deletion reaches the daemon before its next flush."""
    await world.create_pod(
        "g",
        labels={"app": "game"},
        annotations={BIG: BIG_VALUE, "example.com/same": "v", "example.com/other": "user"},
    )
    first = probe("ready", succeeded={"annotations": {NOTE: "up"}})
    await world.apply_marker(marker("m", probes=[first]))
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("g", lambda p: annotations_of(p).get(NOTE) == "up")
        # The write answered, not only stored: the store shows it a little sooner.
        writes = await world.sim.accounting.wait_for(
            verb="patch", resource="pods", subresource="status"
        )
        more = {NOTE: "up", "example.com/same": "v", "example.com/other": "mine"}
        await world.apply_marker(
            marker("m", probes=[probe("ready", succeeded={"annotations": more})])
        )
        pod = await world.wait_pod(
            "g", lambda p: annotations_of(p).get("example.com/other") == "mine"
        )
        record = annotations_of(pod)[OWNED]
        assert '"example.com/same":"v"' in record
        assert '"example.com/other":"mine"' in record
        await eventually(
            lambda: (
                daemon.pods.entries()[0].resource_version
                == world.pod("g")["metadata"]["resourceVersion"]
                and daemon.writer.depth == 0
            )
        )
    # Stopped: every write it made, its shutdown flush's included, has been answered.
    assert world.pod_writes() == writes + 1  # one write: steady after it
    await world.core.patch_namespaced_pod(
        "g", "default", {"metadata": {"annotations": {"example.com/other": "changed"}}}
    )
    await world.delete_marker("m")
    async with running_daemon(world.sim):
        pod = await world.wait_pod("g", lambda p: NOTE not in annotations_of(p))
    notes = annotations_of(pod)
    assert notes.get("example.com/other") == "changed"  # not what the daemon wrote
    assert "example.com/same" not in notes
    assert notes[BIG] == BIG_VALUE
    assert OWNED not in notes


async def test_a_relist_keeps_the_projections_of_unchanged_pods(world: World) -> None:
    """A watch outage that ends in 410 Gone: the re-list changes nothing, and the store
    keeps the projections it had (one copy of each, not two)."""
    for i in range(3):
        await world.create_pod(f"g{i}", labels={"app": "game"}, annotations={BIG: BIG_VALUE})
    await world.apply_marker(marker("m", probes=[probe("ready", succeeded={"labels": {"r": "y"}})]))
    async with running_daemon(world.sim) as daemon:
        for i in range(3):
            await world.wait_pod(f"g{i}", lambda p: labels_of(p).get("r") == "y")
        await eventually(lambda: daemon.writer.depth == 0)
        await eventually(
            lambda: all(
                e.resource_version == world.pod(e.key.name)["metadata"]["resourceVersion"]
                for e in daemon.pods.entries()
            )
        )
        before = {e.key: e.obj for e in daemon.pods.entries()}
        lists = daemon.pods.counters.lists
        # In one step of the loop: the watches end, the store moves past the version the
        # daemon saw, and its history goes: the watch comes back to 410 Gone, a re-list.
        world.sim.faults.close_watches(abrupt=True)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}
        world.sim.store.create(NAMESPACES, body, namespace=None)
        world.sim.faults.drop_history()
        await eventually(lambda: daemon.pods.counters.lists > lists, within=20)
        after = {e.key: e.obj for e in daemon.pods.entries()}
        assert after.keys() == before.keys()
        assert all(after[k] is before[k] for k in before)
