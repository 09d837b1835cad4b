"""The health and metrics server: /healthz, /readyz and /metrics over plain HTTP.

Stage: edge (output). Input: the listen address (`--metrics-address`), the `Health`
answers, the metrics registry. Output: one aiohttp server for as long as the `async
with` lasts; `port` is the port bound (port 0 asks the kernel for a free one; on
every interface, `:0`, one dual-stack socket where the host has IPv6, so one port).

- /healthz: 200 while the event loop wakes timers on time and no informer loop is hung
  past its own deadline, else 503; the body says which (health.py). The kubelet's
  liveness probe: a failure restarts the container.
- /readyz: 200 once both informers synced and the engine started, 503 before (the body
  names what is awaited and why) and while stopping. The kubelet's readiness probe.
- /metrics: the Prometheus text format (or OpenMetrics when the scraper asks for it),
  rendered in the event loop at once, so it reads every counter at one instant.

Bounds, so that whoever can reach the port cannot take the daemon's descriptors,
memory or time (issue 22; docs/operations.md, "Connections to the port"):

- a connection must send a complete request (line and headers) within
  `IDLE_TIMEOUT` seconds of connecting or of its previous answer, else it is closed
  (aiohttp's keep-alive timer, which it also arms when a connection opens); request
  lines and header fields are limited in size and number;
- a request body is never read: the connection is closed after the answer;
- a connection lives at most `LIFETIME` seconds (accept.py);
- at most `limits.total` connections at once, `limits.per_peer` from one address; a
  new connection beyond them gets in, and the oldest (of its address, or of all) is
  closed for it (connections.py says why; the limits come from the open-files
  limit, descriptors.py).

No access log (a probe every few seconds is not news); what aiohttp reports about
requests (a malformed one, a handler that raised) goes through `ServerLog`, at most
one line a minute per kind (httplog.py). Closing stops listening and
closes open connections within `shutdown_timeout`, cancellation or not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Final

import anyio
import structlog
from aiohttp import web
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.stapled import MultiListener
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kit.repeats import Repeats
from probemarker.observe.accept import AcceptLoop
from probemarker.observe.address import ListenAddress
from probemarker.observe.connections import ConnectionGate, ServerStats
from probemarker.observe.descriptors import ConnectionLimits, connection_limits
from probemarker.observe.health import Health, Report
from probemarker.observe.httplog import ServerLog

__all__ = ["IDLE_TIMEOUT", "LIFETIME", "MetricsServer", "MetricsServerError"]

log = structlog.get_logger(__name__)

# Seconds a connection may take to send a complete request, from its start or its
# previous answer. The kubelet sends its probe at once on a new connection; Prometheus
# scrapes every 10 s or more, so its idle keep-alive connection is closed between
# scrapes and it connects again (Go's client retries a GET on a connection closed
# while idle). aiohttp's default is 3630 s.
IDLE_TIMEOUT: Final = 5.0
# Seconds a connection lives at most, whatever it is doing. An answer is a few KiB
# rendered at once; only a reader that does not read holds one this long.
LIFETIME: Final = 30.0
# Request line and header sizes: a scrape or a probe sends a handful of short
# headers. aiohttp's defaults (8190 bytes a line, 128 headers) would let each
# connection make the server hold about 1 MiB; these, 128 KiB at most.
_MAX_LINE: Final = 4096
_MAX_HEADERS: Final = 32
_BACKLOG: Final = 128  # connections the kernel queues until they are accepted


class MetricsServerError(Exception):
    """The server cannot listen where it is told; the message says where and what to do."""


class MetricsServer:
    """See the module docstring; an async context manager."""

    def __init__(
        self,
        address: ListenAddress,
        *,
        health: Health,
        registry: CollectorRegistry,
        limits: ConnectionLimits | None = None,
        stats: ServerStats | None = None,
        clock: Clock = MONOTONIC,
        shutdown_timeout: float = 2.0,
        idle_timeout: float = IDLE_TIMEOUT,
        lifetime: float = LIFETIME,
    ) -> None:
        self.address = address
        self._health = health
        self._registry = registry
        self.limits = limits or connection_limits(1024)
        self.stats = stats or ServerStats()
        self._clock = clock
        self._shutdown_timeout = shutdown_timeout
        self._idle_timeout = idle_timeout
        self._lifetime = lifetime
        self._stack: contextlib.AsyncExitStack | None = None
        self.port: int | None = None  # bound, once listening

    def __repr__(self) -> str:
        return f"MetricsServer({str(self.address)!r}, port={self.port}, limits={self.limits})"

    async def __aenter__(self) -> MetricsServer:
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(self._serving())
        self._stack = stack
        log.info(
            "metrics.serving",
            address=str(self.address),
            port=self.port,
            max_connections=self.limits.total,
            max_connections_per_peer=self.limits.per_peer,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        """The HTTP server, the listening sockets and one accept loop on each; all
        closed on exit, in that order reversed."""
        repeats = Repeats()  # one line a minute per kind of trouble, for the whole server
        runner = web.AppRunner(
            self._app(),
            logger=ServerLog(clock=self._clock, stats=self.stats, repeats=repeats),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
            keepalive_timeout=self._idle_timeout,
            lingering_time=0,  # a body is never read: close after the answer
            max_line_size=_MAX_LINE,
            max_field_size=_MAX_LINE,
            max_headers=_MAX_HEADERS,
        )
        await runner.setup()
        try:
            async with await self._listen() as listener, anyio.create_task_group() as accepting:
                sockets = [one.extra(SocketAttribute.raw_socket) for one in listener.listeners]
                self.port = int(sockets[0].getsockname()[1])
                loop = self._accept_loop(runner, repeats)
                for sock in sockets:
                    accepting.start_soon(loop.serve, sock)
                try:
                    yield
                finally:
                    accepting.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def _listen(self) -> MultiListener[SocketStream]:
        try:
            return await anyio.create_tcp_listener(
                local_host=self.address.host, local_port=self.address.port, backlog=_BACKLOG
            )
        except OSError as err:
            raise MetricsServerError(
                f"--metrics-address={str(self.address)!r}: cannot listen: {err.strerror or err}; "
                "choose another address or port, or 0 to turn the server off"
            ) from err

    def _accept_loop(self, runner: web.AppRunner, repeats: Repeats) -> AcceptLoop:
        server = runner.server
        assert server is not None  # the runner is set up
        return AcceptLoop(
            factory=server,
            gate=ConnectionGate(self.limits, self.stats),
            clock=self._clock,
            repeats=repeats,
            lifetime=self._lifetime,
        )

    @staticmethod
    def _answer(report: Report) -> web.Response:
        return web.Response(status=200 if report.ok else 503, text=report.text)

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._answer(self._health.liveness())

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._answer(self._health.readiness())

    async def _metrics(self, request: web.Request) -> web.Response:
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(self._registry), headers={"Content-Type": content_type})
