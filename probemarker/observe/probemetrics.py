"""The probe stage's metric families: runs, the exec holds, the httpGet pool.

Stage: observation (pure functions of the counters), under metrics.py. Input: the
engine's `EngineStats` and the dispatcher's `DispatchStats`, the exec holds
(`CommandHolds`, api backend), the httpGet keep-alive pool (`HTTPPool`), the
namespaces with pods on the node. Output: the `probemarker_probe_*`,
`probemarker_exec_*` and `probemarker_http_probe_*` families (their by-namespace
series through namespaced.py's `by_namespace`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.metrics_core import HistogramMetricFamily, Metric

from probemarker.engine.dials import EngineStats
from probemarker.observe.metricfamily import P, counter, gauge, le, one, ones
from probemarker.observe.namespaced import by_namespace
from probemarker.probe.holds import CommandHolds
from probemarker.probe.httppool import PoolStats
from probemarker.schedule.dispatcher import DispatchStats

__all__ = ["HTTPPool", "hold_families", "http_pool_families", "probe_families"]


@dataclass(frozen=True, slots=True)
class HTTPPool:
    """The httpGet handler's keep-alive pool (probe/http.py)."""

    idle: int  # idle connections held now
    limit: int  # idle connections kept at most
    stats: PoolStats
    # idle connections held now, by the namespace of the pod probed
    idle_by_namespace: Mapping[str, int] = dataclasses.field(default_factory=dict)


def probe_families(
    engine: EngineStats, dispatch: DispatchStats, probes: int, running: int
) -> list[Metric]:
    """Probe runs: by kind and result, how long, the states decided, the values that
    could not go on a pod, and the dispatcher's slots (schedule/dispatcher.py)."""
    durations = HistogramMetricFamily(
        P + "probe_duration_seconds",
        "How long probe handlers took, by kind (exec, httpGet, tcpSocket, grpc).",
        labels=["kind"],
    )
    for kind, histogram in sorted(engine.durations.items()):
        buckets = [(le(bound), float(n)) for bound, n in histogram.cumulative()]
        durations.add_metric([kind], buckets, histogram.sum)
    return [
        counter(
            "probe_runs_total",
            "Probe runs by kind and result (Succeeded, Failed, Unknown).",
            ["kind", "result"],
            (((kind, result), n) for (kind, result), n in engine.runs.items()),
        ),
        durations,
        counter(
            "transitions_total",
            "Decided probe states reached (a threshold met), by the new state.",
            ["state"],
            (((state,), n) for state, n in engine.transitions.items()),
        ),
        counter(
            "invalid_result_values_total",
            "Values rendered from {{.Result}} that could not go on a pod and were reported "
            "(not written; once per pod, key and value, with an InvalidResultValue Warning), "
            "by kind.",
            ["kind"],
            (((kind,), n) for kind, n in engine.invalid_values.items()),
        ),
        one(
            "invalid_result_values_held_total",
            "New invalid {{.Result}} values of keys reported already, not reported: the pod's "
            "last such Warning was less than --message-refresh-seconds before (answers that "
            "change every run).",
            engine.invalid_values_kept,
        ),
        gauge("probes_tracked", "Probes the daemon runs on this node's pods.", probes),
        gauge("probes_running", "Probe runs in progress.", running),
        *ones(
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
        gauge(
            "probe_lateness_max_seconds", "The latest any run could start.", dispatch.lateness_max
        ),
        gauge(
            "probe_slot_wait_max_seconds",
            "The longest wait for a free slot.",
            dispatch.slot_wait_max,
        ),
    ]


def http_pool_families(pool: HTTPPool | None, namespaces: frozenset[str]) -> list[Metric]:
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
        one(
            "http_probe_connections_given_up_total",
            "Idle httpGet connections closed so that a namespace below its share of the "
            "idle limit could keep one.",
            pool.stats.given_up,
        ),
        gauge(
            "http_probe_connections_idle",
            "Idle httpGet keep-alive connections held now (a file descriptor each).",
            pool.idle,
        ),
        gauge(
            "http_probe_connections_idle_limit",
            "Idle httpGet keep-alive connections kept at most (1/8 of the open-files "
            "limit, 8 to 1024).",
            pool.limit,
        ),
        one(
            "http_probe_connections_not_kept_total",
            "Answered httpGet connections closed instead of kept: the idle limit was reached.",
            pool.stats.not_kept,
        ),
    ]


def hold_families(holds: CommandHolds | None, namespaces: frozenset[str]) -> list[Metric]:
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
        gauge(
            "exec_streams_held",
            "Exec streams held open after their deadline, their command still running.",
            holds.held,
        ),
        one(
            "exec_streams_held_total",
            "Exec streams held open after their deadline.",
            stats.held_total,
        ),
        counter(
            "exec_hold_limits_total",
            "Held exec streams given up: limit=time (--exec-hold-seconds ran out), "
            "limit=streams (--max-held-exec-streams were held already, the namespace "
            "at its share), limit=share (given up for another namespace's share).",
            ["limit"],
            (((limit,), stats.limit_hits[limit]) for limit in ("time", "streams", "share")),
        ),
        gauge(
            "exec_commands_held",
            "Exec commands that may still run, whose probes wait: held streams, and "
            "commands held by time alone (seeded from a pod's record, a lost stream, "
            "no room for a stream).",
            holds.holding,
        ),
        one(
            "exec_streams_lost_total",
            "Held exec streams that ended without the command's exit status: held on by time.",
            stats.lost,
        ),
        one(
            "exec_holds_seeded_total",
            "Holds taken over from the pods' ownership records at a probe's start (a "
            "restarted daemon): the command may still run.",
            stats.seeded,
        ),
        one(
            "exec_holds_recorded_total",
            "Holds put on the pods' ownership records: a run of the command came due while "
            "it still ran (one pod write, and one when the hold ends).",
            stats.recorded,
        ),
    ]
