"""Wiring of `probemarker run`: the stages in one task group, nothing else (the process
around it, its signals and its connection: daemon/process.py).

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

The health and metrics server (`--metrics-address`, observe/serve.py) listens first,
before the informers list, so /healthz answers while the daemon waits for an API server
or a CRD, and /readyz says what it waits for; it closes last, after the shutdown. Its
connections are held to a share of the open-files limit (observe/descriptors.py),
which the process raised to the hard limit first.

Shutdown (`stop` set: a SIGTERM or SIGINT, at any stage): stop starting probes, give
running ones and pending writes `shutdown_grace_seconds`, write queued events, exit 0.
Before the first LISTs there is nothing to finish, so it stops at once.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import structlog

from probemarker.api import rules
from probemarker.cri.client import RuntimeInfo
from probemarker.daemon.assembly import exec_connections, probe_handlers
from probemarker.daemon.settings import RunSettings
from probemarker.engine.dials import EngineSettings
from probemarker.engine.engine import Engine
from probemarker.engine.report import Reporter
from probemarker.kit.clock import MONOTONIC, Clock, rfc3339_now
from probemarker.kit.repeats import Repeats
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.resources import PODS
from probemarker.kube.watch.cache import ObjectKey
from probemarker.kube.watch.informer import Informer
from probemarker.kube.write.events import EventRecorder
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.observe.address import parse_listen_address
from probemarker.observe.answer import PodPart, encode_answer, pod_parts
from probemarker.observe.clientmetrics import InformerSnapshot
from probemarker.observe.connections import ServerStats
from probemarker.observe.descriptors import (
    connection_limits,
    idle_http_connections,
    open_files_limit,
)
from probemarker.observe.health import Health, HealthSettings, Heartbeat
from probemarker.observe.metrics import Snapshot, build_registry
from probemarker.observe.probemetrics import HTTPPool
from probemarker.observe.serve import MetricsServer
from probemarker.observe.snapshot import head_document, wall_times
from probemarker.observe.statussocket import StatusRequest, StatusSocket
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.holdtable import CommandKey
from probemarker.probe.runner import ProbeRunner
from probemarker.watch.markers import marker_projection, marker_resource
from probemarker.watch.pods import PodUID, pod_projection
from probemarker.write.writer import PodWriter, WriterSettings

log = structlog.get_logger("probemarker.app")

_RUNTIME_GREETING = 10.0  # seconds the start-up Version question may take

Raw = dict[str, Any]
T = TypeVar("T")


async def unless_stopped(stop: anyio.Event, work: Callable[[], Awaitable[T]]) -> T | None:
    """`work()`'s result, or None once `stop` is set first (`work` is then cancelled).
    An exception of `work` propagates as itself, not inside an exception group."""
    done: list[T] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as race:

        async def until_stopped() -> None:
            await stop.wait()
            race.cancel_scope.cancel()

        race.start_soon(until_stopped)
        try:
            done.append(await work())
        except Exception as err:  # re-raised below, outside the task group
            failed.append(err)
        race.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return done[0] if done and not stop.is_set() else None


def crd_missing_hint(group: str) -> str:
    """What to do when the API server does not serve PodProbeMarkers of `group`."""
    if group == rules.KRUISE_GROUP:
        return (
            "Kruise's PodProbeMarker CRD is not installed; install OpenKruise, or run with "
            f"--marker-group {rules.GROUP} and install probemarker's CRD"
        )
    return "the PodProbeMarker CRD is not installed; install it: kubectl apply -f manifests/crd/"


def engine_settings(settings: RunSettings) -> EngineSettings:
    """The engine's part of the run settings."""
    return EngineSettings(
        max_concurrent=settings.max_concurrent_probes,
        cleanup_delay=settings.cleanup_delay_seconds,
        warning_refresh=settings.message_refresh_seconds,
        phase_step=settings.probe_phase_step_seconds,
    )


