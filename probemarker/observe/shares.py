"""The metrics of the budgets namespaces share (SPEC §5), by namespace.

Stage: observation (pure: reads counters the parts keep anyway). Input: the namespaces
with a pod on this node, and what each budget counts by namespace: the status
writes' (write/writer.py) and the events' (kube/write/events.py). Output: metric
families with a `namespace` label, one series per namespace with a pod on this node
(0 when it has nothing counted), none for other namespaces: the number of series
grows with the node's pods (at most the kubelet's max-pods), never with the cluster.
What other namespaces spend (a marker's InvalidMarker event in a namespace with no
pod here) is in the totals of observe/metrics.py only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from probemarker.kube.write.events import EventStats
from probemarker.write.writer import WriterStats

__all__ = ["share_families"]

P = "probemarker_"


def share_families(
    *,
    namespaces: Iterable[str],
    writes_waiting: Mapping[str, int],
    writer: WriterStats,
    events_queued: Mapping[str, int],
    events: EventStats,
) -> list[Metric]:
    """Every family by namespace, for `namespaces` only."""
    shown = sorted(namespaces)
    rows = [
        (
            GaugeMetricFamily,
            "pod_writes_waiting",
            "Pods whose status write is due and waits for its namespace's turn under "
            "--write-qps, by namespace.",
            writes_waiting,
        ),
        (
            CounterMetricFamily,
            "pod_writes_sent_total",
            "pods/status patches sent, by the pod's namespace (a token of --write-qps each).",
            writer.sent_by_namespace,
        ),
        (
            GaugeMetricFamily,
            "events_queued",
            "Event series waiting to be written (1000 at most in all), by namespace.",
            events_queued,
        ),
        (
            CounterMetricFamily,
            "events_sent_total",
            "Event writes sent (create or patch), by the event's namespace (a token of "
            "--event-qps each).",
            events.sent_by_namespace,
        ),
        (
            CounterMetricFamily,
            "events_dropped_by_namespace_total",
            "Event observations dropped, or queued series pushed out for another "
            "namespace's, by the event's namespace.",
            events.dropped_by_namespace,
        ),
    ]
    families: list[Metric] = []
    for kind, name, doc, counts in rows:
        family = kind(P + name, doc, labels=["namespace"])
        for namespace in shown:
            family.add_metric([namespace], counts.get(namespace, 0))
        families.append(family)
    return families
