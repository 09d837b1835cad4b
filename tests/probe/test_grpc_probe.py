"""gRPC probes against real grpc.aio servers bound to simulated pod IPs (127.0.1.2xx).

Each server serves grpcio-health-checking's HealthServicer, scripted where a test
needs it (a service that hangs until released, what each call carried). Connection
counts and closes are seen from outside the client, through a TCP relay in front of
the server. Every handler is closed inside its test, before the test's loop ends.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import grpc
import grpc.aio
import pytest
from anyio.abc import SocketStream
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

import probemarker
from probemarker.api.model import GRPCAction
from probemarker.probe.grpc import (
    EXTRA_HINT,
    GRPCHandler,
    fd_shortage,
    grpc_target,
    rpc_failure,
)
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.ports import Address
from probemarker.watch.pods import PodUID
from tests.probe.servers import free_port

POD_IP = "127.0.1.200"
LIMIT = 0.3  # seconds: the time limit of the runs that are meant to time out
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def target(ip: str | None = POD_IP) -> ProbeTarget:
    return ProbeTarget("default", "web", PodUID("uid-1"), "app", pod_ip=ip)


class Health(health_aio.HealthServicer):
    """The reference servicer, recording each call; a service in `gates` waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.peers: list[str] = []
        self.user_agents: list[str] = []
        self.gates: dict[str, anyio.Event] = {}
        self.arrived = anyio.Event()  # set by a call that waits at a gate

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self.peers.append(context.peer())
        self.user_agents += [v for k, v in context.invocation_metadata() if k == "user-agent"]
        gate = self.gates.get(request.service)
        if gate is not None:
            self.arrived.set()
            await gate.wait()
        return await super().Check(request, context)


@dataclass
class Server:
    port: int
    health: Health


@asynccontextmanager
async def grpc_server(
    host: str = POD_IP, *, port: int = 0, health: bool = True
) -> AsyncIterator[Server]:
    """A grpc.aio server on `host`; with the health service, or with no service at all."""
    server = grpc.aio.server()
    servicer = Health()
    if health:
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{'[' + host + ']' if ':' in host else host}:{port}")
    await server.start()
    try:
        yield Server(bound, servicer)
    finally:
        await server.stop(None)


@dataclass
class Relay:
    """A TCP relay in front of a server: sees each connection open and close."""

    port: int = 0
    opened: int = 0
    open_now: int = 0
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def wait_open(self, count: int) -> None:
        with anyio.fail_after(5):
            while self.open_now != count:
                self._changed = anyio.Event()
                await self._changed.wait()


async def _pump(source: SocketStream, sink: SocketStream) -> None:
    try:
        async for chunk in source:
            await sink.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


@asynccontextmanager
async def relay(upstream: int, host: str = POD_IP) -> AsyncIterator[Relay]:
    listener = await anyio.create_tcp_listener(local_host=host)
    state = Relay(port=listener.extra(anyio.abc.SocketAttribute.local_port))

    async def handle(client: SocketStream) -> None:
        async with client, await anyio.connect_tcp(host, upstream) as server:
            state.opened += 1
            state.open_now += 1
            try:
                async with anyio.create_task_group() as pair:
                    pair.start_soon(_pump, server, client)
                    await _pump(client, server)  # the probe side closed: drop the pair
                    pair.cancel_scope.cancel()
            finally:
                state.open_now -= 1
                state._changed.set()

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        yield state
        group.cancel_scope.cancel()


@asynccontextmanager
async def silent_listener(port: int) -> AsyncIterator[None]:
    """Accepts connections on POD_IP:`port` and never says a word (no HTTP/2 SETTINGS)."""
    listener = await anyio.create_tcp_listener(local_host=POD_IP, local_port=port)

    async def hold(stream: SocketStream) -> None:
        async with stream:
            await anyio.sleep_forever()

    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, hold)
        yield
        group.cancel_scope.cancel()


async def probe(
    handler: GRPCHandler,
    port: int,
    service: str | None = None,
    *,
    ip: str | None = POD_IP,
    time_limit: float = 5.0,
) -> Outcome:
    with anyio.fail_after(time_limit + 2):  # the handler keeps its limit; this bounds the test
        return await handler.run(GRPCAction(port, service), target(ip), time_limit=time_limit)


