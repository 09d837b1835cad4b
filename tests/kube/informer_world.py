"""The informer tests' world: a sim written to directly, change collectors, settings.

Shared by test_informer.py and test_informer_contract.py. Writes go straight to the
sim's store (`SimWorld`), so they are not subject to the faults the tests inject on
the informer's LIST and WATCH requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio

from probemarker.kit.backoff import BackoffSettings
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.watch.cache import Change, ChangeKind, ObjectKey
from probemarker.kube.watch.informer import PODS, Informer, InformerSettings
from probemarker.sim import SimCluster
from probemarker.sim.errors import NotFound
from probemarker.sim.server.discovery.catalog import NAMESPACES as SIM_NAMESPACES
from probemarker.sim.server.discovery.catalog import PODS as SIM_PODS
from probemarker.watch.pods import pod_projection
from tests.sim.server_helpers import pod_manifest

Projection = dict[str, Any]

FAST = InformerSettings(
    watch_timeout_min=2.0,
    watch_timeout_max=3.0,
    read_margin=1.0,
    page_size=2,
    backoff=BackoffSettings(initial=0.05, maximum=0.5, factor=2.0, jitter=0.5),
)


class SimWorld:
    """Writes to the sim's store (the "other clients" of the API server)."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim

    def namespace(self, name: str) -> None:
        self.sim.store.create(SIM_NAMESPACES, {"metadata": {"name": name}}, namespace=None)

    def create(
        self, ns: str, name: str, *, labels: dict[str, str] | None = None, node: str | None = None
    ) -> dict[str, Any]:
        return self.sim.store.create(
            SIM_PODS, pod_manifest(name, labels=labels, node=node), namespace=ns
        )

    def change(
        self, ns: str, name: str, edit: Callable[[dict[str, Any]], None], *, status: bool = False
    ) -> dict[str, Any]:
        pod = self.sim.store.get(SIM_PODS, ns, name)
        edit(pod)
        return self.sim.store.update(
            SIM_PODS, pod, namespace=ns, name=name, subresource="status" if status else None
        )

    def label(self, ns: str, name: str, **labels: str) -> dict[str, Any]:
        return self.change(
            ns, name, lambda pod: pod["metadata"].setdefault("labels", {}).update(labels)
        )

    def delete(self, ns: str, name: str) -> None:
        self.sim.store.delete(SIM_PODS, ns, name, grace_period_seconds=0)

    def exists(self, ns: str, name: str) -> bool:
        try:
            self.sim.store.get(SIM_PODS, ns, name)
        except NotFound:
            return False
        return True

    def open_watches(self) -> int:
        assert self.sim.server is not None
        return len(self.sim.server.watches)

    def projected(
        self,
        *,
        namespaces: Sequence[str] | None = None,
        label: str | None = None,
        field: str | None = None,
    ) -> dict[ObjectKey, Projection]:
        """What a fresh LIST gives, as projections."""
        items = self.sim.store.list(SIM_PODS, label_selector=label, field_selector=field).items
        return {
            ObjectKey(p["metadata"]["namespace"], p["metadata"]["name"]): pod_projection(p)
            for p in items
            if namespaces is None or p["metadata"]["namespace"] in namespaces
        }


class Collector:
    """Consumes an informer's changes; replays them into `state`."""

    def __init__(self, informer: Informer[Projection]) -> None:
        self.informer = informer
        self.changes: list[Change[Projection]] = []
        self.state: dict[ObjectKey, Projection] = {}
        self.ended = False
        self._cond = asyncio.Condition()

    async def run(self) -> None:
        async with self.informer.changes:
            async for change in self.informer.changes:
                self.changes.append(change)
                if change.kind is ChangeKind.DELETED:
                    self.state.pop(change.key, None)
                else:
                    self.state[change.key] = change.obj
                async with self._cond:
                    self._cond.notify_all()
        self.ended = True

    async def wait_for(self, predicate: Callable[[], bool], *, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._cond:
            await self._cond.wait_for(predicate)

    async def converge(
        self, expected: Mapping[ObjectKey, Projection], *, within: float = 10.0
    ) -> None:
        """Until the replayed changes and the store both equal `expected`."""
        await self.wait_for(lambda: self.state == expected, within=within)
        assert stored(self.informer) == expected

    def kinds(self, since: int = 0) -> list[tuple[ChangeKind, str]]:
        return [(c.kind, str(c.key)) for c in self.changes[since:]]


def stored(informer: Informer[Projection]) -> dict[ObjectKey, Projection]:
    return {
        ObjectKey(p["metadata"].get("namespace", ""), p["metadata"]["name"]): p
        for p in informer.list()
    }


async def eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    """Poll a condition nothing signals (a counter, the recorded requests)."""
    for _ in range(int(within / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not true within {within} s")


def hidden_writes(world: SimWorld, write: Callable[[], None], *, abrupt: bool = False) -> None:
    """Writes the informer cannot see on its watch, then a watch end: it must re-list."""
    faults = world.sim.faults
    faults.stall_watches(new_too=True)
    write()
    faults.drop_history()
    faults.unstall_watches()
    faults.close_watches(abrupt=abrupt)


@contextlib.asynccontextmanager
async def running(informer: Informer[Projection]) -> AsyncIterator[Collector]:
    collector = Collector(informer)
    async with anyio.create_task_group() as group:
        group.start_soon(informer.run)
        group.start_soon(collector.run)
        try:
            yield collector
        finally:
            group.cancel_scope.cancel()


class RecordingClock:
    """The real monotonic time; sleeps are recorded and shortened (no test waits 1 s
    for a Retry-After)."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await asyncio.sleep(min(seconds, 0.02))


class RecordingClient:
    """The real client, recording every request's parameters; `before_request` may act
    on the sim between pages."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.lists: list[dict[str, str]] = []
        self.watches: list[dict[str, str]] = []
        self.before_request: Callable[[dict[str, str]], None] | None = None

    async def list_page(
        self,
        path: str,
        *,
        info: RequestInfo,
        item: Callable[[dict[str, Any]], None],
        params: Sequence[tuple[str, str]] | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        query = dict(params or ())
        self.lists.append(query)
        if self.before_request is not None:
            self.before_request(query)
        return await self.client.list_page(path, info=info, item=item, params=params, wait=wait)

    def stream_lines(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Sequence[tuple[str, str]] | None = None,
        read_timeout: float,
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        self.watches.append(dict(params or ()))
        return self.client.stream_lines(path, info=info, params=params, read_timeout=read_timeout)


def pods_informer(client: Any, **kwargs: Any) -> Informer[Projection]:
    kwargs.setdefault("settings", FAST)
    return Informer(client=client, resource=PODS, project=pod_projection, **kwargs)
