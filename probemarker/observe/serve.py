"""The health and metrics server: /healthz, /readyz and /metrics over plain HTTP.

Stage: edge (output). Input: the listen address (`--metrics-address`), the `Health`
answers, the metrics registry. Output: one aiohttp server for as long as the `async
with` lasts; `port` is the port bound (port 0 asks the kernel for a free one; on
every interface, `:0`, IPv4 and IPv6 may get different ones: `port` is the first).

- /healthz: 200 while the event loop wakes timers on time and no informer loop is hung
  past its own deadline, else 503; the body says which (health.py). The kubelet's
  liveness probe: a failure restarts the container.
- /readyz: 200 once both informers synced and the engine started, 503 before (the body
  names what is awaited and why) and while stopping. The kubelet's readiness probe.
- /metrics: the Prometheus text format (or OpenMetrics when the scraper asks for it),
  rendered in the event loop at once, so it reads every counter at one instant.

No access log (a probe every few seconds is not news). Closing stops listening and
closes open connections within `shutdown_timeout`, cancellation or not.
"""

from __future__ import annotations

from types import TracebackType

import anyio
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from probemarker.observe.address import ListenAddress
from probemarker.observe.health import Health, Report

__all__ = ["MetricsServer", "MetricsServerError"]

log = structlog.get_logger(__name__)


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
        shutdown_timeout: float = 2.0,
    ) -> None:
        self.address = address
        self._health = health
        self._registry = registry
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # bound, once listening

    def __repr__(self) -> str:
        return f"MetricsServer({str(self.address)!r}, port={self.port})"

    async def __aenter__(self) -> MetricsServer:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=self._shutdown_timeout
        )
        await runner.setup()
        site = web.TCPSite(runner, host=self.address.host, port=self.address.port)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise MetricsServerError(
                f"--metrics-address={str(self.address)!r}: cannot listen: {err.strerror or err}; "
                "choose another address or port, or 0 to turn the server off"
            ) from err
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("metrics.serving", address=str(self.address), port=self.port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        with anyio.CancelScope(shield=True):
            await runner.cleanup()

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
