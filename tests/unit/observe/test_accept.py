"""The health server's bounds over real sockets on 127.0.0.x (observe/accept.py,
serve.py): a connection that sends half a request, or nothing, or dribbles, is closed
within the idle timeout; an idle keep-alive connection too; beyond the limits (in all,
from one address) the newest gets in and the oldest is closed, so a flood leaves room
for the kubelet's probe; a reader that does not read is cut at the lifetime. accept() failures: counted, logged once a minute
without a traceback (a fake socket and a fake clock), and a real EMFILE in a child
process whose descriptors are all taken, then given back.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from prometheus_client import Gauge
from structlog.testing import capture_logs

from probemarker.kit.repeats import Repeats
from probemarker.observe.accept import AcceptLoop, _Tracked
from probemarker.observe.address import ListenAddress
from probemarker.observe.connections import ConnectionGate, Eviction, ServerStats
from probemarker.observe.descriptors import ConnectionLimits
from probemarker.observe.serve import MetricsServer
from tests.fakes import FakeClock
from tests.rbac_check import REPO
from tests.unit.observe.test_serve import Parts

# The server listens on 127.0.0.1; clients come from other loopback addresses, as
# pods and the node would from theirs.
KUBELET, POD_A, POD_B, POD_C = "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"


@contextlib.asynccontextmanager
async def serving(parts: Parts, **options: Any) -> AsyncIterator[MetricsServer]:
    server = MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry, **options
    )
    async with server:
        yield server


async def connect(port: int, source: str, *, receive_buffer: int = 0) -> socket.socket:
    sock = socket.socket()
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    sock.bind((source, 0))
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return sock


async def closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed `sock`: end of stream or a reset (data is skipped)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            if not await loop.sock_recv(sock, 65536):
                return True
        except ConnectionResetError:
            return True


async def until(condition: Callable[[], bool], *, within: float = 5.0) -> None:
    """Until `condition()` holds: the server's counters, which have no event."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 (no event to await: the server's counters)
            await anyio.sleep(0.01)


async def healthz(port: int, source: str) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        return response.status


# -- the idle timeout ----------------------------------------------------------------

# what the client sends, and how, before it waits for the server to close
SLOW_CLIENTS = [
    pytest.param([b"GET /metr"], id="half-a-request-line"),
    pytest.param([], id="nothing"),
    pytest.param([b"GET /healthz HTTP/1.1\r\n", b"Host: x\r\n"], id="headers-unfinished"),
    pytest.param([b"G", b"E", b"T", b" ", b"/", b"h"] * 4, id="dribbling-a-byte-at-a-time"),
]


@pytest.mark.parametrize("sends", SLOW_CLIENTS)
async def test_a_request_not_sent_in_time_is_closed(sends: list[bytes]) -> None:
    parts = Parts()
    async with serving(parts, idle_timeout=0.5) as server:
        assert server.port
        sock = await connect(server.port, POD_A)
        with sock, anyio.fail_after(5):
            loop = asyncio.get_running_loop()
            for chunk in sends:
                try:
                    await loop.sock_sendall(sock, chunk)
                except (BrokenPipeError, ConnectionResetError):
                    break  # closed while it dribbled
                await anyio.sleep(0.05)  # the dribble itself: time passing is the case
            assert await closed_by_server(sock)
        await until(lambda: server.stats.open == 0)
        assert server.stats.expired == 0  # the idle timer, not the lifetime


async def test_an_idle_keep_alive_connection_is_closed() -> None:
    parts = Parts()
    async with serving(parts, idle_timeout=0.5) as server:
        assert server.port
        sock = await connect(server.port, POD_A)
        with sock, anyio.fail_after(5):
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while b"ok: event loop" not in answer:
                answer += await loop.sock_recv(sock, 65536)
            assert answer.startswith(b"HTTP/1.1 200 OK")
            assert await closed_by_server(sock)


# -- the limits ------------------------------------------------------------------------