# --- answers from the server ----------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "service", "expected"),
    [
        pytest.param({}, None, Outcome.succeeded(answer="SERVING"), id="overall-serving"),
        pytest.param({}, "", Outcome.succeeded(answer="SERVING"), id="empty-service-is-overall"),
        pytest.param(
            {"db": SERVING}, "db", Outcome.succeeded(answer="SERVING"), id="service-serving"
        ),
        pytest.param(
            {"": NOT_SERVING},
            None,
            Outcome.failed("service unhealthy (responded with NOT_SERVING)", answer="NOT_SERVING"),
            id="overall-not-serving",
        ),
        pytest.param(
            {"db": NOT_SERVING},
            "db",
            Outcome.failed(
                'service "db" unhealthy (responded with NOT_SERVING)', answer="NOT_SERVING"
            ),
            id="service-not-serving",
        ),
        pytest.param(
            {},
            "cache",
            Outcome.failed('service "cache" is unknown to the server (NOT_FOUND)'),
            id="service-unknown",
        ),
    ],
)
async def test_health_answers(
    statuses: dict[str, int], service: str | None, expected: Outcome
) -> None:
    async with grpc_server() as server, GRPCHandler() as handler:
        for name, status in statuses.items():
            await server.health.set(name, status)
        assert await probe(handler, server.port, service) == expected


async def test_server_without_the_health_service_is_failed() -> None:
    async with grpc_server(health=False) as server, GRPCHandler() as handler:
        outcome = await probe(handler, server.port)
    assert outcome == Outcome.failed(
        "this server does not implement the grpc health protocol (grpc.health.v1.Health): "
        "Method not found!"
    )


async def test_server_down_is_failed_at_once_naming_the_address() -> None:
    port = free_port(POD_IP)
    async with GRPCHandler() as handler:
        started = time.monotonic()
        outcome = await probe(handler, port)
    assert time.monotonic() - started < 2.5  # refused, not waited out (time limit 5 s)
    assert outcome.result is Result.FAILED, outcome
    assert outcome.message == f"cannot connect to {POD_IP}:{port}: " + (
        "Failed to connect to remote host: Connection refused"
    )


async def test_server_hanging_past_the_time_limit_is_failed_within_it() -> None:
    async with grpc_server() as server, GRPCHandler() as handler:
        server.health.gates["slow"] = anyio.Event()
        started = time.monotonic()
        outcome = await probe(handler, server.port, "slow", time_limit=LIMIT)
        elapsed = time.monotonic() - started
        server.health.gates["slow"].set()
    assert outcome == Outcome.failed(
        f"timed out after 0.3s: {POD_IP}:{server.port} did not answer the health check"
    )
    assert LIMIT <= elapsed < LIMIT + 1


@asynccontextmanager
async def nothing(port: int) -> AsyncIterator[None]:
    yield


@pytest.mark.parametrize(
    ("broken", "limit", "message"),
    [
        pytest.param(nothing, 5.0, "cannot connect to {address}: ", id="refused"),
        pytest.param(
            silent_listener, LIMIT, "timed out after 0.3s connecting to {address}", id="silent"
        ),
    ],
)
async def test_a_server_that_comes_up_is_seen_on_the_next_run(
    broken: Callable[[int], AbstractAsyncContextManager[None]], limit: float, message: str
) -> None:
    """A failed connection is not kept: no reconnect backoff, no attempt left hanging."""
    port = free_port(POD_IP)
    async with GRPCHandler() as handler:
        async with broken(port):
            outcome = await probe(handler, port, time_limit=limit)
        assert outcome.result is Result.FAILED, outcome
        assert outcome.message.startswith(message.format(address=f"{POD_IP}:{port}")), outcome
        async with grpc_server(port=port):
            # A kept channel would fail again: in reconnect backoff (refused), or
            # still waiting for the silent listener's HTTP/2 settings.
            assert await probe(handler, port, time_limit=limit) == Outcome.succeeded(
                answer="SERVING"
            )


# --- what is sent, and to where -----------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "agent"),
    [
        pytest.param({}, f"probemarker/{probemarker.__version__}", id="default"),
        pytest.param({"user_agent": "acme-probe/2"}, "acme-probe/2", id="custom"),
    ],
)
async def test_user_agent_reaches_the_server(kwargs: dict[str, str], agent: str) -> None:
    async with grpc_server() as server, GRPCHandler(**kwargs) as handler:
        assert await probe(handler, server.port) == Outcome.succeeded(answer="SERVING")
    [received] = server.health.user_agents
    assert received.startswith(f"{agent} grpc-python"), received  # grpc appends its own


