"""The half-open watch fault: `stall_watches` stops sending without ending the stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import orjson
import pytest

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest, raw

PODS = "/api/v1/namespaces/default/pods"


def _open_streams(sim: SimCluster) -> int:
    assert sim.server is not None
    return len(sim.server.watches)


async def _wait_for(predicate: Callable[[], bool], *, within: float = 5.0) -> None:
    """Poll a condition of the sim's state that has no event to await (a stream ends
    on the server some time after the client left)."""
    for _ in range(int(within / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not true within {within} s")


async def _open_watch(
    session: aiohttp.ClientSession, sim: SimCluster, **params: str
) -> aiohttp.ClientResponse:
    response = await session.get(
        sim.url + PODS,
        params={"watch": "1", **params},
        timeout=aiohttp.ClientTimeout(total=None),
    )
    assert response.status == 200
    return response


async def _next_line(response: aiohttp.ClientResponse, *, within: float) -> bytes:
    async with asyncio.timeout(within):
        while True:
            line = await response.content.readline()
            if not line or line.strip():
                return line


async def _current_rv(sim: SimCluster) -> str:
    status, body = await raw(sim, "GET", PODS)
    assert status == 200
    return str(body["metadata"]["resourceVersion"])


async def test_a_stalled_watch_sends_nothing_and_outlives_its_timeout(sim: SimCluster) -> None:
    rv = await _current_rv(sim)
    async with aiohttp.ClientSession() as session:
        response = await _open_watch(session, sim, resourceVersion=rv, timeoutSeconds="1")
        try:
            await raw(sim, "POST", PODS, json=pod_manifest("before", node=None))
            event = orjson.loads(await _next_line(response, within=5))
            assert event["object"]["metadata"]["name"] == "before"
            assert sim.faults.stall_watches() == 1
            await raw(sim, "POST", PODS, json=pod_manifest("after", node=None))
            # Past the 1 s timeoutSeconds: a healthy watch would have ended (EOF) by now.
            with pytest.raises(TimeoutError):
                await _next_line(response, within=2.0)
            assert _open_streams(sim) == 1
        finally:
            response.close()  # the client leaves
        await _wait_for(lambda: _open_streams(sim) == 0)


async def test_new_too_stalls_later_watches_until_unstalled(sim: SimCluster) -> None:
    await raw(sim, "POST", PODS, json=pod_manifest("p0", node=None))
    sim.faults.stall_watches(new_too=True)
    async with aiohttp.ClientSession() as session:
        # resourceVersion=0 would start with an ADDED for p0: a stalled watch sends
        # its headers and then nothing.
        stalled = await _open_watch(session, sim, resourceVersion="0", timeoutSeconds="1")
        try:
            with pytest.raises(TimeoutError):
                await _next_line(stalled, within=1.5)
        finally:
            stalled.close()
        sim.faults.unstall_watches()
        healthy = await _open_watch(session, sim, resourceVersion="0", timeoutSeconds="1")
        try:
            event = orjson.loads(await _next_line(healthy, within=5))
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "p0")
            assert await _next_line(healthy, within=5) == b""  # its timeout ends it
        finally:
            healthy.close()
    await _wait_for(lambda: _open_streams(sim) == 0)


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean", "abrupt"])
async def test_close_watches_ends_a_stalled_watch(sim: SimCluster, abrupt: bool) -> None:
    rv = await _current_rv(sim)
    async with aiohttp.ClientSession() as session:
        response = await _open_watch(session, sim, resourceVersion=rv)
        try:
            assert sim.faults.stall_watches() == 1
            assert sim.faults.close_watches(abrupt=abrupt) == 1
            if abrupt:
                with pytest.raises(aiohttp.ClientPayloadError):
                    await _next_line(response, within=5)
            else:
                assert await _next_line(response, within=5) == b""
        finally:
            response.close()
    await _wait_for(lambda: _open_streams(sim) == 0)
