"""The metric families by namespace: what each namespace takes of a budget they share.

Stage: observation (pure, as metrics.py). Input: counts by namespace, and the
namespaces with pods on the node (`namespaces`). Output: families named
`probemarker_namespace_*` with one label, `pod_namespace`, and one series per namespace
with pods on the node, never another (metrics.py's docstring says why, and why the
label is not `namespace`). docs/operations.md lists them.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from probemarker.kube.write.events import EventStats
from probemarker.schedule.dispatcher import DispatchStats
from probemarker.write.writer import WriterStats

__all__ = ["budget_families", "by_namespace", "slot_families"]

P = "probemarker_"


def by_namespace(
    name: str,
    doc: str,
    values: Mapping[str, float],
    namespaces: frozenset[str],
    *,
    counter: bool = False,
) -> Metric:
    """A gauge (or a counter) per namespace with pods on the node (0 where `values` has
    none); never a namespace without (see the module docstring)."""
    kind = CounterMetricFamily if counter else GaugeMetricFamily
    family = kind(P + "namespace_" + name, doc, labels=["pod_namespace"])
    for namespace in sorted(namespaces):
        family.add_metric([namespace], values.get(namespace, 0))
    return family


def slot_families(
    dispatch: DispatchStats,
    running: Mapping[str, int],
    waiting: Mapping[str, int],
    namespaces: frozenset[str],
) -> list[Metric]:
    """The probe slots (--max-concurrent-probes) by namespace: one namespace takes at
    most all but a quarter of them, and a freed slot goes to the namespace with the
    fewest runs (schedule/dispatcher.py). `running`, `waiting`: the dispatcher's runs
    in progress and due runs waiting, by namespace."""
    return [
        by_namespace(
            "probes_running",
            "Probe runs in progress, by namespace (each at most --max-concurrent-probes "
            "less a quarter).",
            running,
            namespaces,
        ),
        by_namespace(
            "probes_waiting",
            "Probe runs due and waiting for a slot, by namespace.",
            waiting,
            namespaces,
        ),
        by_namespace(
            "probe_slot_waits",
            "Runs that waited for a free slot (the cap, or their namespace's part of it), "
            "by namespace.",
            dispatch.slot_waits_by_flow,
            namespaces,
            counter=True,
        ),
        by_namespace(
            "probe_slot_wait_max_seconds",
            "The longest wait for a free slot, by namespace.",
            dispatch.slot_wait_max_by_flow,
            namespaces,
        ),
    ]


def budget_families(
    *,
    namespaces: frozenset[str],
    writes_waiting: Mapping[str, int],
    writer: WriterStats,
    events_queued: Mapping[str, int],
    events: EventStats,
) -> list[Metric]:
    """The status writes' budget (--write-qps, write/writer.py) and the events'
    (--event-qps, kube/write/events.py) by namespace: the namespaces take turns, one
    write each. What namespaces without pods on the node spend (a marker's
    InvalidMarker event) is in metrics.py's totals only."""
    return [
        by_namespace(
            "pod_writes_waiting",
            "Pods whose status write is due and waits for its namespace's turn under "
            "--write-qps, by namespace.",
            writes_waiting,
            namespaces,
        ),
        by_namespace(
            "pod_writes_sent",
            "pods/status patches sent, by the pod's namespace (a token of --write-qps each).",
            writer.sent_by_namespace,
            namespaces,
            counter=True,
        ),
        by_namespace(
            "events_queued",
            "Event series waiting to be written (1000 at most in all), by namespace.",
            events_queued,
            namespaces,
        ),
        by_namespace(
            "events_sent",
            "Event writes sent (create or patch), by the event's namespace (a token of "
            "--event-qps each).",
            events.sent_by_namespace,
            namespaces,
            counter=True,
        ),
        by_namespace(
            "events_dropped",
            "Event observations dropped, or queued series pushed out for another "
            "namespace's, by the event's namespace.",
            events.dropped_by_namespace,
            namespaces,
            counter=True,
        ),
    ]
