"""A LIST is read item by item: the informer projects each listed pod as it arrives and
never holds the whole answer (issue 22: a re-list of a fat node held the raw list, its
parse and the old store at once).

A tiny aiohttp server (not the sim, which writes an answer whole) sends the first
items of a pod list, then stops in the middle of the answer until the test lets it go
on. Read whole (`response.read()` + one parse), nothing can be projected before the
answer ends; read item by item, the items sent so far are projected while the server
still waits, each raw item already dropped.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import Connection
from probemarker.kube.watch.informer import PODS, Informer, InformerSettings
from probemarker.watch.pods import pod_projection

SETTINGS = InformerSettings(watch_timeout_min=300, watch_timeout_max=300, page_size=0)
NOTE = "n" * 32_768  # a pod's 32 KiB of annotations


def raw_pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p{i}",
            "namespace": "default",
            "uid": f"u{i}",
            "resourceVersion": str(10 + i),
            "annotations": {"example.com/note": f"{i}{NOTE}"},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "app"}]},
        "status": {"phase": "Running"},
    }


class PausingList:
    """GET /api/v1/pods: the list's head and `before` items, then (once `go_on` is
    set) the other items and the end; a watch stays open and silent."""

    def __init__(self, *, before: int, after: int) -> None:
        self.before, self.after = before, after
        self.go_on = anyio.Event()
        self.paused = anyio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"Content-Type": "application/json"})
        await answer.prepare(request)
        if request.query.get("watch") == "true":
            await anyio.sleep_forever()
        items = [orjson.dumps(raw_pod(i)) for i in range(self.before + self.after)]
        await answer.write(b'{"kind":"PodList","apiVersion":"v1","metadata":')
        await answer.write(b'{"resourceVersion":"99"},"items":[')
        await answer.write(b",".join(items[: self.before]) + b",")
        self.paused.set()
        await self.go_on.wait()
        await answer.write(b",".join(items[self.before :]) + b"]}")
        await answer.write_eof()
        return answer


@pytest.fixture
async def server() -> AsyncIterator[tuple[PausingList, KubeClient]]:
    script = PausingList(before=3, after=2)
    app = web.Application()
    app.router.add_get("/api/v1/pods", script.handle)
    test_server = TestServer(app)
    await test_server.start_server()
    try:
        url = str(test_server.make_url("")).rstrip("/")
        async with KubeClient(Connection(server=url)) as client:
            yield script, client
    finally:
        await test_server.close()


async def test_listed_items_are_projected_while_the_answer_is_still_arriving(
    server: tuple[PausingList, KubeClient],
) -> None:
    script, client = server
    projected: list[str] = []
    alive: list[int] = []  # raw listed objects still referenced after their projection
    three = anyio.Event()

    def project(raw: Mapping[str, Any]) -> dict[str, Any]:
        projected.append(raw["metadata"]["name"])
        if len(projected) == 3:
            three.set()
        gc.collect()
        alive.append(sum(1 for o in gc.get_objects() if _a_raw_pod(o)))
        return pod_projection(raw)

    informer: Informer[dict[str, Any]] = Informer(
        client=client, resource=PODS, project=project, settings=SETTINGS
    )
    async with informer.changes, anyio.create_task_group() as group:
        group.start_soon(informer.run)
        with anyio.fail_after(10):
            await script.paused.wait()
            await three.wait()  # read whole, nothing is projected before the end
        assert not informer.synced.is_set()
        # Each raw item is dropped once projected: only the one being projected lives.
        assert alive == [1, 1, 1]
        script.go_on.set()
        with anyio.fail_after(10):
            await informer.wait_synced()
        assert projected == ["p0", "p1", "p2", "p3", "p4"]
        group.cancel_scope.cancel()
    stored = informer.list()
    assert [p["metadata"]["name"] for p in stored] == projected
    # What the store keeps of the annotations: a summary (size, fingerprints), not the note.
    summary = stored[0]["metadata"]["annotations"]
    assert summary.total_bytes == len("example.com/note") + 1 + len(NOTE)
    assert summary.carries("example.com/note", f"0{NOTE}")
    assert NOTE not in repr(stored)


def _a_raw_pod(obj: object) -> bool:
    """A listed pod as parsed (its annotations a plain dict holding the note)."""
    if type(obj) is not dict:
        return False
    meta = obj.get("metadata")
    notes = meta.get("annotations") if type(meta) is dict else None
    return type(notes) is dict and str(notes.get("example.com/note", "")).endswith(NOTE)