class Daemon:
    """The running daemon: its parts, for `run_daemon` (daemon/process.py) and for tests
    to look into."""

    def __init__(
        self,
        client: KubeClient,
        settings: RunSettings,
        *,
        clock: Clock = MONOTONIC,
        health: HealthSettings | None = None,
    ):
        if client.settings.exec_connections < exec_connections(settings):
            raise ValueError(
                f"the client has {client.settings.exec_connections} exec connections for "
                f"{settings.max_concurrent_probes} probe runs at once and "
                f"{settings.max_held_exec_streams} held exec streams: build it with "
                "client_settings(settings)"
            )
        self.settings = settings
        self._client = client
        self._clock = clock
        group = settings.marker_group
        repeats = Repeats()  # an unreachable server: one line a minute, not one per informer
        server = client.connection.server
        self.pods: Informer[Raw] = Informer(
            client=client,
            resource=PODS,
            project=pod_projection,
            field_selector=f"spec.nodeName={settings.node}",
            clock=clock,
            name="pods",
            server=server,
            repeats=repeats,
        )
        self.markers: Informer[Raw] = Informer(
            client=client,
            resource=marker_resource(group),
            project=marker_projection,
            namespaces=settings.namespaces or None,
            clock=clock,
            name="podprobemarkers",
            server=server,
            missing_hint=crd_missing_hint(group),
            repeats=repeats,
        )
        # Two budgets: an event never takes a token a status write needs (issue 15).
        self.limiter = TokenBucket(qps=settings.write_qps, burst=settings.write_burst, clock=clock)
        self.event_limiter = TokenBucket(
            qps=settings.event_qps, burst=settings.event_burst, clock=clock
        )
        self.events = EventRecorder(client, node_name=settings.node, limiter=self.event_limiter)
        send, receive = anyio.create_memory_object_stream[PodUID](math.inf)
        self._marks, self._marks_received = send, receive
        # --exec-backend cri: exec probes through the runtime socket, not pods/exec. The
        # httpGet handler keeps its share of the open-files limit as idle connections.
        self.handlers = probe_handlers(
            client,
            settings,
            clock=clock,
            http_idle=idle_http_connections(open_files_limit()),
            changed=self._hold_changed,
        )
        assert self.handlers.http is not None  # the daemon runs every kind of probe
        self.http = self.handlers.http
        self.runtime = self.handlers.runtime
        self._runtime_client = self.handlers.runtime_client
        self.exec = self.handlers.exec
        self.engine = Engine(
            runner=ProbeRunner(self.handlers.table()),
            sink=self.events,
            mark=self._mark,
            clock=clock,
            wall=time.time,
            settings=engine_settings(settings),
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
            settings=WriterSettings(
                coalesce=settings.write_coalesce_seconds,
                message_refresh=settings.message_refresh_seconds,
            ),
            refused=Reporter(self.events).write_refused,
        )
        self.ready = anyio.Event()
        self.stopping = anyio.Event()  # set when the graceful shutdown starts
        health = health or HealthSettings()
        self.heartbeat = Heartbeat(clock=clock, interval=health.heartbeat)
        self.health = Health(
            heartbeat=self.heartbeat,
            informers=(self.pods, self.markers),
            ready=self.ready,
            stopping=self.stopping,
            settings=health,
            runtime=self._runtime_client,
        )
        self.server_stats = ServerStats()  # the health and metrics server's connections
        self.metrics = build_registry(self.snapshot)
        self.serving = anyio.Event()  # set once the health and metrics server listens
        self.metrics_port: int | None = None  # the port it listens on

    def snapshot(self) -> Snapshot:
        """The counters for a scrape, read at once (observe/metrics.py)."""
        dispatcher = self.engine.dispatcher
        return Snapshot(
            engine=self.engine.stats,
            probes=self.engine.probe_count,
            running=dispatcher.running,
            dispatch=dispatcher.stats,
            writer=self.writer.stats,
            write_depth=self.writer.depth,
            informers=[
                InformerSnapshot(i.name, i.counters, i.synced.is_set())
                for i in (self.pods, self.markers)
            ],
            requests=self._client.requests,
            events=self.events.stats,
            loop_lag=self.heartbeat.late(),
            exec_backend=self.settings.exec_backend,
            holds=None if self.exec is None else self.exec.holds,
            runtime_refused=0.0
            if self._runtime_client is None
            else self._runtime_client.refused_for()[0],
            server=self.server_stats,
            http=HTTPPool(
                idle=self.http.idle,
                limit=self.http.max_idle,
                stats=self.http.stats,
                idle_by_namespace=self.http.idle_by_namespace(),
            ),
            namespaces=self.engine.namespaces,
            running_by_namespace=dispatcher.running_by_flow(),
            waiting_by_namespace=dispatcher.waiting_by_flow(),
            writes_waiting=self.writer.waiting_by_namespace(),
            events_queued=self.events.queued_by_namespace(),
        )

    def status(self, request: StatusRequest) -> bytes:
        """What the daemon holds of its node's pods (only those `request` asks for), for
        `probemarker status` (observe/answer.py, observe/snapshot.py); built only when
        asked, one pod at a time."""
        wall_now, clock_now = time.time(), self._clock.now()

        def pods() -> Iterator[PodPart]:
            seen = self.engine.inspect(
                pod=request.pod, marker=request.marker, namespace=request.namespace
            )
            return pod_parts(
                seen,
                lambda p: self.writer.pending(p.view.uid, p.view, p.desired),
                wall_times(wall_now, clock_now),
            )

        head = head_document(node=self.settings.node, ready=self.ready.is_set(), wall_now=wall_now)
        return encode_answer(head, pods)

    def _hold_changed(self, key: CommandKey) -> None:
        """A hold of a command in a pod went on the pod's record (a run of it was
        skipped) or, recorded, ended: the record follows."""
        self._mark(key.pod_uid)

    def _mark(self, uid: PodUID) -> None:
        """The engine's marks, to the writer; after shutdown there is no one to tell."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._marks.send_nowait(uid)

    async def run(self, *, stop: anyio.Event) -> None:
        """Until `stop` is set; then the graceful shutdown. `stop` is looked at from the
        first moment: a daemon that never syncs (API server unreachable, CRD missing)
        still stops at once."""
        try:
            await self._run(stop)
        finally:
            # What the stages close, for a daemon stopped before they ran (a stop before
            # the first LISTs, a metrics port in use).
            self.pods.close()
            self.markers.close()
            self._marks.close()  # never entered when the server could not start
            self._marks_received.close()

    async def _run(self, stop: anyio.Event) -> None:
        # The server is entered first, so it closes last: after the handlers closed
        # their connections (grpc channels may take seconds), /readyz still answers.
        # The kubelet probes readiness until the container has stopped; a refused
        # connection meanwhile would be a Warning (observe/health.py).
        async with (
            self._serving(),
            self._status_socket(),
            self._marks,
            self.handlers.opened(),
            anyio.create_task_group() as inputs,
        ):
            inputs.start_soon(self.pods.run)
            inputs.start_soon(self.markers.run)
            inputs.start_soon(self.events.run)
            if self.runtime is not None:
                inputs.start_soon(self._greet_runtime, self.runtime)
            if not await self._synced_unless(stop):
                # Nothing has been planned, probed or written yet: nothing to finish.
                self.stopping.set()
                log.info("daemon.stopping", stage="starting")
                inputs.cancel_scope.cancel()
                return
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

    async def _greet_runtime(self, runtime: CRIExecHandler) -> None:
        """One line at start-up: the runtime that exec probes will use, or why it did not
        answer (not fatal: probes are Unknown until it does, and it is asked again)."""
        answer = await runtime.runtime(wait=_RUNTIME_GREETING)
        endpoint = self.settings.cri_endpoint
        if isinstance(answer, RuntimeInfo):
            log.info(
                "cri.runtime",
                endpoint=endpoint,
                runtime=answer.name,
                version=answer.version,
                api=answer.api_version,
            )
        else:
            log.warning(
                "cri.unreachable",
                endpoint=endpoint,
                error=str(answer),
                hint="exec probes stay Unknown until the runtime answers; is the socket "
                "mounted and is the daemon allowed to connect? (docs/cri.md)",
            )

    @contextlib.asynccontextmanager
    async def _serving(self) -> AsyncIterator[None]:
        """/healthz, /readyz and /metrics, with the heartbeat /healthz reads; nothing
        when `--metrics-address` is 0."""
        address = parse_listen_address(self.settings.metrics_address)
        if address is None:
            yield
            return
        server = MetricsServer(
            address,
            health=self.health,
            registry=self.metrics,
            # its share of the open-files limit: the rest stays the probes' and the API
            # traffic's (observe/descriptors.py)
            limits=connection_limits(open_files_limit()),
            stats=self.server_stats,
            clock=self._clock,
        )
        async with server, anyio.create_task_group() as beats:
            beats.start_soon(self.heartbeat.run)
            self.metrics_port = server.port
            self.serving.set()
            try:
                yield
            finally:
                beats.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _status_socket(self) -> AsyncIterator[None]:
        """The socket `probemarker status` reads (--status-socket); nothing when unset."""
        if not self.settings.status_socket:
            yield
            return
        async with StatusSocket(self.settings.status_socket, self.status):
            yield

    async def _synced_unless(self, stop: anyio.Event) -> bool:
        """True once both stores hold their first LIST; False if `stop` is set first."""

        async def synced() -> bool:
            await self.pods.wait_synced()
            await self.markers.wait_synced()
            return True

        return bool(await unless_stopped(stop, synced))

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
        self.stopping.set()
        log.info("daemon.stopping", grace_seconds=grace)
        with anyio.move_on_after(grace, shield=True):
            await self.engine.dispatcher.stop(grace=grace)
            await self.writer.flush_pending()
            await self.events.drain()
        stages.cancel_scope.cancel()
