"""The exec stream against servers that break the protocol (a tiny aiohttp server, not the sim)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import Connection
from probemarker.probe.execresult import (
    ExecExited,
    ExecResult,
    ExecTransportError,
    TransportFailure,
)
from probemarker.probe.execstream import V5, run_exec

Script = Callable[[web.WebSocketResponse], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Script, tuple[str, ...]], Awaitable[KubeClient]]]:
    servers: list[TestServer] = []
    clients: list[KubeClient] = []

    async def start(script: Script, protocols: tuple[str, ...] = (V5,)) -> KubeClient:
        async def handle(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse(protocols=protocols)
            await ws.prepare(request)
            await script(ws)
            return ws

        app = web.Application()
        app.router.add_get("/api/v1/namespaces/default/pods/p/exec", handle)
        server = TestServer(app)
        await server.start_server()
        servers.append(server)
        client = KubeClient(Connection(server=str(server.make_url("")).rstrip("/")))
        clients.append(await client.__aenter__())
        return client

    try:
        yield start
    finally:
        for client in clients:
            await client.__aexit__(None, None, None)
        for server in servers:
            await server.close()


async def run(client: KubeClient, time_limit: float = 10.0) -> ExecResult:
    return await run_exec(
        client,
        namespace="default",
        pod="p",
        container="c",
        command=["x"],
        time_limit=time_limit,
        wait=time_limit + 10.0,
    )


async def hang(ws: web.WebSocketResponse) -> None:
    async for _ in ws:  # until the client goes away
        pass


async def test_unreadable_status_is_a_protocol_error_at_once(
    serve: Callable[..., Awaitable[KubeClient]],
) -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x01")
        await ws.send_bytes(b'\x03{"status":"Failure","reason":"NonZeroExitCode"}')
        await hang(ws)

    result = await run(await serve(script), time_limit=30)
    assert isinstance(result, ExecTransportError)
    assert result.kind is TransportFailure.PROTOCOL
    assert "without details" in result.message


async def test_no_subprotocol_chosen_is_a_protocol_error(
    serve: Callable[..., Awaitable[KubeClient]],
) -> None:
    result = await run(await serve(hang, ()))
    assert isinstance(result, ExecTransportError)
    assert result.kind is TransportFailure.PROTOCOL
    assert "chose the subprotocol None" in result.message


async def test_status_complete_then_silence_stands_at_the_deadline(
    serve: Callable[..., Awaitable[KubeClient]],
) -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_bytes(b"\x01ok")
        await ws.send_bytes(b'\x03{"metadata":{},"status":"Success"}')
        await hang(ws)  # never closes

    assert await run(await serve(script), time_limit=0.5) == ExecExited(0, "ok", "", 0, 0)


async def test_text_frames_and_v5_close_signal_are_tolerated(
    serve: Callable[..., Awaitable[KubeClient]],
) -> None:
    async def script(ws: web.WebSocketResponse) -> None:
        await ws.send_str("\x01text")
        await ws.send_bytes(bytes((255, 1)))
        await ws.send_bytes(b'\x03{"status":"Success"}')
        await ws.close()

    assert await run(await serve(script)) == ExecExited(0, "text", "", 0, 0)