async def test_proxy_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("grpc_proxy", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.1.254:9")  # nothing there
    monkeypatch.delenv("no_proxy", raising=False)
    async with grpc_server() as server, GRPCHandler() as handler:
        assert await probe(handler, server.port) == Outcome.succeeded(answer="SERVING")


async def test_ipv6_pod_ip() -> None:
    async with grpc_server("::1") as server, GRPCHandler() as handler:
        assert await probe(handler, server.port, ip="::1") == Outcome.succeeded(answer="SERVING")


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param(Address("127.0.1.5", 50051), "ipv4:127.0.1.5:50051", id="ipv4"),
        pytest.param(Address("::1", 8080), "ipv6:[::1]:8080", id="ipv6-loopback"),
        pytest.param(Address("fd00:10:244::5", 9), "ipv6:[fd00:10:244::5]:9", id="ipv6"),
    ],
)
def test_grpc_target(address: Address, expected: str) -> None:
    assert grpc_target(address) == expected


@pytest.mark.parametrize(
    ("ip", "port", "reason"),
    [
        pytest.param(None, 50051, "pod default/web has no IP yet", id="no-ip"),
        pytest.param("", 50051, "pod default/web has no IP yet", id="empty-ip"),
        pytest.param(POD_IP, 0, "port 0 is not a TCP port number", id="port-0"),
        pytest.param(POD_IP, 70000, "port 70000 is not a TCP port number", id="port-too-big"),
        pytest.param(
            "web.example",
            50051,
            "status.podIP 'web.example', which is not one host's IP",
            id="name",
        ),
    ],
)
async def test_no_address_is_unknown(ip: str | None, port: int, reason: str) -> None:
    async with GRPCHandler() as handler:
        outcome = await probe(handler, port, ip=ip)
    assert outcome.result is Result.UNKNOWN, outcome
    assert reason in outcome.message, outcome


# --- connections ----------------------------------------------------------------------


async def test_runs_share_one_connection() -> None:
    async with grpc_server() as server, relay(server.port) as via, GRPCHandler() as handler:
        for _ in range(3):
            assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        assert via.opened == 1
        assert len(set(server.health.peers)) == 1


async def test_an_idle_channel_is_closed_without_another_run() -> None:
    """The pod went away: no run comes to sweep its channel, the timer does."""
    async with (
        grpc_server() as server,
        relay(server.port) as via,
        GRPCHandler(idle_close=0.2) as handler,
    ):
        assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        assert via.open_now == 1
        await via.wait_open(0)  # bounded by wait_open's own 5 s
        assert handler._sweeper is not None
        await handler._sweeper  # ends with the last channel


