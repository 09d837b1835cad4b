"""The Prometheus metrics: the daemon's own counters, read when scraped.

Stage: observation. Input: a `Snapshot` of the counters the parts keep anyway
(`EngineStats`, `DispatchStats`, `WriterStats`, `InformerCounters`, `EventStats`, the
client's requests) and a few gauges, taken when Prometheus scrapes. Output: metric
families (`families`, pure) for a private `CollectorRegistry` (`build_registry`), never
the global default one, so several daemons in one process (the tests) never collide.

Names follow Prometheus' conventions: the `probemarker_` prefix, `_total` on
counters, seconds as the unit. Labels have a small fixed set of values (a probe kind,
a result, a state, an informer, a verb, a resource, an HTTP code, an error class):
never a pod, a marker or a UID, so the number of series does not grow with the
cluster. The one exception is `pod_namespace`, on the `probemarker_namespace_*`
families only: what each namespace takes of a budget the namespaces share (issue 40),
shown for the namespaces that have pods on the node now (`Snapshot.namespaces`) and no
other, so their number is bounded by the node's pods (110 by default). Nothing a
namespace holds past its last pod (a hold running out its limit) gets a series. Not
`namespace`: Prometheus' scrape sets that target label to the daemon's own namespace,
and would rename ours `exported_namespace`.
docs/operations.md lists every metric with example queries.

Here: the `Snapshot`, the one entry point that builds every family (`families`), and
the families of the build, the event loop, the container runtime and this server
itself. The stages' families are probemetrics.py's (probe runs and slots, the exec
holds, the httpGet pool), clientmetrics.py's (API requests, informers, pod writes,
events) and namespaced.py's (by namespace); a family's shapes (a counter by labels, a
counter, a gauge) are metricfamily.py's.
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from probemarker import __version__
from probemarker.engine.dials import EngineStats
from probemarker.kube.write.events import EventStats
from probemarker.observe.clientmetrics import (
    InformerSnapshot,
    api_families,
    event_families,
    write_families,
)
from probemarker.observe.connections import Eviction, ServerStats
from probemarker.observe.metricfamily import P, counter, gauge, ones
from probemarker.observe.namespaced import budget_families, slot_families
from probemarker.observe.probemetrics import (
    HTTPPool,
    hold_families,
    http_pool_families,
    probe_families,
)
from probemarker.probe.holds import CommandHolds
from probemarker.schedule.dispatcher import DispatchStats
from probemarker.write.writer import WriterStats

__all__ = ["Snapshot", "build_registry", "families"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a scrape reads; the objects are the live ones, read at once, in the loop."""

    engine: EngineStats
    probes: int  # probes tracked (one per pod, container, marker and probe)
    running: int  # probe runs in progress
    dispatch: DispatchStats
    writer: WriterStats
    write_depth: int  # pods waiting for a flush
    informers: Sequence[InformerSnapshot]
    requests: Mapping[tuple[str, str, int], int]  # (verb, resource, code; 0: no answer)
    events: EventStats
    loop_lag: float  # seconds the event loop was late waking the heartbeat
    exec_backend: str = "api"  # --exec-backend
    # api backend: exec streams held past their deadline while their command runs
    holds: CommandHolds | None = None
    # cri backend only: seconds every call to the runtime socket has been refused
    runtime_refused: float = 0.0
    # the health and metrics server's connections (this very scrape's among them)
    server: ServerStats | None = None
    http: HTTPPool | None = None  # the httpGet probes' idle keep-alive connections
    # the namespaces with pods on the node: the only values of the `pod_namespace` label
    namespaces: frozenset[str] = frozenset()
    # probe runs in progress, and due runs waiting for a slot, by namespace
    running_by_namespace: Mapping[str, int] = dataclasses.field(default_factory=dict)
    waiting_by_namespace: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # pods whose write waits for its namespace's turn, event series waiting, by namespace
    writes_waiting: Mapping[str, int] = dataclasses.field(default_factory=dict)
    events_queued: Mapping[str, int] = dataclasses.field(default_factory=dict)


def families(snap: Snapshot) -> list[Metric]:
    """Every metric family of `snap` (pure)."""
    return [
        *_build_info(snap.exec_backend),
        *probe_families(snap.engine, snap.dispatch, snap.probes, snap.running),
        *slot_families(
            snap.dispatch, snap.running_by_namespace, snap.waiting_by_namespace, snap.namespaces
        ),
        *write_families(snap.writer, snap.write_depth),
        *api_families(snap.requests, snap.informers),
        *event_families(snap.events),
        gauge(
            "event_loop_lag_seconds", "How late the event loop last woke a timer.", snap.loop_lag
        ),
        *_runtime_families(snap),
        *hold_families(snap.holds, snap.namespaces),
        *_server_families(snap.server),
        *http_pool_families(snap.http, snap.namespaces),
        *budget_families(
            namespaces=snap.namespaces,
            writes_waiting=snap.writes_waiting,
            writer=snap.writer,
            events_queued=snap.events_queued,
            events=snap.events,
        ),
    ]


def _server_families(stats: ServerStats | None) -> list[Metric]:
    """The health and metrics server's connections (docs/operations.md, "Connections
    to the port")."""
    if stats is None:
        return []
    return [
        gauge("metrics_connections_open", "Connections to this server open now.", stats.open),
        gauge(
            "metrics_connections_limit",
            "Connections this server holds at most (1/16 of the open-files limit, 4 to 64).",
            stats.limit,
        ),
        *ones(
            ("metrics_connections_accepted_total", "Connections accepted.", stats.accepted),
            (
                "metrics_bad_requests_total",
                "Requests this server could not parse (answered 400).",
                stats.bad_requests,
            ),
            (
                "metrics_connections_expired_total",
                "Connections closed at the end of their lifetime (30 s), answer unread.",
                stats.expired,
            ),
        ),
        counter(
            "metrics_connections_evicted_total",
            "Connections closed to make room for a newer one: the server's limit (limit) "
            "or one address' share of it (peer_limit) was reached.",
            ["reason"],
            (((reason.value,), stats.evicted[reason]) for reason in Eviction),
        ),
        counter(
            "accept_errors_total",
            "Failed accept() calls of this server, by errno (EMFILE: the process is out "
            "of file descriptors).",
            ["error"],
            (((name,), n) for name, n in stats.accept_errors.items()),
        ),
    ]


def _runtime_families(snap: Snapshot) -> list[Metric]:
    """The container runtime socket's state, with the cri exec backend only."""
    if snap.exec_backend != "cri":
        return []
    return [
        gauge(
            "cri_refused_seconds",
            "How long every call to the container runtime socket has been refused "
            "(0: it answers); /healthz fails past 60 s.",
            snap.runtime_refused,
        )
    ]


def _build_info(exec_backend: str) -> list[Metric]:
    info = GaugeMetricFamily(
        P + "build_info",
        "The running build: 1, with its version and exec backend.",
        labels=["version", "python", "exec_backend"],
    )
    info.add_metric([__version__, platform.python_version(), exec_backend], 1)
    return [info]


class _Collector:
    """Takes a snapshot per scrape (prometheus_client's custom collector protocol)."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        return families(self._snapshot())


def build_registry(snapshot: Callable[[], Snapshot]) -> CollectorRegistry:
    """A registry of the daemon's metrics and the process' own (memory, CPU, open
    files: prometheus_client's `process_*` from /proc, nothing where there is none)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snapshot))
    ProcessCollector(registry=registry)
    return registry
