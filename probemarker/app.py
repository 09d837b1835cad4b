"""Wiring of `probemarker run`: the stages in one task group, nothing else.

    pods informer ──┐                    ┌─> runner (exec, httpGet, ┐
                    │                    │   tcpSocket, grpc)       │
                    ├─> Engine (match) ──> dispatcher (timer wheel) │
    marker informer ┘        ^           └──────── decide <─────────┘
                             │ plan / lookup            │ mark(pod uid)
                             └──────── PodWriter <──────┘ (memory stream)
                                       │ pods/status JSON patch (write budget)
                                       └─> API server     events ─> EventRecorder (own budget)

Order at start: both informers list; once both stores hold their first LIST, the
engine reads them whole (so it never acts on a pod before it knows every marker,
which would clean up labels of markers it has not seen yet); then it follows their
change streams, the dispatcher starts probes and the writer starts writing. Every
pod is planned once at start: what changed while the daemon was down (a marker
deleted, a pod relabelled) is cleaned up then, and a pod that matches is not written.

Shutdown (SIGTERM/SIGINT): stop starting probes, give running ones and pending writes
`shutdown_grace_seconds`, write queued events, exit 0.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import structlog

from probemarker.api.model import ExecAction, GRPCAction, HTTPGetAction, TCPSocketAction
from probemarker.engine import Engine, EngineSettings
from probemarker.identity import PodUID
from probemarker.kube.cache import ObjectKey
from probemarker.kube.client import ClientSettings, KubeClient
from probemarker.kube.config import Connection, load_incluster, load_kubeconfig
from probemarker.kube.events import EventRecorder
from probemarker.kube.informer import Informer
from probemarker.kube.projection import pod_projection
from probemarker.kube.ratelimit import MONOTONIC, Clock, TokenBucket
from probemarker.kube.resources import PODS
from probemarker.markers import marker_projection, marker_resource
from probemarker.probe.exec import ExecHandler
from probemarker.probe.grpc import GRPCHandler
from probemarker.probe.handler import ProbeHandler
from probemarker.probe.http import HTTPGetHandler
from probemarker.probe.runner import ProbeRunner
from probemarker.probe.tcp import TCPSocketHandler
from probemarker.settings import RunSettings
from probemarker.write.writer import PodWriter, WriterSettings

log = structlog.get_logger("probemarker.app")

Raw = dict[str, Any]


def rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def connect(settings: RunSettings, environ: dict[str, str] | None = None) -> Connection:
    """A kubeconfig when one is named, else the pod's in-cluster configuration."""
    if settings.kubeconfig:
        return await load_kubeconfig(settings.kubeconfig, context=settings.context)
    return load_incluster(environ=os.environ if environ is None else environ)


def client_settings(settings: RunSettings) -> ClientSettings:
    """The client for these settings: an exec connection for every probe run allowed at
    once, so a running exec probe never waits for a connection (its timeoutSeconds is
    its own), and the watches, patches and events keep pools of their own."""
    return ClientSettings(exec_connections=settings.max_concurrent_probes)


