"""observe/serve.py: the three endpoints over real HTTP on 127.0.0.1, port 0."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS

from probemarker.observe.address import ListenAddress
from probemarker.observe.health import Health, HealthSettings, Heartbeat
from probemarker.observe.serve import MetricsServer, MetricsServerError
from tests.fakes import FakeClock


class FakeInformer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.synced = anyio.Event()
        self.problem: str | None = None
        self.late = -1.0

    def overdue(self) -> float:
        return self.late


class Parts:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pods, self.markers = FakeInformer("pods"), FakeInformer("podprobemarkers")
        self.ready, self.stopping = anyio.Event(), anyio.Event()
        heartbeat = Heartbeat(clock=self.clock, interval=1.0)
        heartbeat.last = self.clock.now()  # as if its task had just woken it
        self.health = Health(
            heartbeat=heartbeat,
            informers=(self.pods, self.markers),
            ready=self.ready,
            stopping=self.stopping,
            settings=HealthSettings(),
        )
        self.registry = CollectorRegistry()
        Gauge("probemarker_example", "An example.", registry=self.registry).set(3)


@pytest.fixture
async def parts() -> Parts:
    return Parts()


@contextlib.asynccontextmanager
async def serving(parts: Parts, **options: Any) -> AsyncIterator[tuple[MetricsServer, str]]:
    """The server on 127.0.0.1, a free port. In the test's own task, not a fixture:
    its accept loops are a task group, entered and left in one task."""
    server = MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry, **options
    )
    async with server:
        assert server.port
        yield server, f"http://127.0.0.1:{server.port}"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


async def test_healthz(parts: Parts, session: aiohttp.ClientSession) -> None:
    async with serving(parts) as (_, base):
        assert await get(session, base + "/healthz") == (200, "ok: event loop late 0.000s\n")
        parts.markers.late = 61.0
        status, body = await get(session, base + "/healthz")
        assert (status, body) == (
            503,
            "informer podprobemarkers: hung 61s past its own deadline (bound 60s)\n",
        )
        parts.markers.late = 0.0
        parts.clock.t += 10.0  # the heartbeat did not wake for 10 s
        status, body = await get(session, base + "/healthz")
        assert status == 503
        assert body.startswith("event loop: 9.0s late")


async def test_readyz(parts: Parts, session: aiohttp.ClientSession) -> None:
    async with serving(parts) as (_, base):
        parts.pods.synced.set()
        parts.markers.problem = (
            "the API server does not serve podprobemarkers.probemarker.io/v1alpha1"
        )
        status, body = await get(session, base + "/readyz")
        assert status == 503
        assert body == (
            "informer podprobemarkers: waiting for its first list: the API server does not "
            "serve podprobemarkers.probemarker.io/v1alpha1\n"
        )
        parts.ready.set()
        assert await get(session, base + "/readyz") == (200, "ok\n")
        parts.stopping.set()  # still ready: a normal stop raises no Warning (health.py)
        assert await get(session, base + "/readyz") == (200, "ok: stopping\n")


async def test_metrics_text_and_openmetrics(parts: Parts, session: aiohttp.ClientSession) -> None:
    async with serving(parts) as (_, base):
        async with session.get(base + "/metrics") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert "probemarker_example 3.0" in await response.text()
        headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
        async with session.get(base + "/metrics", headers=headers) as response:
            assert response.headers["Content-Type"].startswith(OPENMETRICS)
            assert (await response.text()).endswith("# EOF\n")


async def test_unknown_path_is_404(parts: Parts, session: aiohttp.ClientSession) -> None:
    async with serving(parts) as (_, base):
        assert (await get(session, base + "/debug"))[0] == 404


async def test_a_port_in_use_is_one_clear_error(parts: Parts) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = MetricsServer(
            ListenAddress("127.0.0.1", port), health=parts.health, registry=parts.registry
        )
        with pytest.raises(MetricsServerError) as caught:
            async with server:
                pass  # pragma: no cover
    message = str(caught.value)
    assert message.startswith(f"--metrics-address='127.0.0.1:{port}': cannot listen: ")
    assert "or 0 to turn the server off" in message
    assert "\n" not in message


async def test_closing_stops_listening(parts: Parts) -> None:
    server = MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry
    )
    async with server:
        port = server.port
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
