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
"""

from __future__ import annotations

import dataclasses
import math
import platform
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from probemarker import __version__
from probemarker.engine.dials import EngineStats
from probemarker.kube.watch.informertypes import InformerCounters
from probemarker.kube.write.events import EventStats
from probemarker.observe.connections import Eviction, ServerStats
from probemarker.observe.namespaced import budget_families, by_namespace, slot_families
from probemarker.probe.holds import CommandHolds
from probemarker.probe.httppool import PoolStats
from probemarker.schedule.dispatcher import DispatchStats
from probemarker.write.writer import WriterStats

__all__ = [
    "HTTPPool",
    "InformerSnapshot",
    "Snapshot",
    "build_registry",
    "error_label",
    "families",
]

P = "probemarker_"


@dataclass(frozen=True, slots=True)
class InformerSnapshot:
    name: str
    counters: InformerCounters
    synced: bool


@dataclass(frozen=True, slots=True)
class HTTPPool:
    """The httpGet handler's keep-alive pool (probe/http.py)."""

    idle: int  # idle connections held now
    limit: int  # idle connections kept at most
    stats: PoolStats
    # idle connections held now, by the namespace of the pod probed
    idle_by_namespace: Mapping[str, int] = dataclasses.field(default_factory=dict)


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


def error_label(class_name: str) -> str:
    """`ApiConflict` -> `conflict`, `ApiPatchTestFailed` -> `patch_test_failed`."""
    name = class_name.removeprefix("Api") or class_name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _le(bound: float) -> str:
    """A bucket's upper bound as the exposition writes it: `0.005`, `1.0`, `+Inf`."""
    return "+Inf" if math.isinf(bound) else repr(bound)


