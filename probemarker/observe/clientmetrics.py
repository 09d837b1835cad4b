"""The families of what the daemon says to the API server: requests, informers, pod
writes, events.

Stage: observation (pure functions of the counters), under metrics.py. Input: the
client's answers by verb, resource and code, each informer's `InformerCounters`
(`InformerSnapshot`), the writer's `WriterStats` and queue depth, the event
recorder's `EventStats`. Output: the `probemarker_api_*`, `probemarker_informer_*`,
`probemarker_pod_*` and `probemarker_events_*` families; an error class is a label
value through `error_label`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from probemarker.kube.watch.informertypes import InformerCounters
from probemarker.kube.write.events import EventStats
from probemarker.observe.metricfamily import P, counter, gauge, one, ones
from probemarker.write.writer import WriterStats

__all__ = ["InformerSnapshot", "api_families", "error_label", "event_families", "write_families"]


@dataclass(frozen=True, slots=True)
class InformerSnapshot:
    name: str
    counters: InformerCounters
    synced: bool


def error_label(class_name: str) -> str:
    """`ApiConflict` -> `conflict`, `ApiPatchTestFailed` -> `patch_test_failed`."""
    name = class_name.removeprefix("Api") or class_name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def write_families(writer: WriterStats, depth: int) -> list[Metric]:
    outcomes = [(("written",), writer.writes)]
    outcomes += [((error_label(name),), n) for name, n in writer.failures.items()]
    return [
        counter(
            "pod_writes_total",
            "pods/status patches by outcome: written, or the error the API server answered.",
            ["outcome"],
            outcomes,
        ),
        *ones(
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
        gauge("write_queue_depth", "Pods waiting for a write.", depth),
    ]


def api_families(
    requests: Mapping[tuple[str, str, int], int], informers: Iterable[InformerSnapshot]
) -> list[Metric]:
    answers = counter(
        "api_requests_total",
        "Requests to the API server by verb, resource and HTTP code (<error>: no answer).",
        ["verb", "resource", "code"],
        (
            ((verb, resource, str(code) if code else "<error>"), n)
            for (verb, resource, code), n in requests.items()
        ),
    )
    per_informer: dict[str, list[tuple[Sequence[str], float]]] = {}
    errors: list[tuple[Sequence[str], float]] = []
    synced = GaugeMetricFamily(
        P + "informer_synced", "1 once the informer holds its first list.", labels=["informer"]
    )
    for informer in sorted(informers, key=lambda i: i.name):
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
        answers,
        *(
            counter(
                f"informer_{field}_total", docs[field], ["informer"], per_informer.get(field, [])
            )
            for field in docs
        ),
        counter(
            "informer_errors_total",
            "Failed LISTs and WATCHes by informer and error.",
            ["informer", "error"],
            errors,
        ),
        synced,
    ]


def event_families(events: EventStats) -> list[Metric]:
    return [
        one("events_recorded_total", "Event observations accepted for writing.", events.recorded),
        counter(
            "events_written_total",
            "Events written: created, or patched (a repeat's count).",
            ["action"],
            [(("create",), events.created), (("patch",), events.patched)],
        ),
        *ones(
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
        gauge(
            "events_queued_max", "The most event series ever waiting at once.", events.queued_max
        ),
    ]