def test_fd_shortage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new channel needs descriptors to spare: grpc aborts the process without them."""
    monkeypatch.setattr(resource, "getrlimit", lambda _: (40, 4096))
    for i in range(9):  # nine descriptors "in use"
        (tmp_path / str(i)).touch()
    assert fd_shortage(margin=31, fd_dir=str(tmp_path)) is None
    assert fd_shortage(margin=32, fd_dir=str(tmp_path)) == (
        "too few file descriptors left for a new grpc connection (9 of 40 in use, "
        "32 kept spare); raise the daemon's open-files limit"
    )
    assert fd_shortage(fd_dir=str(tmp_path / "missing")) is None  # not Linux: unchecked
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY,) * 2)
    assert fd_shortage(margin=10**6, fd_dir=str(tmp_path)) is None


async def test_idle_channel_is_closed_and_the_next_run_reconnects() -> None:
    async with (
        grpc_server() as server,
        relay(server.port) as via,
        GRPCHandler(idle_close=0) as handler,
    ):
        assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        assert await probe(handler, via.port) == Outcome.succeeded(
            answer="SERVING"
        )  # sweeps the first
        await via.wait_open(1)
        assert via.opened == 2


async def test_aclose_closes_every_connection_and_ends_the_runs_unknown() -> None:
    async with grpc_server() as server, relay(server.port) as via, relay(server.port) as via2:
        handler = GRPCHandler()
        assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        server.health.gates["slow"] = anyio.Event()
        in_flight: list[Outcome] = []

        async def run_slow() -> None:
            in_flight.append(await probe(handler, via2.port, "slow"))

        async with anyio.create_task_group() as group:
            group.start_soon(run_slow)
            await server.health.arrived.wait()
            assert (via.open_now, via2.open_now) == (1, 1)
            await handler.aclose()
        server.health.gates["slow"].set()
        await via.wait_open(0)
        await via2.wait_open(0)
        later = await probe(handler, via.port)
    assert in_flight == [Outcome.unknown("the grpc probe handler was closed during the run")]
    assert later == Outcome.unknown("the grpc probe handler is closed")
    assert via.opened == 1


async def _cancel_with_anyio(run: Awaitable[Outcome]) -> bool:
    with anyio.move_on_after(LIMIT) as scope:  # as the runner's safety net does
        await run
    return scope.cancelled_caught


async def _cancel_with_asyncio(run: Awaitable[Outcome]) -> bool:
    try:
        async with asyncio.timeout(LIMIT):
            await run
    except TimeoutError:
        return True
    return False


@pytest.mark.parametrize(
    "cancel",
    [
        pytest.param(_cancel_with_anyio, id="anyio-move-on-after"),
        pytest.param(_cancel_with_asyncio, id="asyncio-timeout"),
    ],
)
async def test_cancelling_a_run_propagates_and_closes_its_connection(
    cancel: Callable[[Awaitable[Outcome]], Awaitable[bool]],
) -> None:
    """The caller's cancellation is not turned into an outcome, reaches the caller's
    own scope (grpc.aio raises a CancelledError of its own), and the connection it
    interrupted is not reused."""
    async with grpc_server() as server, relay(server.port) as via, GRPCHandler() as handler:
        server.health.gates["slow"] = anyio.Event()
        assert await cancel(handler.run(GRPCAction(via.port, "slow"), target(), time_limit=5))
        server.health.gates["slow"].set()
        await via.wait_open(0)
        assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        assert via.opened == 2


async def test_a_timed_out_channel_is_dropped_but_not_closed_under_another_run() -> None:
    """The timed-out run drops the channel: new runs connect afresh (no shared
    subchannel), the run still on the old channel ends normally, and then it is closed."""
    async with grpc_server() as server, relay(server.port) as via, GRPCHandler() as handler:
        server.health.gates |= {"slow": anyio.Event(), "late": anyio.Event()}
        await server.health.set("late", SERVING)
        late: list[Outcome] = []

        async def run_late() -> None:
            late.append(await probe(handler, via.port, "late"))

        async with anyio.create_task_group() as group:
            group.start_soon(run_late)
            await server.health.arrived.wait()  # "late" is on the channel now
            timed_out = await probe(handler, via.port, "slow", time_limit=LIMIT)
            assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
            assert (via.opened, via.open_now) == (2, 2)
            server.health.gates["late"].set()
        server.health.gates["slow"].set()
        assert timed_out.result is Result.FAILED, timed_out
        assert late == [Outcome.succeeded(answer="SERVING")]
        await via.wait_open(1)  # the old one, once "late" was done with it
        assert await probe(handler, via.port) == Outcome.succeeded(answer="SERVING")
        assert via.opened == 2


# --- the optional library -----------------------------------------------------------


def test_importing_the_handler_does_not_load_grpcio() -> None:
    """A daemon with no grpc probes never pays for grpcio (about 10 MB)."""
    code = (
        "import sys, probemarker.probe.grpc; print(sorted(m for m in sys.modules if 'grpc' in m))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert loaded.strip() == "['probemarker.probe.grpc']"


async def test_available_with_the_extra_installed() -> None:
    async with GRPCHandler() as handler:
        assert await handler.unavailable() is None


@pytest.mark.parametrize("module", ["grpc", "grpc_health.v1"])
async def test_missing_library_is_unknown_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # the next import of it fails
    async with GRPCHandler() as handler:
        message = await handler.unavailable()  # what the engine's event says
        assert message is not None
        assert message.startswith(EXTRA_HINT)
        assert module in message
        assert await probe(handler, 50051) == Outcome.unknown(message)


# --- messages of the other status codes -----------------------------------------------


@pytest.mark.parametrize(
    ("code", "details", "connected", "expected"),
    [
        pytest.param(
            "UNAVAILABLE",
            "shutting down",
            True,
            "health check failed with UNAVAILABLE: shutting down",
            id="unavailable-from-the-server",
        ),
        pytest.param(
            "UNAVAILABLE",
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.5:81: "
            "Failed to connect to remote host: No route to host",
            False,
            "cannot connect to 10.0.0.5:81: Failed to connect to remote host: No route to host",
            id="unreachable",
        ),
        pytest.param(
            "PERMISSION_DENIED",
            "no",
            True,
            "health check failed with PERMISSION_DENIED: no",
            id="other-code",
        ),
        pytest.param("INTERNAL", "", True, "health check failed with INTERNAL", id="no-details"),
        pytest.param(
            "NOT_FOUND",
            "",
            True,
            'the overall health (service "") is unknown to the server (NOT_FOUND)',
            id="overall-not-found",
        ),
    ],
)
def test_rpc_failure_messages(code: str, details: str, connected: bool, expected: str) -> None:
    outcome = rpc_failure(
        code,
        details,
        service="",
        address=Address("10.0.0.5", 81),
        time_limit=1.0,
        connected=connected,
    )
    assert outcome == Outcome.failed(expected)
