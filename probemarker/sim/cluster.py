"""`SimCluster`: the simulated API server, started in-process.

    async with SimCluster() as sim:
        sim.url, sim.kubeconfig_path, sim.configuration()
        sim.store, sim.kubelet, sim.faults, sim.accounting, sim.exec_handlers

On enter it creates a temporary directory (kubeconfig, TLS material, the
working directories of exec commands, which run on this host without isolation),
the store with the built-in namespaces, one Node object per node
name, the aiohttp server on 127.0.0.1 (`port=0` picks a free port; `https`
adds a generated CA and server certificate) and the simulated kubelet's watch
loop.  On exit everything is stopped and the directory removed.

With `scheduler=True`, unscheduled pods are bound to a node (scheduler.py).

If the port cannot be listened on (in use, or not permitted), entering raises
`ListenError`, an OSError whose message names the address and port.

Invariants: the kubelet task is owned by the cluster and cancelled and
awaited on exit; `faults.take_down()` closes the listening socket and every open
connection, `bring_up()` listens again on the same port, so `url` stays valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import shutil
import tempfile
from base64 import b64encode
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from probemarker.sim.exec.runners import HandlerRegistry
from probemarker.sim.kubelet.node import Kubelet, rfc3339
from probemarker.sim.kubelet.nodeobject import node_object
from probemarker.sim.kubelet.scheduler import Scheduler
from probemarker.sim.server.admission.crdserving import CrdController
from probemarker.sim.server.app import ApiServer
from probemarker.sim.server.discovery.catalog import NODES, Catalog
from probemarker.sim.server.handlers.resources import Resources
from probemarker.sim.server.harness.accounting import Accounting
from probemarker.sim.server.harness.faults import Faults
from probemarker.sim.store.objects import Store

if TYPE_CHECKING:
    from probemarker.sim.server.harness.tls import TlsMaterial


log = logging.getLogger(__name__)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("sim.loop_failed", extra={"task": task.get_name()}, exc_info=task.exception())


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ListenError(OSError):
    """The sim cannot listen on its address and port; `host` and `port` say which."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.host, self.port = host, port
        self.in_use = cause.errno == errno.EADDRINUSE

    def __str__(self) -> str:
        reason = "address already in use" if self.in_use else self.strerror
        return f"cannot listen on {self.host}:{self.port}: {reason}"


class SimCluster:
    """The simulated cluster; see the module docstring."""

    def __init__(
        self,
        *,
        port: int = 0,
        https: bool = False,
        token: str | None = None,
        history_limit: int = 10000,
        node_names: tuple[str, ...] = ("node-1",),
        kubelet_events: bool = True,
        scheduler: bool = False,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._requested_port = port
        self.https = https
        self.token = token
        self.node_names = node_names
        self._clock = clock
        self.store = Store(history_limit=history_limit, clock=clock)
        self.catalog = Catalog()
        self.accounting = Accounting()
        self.faults = Faults()
        self.exec_handlers = HandlerRegistry()
        self.kubelet = Kubelet(
            store=self.store, node_names=node_names, clock=clock, emit_events=kubelet_events
        )
        self.scheduler = Scheduler(store=self.store, clock=clock) if scheduler else None
        self._crds = CrdController(store=self.store, catalog=self.catalog, clock=clock)
        self._dir: Path | None = None
        self._tls: TlsMaterial | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.port = 0
        self.server: ApiServer | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> SimCluster:
        self._dir = Path(tempfile.mkdtemp(prefix="probemarker-sim-"))
        try:
            await self._start()
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop()

    async def _start(self) -> None:
        assert self._dir is not None
        if self.https:
            # Imported here: `cryptography` is only needed in HTTPS mode.
            from probemarker.sim.server.harness.tls import generate_tls

            self._tls = generate_tls(self._dir / "tls")
        resources = Resources(
            store=self.store,
            catalog=self.catalog,
            crds=self._crds,
            clock=self._clock,
            scheduler=self.scheduler,
        )
        self.server = ApiServer(
            store=self.store,
            catalog=self.catalog,
            resources=resources,
            crds=self._crds,
            accounting=self.accounting,
            faults=self.faults,
            exec_runner=self.exec_handlers,
            workdir_root=self._dir / "workdirs",
            token=self.token,
            server_address=lambda: f"127.0.0.1:{self.port}",
            clock=self._clock,
        )
        self._runner = web.AppRunner(
            self.server.build_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await self.start_listening()
        self.faults.bind(
            close_watches=self.server.watches.close_all,
            drop_history=self.store.drop_history,
            listener=self,
            watches=self.server.watches,
        )
        self._register_nodes()
        self._start_kubelet()
        self.kubeconfig_path.write_text(yaml.safe_dump(self.kubeconfig()))

    def _start_kubelet(self) -> None:
        task = asyncio.create_task(self.kubelet.run(), name="sim-kubelet")
        task.add_done_callback(_log_failure)
        self._tasks.append(task)

    async def _stop(self) -> None:
        try:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if self.server is not None:
                self.server.watches.close_all(True)
                # Running or stalled exec sessions would hold the shutdown up.
                await self.server.exec_sessions.close_all()
            if self._runner is not None:
                await self._runner.cleanup()
        finally:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)

    def _register_nodes(self) -> None:
        now = rfc3339(self._clock())
        for name in self.node_names:
            self.store.create(NODES, node_object(name, now=now), namespace=None)

    # -- listening (the faults' Listener) --------------------------------------------

    async def start_listening(self) -> None:
        assert self._runner is not None
        ssl_context = self._tls.server_context() if self._tls is not None else None
        port = self.port or self._requested_port
        site = web.TCPSite(
            self._runner, "127.0.0.1", port, ssl_context=ssl_context, reuse_address=True
        )
        try:
            await site.start()
        except OSError as exc:
            raise ListenError("127.0.0.1", port, exc) from exc
        self._site = site
        if not self.port:
            self.port = int(self._runner.addresses[0][1])

    async def stop_listening(self) -> None:
        if self._site is not None:
            await self._site.stop()
            self._site = None
        if self._runner is not None and self._runner.server is not None:
            for connection in list(self._runner.server.connections):
                connection.force_close()

    # -- what clients use ------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}"

    @property
    def directory(self) -> Path:
        if self._dir is None:
            raise RuntimeError("SimCluster is not running")
        return self._dir

    @property
    def kubeconfig_path(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def ca_path(self) -> Path | None:
        return self._tls.ca_path if self._tls is not None else None

    def kubeconfig(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.url}
        if self._tls is not None:
            cluster["certificate-authority-data"] = b64encode(self._tls.ca_pem).decode()
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sim", "cluster": cluster}],
            "users": [{"name": "sim", "user": user}],
            "contexts": [
                {
                    "name": "sim",
                    "context": {"cluster": "sim", "user": "sim", "namespace": "default"},
                }
            ],
            "current-context": "sim",
            "preferences": {},
        }

    def set_tokens(self, *tokens: str) -> None:
        """Accept exactly these bearer tokens from now on (rotation, revocation)."""
        if self.server is None or self.server.tokens is None:
            raise RuntimeError("set_tokens needs a running SimCluster created with token=...")
        self.server.tokens = set(tokens)

    def configuration(self) -> Any:
        """A kubernetes_asyncio `Configuration` for this cluster."""
        from kubernetes_asyncio.client import Configuration

        config = Configuration(host=self.url)
        if self._tls is not None:
            config.ssl_ca_cert = str(self._tls.ca_path)
            config.verify_ssl = True
        if self.token:
            config.api_key = {"BearerToken": self.token}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        return config