class Daemon:
    """The running daemon: its parts, for `run_daemon` and for tests to look into."""

    def __init__(self, client: KubeClient, settings: RunSettings, *, clock: Clock = MONOTONIC):
        if client.settings.exec_connections < settings.max_concurrent_probes:
            raise ValueError(
                f"the client has {client.settings.exec_connections} exec connections for "
                f"{settings.max_concurrent_probes} probe runs at once: build it with "
                "client_settings(settings)"
            )
        self.settings = settings
        group = settings.marker_group
        self.pods: Informer[Raw] = Informer(
            client=client,
            resource=PODS,
            project=pod_projection,
            field_selector=f"spec.nodeName={settings.node}",
            clock=clock,
            name="pods",
        )
        self.markers: Informer[Raw] = Informer(
            client=client,
            resource=marker_resource(group),
            project=marker_projection,
            namespaces=settings.namespaces or None,
            clock=clock,
            name="podprobemarkers",
        )
        # Two budgets: an event never takes a token a status write needs (issue 15).
        self.limiter = TokenBucket(qps=settings.write_qps, burst=settings.write_burst, clock=clock)
        self.event_limiter = TokenBucket(
            qps=settings.event_qps, burst=settings.event_burst, clock=clock
        )
        self.events = EventRecorder(client, node_name=settings.node, limiter=self.event_limiter)
        send, receive = anyio.create_memory_object_stream[PodUID](math.inf)
        self._marks = send
        self.http = HTTPGetHandler()
        self.tcp = TCPSocketHandler()
        self.grpc = GRPCHandler()  # grpcio is loaded by the first grpc probe, if any
        handlers: dict[type, ProbeHandler] = {
            ExecAction: ExecHandler(client),
            HTTPGetAction: self.http,
            TCPSocketAction: self.tcp,
            GRPCAction: self.grpc,
        }
        self.engine = Engine(
            runner=ProbeRunner(handlers),
            sink=self.events,
            mark=self._mark,
            clock=clock,
            wall=time.time,
            settings=EngineSettings(max_concurrent=settings.max_concurrent_probes),
            api_version=f"{group}/v1alpha1",
        )
        self.writer = PodWriter(
            client=client,
            limiter=self.limiter,
            lookup=self.engine.lookup,
            plan=self.engine.plan,
            marks=receive,
            now_text=rfc3339_now,
            clock=clock,
            settings=WriterSettings(coalesce=settings.write_coalesce_seconds),
        )
        self.ready = anyio.Event()

    def _mark(self, uid: PodUID) -> None:
        """The engine's marks, to the writer; after shutdown there is no one to tell."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._marks.send_nowait(uid)

    async def run(self, *, stop: anyio.Event) -> None:
        """Until `stop` is set; then the graceful shutdown."""
        async with (
            self._marks,
            self.http,
            self.tcp,
            self.grpc,
            anyio.create_task_group() as inputs,
        ):
            inputs.start_soon(self.pods.run)
            inputs.start_soon(self.markers.run)
            inputs.start_soon(self.events.run)
            await self.pods.wait_synced()
            await self.markers.wait_synced()
            self._load()
            inputs.start_soon(self._follow, self.markers, self.engine.sync_marker)
            inputs.start_soon(self._follow, self.pods, self.engine.sync_pod)
            async with anyio.create_task_group() as stages:
                stages.start_soon(self.engine.dispatcher.run)
                stages.start_soon(self.writer.run)
                self.ready.set()
                log.info("daemon.ready", node=self.settings.node, probes=self.engine.probe_count)
                await stop.wait()
                await self._shut_down(stages)
            inputs.cancel_scope.cancel()

    def _load(self) -> None:
        for entry in self.markers.entries():
            self.engine.sync_marker(entry.key, entry)
        for entry in self.pods.entries():
            self.engine.sync_pod(entry.key, entry)

    async def _follow(
        self, informer: Informer[Raw], sync: Callable[[ObjectKey, Any], None]
    ) -> None:
        async with informer.changes:
            async for change in informer.changes:
                sync(change.key, informer.entry(change.key))

    async def _shut_down(self, stages: anyio.abc.TaskGroup) -> None:
        grace = self.settings.shutdown_grace_seconds
        log.info("daemon.stopping", grace_seconds=grace)
        with anyio.move_on_after(grace, shield=True):
            await self.engine.dispatcher.stop(grace=grace)
            await self.writer.flush_pending()
            await self.events.drain()
        stages.cancel_scope.cancel()


async def run_daemon(settings: RunSettings) -> int:
    """`probemarker run`: until SIGTERM or SIGINT; 0 after a clean shutdown."""
    connection = await connect(settings)
    log.info("daemon.starting", node=settings.node, server=connection.server)
    async with KubeClient(connection, settings=client_settings(settings)) as client:
        daemon = Daemon(client, settings)
        stop = anyio.Event()
        async with anyio.create_task_group() as group:

            async def signals() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                    async for signum in received:
                        log.info("daemon.signal", signal=signal.Signals(signum).name)
                        stop.set()
                        return

            group.start_soon(signals)
            await daemon.run(stop=stop)
            group.cancel_scope.cancel()
    log.info("daemon.stopped")
    return 0
