"""observe/httplog.py: what aiohttp reports about the health server's requests, over
real HTTP. A client sending malformed requests in a loop gets 400s and the log one
line (aiohttp's own logger, unconfigured, printed a traceback per request); a
handler that raises is logged with its traceback, once a minute per kind; TLS sent to
the plain port is counted and not logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import anyio
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from structlog.testing import capture_logs

from probemarker.observe.address import ListenAddress
from probemarker.observe.serve import MetricsServer
from tests.unit.observe.test_serve import Parts


async def ask(port: int, request: bytes) -> bytes:
    """The status line of the answer to `request` (raw bytes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return (await reader.readline()).rstrip()
    finally:
        writer.close()


TOO_LONG = b"GET /healthz?" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
TOO_MANY = b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(40)) + b"\r\n"


async def test_malformed_requests_get_400_and_the_log_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parts = Parts()
    server = MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry
    )
    with capture_logs() as logs, caplog.at_level(logging.DEBUG), anyio.fail_after(20):
        async with server:
            assert server.port
            for _ in range(20):
                assert await ask(server.port, TOO_LONG) == b"HTTP/1.0 400 Bad Request"
            assert await ask(server.port, TOO_MANY) == b"HTTP/1.0 400 Bad Request"
    bad = [line for line in logs if line["event"] == "metrics.bad_request"]
    assert [line["error"].split(":")[0] for line in bad] == ["LineTooLong", "BadHttpMessage"]
    assert bad[0]["message"] == "Error handling request from 127.0.0.1"
    assert not [line for line in logs if "exc_info" in line]
    assert server.stats.bad_requests == 21
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")]


async def test_tls_to_the_plain_port_is_counted_not_logged() -> None:
    parts = Parts()
    server = MetricsServer(
        ListenAddress("127.0.0.1", 0), health=parts.health, registry=parts.registry
    )
    hello = (
        bytes.fromhex("160301020001000200") + b"\x00" * 64 + b"\r\n\r\n"
    )  # a ClientHello's start
    with capture_logs() as logs, anyio.fail_after(20):
        async with server:
            assert server.port
            assert (await ask(server.port, hello)).startswith(b"HTTP/1.0 400")
    assert server.stats.bad_requests == 1
    assert not [line for line in logs if line["event"].startswith("metrics.bad")]


class Broken:
    """A collector with a bug."""

    def collect(self) -> Iterable[Metric]:
        raise ZeroDivisionError("a bug")


async def test_a_handler_that_raises_is_logged_with_its_traceback_once_a_minute() -> None:
    parts = Parts()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Broken())
    server = MetricsServer(ListenAddress("127.0.0.1", 0), health=parts.health, registry=registry)
    get = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    with capture_logs() as logs, anyio.fail_after(20):
        async with server:
            assert server.port
            for _ in range(5):
                assert await ask(server.port, get) == b"HTTP/1.1 500 Internal Server Error"
    (line,) = [line for line in logs if line["event"] == "metrics.handler_error"]
    assert line["log_level"] == "error"
    assert isinstance(line["exc_info"], ZeroDivisionError)
    assert server.stats.bad_requests == 0
