"""WATCH: resume from a resourceVersion, bookmarks, 410 Gone, and no loss across reconnects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest

PODS = "/api/v1/namespaces/default/pods"


async def stream_events(
    session: aiohttp.ClientSession, url: str, **params: str
) -> AsyncIterator[dict[str, Any]]:
    """The watch events of one stream, until the server ends it."""
    async with session.get(url, params={"watch": "1", **params}) as response:
        assert response.status == 200
        async for line in response.content:
            if line.strip():
                yield orjson.loads(line)


async def test_watch_resumes_from_resource_version(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("w0", node=None))
    listed = await core.list_namespaced_pod("default")
    await core.create_namespaced_pod("default", pod_manifest("w1", node=None))
    await core.patch_namespaced_pod("w0", "default", {"metadata": {"labels": {"x": "y"}}})
    async with aiohttp.ClientSession() as session:
        seen = []
        async for event in stream_events(
            session, sim.url + PODS, resourceVersion=listed.metadata.resource_version
        ):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 2:
                break
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w0")]


async def test_watch_with_kubernetes_asyncio(sim: SimCluster, core: client.CoreV1Api) -> None:
    listed = await core.list_namespaced_pod("default")
    await core.create_namespaced_pod("default", pod_manifest("kw", labels={"app": "k"}, node=None))
    events = []
    # A Watch opens its own ApiClient (an aiohttp session): `async with` closes it.
    async with watch.Watch() as w, asyncio.timeout(5):
        async for event in w.stream(
            core.list_namespaced_pod,
            "default",
            label_selector="app=k",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=5,
        ):
            events.append((event["type"], event["object"].metadata.name))
            break
    assert events == [("ADDED", "kw")]


async def test_bookmarks_are_sent_when_allowed(sim: SimCluster) -> None:
    sim.store.bookmark_interval = 0.05
    async with aiohttp.ClientSession() as session:
        async for event in stream_events(
            session,
            sim.url + PODS,
            allowWatchBookmarks="true",
            resourceVersion=str(sim.store.resource_version),
        ):
            assert event["type"] == "BOOKMARK"
            assert event["object"]["kind"] == "Pod"
            assert int(event["object"]["metadata"]["resourceVersion"]) >= 1
            break


async def test_too_old_resource_version_gives_410_error_event(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("old", node=None))
    old = sim.store.resource_version
    await core.patch_namespaced_pod("old", "default", {"metadata": {"labels": {"a": "b"}}})
    sim.faults.drop_history()
    async with aiohttp.ClientSession() as session:
        events = [
            e async for e in stream_events(session, sim.url + PODS, resourceVersion=str(old - 1))
        ]
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410
    assert events[0]["object"]["reason"] == "Expired"


async def test_timeout_seconds_ends_the_stream(sim: SimCluster) -> None:
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(5):
            events = [
                e
                async for e in stream_events(
                    session,
                    sim.url + PODS,
                    timeoutSeconds="1",
                    resourceVersion=str(sim.store.resource_version),
                )
            ]
    assert events == []
    assert sim.accounting.count(verb="watch", resource="pods") == 1


async def test_no_event_lost_or_reordered_across_reconnects(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    """A reader that resumes from its last seen version sees every write exactly once, in order,
    while the server keeps closing its streams (cleanly and abruptly)."""
    await core.create_namespaced_pod("default", pod_manifest("seq", node=None))
    start = sim.store.resource_version
    writes = 60
    written: list[int] = []
    received: list[int] = []
    reconnects = 0

    async def writer() -> None:
        for i in range(writes):
            pod = await core.patch_namespaced_pod(
                "seq", "default", {"metadata": {"labels": {"n": str(i)}}}
            )
            written.append(int(pod.metadata.resource_version))
            if i % 7 == 3:
                sim.faults.close_watches(abrupt=(i % 2 == 0))

    async def reader() -> None:
        nonlocal reconnects
        last = str(start)
        async with aiohttp.ClientSession() as session:
            while len(received) < writes:
                try:
                    async for event in stream_events(session, sim.url + PODS, resourceVersion=last):
                        assert event["type"] == "MODIFIED"
                        last = event["object"]["metadata"]["resourceVersion"]
                        received.append(int(last))
                except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                    pass
                reconnects += 1

    async with asyncio.timeout(20), asyncio.TaskGroup() as group:
        group.create_task(reader())
        group.create_task(writer())
    assert received == written
    assert reconnects >= 2


async def test_kubernetes_asyncio_sees_410_as_api_exception(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("gone", node=None))
    old = str(sim.store.resource_version - 1)
    await core.patch_namespaced_pod("gone", "default", {"metadata": {"labels": {"a": "b"}}})
    sim.faults.drop_history()
    w = watch.Watch()

    async def consume() -> None:
        async with asyncio.timeout(5):
            async for _ in w.stream(
                core.list_namespaced_pod, "default", resource_version=old, timeout_seconds=5
            ):
                pass

    with pytest.raises(ApiException) as expired:
        await consume()
    assert expired.value.status == 410