async def test_beyond_the_limits_the_oldest_connection_makes_room() -> None:
    parts = Parts()
    limits = ConnectionLimits(total=4, per_peer=2)
    async with serving(parts, limits=limits, idle_timeout=60) as server:
        assert server.port
        a1, a2 = [await connect(server.port, POD_A) for _ in range(2)]
        await until(lambda: server.stats.open == 2)
        a3 = await connect(server.port, POD_A)  # A's third: A's oldest goes
        with anyio.fail_after(5):
            assert await closed_by_server(a1)  # at once: the idle timeout is 60 s
        await until(lambda: server.stats.open == 2)
        assert server.stats.evicted == {Eviction.PEER_LIMIT: 1}

        b1, b2 = [await connect(server.port, POD_B) for _ in range(2)]
        await until(lambda: server.stats.open == 4)
        with anyio.fail_after(5):  # the server full: the kubelet gets in...
            assert await healthz(server.port, KUBELET) == 200
        with anyio.fail_after(5):  # ...and the oldest of all made room
            assert await closed_by_server(a2)
        assert server.stats.evicted == {Eviction.PEER_LIMIT: 1, Eviction.LIMIT: 1}
        await until(lambda: server.stats.open == 3)  # the kubelet's closed after it
        assert server.stats.accepted == 6
        for sock in (a1, a2, a3, b1, b2):
            sock.close()
        await until(lambda: server.stats.open == 0)


# (flooding addresses) with a server of 8, 2 per address
FLOODS = [
    pytest.param([POD_A], id="one-address"),
    pytest.param([f"127.0.1.{i}" for i in range(1, 21)], id="twenty-addresses"),
]


@pytest.mark.parametrize("sources", FLOODS)
async def test_a_flood_of_idle_connections_leaves_room_for_the_kubelet(
    sources: list[str],
) -> None:
    parts = Parts()
    limits = ConnectionLimits(total=8, per_peer=2)
    async with serving(parts, limits=limits, idle_timeout=60) as server:
        assert server.port
        flood = [await connect(server.port, sources[i % len(sources)]) for i in range(100)]
        await until(lambda: server.stats.accepted == 100)
        with anyio.fail_after(5):
            assert await healthz(server.port, KUBELET) == 200
        assert server.stats.open <= limits.total
        assert sum(server.stats.evicted.values()) >= 100 - limits.total
        for sock in flood:
            sock.close()


# -- the lifetime ----------------------------------------------------------------------


async def test_a_reader_that_does_not_read_is_cut_at_the_lifetime() -> None:
    parts = Parts()
    # An answer far larger than both sockets' buffers: the server's write waits.
    Gauge("probemarker_big", "x" * 8_000_000, registry=parts.registry).set(1)
    async with serving(parts, lifetime=0.5, idle_timeout=60) as server:
        assert server.port
        sock = await connect(server.port, POD_A, receive_buffer=4096)
        with sock:
            request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
            await asyncio.get_running_loop().sock_sendall(sock, request)
            await until(lambda: server.stats.expired == 1)
            await until(lambda: server.stats.open == 0)


class FakeTransport(asyncio.Transport):
    """A transport closing already, its answer unread: only abort() ends it."""

    def __init__(self) -> None:
        super().__init__()
        self.aborted = asyncio.Event()

    def is_closing(self) -> bool:
        return True

    def abort(self) -> None:
        self.aborted.set()


async def test_the_lifetime_ends_a_connection_that_is_closing_already() -> None:
    """aiohttp closed it after its answer, and the close waits for the answer to be
    read (the kernel's buffers full): the lifetime aborts it all the same."""
    expired: list[bool] = []
    tracked = _Tracked(
        asyncio.Protocol(),
        on_end=lambda _: None,
        lifetime=0.05,
        on_expiry=lambda: expired.append(True),
    )
    transport = FakeTransport()
    tracked.connection_made(transport)
    with anyio.fail_after(5):
        await transport.aborted.wait()
    assert expired == [True]


async def test_a_quick_client_is_not_cut() -> None:
    parts = Parts()
    async with serving(parts, lifetime=0.5) as server:
        assert server.port
        for _ in range(3):
            with anyio.fail_after(5):
                assert await healthz(server.port, KUBELET) == 200
        assert server.stats.expired == 0


# -- accept() failures -----------------------------------------------------------------


class FailingListener(socket.socket):
    """A listening socket whose accept() fails with `code` `failures` times first."""

    def __init__(self, code: int, failures: int) -> None:
        super().__init__()
        self.code, self.failures = code, failures
        self.exhausted = asyncio.Event()

    def accept(self) -> tuple[socket.socket, Any]:
        if self.failures > 0:
            self.failures -= 1
            if self.failures == 0:
                self.exhausted.set()
            raise OSError(self.code, "Too many open files")
        return super().accept()