def _counter(
    name: str, doc: str, labels: Sequence[str], values: Iterable[tuple[Sequence[str], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(P + name, doc, labels=labels)
    for label_values, value in sorted(values):
        family.add_metric(label_values, value)
    return family


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(P + name, doc, value=value)


def _one(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(P + name, doc, value=value)


def _ones(*rows: tuple[str, str, float]) -> list[Metric]:
    """A counter without labels per (name, doc, value)."""
    return [_one(name, doc, value) for name, doc, value in rows]


def families(snap: Snapshot) -> list[Metric]:
    """Every metric family of `snap` (pure)."""
    return [
        *_build_info(snap.exec_backend),
        *_probe_families(snap),
        *slot_families(
            snap.dispatch, snap.running_by_namespace, snap.waiting_by_namespace, snap.namespaces
        ),
        *_write_families(snap.writer, snap.write_depth),
        *_api_families(snap),
        *_event_families(snap.events),
        _gauge(
            "event_loop_lag_seconds", "How late the event loop last woke a timer.", snap.loop_lag
        ),
        *_runtime_families(snap),
        *_hold_families(snap.holds, snap.namespaces),
        *_server_families(snap.server),
        *_http_pool_families(snap.http, snap.namespaces),
        *budget_families(
            namespaces=snap.namespaces,
            writes_waiting=snap.writes_waiting,
            writer=snap.writer,
            events_queued=snap.events_queued,
            events=snap.events,
        ),
    ]


def _http_pool_families(pool: HTTPPool | None, namespaces: frozenset[str]) -> list[Metric]:
    """The httpGet probes' keep-alive pool: a descriptor per idle connection."""
    if pool is None:
        return []
    return [
        by_namespace(
            "http_probe_connections_idle",
            "Idle httpGet keep-alive connections held now, by the namespace of the pod "
            "probed: each namespace keeps its share of the limit, or all of it alone.",
            pool.idle_by_namespace,
            namespaces,
        ),
        _one(
            "http_probe_connections_given_up_total",
            "Idle httpGet connections closed so that a namespace below its share of the "
            "idle limit could keep one.",
            pool.stats.given_up,
        ),
        _gauge(
            "http_probe_connections_idle",
            "Idle httpGet keep-alive connections held now (a file descriptor each).",
            pool.idle,
        ),
        _gauge(
            "http_probe_connections_idle_limit",
            "Idle httpGet keep-alive connections kept at most (1/8 of the open-files "
            "limit, 8 to 1024).",
            pool.limit,
        ),
        _one(
            "http_probe_connections_not_kept_total",
            "Answered httpGet connections closed instead of kept: the idle limit was reached.",
            pool.stats.not_kept,
        ),
    ]


def _hold_families(holds: CommandHolds | None, namespaces: frozenset[str]) -> list[Metric]:
    """api backend: exec streams held after their run's deadline (probe/holds.py)."""
    if holds is None:
        return []
    stats = holds.stats
    return [
        by_namespace(
            "exec_streams_held",
            "Exec streams held open after their deadline, by namespace: each namespace "
            "may hold its share of --max-held-exec-streams, or all of them alone.",
            holds.held_by_namespace(),
            namespaces,
        ),
        by_namespace(
            "exec_commands_held",
            "Exec commands that may still run, whose probes wait, by namespace.",
            holds.holding_by_namespace(),
            namespaces,
        ),
        _gauge(
            "exec_streams_held",
            "Exec streams held open after their deadline, their command still running.",
            holds.held,
        ),
        _one(
            "exec_streams_held_total",
            "Exec streams held open after their deadline.",
            stats.held_total,
        ),
        _counter(
            "exec_hold_limits_total",
            "Held exec streams given up: limit=time (--exec-hold-seconds ran out), "
            "limit=streams (--max-held-exec-streams were held already, the namespace "
            "at its share), limit=share (given up for another namespace's share).",
            ["limit"],
            (((limit,), stats.limit_hits[limit]) for limit in ("time", "streams", "share")),
        ),
        _gauge(
            "exec_commands_held",
            "Exec commands that may still run, whose probes wait: held streams, and "
            "commands held by time alone (seeded from a pod's record, a lost stream, "
            "no room for a stream).",
            holds.holding,
        ),
        _one(
            "exec_streams_lost_total",
            "Held exec streams that ended without the command's exit status: held on by time.",
            stats.lost,
        ),
        _one(
            "exec_holds_seeded_total",
            "Holds taken over from the pods' ownership records at a probe's start (a "
            "restarted daemon): the command may still run.",
            stats.seeded,
        ),
        _one(
            "exec_holds_recorded_total",
            "Holds put on the pods' ownership records: a run of the command came due while "
            "it still ran (one pod write, and one when the hold ends).",
            stats.recorded,
        ),
    ]


def _server_families(stats: ServerStats | None) -> list[Metric]:
    """The health and metrics server's connections (docs/operations.md, "Connections
    to the port")."""
    if stats is None:
        return []
    return [
        _gauge("metrics_connections_open", "Connections to this server open now.", stats.open),
        _gauge(
            "metrics_connections_limit",
            "Connections this server holds at most (1/16 of the open-files limit, 4 to 64).",
            stats.limit,
        ),
        *_ones(
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
        _counter(
            "metrics_connections_evicted_total",
            "Connections closed to make room for a newer one: the server's limit (limit) "
            "or one address' share of it (peer_limit) was reached.",
            ["reason"],
            (((reason.value,), stats.evicted[reason]) for reason in Eviction),
        ),
        _counter(
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
        _gauge(
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


def _probe_families(snap: Snapshot) -> list[Metric]:
    engine, dispatch = snap.engine, snap.dispatch
    durations = HistogramMetricFamily(
        P + "probe_duration_seconds",
        "How long probe handlers took, by kind (exec, httpGet, tcpSocket, grpc).",
        labels=["kind"],
    )
    for kind, histogram in sorted(engine.durations.items()):
        buckets = [(_le(bound), float(n)) for bound, n in histogram.cumulative()]
        durations.add_metric([kind], buckets, histogram.sum)
    return [
        _counter(
            "probe_runs_total",
            "Probe runs by kind and result (Succeeded, Failed, Unknown).",
            ["kind", "result"],
            (((kind, result), n) for (kind, result), n in engine.runs.items()),
        ),
        durations,
        _counter(
            "transitions_total",
            "Decided probe states reached (a threshold met), by the new state.",
            ["state"],
            (((state,), n) for state, n in engine.transitions.items()),
        ),
        _counter(
            "invalid_result_values_total",
            "Values rendered from {{.Result}} that could not go on a pod and were reported "
            "(not written; once per pod, key and value, with an InvalidResultValue Warning), "
            "by kind.",
            ["kind"],
            (((kind,), n) for kind, n in engine.invalid_values.items()),
        ),
        _one(
            "invalid_result_values_held_total",
            "New invalid {{.Result}} values of keys reported already, not reported: the pod's "
            "last such Warning was less than --message-refresh-seconds before (answers that "
            "change every run).",
            engine.invalid_values_kept,
        ),
        _gauge("probes_tracked", "Probes the daemon runs on this node's pods.", snap.probes),
        _gauge("probes_running", "Probe runs in progress.", snap.running),
        *_ones(
            ("probe_runs_started_total", "Probe runs started.", dispatch.runs_started),
            (
                "probe_late_starts_total",
                "Runs that could start only >1s after their slot.",
                dispatch.late,
            ),
            (
                "probe_slot_waits_total",
                "Runs that waited for a free slot under --max-concurrent-probes.",
                dispatch.slot_waits,
            ),
            (
                "probe_missed_slots_total",
                "Periods skipped: a run overran or started late.",
                engine.missed_slots,
            ),
            (
                "probe_periods_skipped_total",
                "Periods skipped: a previous run of the probe's command, by it or "
                "another probe, may still run (an exec stream held past its deadline).",
                engine.periods_skipped,
            ),
            (
                "probe_results_dropped_total",
                "Results of runs whose probe changed or went away meanwhile.",
                engine.dropped_results,
            ),
            (
                "probe_run_errors_total",
                "Runs whose callback raised (a bug; logged).",
                dispatch.errors,
            ),
            (
                "probe_runs_cancelled_total",
                "Runs cancelled when the shutdown grace ran out.",
                dispatch.cancelled,
            ),
        ),
        _gauge(
            "probe_lateness_max_seconds", "The latest any run could start.", dispatch.lateness_max
        ),
        _gauge(
            "probe_slot_wait_max_seconds",
            "The longest wait for a free slot.",
            dispatch.slot_wait_max,
        ),
    ]


def _write_families(writer: WriterStats, depth: int) -> list[Metric]:
    outcomes = [(("written",), writer.writes)]
    outcomes += [((error_label(name),), n) for name, n in writer.failures.items()]
    return [
        _counter(
            "pod_writes_total",
            "pods/status patches by outcome: written, or the error the API server answered.",
            ["outcome"],
            outcomes,
        ),
        *_ones(
            (
                "pod_flushes_total",
                "Pods whose desired state was computed for a write.",
                writer.flushes,
            ),
            (
                "pod_flushes_unchanged_total",
                "Flushes that needed no request.",
                writer.unchanged,
            ),
            (
                "pod_messages_held_total",
                "Flushes whose only change, a message, was held back.",
                writer.messages_held,
            ),
            (
                "pod_write_retries_total",
                "Writes scheduled again after an error (with backoff).",
                writer.retries,
            ),
            (
                "pod_rereads_total",
                "Pods read again after a conflict or a failed test.",
                writer.rereads,
            ),
            (
                "pod_writes_narrowed_total",
                "Refused (422) writes answered with a smaller patch.",
                writer.narrowed,
            ),
            (
                "pods_replaced_total",
                "Pods found re-created under the same name.",
                writer.replaced,
            ),
        ),
        _gauge("write_queue_depth", "Pods waiting for a write.", depth),
    ]


def _api_families(snap: Snapshot) -> list[Metric]:
    requests = _counter(
        "api_requests_total",
        "Requests to the API server by verb, resource and HTTP code (<error>: no answer).",
        ["verb", "resource", "code"],
        (
            ((verb, resource, str(code) if code else "<error>"), n)
            for (verb, resource, code), n in snap.requests.items()
        ),
    )
    per_informer: dict[str, list[tuple[Sequence[str], float]]] = {}
    errors: list[tuple[Sequence[str], float]] = []
    synced = GaugeMetricFamily(
        P + "informer_synced", "1 once the informer holds its first list.", labels=["informer"]
    )
    for informer in sorted(snap.informers, key=lambda i: i.name):
        c, name = informer.counters, informer.name
        fields = {
            "lists": c.lists,
            "watches": c.watches,
            "watch_restarts": c.restarts,
            "expired": c.gone,
            "watch_events": c.events,
            "bookmarks": c.bookmarks,
        }
        for field, value in fields.items():
            per_informer.setdefault(field, []).append(((name,), value))
        errors += [((name, error_label(err)), n) for err, n in c.errors.items()]
        synced.add_metric([name], 1 if informer.synced else 0)
    docs = {
        "lists": "Complete LISTs; more than one per watched namespace means re-lists.",
        "watches": "WATCH requests the API server accepted.",
        "watch_restarts": "Watches that ended (closed, failed or expired) and started again.",
        "expired": "410 Gone answers (too old a resourceVersion), each followed by a LIST.",
        "watch_events": "ADDED, MODIFIED and DELETED events received.",
        "bookmarks": "BOOKMARK events received.",
    }
    return [
        requests,
        *(
            _counter(
                f"informer_{field}_total", docs[field], ["informer"], per_informer.get(field, [])
            )
            for field in docs
        ),
        _counter(
            "informer_errors_total",
            "Failed LISTs and WATCHes by informer and error.",
            ["informer", "error"],
            errors,
        ),
        synced,
    ]


def _event_families(events: EventStats) -> list[Metric]:
    return [
        _one("events_recorded_total", "Event observations accepted for writing.", events.recorded),
        _counter(
            "events_written_total",
            "Events written: created, or patched (a repeat's count).",
            ["action"],
            [(("create",), events.created), (("patch",), events.patched)],
        ),
        *_ones(
            (
                "events_dropped_total",
                "Event observations dropped (their namespace's queue, or the whole queue, "
                "was full), or queued series pushed out for another namespace's.",
                events.dropped,
            ),
            (
                "events_failed_total",
                "Event writes refused or unanswered (not retried).",
                events.failed,
            ),
            (
                "events_evicted_total",
                "Event series forgotten to keep the cache bounded.",
                events.evicted,
            ),
        ),
        _gauge(
            "events_queued_max", "The most event series ever waiting at once.", events.queued_max
        ),
    ]


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
