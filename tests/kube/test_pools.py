"""The client's connection pools: long-lived connections never take the short requests'.

Exec WebSockets stay open for a whole probe run, watches for minutes; plain requests
(patches, events, LISTs) must find a connection whatever those hold (issue 15, 2).
Every test is bounded by `fail_after`; nothing here sleeps.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import pytest

from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import ApiTimeout, RequestInfo
from probemarker.kube.connect.websocket import WebSocket
from probemarker.sim import SimCluster
from tests.kube.test_client import LIST, PODS, create, pod, wait_running

EXEC = RequestInfo("get", "pods", namespace="default", name="a", subresource="exec")
EXEC_PARAMS = [("command", "true"), ("container", "app"), ("stdout", "true"), ("stderr", "true")]


def open_exec(
    client: KubeClient, *, wait: float = 5.0
) -> contextlib.AbstractAsyncContextManager[WebSocket]:
    return client.websocket(
        f"{PODS}/a/exec",
        info=EXEC,
        params=EXEC_PARAMS,
        protocols=["v5.channel.k8s.io"],
        wait=wait,
    )


def open_watch(client: KubeClient) -> contextlib.AbstractAsyncContextManager[object]:
    params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "60"}
    return client.stream_lines(PODS, info=LIST, params=params, read_timeout=30)


@contextlib.asynccontextmanager
async def small_pools(sim: SimCluster, **over: int) -> AsyncIterator[KubeClient]:
    settings = ClientSettings(**over)  # type: ignore[arg-type]
    async with KubeClient(await load_kubeconfig(sim.kubeconfig_path), settings=settings) as kube:
        await create(kube, pod("a"))
        await wait_running(kube, "a")
        yield kube


async def test_open_execs_leave_requests_their_connections(sim: SimCluster) -> None:
    sim.faults.exec.stall = True  # upgraded, then silent: each exec holds its connection
    async with small_pools(sim, request_connections=2) as kube, contextlib.AsyncExitStack() as held:
        for _ in range(2):
            await held.enter_async_context(open_exec(kube))
        with anyio.fail_after(5):
            listed = await kube.request("GET", PODS, info=LIST, wait=5)
            async with open_watch(kube):
                pass
        assert listed["kind"] == "PodList"


async def test_open_watches_leave_requests_their_connections(sim: SimCluster) -> None:
    async with small_pools(sim, request_connections=2) as kube, contextlib.AsyncExitStack() as held:
        with anyio.fail_after(5):
            for _ in range(3):  # more watches than the request pool has connections
                await held.enter_async_context(open_watch(kube))
            listed = await kube.request("GET", PODS, info=LIST, wait=5)
        assert listed["kind"] == "PodList"


async def test_the_exec_pool_holds_its_limit(sim: SimCluster) -> None:
    sim.faults.exec.stall = True
    async with small_pools(sim, exec_connections=2) as kube, contextlib.AsyncExitStack() as held:
        for _ in range(2):
            await held.enter_async_context(open_exec(kube))
        with anyio.fail_after(5), pytest.raises(ApiTimeout):
            async with open_exec(kube, wait=0.3):
                pass
        await held.aclose()  # closing one frees its connection for the next exec
        with anyio.fail_after(5):
            async with open_exec(kube):
                pass


def test_pools_need_a_connection_each() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        KubeClient(object(), settings=ClientSettings(exec_connections=0))  # type: ignore[arg-type]
