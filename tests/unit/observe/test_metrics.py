"""observe/metrics.py: the daemon's counters, as Prometheus reads them.

Each case fills the stats the parts keep, renders them through a private registry in
the text format and parses that back with prometheus-client's parser, so what is
checked is what a scrape sees.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from probemarker import __version__
from probemarker.engine.dials import EngineStats
from probemarker.identity.commands import HeldCommand
from probemarker.kit.histogram import Histogram
from probemarker.kube.watch.informertypes import InformerCounters
from probemarker.kube.write.events import EventStats
from probemarker.observe.clientmetrics import InformerSnapshot, error_label
from probemarker.observe.connections import Eviction, ServerStats
from probemarker.observe.metrics import Snapshot, build_registry
from probemarker.observe.probemetrics import HTTPPool
from probemarker.probe.holds import CommandHolds
from probemarker.probe.holdtable import CommandKey
from probemarker.probe.httppool import PoolStats
from probemarker.schedule.dispatcher import DispatchStats
from probemarker.watch.pods import PodUID
from probemarker.write.writer import WriterStats

Labels = tuple[tuple[str, str], ...]


@dataclass
class Parts:
    """The live objects a snapshot reads; a case changes some of them."""

    engine: EngineStats = field(default_factory=EngineStats)
    dispatch: DispatchStats = field(default_factory=DispatchStats)
    writer: WriterStats = field(default_factory=WriterStats)
    events: EventStats = field(default_factory=EventStats)
    pods: InformerCounters = field(default_factory=InformerCounters)
    markers: InformerCounters = field(default_factory=InformerCounters)
    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    probes: int = 0
    running: int = 0
    depth: int = 0
    lag: float = 0.0
    backend: str = "api"
    refused: float = 0.0
    server: ServerStats | None = field(default_factory=ServerStats)
    http: HTTPPool | None = None
    holds: CommandHolds | None = None
    namespaces: frozenset[str] = frozenset()
    running_by_namespace: dict[str, int] = field(default_factory=dict)
    waiting_by_namespace: dict[str, int] = field(default_factory=dict)
    writes_waiting: dict[str, int] = field(default_factory=dict)
    events_queued: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            engine=self.engine,
            probes=self.probes,
            running=self.running,
            dispatch=self.dispatch,
            writer=self.writer,
            write_depth=self.depth,
            informers=[
                InformerSnapshot("pods", self.pods, True),
                InformerSnapshot("podprobemarkers", self.markers, False),
            ],
            requests=self.requests,
            events=self.events,
            loop_lag=self.lag,
            exec_backend=self.backend,
            runtime_refused=self.refused,
            server=self.server,
            http=self.http,
            holds=self.holds,
            namespaces=self.namespaces,
            running_by_namespace=self.running_by_namespace,
            waiting_by_namespace=self.waiting_by_namespace,
            writes_waiting=self.writes_waiting,
            events_queued=self.events_queued,
        )


def scrape(parts: Parts) -> dict[tuple[str, Labels], float]:
    text = generate_latest(build_registry(parts.snapshot)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _http_pool(p: Parts) -> None:
    p.http = HTTPPool(
        idle=120,
        limit=128,
        stats=PoolStats(not_kept=17, given_up=3),
        idle_by_namespace={"a": 100, "b": 20},
    )
    p.namespaces = frozenset({"a", "c"})


def _runs(p: Parts) -> None:
    p.engine.runs.update({("exec", "Succeeded"): 5, ("httpGet", "Failed"): 2})


def _transitions(p: Parts) -> None:
    p.engine.transitions.update({"Succeeded": 3, "Failed": 1})


def _invalid_values(p: Parts) -> None:
    p.engine.invalid_values.update({"label": 3, "annotation": 1})
    p.engine.invalid_values_kept = 27


def _gauges(p: Parts) -> None:
    p.probes, p.running, p.depth, p.lag = 12, 4, 7, 0.25


def _dispatch(p: Parts) -> None:
    p.dispatch.runs_started, p.dispatch.late, p.dispatch.lateness_max = 9, 2, 1.5
    p.dispatch.slot_waits, p.dispatch.slot_wait_max = 3, 0.75
    p.dispatch.errors, p.dispatch.cancelled = 1, 2
    p.engine.missed_slots, p.engine.dropped_results = 6, 4


def _writer(p: Parts) -> None:
    w = p.writer
    w.writes, w.flushes, w.unchanged, w.retries, w.rereads = 10, 30, 15, 4, 2
    w.failures.update({"ApiConflict": 2, "ApiPatchTestFailed": 1, "ApiUnreachable": 3})
    w.messages_held, w.narrowed, w.replaced = 5, 1, 1


def _requests(p: Parts) -> None:
    p.requests.update(
        {
            ("patch", "pods/status", 200): 10,
            ("patch", "pods/status", 409): 2,
            ("list", "pods", 0): 3,
            ("get", "pods/exec", 101): 8,
        }
    )


def _informers(p: Parts) -> None:
    p.pods.lists, p.pods.watches, p.pods.restarts, p.pods.gone = 2, 5, 4, 1
    p.pods.events, p.pods.bookmarks = 40, 3
    p.markers.errors.update({"ApiNotFound": 6})


def _events(p: Parts) -> None:
    e = p.events
    e.recorded, e.created, e.patched, e.dropped, e.failed, e.evicted, e.queued_max = (
        20, 12, 6, 1, 1, 0, 9,
    )  # fmt: skip


def _shares(p: Parts) -> None:
    # "gone" has no pod on this node any more, "marker-only" never had one: neither is
    # a label value (their counts are in the totals only).
    p.namespaces = frozenset({"a", "b"})
    p.writes_waiting.update({"a": 40, "gone": 3})
    p.writer.sent_by_namespace.update({"a": 900, "b": 12, "gone": 5})
    p.events_queued.update({"a": 100})
    p.events.sent_by_namespace.update({"a": 300, "b": 7, "marker-only": 2})
    p.events.dropped_by_namespace.update({"a": 9235, "marker-only": 1})


def _durations(p: Parts) -> None:
    histogram = Histogram(bounds=(0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 3.0):
        histogram.observe(seconds)
    p.engine.durations["exec"] = histogram


def _server(p: Parts) -> None:
    assert p.server is not None
    p.server.limit, p.server.open, p.server.accepted, p.server.expired = 64, 3, 1200, 2
    p.server.evicted.update({Eviction.PEER_LIMIT: 1084, Eviction.LIMIT: 50})
    p.server.accept_errors.update({"EMFILE": 7})
    p.server.bad_requests = 5


def s(name: str, value: float, **labels: str) -> tuple[str, Labels, float]:
    return name, tuple(sorted(labels.items())), value


P = "probemarker_"
CASES: list[Any] = [
    pytest.param(
        _runs,
        [
            s(P + "probe_runs_total", 5, kind="exec", result="Succeeded"),
            s(P + "probe_runs_total", 2, kind="httpGet", result="Failed"),
        ],
        id="probe-runs-by-kind-and-result",
    ),
    pytest.param(
        _transitions,
        [
            s(P + "transitions_total", 3, state="Succeeded"),
            s(P + "transitions_total", 1, state="Failed"),
        ],
        id="transitions-by-state",
    ),
    pytest.param(
        _invalid_values,
        [
            s(P + "invalid_result_values_total", 3, kind="label"),
            s(P + "invalid_result_values_total", 1, kind="annotation"),
            s(P + "invalid_result_values_held_total", 27),
        ],
        id="invalid-result-values-by-kind",
    ),
    pytest.param(
        _gauges,
        [
            s(P + "probes_tracked", 12),
            s(P + "probes_running", 4),
            s(P + "write_queue_depth", 7),
            s(P + "event_loop_lag_seconds", 0.25),
        ],
        id="gauges",
    ),
    pytest.param(
        _dispatch,
        [
            s(P + "probe_runs_started_total", 9),
            s(P + "probe_late_starts_total", 2),
            s(P + "probe_lateness_max_seconds", 1.5),
            s(P + "probe_slot_waits_total", 3),
            s(P + "probe_slot_wait_max_seconds", 0.75),
            s(P + "probe_missed_slots_total", 6),
            s(P + "probe_results_dropped_total", 4),
            s(P + "probe_run_errors_total", 1),
            s(P + "probe_runs_cancelled_total", 2),
        ],
        id="late-starts-and-missed-slots",
    ),
    pytest.param(
        _writer,
        [
            s(P + "pod_writes_total", 10, outcome="written"),
            s(P + "pod_writes_total", 2, outcome="conflict"),
            s(P + "pod_writes_total", 1, outcome="patch_test_failed"),
            s(P + "pod_writes_total", 3, outcome="unreachable"),
            s(P + "pod_flushes_total", 30),
            s(P + "pod_flushes_unchanged_total", 15),
            s(P + "pod_write_retries_total", 4),
            s(P + "pod_rereads_total", 2),
            s(P + "pod_messages_held_total", 5),
            s(P + "pod_writes_narrowed_total", 1),
            s(P + "pods_replaced_total", 1),
        ],
        id="writes-by-outcome-and-retries",
    ),
    pytest.param(
        _requests,
        [
            s(P + "api_requests_total", 10, verb="patch", resource="pods/status", code="200"),
            s(P + "api_requests_total", 2, verb="patch", resource="pods/status", code="409"),
            s(P + "api_requests_total", 3, verb="list", resource="pods", code="<error>"),
            s(P + "api_requests_total", 8, verb="get", resource="pods/exec", code="101"),
        ],
        id="api-requests-by-verb-resource-code",
    ),
    pytest.param(
        _informers,
        [
            s(P + "informer_lists_total", 2, informer="pods"),
            s(P + "informer_watches_total", 5, informer="pods"),
            s(P + "informer_watch_restarts_total", 4, informer="pods"),
            s(P + "informer_expired_total", 1, informer="pods"),
            s(P + "informer_watch_events_total", 40, informer="pods"),
            s(P + "informer_bookmarks_total", 3, informer="pods"),
            s(P + "informer_lists_total", 0, informer="podprobemarkers"),
            s(P + "informer_errors_total", 6, informer="podprobemarkers", error="not_found"),
            s(P + "informer_synced", 1, informer="pods"),
            s(P + "informer_synced", 0, informer="podprobemarkers"),
        ],
        id="watch-restarts-and-relists",
    ),
    pytest.param(
        _events,
        [
            s(P + "events_recorded_total", 20),
            s(P + "events_written_total", 12, action="create"),
            s(P + "events_written_total", 6, action="patch"),
            s(P + "events_dropped_total", 1),
            s(P + "events_failed_total", 1),
            s(P + "events_evicted_total", 0),
            s(P + "events_queued_max", 9),
        ],
        id="events-written-and-dropped",
    ),
    pytest.param(
        _shares,
        [
            s(P + "namespace_pod_writes_waiting", 40, pod_namespace="a"),
            s(P + "namespace_pod_writes_waiting", 0, pod_namespace="b"),
            s(P + "namespace_pod_writes_sent_total", 900, pod_namespace="a"),
            s(P + "namespace_pod_writes_sent_total", 12, pod_namespace="b"),
            s(P + "namespace_events_queued", 100, pod_namespace="a"),
            s(P + "namespace_events_queued", 0, pod_namespace="b"),
            s(P + "namespace_events_sent_total", 300, pod_namespace="a"),
            s(P + "namespace_events_sent_total", 7, pod_namespace="b"),
            s(P + "namespace_events_dropped_total", 9235, pod_namespace="a"),
            s(P + "namespace_events_dropped_total", 0, pod_namespace="b"),
        ],
        id="shared-budgets-by-namespace",
    ),
    pytest.param(
        _durations,
        [
            s(P + "probe_duration_seconds_bucket", 2, kind="exec", le="0.1"),
            s(P + "probe_duration_seconds_bucket", 3, kind="exec", le="1.0"),
            s(P + "probe_duration_seconds_bucket", 4, kind="exec", le="+Inf"),
            s(P + "probe_duration_seconds_count", 4, kind="exec"),
            s(P + "probe_duration_seconds_sum", 3.65, kind="exec"),
        ],
        id="probe-duration-histogram",
    ),
    pytest.param(
        _server,
        [
            s(P + "metrics_connections_limit", 64),
            s(P + "metrics_connections_open", 3),
            s(P + "metrics_connections_accepted_total", 1200),
            s(P + "metrics_connections_expired_total", 2),
            s(P + "metrics_connections_evicted_total", 1084, reason="peer_limit"),
            s(P + "metrics_connections_evicted_total", 50, reason="limit"),
            s(P + "accept_errors_total", 7, error="EMFILE"),
            s(P + "metrics_bad_requests_total", 5),
        ],
        id="health-server-connections",
    ),
    pytest.param(
        _http_pool,
        [
            s(P + "http_probe_connections_idle", 120),
            s(P + "http_probe_connections_idle_limit", 128),
            s(P + "http_probe_connections_not_kept_total", 17),
            s(P + "http_probe_connections_given_up_total", 3),
            # only namespaces with pods on the node: "b" has none now
            s(P + "namespace_http_probe_connections_idle", 100, pod_namespace="a"),
            s(P + "namespace_http_probe_connections_idle", 0, pod_namespace="c"),
        ],
        id="http-keepalive-pool",
    ),
]


@pytest.mark.parametrize(("fill", "expected"), CASES)
def test_stats_become_samples(fill: Any, expected: list[tuple[str, Labels, float]]) -> None:
    parts = Parts()
    fill(parts)
    samples = scrape(parts)
    for name, labels, value in expected:
        assert samples.get((name, labels)) == pytest.approx(value), (name, labels)


def test_without_the_server_no_connection_metrics() -> None:
    samples = scrape(Parts(server=None))
    assert not [name for name, _ in samples if "connections" in name or "accept" in name]


def test_every_eviction_reason_shows_from_the_start() -> None:
    samples = scrape(Parts())
    for reason in ("limit", "peer_limit"):
        assert samples[(P + "metrics_connections_evicted_total", (("reason", reason),))] == 0


def test_build_info() -> None:
    samples = scrape(Parts())
    (labels,) = [labels for name, labels in samples if name == P + "build_info"]
    assert dict(labels)["version"] == __version__
    assert dict(labels)["python"].count(".") == 2
    assert dict(labels)["exec_backend"] == "api"
    assert samples[(P + "build_info", labels)] == 1
    assert not [name for name, _ in samples if name == P + "cri_refused_seconds"]


def test_the_cri_backend_shows_how_long_the_runtime_refused() -> None:
    parts = Parts(backend="cri", refused=42.5)
    samples = scrape(parts)
    (labels,) = [labels for name, labels in samples if name == P + "build_info"]
    assert dict(labels)["exec_backend"] == "cri"
    assert samples[(P + "cri_refused_seconds", ())] == 42.5


def test_a_scrape_reads_the_live_counters() -> None:
    """Nothing is copied at registration: a later scrape sees later counts."""
    parts = Parts()
    registry = build_registry(parts.snapshot)
    before = generate_latest(registry).decode()
    parts.engine.runs[("tcpSocket", "Succeeded")] += 1
    after = generate_latest(registry).decode()
    line = 'probemarker_probe_runs_total{kind="tcpSocket",result="Succeeded"} 1.0'
    assert line not in before
    assert line in after


def test_names_follow_prometheus_conventions() -> None:
    parts = Parts()
    fills = (_runs, _writer, _requests, _informers, _events, _durations, _server, _http_pool)
    for fill in (*fills, _shares):
        fill(parts)
    text = generate_latest(build_registry(parts.snapshot)).decode()
    families = list(text_string_to_metric_families(text))
    ours = [f for f in families if not f.name.startswith("process_")]
    assert len(ours) > 30
    for family in ours:
        assert family.name.startswith(P), family.name
        assert family.name == family.name.lower()
        assert "_total" not in family.name  # the parser strips it from counters' names
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith("_total"), sample.name
            assert not sample.name.endswith(("_milliseconds", "_ms")), sample.name


def test_a_namespace_label_only_for_namespaces_with_pods_on_the_node() -> None:
    parts = Parts()
    _shares(parts)
    shown = {dict(labels).get("pod_namespace") for _, labels in scrape(parts)} - {None}
    assert shown == {"a", "b"}
    assert not [name for name, labels in scrape(Parts()) if dict(labels).get("pod_namespace")]


def test_two_registries_in_one_process_do_not_collide() -> None:
    one, two = Parts(), Parts()
    one.probes, two.probes = 1, 2
    assert scrape(one)[(P + "probes_tracked", ())] == 1
    assert scrape(two)[(P + "probes_tracked", ())] == 2


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("ApiConflict", "conflict"),
        ("ApiPatchTestFailed", "patch_test_failed"),
        ("ApiTooManyRequests", "too_many_requests"),
        ("ShortWatch", "short_watch"),
        ("Api", "api"),
    ],
)
def test_error_labels(name: str, label: str) -> None:
    assert error_label(name) == label


def test_the_api_backend_shows_its_holds() -> None:
    holds = CommandHolds()
    holds.stats.held_total, holds.stats.lost, holds.stats.seeded = 5, 1, 2
    holds.stats.limit_hits.update({"time": 3})
    held = HeldCommand(command="cmd", container="c1", started=int(time.time()))
    assert holds.seed(CommandKey("ns", PodUID("pu"), "app", "cmd"), held, container="c1")
    holds.stats.recorded = 4
    samples = scrape(Parts(holds=holds))
    assert samples[("probemarker_exec_streams_held", ())] == 0
    assert samples[("probemarker_exec_commands_held", ())] == 1
    assert samples[("probemarker_exec_streams_held_total", ())] == 5
    assert samples[("probemarker_exec_streams_lost_total", ())] == 1
    assert samples[("probemarker_exec_holds_seeded_total", ())] == 3
    assert samples[("probemarker_exec_holds_recorded_total", ())] == 4
    assert samples[("probemarker_exec_hold_limits_total", (("limit", "time"),))] == 3


def test_holds_by_namespace_only_for_namespaces_with_pods_on_the_node() -> None:
    holds, wall = CommandHolds(), int(time.time())
    for namespace, pod in (("a", "pa"), ("a", "pb"), ("gone", "pc")):
        command = CommandKey(namespace, PodUID(pod), "app", "cmd")
        held = HeldCommand(command="cmd", container="c1", started=wall)
        assert holds.seed(command, held, container="c1")
    samples = scrape(Parts(holds=holds, namespaces=frozenset({"a", "b"})))
    commands = "probemarker_namespace_exec_commands_held"
    assert {labels: v for (name, labels), v in samples.items() if name == commands} == {
        (("pod_namespace", "a"),): 2,
        (("pod_namespace", "b"),): 0,
    }  # "gone" has no pod on the node: no series
    streams = "probemarker_namespace_exec_streams_held"
    assert samples[(streams, (("pod_namespace", "a"),))] == 0


def test_slots_by_namespace_only_for_namespaces_with_pods_on_the_node() -> None:
    parts = Parts(
        namespaces=frozenset({"a", "b"}),
        running_by_namespace={"a": 48, "gone": 1},
        waiting_by_namespace={"a": 7},
    )
    parts.dispatch.slot_waits_by_flow.update({"a": 30, "b": 2, "gone": 5})
    parts.dispatch.slot_wait_max_by_flow.update({"a": 2.5, "b": 0.05})
    samples = scrape(parts)

    def by_namespace(name: str) -> dict[str, float]:
        return {dict(labels)["pod_namespace"]: v for (n, labels), v in samples.items() if n == name}

    prefix = "probemarker_namespace_"
    assert by_namespace(prefix + "probes_running") == {"a": 48, "b": 0}
    assert by_namespace(prefix + "probes_waiting") == {"a": 7, "b": 0}
    assert by_namespace(prefix + "probe_slot_waits_total") == {"a": 30, "b": 2}
    assert by_namespace(prefix + "probe_slot_wait_max_seconds") == {"a": 2.5, "b": 0.05}
