"""The informer against the sim over real HTTP: scopes, selectors, sync, counters, paging,
re-lists, errors with backoff, the half-open watch, cancellation.

Writes go straight to the sim's store (`SimWorld`), so they are not subject to the
faults the tests inject on the informer's LIST and WATCH requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.watch.cache import ChangeKind, ObjectKey
from probemarker.kube.watch.informer import PODS, Informer, InformerSettings
from probemarker.sim import SimCluster
from probemarker.sim.server.discovery.catalog import PODS as SIM_PODS
from probemarker.watch.pods import pod_projection
from tests.kube.informer_world import (
    FAST,
    Collector,
    Projection,
    RecordingClient,
    RecordingClock,
    SimWorld,
    eventually,
    hidden_writes,
    pods_informer,
    running,
    stored,
)

# -- fixtures ------------------------------------------------------------------------


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(node_names=("node-1",)) as cluster:
        yield cluster


@pytest.fixture
def world(sim: SimCluster) -> SimWorld:
    world = SimWorld(sim)
    for ns in ("a", "b", "c"):
        world.namespace(ns)
    return world


# -- scopes and selectors ------------------------------------------------------------


@pytest.mark.parametrize("namespaces", [None, ("a",), ("a", "c")], ids=["all", "one", "set"])
async def test_scopes(
    world: SimWorld, client: KubeClient, namespaces: tuple[str, ...] | None
) -> None:
    for ns in ("a", "b", "c"):
        world.create(ns, f"{ns}-0")
    informer = pods_informer(client, namespaces=namespaces)
    async with running(informer) as seen:
        await informer.wait_synced()
        assert set(stored(informer)) == set(world.projected(namespaces=namespaces))
        assert informer.counters.lists == (1 if namespaces is None else len(namespaces))
        for ns in ("a", "b", "c"):
            world.create(ns, f"{ns}-1")
        world.label("a", "a-0", tier="x")
        world.delete("c", "c-0")
        await seen.converge(world.projected(namespaces=namespaces))
        relabelled = informer.get(ObjectKey("a", "a-0"))
        assert relabelled is not None
        assert relabelled["metadata"]["labels"] == {"tier": "x"}
        assert (informer.get(ObjectKey("b", "b-0")) is None) == (namespaces is not None)
        assert [p["metadata"]["name"] for p in informer.list("a")] == ["a-0", "a-1"]


async def test_field_and_label_selectors(world: SimWorld, client: KubeClient) -> None:
    world.create("a", "mine", labels={"app": "x"}, node="far-1")
    world.create("a", "other-node", labels={"app": "x"}, node="far-2")
    world.create("a", "other-app", labels={"app": "y"}, node="far-1")
    field, label = "spec.nodeName=far-1", "app=x"
    informer = pods_informer(client, field_selector=field, label_selector=label)
    async with running(informer) as seen:
        await seen.converge(world.projected(field=field, label=label))
        assert seen.kinds() == [(ChangeKind.ADDED, "a/mine")]
        mark = len(seen.changes)
        world.label("a", "other-app", app="x")  # enters the selection
        world.label("a", "mine", app="z")  # leaves it
        await seen.converge(world.projected(field=field, label=label))
        assert seen.kinds(mark) == [
            (ChangeKind.ADDED, "a/other-app"),
            (ChangeKind.DELETED, "a/mine"),
        ]


async def test_https_with_a_token(tls_sim: SimCluster, tls_client: KubeClient) -> None:
    world = SimWorld(tls_sim)
    world.namespace("a")
    world.create("a", "p0")
    informer = pods_informer(tls_client, namespaces=["a"])
    async with running(informer) as seen:
        await informer.wait_synced()
        world.create("a", "p1")
        await seen.converge(world.projected(namespaces=["a"]))


# -- sync, counters, projections -----------------------------------------------------


async def test_synced_counters_and_unchanged_projections(
    world: SimWorld, client: KubeClient
) -> None:
    for i in range(3):
        world.create("a", f"p{i}")
    informer = pods_informer(client, namespaces=["a", "b"])
    assert not informer.synced.is_set()
    async with running(informer) as seen:
        with anyio.fail_after(5):
            await informer.wait_synced()
        counters = informer.counters
        assert counters.lists == 2
        await seen.wait_for(lambda: len(seen.changes) == 3)
        assert seen.kinds() == [(ChangeKind.ADDED, f"a/p{i}") for i in range(3)]
        # A write to a field outside the projection: an event, no change.
        world.change(
            "a",
            "p0",
            lambda pod: pod.setdefault("status", {}).update(hostIP="1.2.3.4"),
            status=True,
        )
        world.label("a", "p1", seen="yes")
        await seen.wait_for(lambda: len(seen.changes) == 4)
        assert seen.kinds(3) == [(ChangeKind.MODIFIED, "a/p1")]
        assert counters.events == 2
        assert counters.changes == 4
        assert counters.watches >= 2
        assert counters.gone == 0
        assert not counters.errors
        assert counters.last_progress > 0
        entry = informer.entry(ObjectKey("a", "p0"))
        assert entry is not None
        assert (
            entry.resource_version
            == world.sim.store.get(SIM_PODS, "a", "p0")["metadata"]["resourceVersion"]
        )


async def test_watch_resumes_after_normal_closes_with_bookmarks(
    world: SimWorld, client: KubeClient
) -> None:
    world.sim.store.bookmark_interval = 0.3
    recorder = RecordingClient(client)
    informer = pods_informer(recorder, namespaces=["a"])
    async with running(informer) as seen:
        await informer.wait_synced()
        world.create("a", "p0")
        await seen.wait_for(lambda: len(seen.changes) == 1)
        # Writes elsewhere move the store's version; bookmarks carry it to the informer.
        world.create("b", "elsewhere")
        elsewhere_rv = world.sim.store.resource_version
        # The server ends the watch after 2-3 s; the next one starts from the version of
        # a bookmark, as no event of namespace "a" carries the newer version.
        await eventually(
            lambda: int(recorder.watches[-1]["resourceVersion"]) >= elsewhere_rv, within=8
        )
        world.create("a", "p1")
        await seen.converge(world.projected(namespaces=["a"]))
    assert informer.counters.lists == 1  # a normal close never re-lists
    assert informer.counters.bookmarks >= 1
    assert informer.counters.restarts >= 1
    assert all(w["allowWatchBookmarks"] == "true" for w in recorder.watches)
    assert all(2 <= int(w["timeoutSeconds"]) <= 3 for w in recorder.watches)


# -- re-lists ------------------------------------------------------------------------


async def test_relist_after_gone_emits_only_the_differences(
    world: SimWorld, client: KubeClient
) -> None:
    for name in ("keep", "relabel", "drop", "quiet"):
        world.create("a", name)
    recorder = RecordingClient(client)
    informer = pods_informer(recorder, namespaces=["a"])
    async with running(informer) as seen:
        await seen.converge(world.projected(namespaces=["a"]))
        mark = len(seen.changes)

        def writes() -> None:
            world.label("a", "relabel", x="1")
            world.delete("a", "drop")
            world.create("a", "new")
            world.change(
                "a",
                "quiet",
                lambda pod: pod.setdefault("status", {}).update(hostIP="9.9.9.9"),
                status=True,
            )
            world.delete("a", "keep")
            world.create("a", "keep")  # same name, another uid

        hidden_writes(world, writes, abrupt=True)
        await seen.converge(world.projected(namespaces=["a"]))
    assert seen.kinds(mark) == [
        (ChangeKind.DELETED, "a/drop"),
        (ChangeKind.DELETED, "a/keep"),
        (ChangeKind.ADDED, "a/keep"),
        (ChangeKind.ADDED, "a/new"),
        (ChangeKind.MODIFIED, "a/relabel"),
    ]
    assert informer.counters.gone == 1
    assert informer.counters.lists == 2
    # As reflector.go: the first LIST from the watch cache (resourceVersion=0), the one
    # after a 410 from the last seen version, unpaged (the cache serves it whole).
    assert recorder.lists[0]["resourceVersion"] == "0"
    assert "limit" not in recorder.lists[1]
    assert int(recorder.lists[1]["resourceVersion"]) > 0


async def test_paged_consistent_relist_and_an_expired_continue_token(
    world: SimWorld, client: KubeClient
) -> None:
    for i in range(7):
        world.create("a", f"p{i}")
    recorder = RecordingClient(client)
    informer = pods_informer(recorder, namespaces=["a"])
    faults = world.sim.faults
    async with running(informer) as seen:
        await seen.converge(world.projected(namespaces=["a"]))
        first = len(recorder.lists)
        # The re-list from the last seen version is refused (as when the watch cache
        # has not got it): the informer falls back to a consistent, paged LIST.
        faults.fail_requests(code=410, verb="list", resource="pods", times=1)
        hidden_writes(world, lambda: world.create("a", "p7") and None)
        await seen.converge(world.projected(namespaces=["a"]))
        pages = recorder.lists[first:]
        assert "limit" not in pages[0]  # the refused one, from the last seen version
        assert pages[1] == {"limit": "2"}  # consistent: no resourceVersion
        assert all(p.get("limit") == "2" and "continue" in p for p in pages[2:])
        assert len(pages) == 1 + 4  # 8 pods, 2 a page

        # Now a continue token expires between two pages: one whole consistent LIST.
        def expire_once(query: dict[str, str]) -> None:
            if "continue" in query and recorder.before_request is not None:
                recorder.before_request = None
                world.create("a", "p8")
                faults.drop_history()

        recorder.before_request = expire_once
        mark = len(recorder.lists)
        faults.fail_requests(code=410, verb="list", resource="pods", times=1)
        hidden_writes(world, lambda: world.delete("a", "p0"))
        await eventually(lambda: informer.counters.lists == 3)
        await seen.converge(world.projected(namespaces=["a"]))
        tail = recorder.lists[mark:]
        assert tail[1] == {"limit": "2"}
        assert "continue" in tail[2]
        assert tail[3] == {}  # the pager's full list after the expired token
    assert informer.counters.gone == 4  # 2 watches, 2 LISTs from the last seen version


# -- errors, backoff, half-open watches ----------------------------------------------


async def test_429_retry_after_is_honoured_and_5xx_backs_off_without_relist(
    world: SimWorld, client: KubeClient
) -> None:
    clock = RecordingClock()
    informer = pods_informer(client, namespaces=["a"], clock=clock)
    faults = world.sim.faults
    async with running(informer) as seen:
        world.create("a", "first")  # a watch that delivered a line ends normally
        await seen.wait_for(lambda: len(seen.changes) == 1)
        faults.fail_requests(code=429, verb="watch", resource="pods", retry_after=3, times=1)
        faults.fail_requests(code=500, verb="watch", resource="pods", times=3)
        faults.close_watches()
        world.create("a", "p0")
        await seen.converge(world.projected(namespaces=["a"]))
    assert clock.sleeps[0] >= 3.0  # Retry-After 3 s
    later = clock.sleeps[1:4]
    assert later == sorted(later)
    assert all(0.05 <= d <= 0.5 for d in later)
    assert informer.counters.errors == {"ApiTooManyRequests": 1, "ApiServerError": 3}
    assert informer.counters.lists == 1  # resumed the watch, never re-listed


async def test_failed_first_list_is_retried_with_backoff(
    world: SimWorld, client: KubeClient
) -> None:
    world.create("a", "p0")
    clock = RecordingClock()
    recorder = RecordingClient(client)
    world.sim.faults.fail_requests(code=503, verb="list", resource="pods", times=2)
    informer = pods_informer(recorder, namespaces=["a"], clock=clock)
    async with running(informer) as seen:
        await seen.converge(world.projected(namespaces=["a"]))
    assert [q["resourceVersion"] for q in recorder.lists] == ["0", "0", "0"]
    assert len(clock.sleeps) == 2
    assert informer.counters.errors == {"ApiServerError": 2}


async def test_a_half_open_watch_is_detected_within_the_read_deadline(
    world: SimWorld, client: KubeClient
) -> None:
    informer = pods_informer(client, namespaces=["a"])
    async with running(informer) as seen:
        await informer.wait_synced()
        await eventually(lambda: world.open_watches() == 1)
        assert world.sim.faults.stall_watches() == 1
        stalled_at = time.monotonic()
        world.create("a", "p0")
        # timeoutSeconds <= 3 + margin 1: no byte for 4 s means a dead connection.
        await seen.converge(world.projected(namespaces=["a"]), within=8)
        elapsed = time.monotonic() - stalled_at
    assert informer.counters.errors == {"ApiTimeout": 1}
    assert elapsed <= 3 + 1 + FAST.backoff.maximum + 1.0
    assert informer.counters.lists == 1  # resumed from the last seen version


async def test_a_watch_closed_at_once_backs_off() -> None:
    """A scripted client: every watch ends at once without a line (reflector.go's
    "very short watch"), so the informer backs off instead of spinning."""

    class Scripted:
        def __init__(self) -> None:
            self.watches = 0
            self.fifth = asyncio.Event()

        async def list_page(self, path: str, **_: Any) -> dict[str, Any]:
            return {"metadata": {"resourceVersion": "5"}, "items": []}

        @contextlib.asynccontextmanager
        async def stream_lines(self, path: str, **_: Any) -> AsyncIterator[AsyncIterator[bytes]]:
            self.watches += 1
            if self.watches == 5:
                self.fifth.set()

            async def nothing() -> AsyncIterator[bytes]:
                return
                yield b""

            yield nothing()

    clock = RecordingClock()
    scripted = Scripted()
    informer = pods_informer(scripted, clock=clock)
    async with running(informer):
        with anyio.fail_after(5):
            await scripted.fifth.wait()
    assert clock.sleeps[:4] == sorted(clock.sleeps[:4])
    assert informer.counters.errors["ShortWatch"] >= 4
    assert informer.counters.lists == 1


# -- lifecycle -----------------------------------------------------------------------


async def test_cancelling_run_ends_the_changes_stream(world: SimWorld, client: KubeClient) -> None:
    informer = pods_informer(client, namespaces=["a", "b"])
    collector = Collector(informer)
    async with anyio.create_task_group() as group:
        group.start_soon(collector.run)
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await informer.run()

        group.start_soon(run)
        await informer.wait_synced()
        scope.cancel()
    assert collector.ended
    with pytest.raises(RuntimeError, match="only once"):
        await informer.run()


async def test_a_consumer_that_closes_the_stream_keeps_a_live_store(
    world: SimWorld, client: KubeClient
) -> None:
    informer = pods_informer(client, namespaces=["a"], settings=InformerSettings(buffer=0))
    informer.changes.close()
    async with anyio.create_task_group() as group:
        group.start_soon(informer.run)
        await informer.wait_synced()
        world.create("a", "p0")
        await eventually(lambda: informer.get(ObjectKey("a", "p0")) is not None)
        group.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespaces": []}, "at least one"),
        ({"settings": None, "namespaces": ["a"], "resource": "nodes"}, "cluster-scoped"),
    ],
    ids=["no-namespace", "cluster-scoped-with-namespaces"],
)
def test_arguments_are_checked(kwargs: dict[str, Any], message: str) -> None:
    from probemarker.kube.watch.informer import Resource

    if kwargs.pop("resource", None) == "nodes":
        kwargs["resource"] = Resource("", "v1", "nodes", namespaced=False)
    else:
        kwargs["resource"] = PODS
    with pytest.raises(ValueError, match=message):
        Informer(client=None, project=pod_projection, **kwargs)  # type: ignore[arg-type]


async def test_an_object_the_projection_cannot_read_is_an_error_not_a_crash(
    world: SimWorld, client: KubeClient
) -> None:
    """A projection that raises (a caller's bug, or an object of an unexpected shape) is
    `ApiMalformed` on the watch as on the list: counted, logged, retried with backoff;
    the informer keeps running and the objects before it stay in the store."""

    def picky(obj: Mapping[str, Any]) -> Projection:
        if obj["metadata"]["name"] == "odd":
            raise TypeError("cannot read this pod")
        return pod_projection(obj)

    world.create("a", "p0")
    clock = RecordingClock()
    informer = Informer(
        client=client,
        resource=PODS,
        project=picky,
        namespaces=["a"],
        settings=FAST,
        clock=clock,
    )
    async with running(informer) as seen:
        await seen.converge(world.projected(namespaces=["a"]))
        world.create("a", "odd")
        await eventually(lambda: informer.counters.errors.get("ApiMalformed", 0) >= 2)
        assert informer.get(ObjectKey("a", "p0")) is not None
        assert informer.get(ObjectKey("a", "odd")) is None
    assert clock.sleeps  # backed off between the attempts