class Counted(asyncio.Protocol):
    def __init__(self, made: asyncio.Event) -> None:
        self.made = made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made.set()
        transport.close()


async def test_accept_failures_are_counted_and_logged_once_a_minute() -> None:
    clock = FakeClock(auto=True)  # each 1 s retry moves fake time on by 1 s
    stats = ServerStats()
    made = asyncio.Event()
    loop = AcceptLoop(
        factory=lambda: Counted(made),
        gate=ConnectionGate(ConnectionLimits(total=4, per_peer=2), stats),
        clock=clock,
        repeats=Repeats(),
        lifetime=30,
    )
    listener = FailingListener(errno.EMFILE, failures=500)
    with listener, capture_logs() as logs, anyio.fail_after(20):
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        async with anyio.create_task_group() as group:
            group.start_soon(loop.serve, listener)
            await listener.exhausted.wait()
            port = listener.getsockname()[1]
            (await connect(port, POD_A)).close()
            await made.wait()
            # failing again after it worked: logged at once
            made.clear()
            listener.failures, listener.exhausted = 1, asyncio.Event()
            (await connect(port, POD_A)).close()
            await listener.exhausted.wait()
            await made.wait()
            group.cancel_scope.cancel()
    assert stats.accept_errors == {"EMFILE": 501}
    failed = [line for line in logs if line["event"] == "metrics.accept_failed"]
    # 500 failures 1 s apart: at 0, 60, ..., 480 s; then the new failure at once
    assert len(failed) == 10
    assert "held_back" not in failed[0]
    assert [line["held_back"] for line in failed[1:9]] == [59] * 8
    assert failed[9].get("held_back", 0) == 0
    assert {line["error"] for line in failed} == {"EMFILE"}
    assert "out of file descriptors" in failed[0]["hint"]
    assert not any("exc_info" in line or "exception" in line for line in logs)
    again = [line["failures"] for line in logs if line["event"] == "metrics.accepting_again"]
    assert again == [{"EMFILE": 500}, {"EMFILE": 1}]
    assert clock.sleeps.count(1.0) >= 500  # it waited between tries: no busy loop


CHILD = """
import asyncio, os, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from prometheus_client import CollectorRegistry
from probemarker.observe.address import ListenAddress
from probemarker.observe.logging import configure_logging
from probemarker.observe.serve import MetricsServer
sys.path.insert(0, os.getcwd())  # the checkout: the tests' Parts
from tests.unit.observe.test_serve import Parts

async def main():
    configure_logging(format="json", level="info", stream=sys.stdout)
    parts = Parts()
    async with MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry
    ) as server:
        taken = []
        while True:
            try:
                taken.append(os.dup(0))
            except OSError:
                break
        print("FULL", server.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for fd in taken:
            os.close(fd)
        print("FREED", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main())
"""


async def test_a_process_out_of_descriptors_logs_once_and_serves_again() -> None:
    """A real EMFILE: the child takes every descriptor it may have, a client connects,
    accept() fails (one line), the child gives them back, /healthz answers."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert child.stdin
    assert child.stdout
    lines: list[dict[str, Any]] = []

    async def read_until(predicate: Callable[[bytes], bool]) -> bytes:
        assert child.stdout
        while True:
            raw = await child.stdout.readline()
            assert raw, f"the child ended: {lines}"
            if raw.startswith(b"{"):
                lines.append(orjson.loads(raw))
            if predicate(raw):
                return raw

    try:
        with anyio.fail_after(30):
            port = int((await read_until(lambda raw: raw.startswith(b"FULL"))).split()[1])
            waiting = await connect(port, KUBELET)  # in the backlog; accept() fails
            await read_until(lambda raw: b"metrics.accept_failed" in raw)
            child.stdin.write(b"free\n")
            await read_until(lambda raw: raw.startswith(b"FREED"))
            waiting.close()
            assert await healthz(port, KUBELET) == 200
            await read_until(lambda raw: b"metrics.accepting_again" in raw)
            child.stdin.write(b"stop\n")
            await child.stdin.drain()
            assert await child.wait() == 0
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    failed = [line for line in lines if line["event"] == "metrics.accept_failed"]
    assert len(failed) == 1
    assert failed[0]["error"] == "EMFILE"
    assert "exception" not in failed[0]
    again = [line for line in lines if line["event"] == "metrics.accepting_again"]
    assert again[0]["failures"]["EMFILE"] >= 1
