"""bench/vs_stats.py and bench/vs_watch.py: what bench/vs_kruise.py counts and how it
compares runs, on made-up audit events, process lists, counters and watch events (the
bench itself needs a real node and is not run in CI).

The tests marked "breakage N" are the ones that fail when the counting is broken in
the ways issue 41's review found unguarded: (1) the baseline run not subtracted,
(2) every write counted per transition, (3) Kruise's manager not counted as Kruise,
(4) the manager's cgroup not counted in Kruise's CPU and memory, (5) the per-minute
rate halved."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bench.vs_stats import (
    AGENTS,
    BASELINE,
    IDENTITIES,
    Run,
    Spread,
    Window,
    agent_pids,
    all_writes,
    busy_seconds,
    compare,
    count_requests,
    event_writes,
    figures,
    mcores,
    object_writes,
    over_baseline,
    per_minute,
    percentile,
    pod_writes,
    pooled_ms,
    restart_figures,
    results,
    rotation,
    rounds,
    run_figures,
    spread,
    summarize,
    system_requests,
    verdict,
    working_set_mib,
    writes_over_rest,
)
from bench.vs_watch import (
    answer_after,
    condition_expected,
    delays,
    flaps,
    flip_delays,
    label_value,
    replacement_ready,
    schedule,
    sequences,
    uptime_cs,
)
from tests.cluster.kube import AuditLog

MANAGER_USER = "system:serviceaccount:kruise-system:kruise-manager"
DAEMON_USER = "system:serviceaccount:kruise-system:kruise-daemon"
OURS = "system:serviceaccount:probemarker-system:probemarker"


def _event(audit_id: str, user: str, verb: str, resource: str, *, sub: str | None = None,
           namespace: str | None = "ns", stage: str = "ResponseComplete") -> dict[str, Any]:  # fmt: skip
    ref: dict[str, Any] = {"resource": resource}
    if sub:
        ref["subresource"] = sub
    if namespace:
        ref["namespace"] = namespace
    return {"auditID": audit_id, "stage": stage, "verb": verb, "user": {"username": user},
            "objectRef": ref}  # fmt: skip


# -- the audit log -------------------------------------------------------------------------

MIXED = [
    # a watch logs two stages under one auditID: one request
    _event("w1", MANAGER_USER, "watch", "pods", stage="ResponseStarted"),
    _event("w1", MANAGER_USER, "watch", "pods"),
    _event("a", MANAGER_USER, "update", "pods", sub="status"),
    _event("b", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
    _event("c", DAEMON_USER, "patch", "events"),
    _event("d", MANAGER_USER, "update", "leases", namespace="kruise-system"),
    _event("e", OURS, "patch", "pods", sub="status"),  # another system
]


@pytest.mark.parametrize(
    ("events", "users", "namespaces", "writes", "by_verb"),
    [
        pytest.param(MIXED, (MANAGER_USER, DAEMON_USER), (),
                     {"pods/status": 1, "nodepodprobes/status": 1, "events": 1, "leases": 1},
                     {"watch": 1, "update": 3, "patch": 1}, id="each-request-once-by-resource"),
        pytest.param(MIXED, (OURS,), (), {"pods/status": 1}, {"patch": 1}, id="only-its-users"),
        pytest.param(MIXED, (), (), {}, {}, id="the-baseline-has-no-users"),
        # pods/exec over a WebSocket is a GET; over SPDY a POST (verb create): neither stores
        pytest.param([_event("x1", OURS, "get", "pods", sub="exec"),
                      _event("x2", OURS, "create", "pods", sub="exec"),
                      _event("x3", OURS, "create", "pods", sub="portforward")],
                     (OURS,), (), {}, {"get": 1, "create": 2}, id="exec-is-a-request-not-a-write"),
        pytest.param([_event("1", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
                      _event("2", MANAGER_USER, "update", "pods", sub="status", namespace="vs-kruise"),
                      _event("3", MANAGER_USER, "update", "leases", namespace="kruise-system")],
                     (MANAGER_USER, DAEMON_USER), ("vs-kruise",),
                     {"nodepodprobes/status": 1, "pods/status": 1}, {"update": 3},
                     id="the-bench-namespace-and-cluster-scoped-writes"),
    ],
)  # fmt: skip
def test_count_requests(
    events: list[dict[str, Any]],
    users: tuple[str, ...],
    namespaces: tuple[str, ...],
    writes: dict[str, int],
    by_verb: dict[str, int],
) -> None:
    found = count_requests(events, users, namespaces=namespaces)
    assert found.writes == writes
    assert found.by_verb == by_verb


WRITES = {"pods/status": 3, "pods": 1, "nodepodprobes/status": 5, "events": 7, "leases": 11}


@pytest.mark.parametrize(
    ("count", "expected"),
    [(object_writes, 9), (pod_writes, 4), (event_writes, 7), (all_writes, 27)],
)
def test_writes_by_kind(count: Any, expected: int) -> None:
    assert count(WRITES) == expected
    assert count({}) == 0


@pytest.mark.parametrize(
    ("system", "writes"),
    [
        # breakage 3: the manager writes the pods, the daemon the NodePodProbe: both are Kruise
        ("kruise", {"pods/status": 1, "nodepodprobes/status": 1, "events": 1, "leases": 1}),
        ("probemarker", {"pods/status": 1}),
        (BASELINE, {}),
    ],
)
def test_system_requests_counts_every_identity_of_the_system(
    system: str, writes: dict[str, int]
) -> None:
    assert system_requests(MIXED, system).writes == writes


def test_kruise_is_its_manager_and_its_daemon() -> None:  # breakage 3
    assert set(IDENTITIES["kruise"]) == {MANAGER_USER, DAEMON_USER}
    assert IDENTITIES["probemarker"] == (OURS,)
    assert IDENTITIES[BASELINE] == ()


def test_audit_log_events_between_two_marks(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert list(log.events(log.mark())) == []  # no log yet
    log.path.write_text(json.dumps({"auditID": "before"}) + "\n")
    start = log.mark()
    with log.path.open("a") as handle:
        handle.write(json.dumps({"auditID": "in"}) + "\n")
    end = log.mark()
    with log.path.open("a") as handle:
        handle.write(json.dumps({"auditID": "after"}) + "\n")
    assert [e["auditID"] for e in log.events(start, until=end)] == ["in"]
    assert [e["auditID"] for e in log.events(start)] == ["in", "after"]


# -- the node ------------------------------------------------------------------------------

PROBEMARKER_ARGV = b"/opt/probemarker/bin/python3\0/opt/probemarker/bin/probemarker\0run\0"
NODE = {
    1: b"/sbin/init\0",
    40: b"/manager\0--enable-leader-election\0-v=4\0",
    41: b"/kruise-daemon\0--socket-file=containerd.sock\0",
    50: PROBEMARKER_ARGV + b"--exec-backend\0cri\0",
    60: b"kube-apiserver\0",
    # another program whose name only starts like an agent's: not one of them
    70: b"/manager-of-something-else\0",
    71: b"/kruise-daemonset-helper\0",
    72: PROBEMARKER_ARGV.replace(b"run\0", b"run-once\0"),
}


@pytest.mark.parametrize(
    ("system", "pids"),
    [
        ("kruise", [40, 41]),  # breakage 4: the manager's cgroup is Kruise's too
        ("probemarker", [50]),
        (BASELINE, []),
    ],
)
def test_agent_pids_one_process_per_agent(system: str, pids: list[int]) -> None:
    assert agent_pids(system, NODE) == pids


@pytest.mark.parametrize(
    ("system", "node", "message"),
    [
        ("kruise", {41: NODE[41]}, "kruise: 0 processes /manager on the node, expected 1"),
        ("kruise", {**NODE, 42: NODE[41]}, "kruise: 2 processes /kruise-daemon on the node"),
        ("probemarker", {1: NODE[1]}, "probemarker: 0 processes /opt/probemarker/bin/python3 "
                                      "/opt/probemarker/bin/probemarker run"),
    ],
)  # fmt: skip
def test_agent_pids_refuses_a_missing_or_doubled_agent(
    system: str, node: dict[int, bytes], message: str
) -> None:
    with pytest.raises(SystemExit, match=message):
        agent_pids(system, node)


def test_agents_are_every_process_of_the_system() -> None:  # breakage 4
    assert AGENTS["kruise"] == (("/manager",), ("/kruise-daemon",))
    assert AGENTS[BASELINE] == ()


@pytest.mark.parametrize(
    ("proc_stat", "hz", "seconds"),
    [
        # user nice system idle iowait irq softirq steal guest guest_nice
        ("cpu  100 20 30 5000 70 4 6 10 0 0\ncpu0 50 10 15 2500 35 2 3 5 0 0\n", 100, 1.7),
        ("cpu  100 0 100 900 0 0 0 0 0 0\n", 250, 0.8),
        ("cpu  100 0 100 900\n", 100, 2.0),  # an old kernel: fewer fields
    ],
)
def test_busy_seconds_of_the_whole_node(proc_stat: str, hz: int, seconds: float) -> None:
    assert busy_seconds(proc_stat, hz) == pytest.approx(seconds)


def test_busy_seconds_wants_the_cpu_line() -> None:
    with pytest.raises(ValueError, match="not the `cpu` line"):
        busy_seconds("intr 1 2 3\n", 100)


@pytest.mark.parametrize(
    ("usage", "memory_stat", "mib"),
    [
        (3 * 2**20, "cache 100\ntotal_inactive_file 1048576\ntotal_active_file 5\n", 2.0),
        (2**20, "total_inactive_file 4194304\n", 0.0),
        (2**20, "", 1.0),
    ],
)
def test_the_cgroup_working_set(usage: int, memory_stat: str, mib: float) -> None:
    assert working_set_mib(usage, memory_stat) == pytest.approx(mib)


# -- the flips and the pod watch ------------------------------------------------------------


def test_schedule_is_seeded_spaced_and_the_same_for_every_system() -> None:
    first, again = schedule(20, 32), schedule(20, 32)
    assert first == again
    assert schedule(20, 33) != first
    for times in first[:50]:
        assert len(times) == 20
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(400 <= gap <= 800 for gap in gaps)
        assert 400 <= times[0] <= 1100
    # centiseconds: phases other than whole seconds occur
    assert {t % 100 for times in first for t in times} == set(range(100))


@pytest.mark.parametrize(
    ("text", "cs"), [("350735.47 1386913.33\n", 35073547), ("12.05 3.00", 1205)]
)
def test_uptime_in_centiseconds_as_the_pods_script_reads_it(text: str, cs: int) -> None:
    assert uptime_cs(text) == cs


def _pod(name: str, label: str | None, status: str | None = None) -> dict[str, Any]:
    labels = {} if label is None else {"vs.bench/answer": label}
    conditions = [] if status is None else [{"type": "vs.bench/answer", "status": status}]
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}


def test_delays_take_the_first_change_to_the_new_value_after_each_flip() -> None:
    seen = [
        (9.0, _pod("a", "yes")),
        (10.4, _pod("b", "no")),  # another pod
        (10.6, _pod("a", "no")),  # flip 0 at 10.0: 0.6 s
        (20.0, _pod("a", "no")),  # a relist: the same value again
        (30.5, _pod("a", "no")),  # another relist, after flip 2 at 30: no change
        (31.2, _pod("a", "yes")),  # flip 3 at 31: 0.2 s
        (40.5, _pod("a", "no")),  # flip 4 at 40: 0.5 s
    ]
    found, missed = delays(seen, "a", [10.0, 15.0, 30.0, 31.0, 40.0], label_value, answer_after)
    # flip 1 (to "yes" at 15) was never seen before flip 2: missed, not matched late; flip
    # 2 (to "no" at 30) found the pod showing "no" already: no change to time, missed too
    assert found == pytest.approx([0.6, 0.2, 0.5])
    assert missed == 2
    assert [answer_after(i) for i in range(3)] == ["no", "yes", "no"]
    assert [condition_expected(i) for i in range(2)] == ["False", "True"]


@pytest.mark.parametrize(
    ("seen_at", "found", "missed"),
    [(19.9, [9.9], 0), (20.0, [], 1), (35.0, [], 1)],
)
def test_a_flip_not_seen_within_10_s_is_missed(
    seen_at: float, found: list[float], missed: int
) -> None:
    seen = [(seen_at, _pod("a", "no"))]
    got, lost = delays(seen, "a", [10.0], label_value, answer_after)
    assert got == pytest.approx(found)
    assert lost == missed


def test_a_flip_after_a_missed_one_is_not_timed_by_the_next_relist() -> None:
    # the system missed flip 0 (to "no"): the pod still says "yes" when flip 1 brings
    # "yes" back, and the watch's relist at 18 s shows it: not a 3 s delay, a miss
    seen = [(9.0, _pod("a", "yes")), (13.0, _pod("a", "yes")), (18.0, _pod("a", "yes"))]
    assert delays(seen, "a", [10.0, 15.0], label_value, answer_after) == ([], 2)


def test_flip_delays_over_every_pod_label_and_condition_apart() -> None:
    seen = [
        (10.5, _pod("a", "no", "True")),  # the label first, the condition not yet
        (10.7, _pod("a", "no", "False")),
        (12.2, _pod("b", "no", "False")),
        (14.0, _pod("b", "yes", "True")),  # flip 1 of b at 13.0
    ]
    out = flip_delays(seen, {"a": [10.0, 16.0], "b": [12.0, 13.0]})
    assert out["label_delays"] == pytest.approx([0.5, 0.2, 1.0])
    assert out["condition_delays"] == pytest.approx([0.7, 0.2, 1.0])
    assert (out["missed_labels"], out["missed_conditions"]) == (1, 1)  # a's flip at 16


def test_sequences_and_flaps_count_changes_after_a_moment() -> None:
    seen = [
        (1.0, _pod("a", "yes")),
        (2.0, _pod("a", "yes")),
        (3.0, _pod("a", None)),  # the label gone for a moment
        (4.0, _pod("a", "yes")),
        (5.0, _pod("b", "no")),
    ]
    assert sequences(seen, 1.5, label_value) == {"a": ["yes", None, "yes"], "b": ["no"]}
    assert flaps(seen, 1.5, label_value) == 2
    assert flaps(seen, 3.5, label_value) == 0


# -- statistics ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 90, 5.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.0),
        ([10.0, 1.0, 2.0], 50, 2.0),
        ([1.0, 2.0], 100, 2.0),
        ([1.0, 2.0], 1, 1.0),
        ([float(i) for i in range(1, 201)], 99, 198.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_pooled_ms_over_every_runs_flips() -> None:
    assert pooled_ms([]) is None
    pooled = pooled_ms([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert pooled == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0, "flips": 100}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5.0], Spread(5.0, 5.0, 5.0, 1)),
        ([3.0, 1.0, 2.0], Spread(2.0, 1.0, 3.0, 3)),
        ([4.0, 1.0, 2.0, 10.0], Spread(3.0, 1.0, 10.0, 4)),
    ],
)
def test_spread_is_the_median_and_the_range(values: list[float], expected: Spread) -> None:
    assert spread(values) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((1, 2), (3, 4), "a"),
        ((3, 4), (1, 2), "b"),
        ((1, 3), (2, 4), "tie"),  # overlapping ranges
        ((1, 4), (2, 3), "tie"),  # one inside the other
        ((1, 2), (2, 3), "tie"),  # touching
        ((2, 2), (2, 2), "tie"),
    ],
)
def test_compare_calls_overlapping_ranges_a_tie(
    a: tuple[float, float], b: tuple[float, float], expected: str
) -> None:
    assert compare(Spread(sum(a) / 2, *a, 3), Spread(sum(b) / 2, *b, 3)) == expected


def _s(low: float, high: float) -> Spread:
    return Spread((low + high) / 2, low, high, 3)


@pytest.mark.parametrize(
    ("spreads", "runs", "expected"),
    [
        ({"kruise": _s(1, 2), "api": _s(3, 4)}, 3, "kruise"),
        ({"kruise": _s(3, 4), "api": _s(1, 2), "cri": _s(1.5, 2.5)}, 3, "tie: api, cri"),
        ({"kruise": _s(1, 3), "api": _s(2, 4)}, 5, "tie: kruise, api"),
        ({"kruise": _s(1, 2), "api": _s(3, 4)}, 2, "-"),  # fewer than 3 runs: no ranking
        ({"api": _s(1, 2)}, 3, "-"),  # nothing to rank against
        ({}, 3, "-"),
        # 3 runs asked, fewer behind a spread (the JSON after round 1, a figure some runs
        # lack): no ranking either
        ({"kruise": Spread(1.5, 1, 2, 1), "api": Spread(3.5, 3, 4, 1)}, 3, "-"),
        ({"kruise": Spread(1.5, 1, 2, 3), "api": Spread(3.5, 3, 4, 2)}, 3, "-"),
    ],
)
def test_verdict_names_the_lowest_only_clear_of_every_other(
    spreads: dict[str, Spread], runs: int, expected: str
) -> None:
    assert verdict(spreads, runs) == expected


def test_summarize_numbers_mappings_and_the_rest() -> None:
    runs = [
        {"a": 1, "b": {"x": 2}, "c": "3/3", "d": None, "e": {"pod": ["yes", None]}},
        {"a": 3, "b": {"x": 4, "y": 1}, "c": "2/3", "d": None, "e": {"pod": ["yes", None]}},
        {"a": 2, "b": {"x": 6}, "c": "3/3", "d": None},
    ]
    assert summarize(runs) == {
        "a": {"median": 2, "min": 1, "max": 3, "runs": 3},
        "b": {"x": {"median": 4, "min": 2, "max": 6, "runs": 3},
              "y": {"median": 0, "min": 0, "max": 1, "runs": 3}},  # absent: 0 in that run
        "c": ["3/3", "2/3"],
        "d": None,
        "e": [{"pod": ["yes", None]}],
    }  # fmt: skip


# -- one run's figures over the baseline ------------------------------------------------------


def _window(seconds: float = 60.0, *, apiserver: float = 0.0, node: float = 0.0,
            system: float | None = None, writes: dict[str, int] | None = None,
            by_verb: dict[str, int] | None = None) -> Window:  # fmt: skip
    return Window(seconds, apiserver, node, system, writes or {}, by_verb or {})


def _run(column: str, round_: int = 0, *, flips: Window | None, quiet: Window | None, transitions: int = 400,
         delays: tuple[float, ...] = (0.5,), missed: int | None = 0, **more: Any) -> Run:  # fmt: skip
    return Run(column, round_, 0, transitions, flips, quiet, label_delays=delays,
               condition_delays=delays, missed_labels=missed, missed_conditions=missed,
               **more)  # fmt: skip


def _baseline(round_: int = 0, *, apiserver: float = 1.2, node: float = 6.0) -> Run:
    return _run(BASELINE, round_, flips=_window(60, apiserver=apiserver, node=node),
                quiet=_window(30, apiserver=apiserver / 2, node=node / 2), delays=(),
                missed=None)  # fmt: skip


KRUISE_FLIPS = _window(
    60, apiserver=3.0, node=12.0, system=3.0,
    writes={"pods/status": 404, "nodepodprobes/status": 480, "events": 40, "leases": 12},
    by_verb={"update": 900, "get": 30},
)  # fmt: skip
KRUISE_QUIET = _window(
    30, apiserver=0.9, node=4.5, system=1.5, writes={"nodepodprobes/status": 240, "events": 2}
)  # fmt: skip


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # breakage 1: over the same round's baseline run, not as read
        ("apiserver_cpu_ms_per_transition", 4.5),  # (3.0 - 1.2) s / 400
        ("apiserver_cpu_mcores_over_baseline", 30.0),  # 1.8 s over 60 s
        ("apiserver_cpu_mcores_steady_over_baseline", 10.0),  # (0.9 - 0.6) s over 30 s
        ("node_cpu_ms_per_transition", 15.0),  # (12 - 6) s / 400
        ("node_cpu_mcores_over_baseline", 100.0),
        ("node_cpu_mcores_steady_over_baseline", 50.0),  # (4.5 - 3.0) s over 30 s
        ("apiserver_cpu_mcores", 50.0),  # as read
        ("node_cpu_mcores_steady", 150.0),
        # breakage 2: pods and NodePodProbes only, not Events nor leases
        ("writes_per_transition", 2.21),  # (404 + 480) / 400
        ("pod_writes_per_transition", 1.01),
        ("events_per_transition", 0.1),
        # beyond its rate at rest: 480 NodePodProbe writes a minute at rest
        ("writes_per_transition_over_rest", 1.01),  # (884 - 240 / 30 * 60) / 400
        # breakage 5: a minute is 60 s
        ("steady_writes_per_min", 484.0),  # (240 + 2) over 30 s
        ("steady_writes_per_min_by_resource", {"nodepodprobes/status": 480.0, "events": 4.0}),
        ("requests_per_min_by_verb", {"get": 30.0, "update": 900.0}),
        ("cpu_mcores", 50.0),
        ("cpu_mcores_steady", 50.0),
        ("latency_median_ms", 500.0),
        ("missed_labels", 0),
    ],
)
def test_figures_of_one_run(key: str, expected: Any) -> None:
    run = _run("kruise v1.5.4", flips=KRUISE_FLIPS, quiet=KRUISE_QUIET)
    assert figures(run, _baseline())[key] == pytest.approx(expected)


def test_the_baselines_own_figures_are_its_rates_as_read() -> None:
    base = _baseline()
    out = figures(base, base)
    assert out["apiserver_cpu_mcores"] == 20.0
    assert out["node_cpu_mcores_steady"] == 100.0
    assert "apiserver_cpu_ms_per_transition" not in out  # nothing to subtract from itself
    assert "writes_per_transition" not in out  # no identity: no writes of its own
    assert "cpu_mcores" not in out  # no processes of its own


@pytest.mark.parametrize(
    ("used", "seconds", "base_used", "base_seconds", "expected"),
    [
        (3.0, 60, 1.2, 60, 1.8),
        (3.0, 60, 1.2, 30, 0.6),  # the baseline's rate over this window's length
        (1.0, 60, 1.2, 60, -0.2),  # noise can make it negative: kept, not clipped
    ],
)
def test_over_baseline(
    used: float, seconds: float, base_used: float, base_seconds: float, expected: float
) -> None:  # breakage 1
    assert over_baseline(used, seconds, base_used, base_seconds) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("count", "seconds", "expected"), [(240, 30, 480.0), (10, 60, 10.0), (1, 0.5, 120.0)]
)
def test_per_minute(count: float, seconds: float, expected: float) -> None:  # breakage 5
    assert per_minute(count, seconds) == pytest.approx(expected)


@pytest.mark.parametrize(("cpu", "seconds", "expected"), [(1.0, 1.0, 1000.0), (0.5, 10.0, 50.0)])
def test_mcores(cpu: float, seconds: float, expected: float) -> None:
    assert mcores(cpu, seconds) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("flips", "quiet", "expected"),
    [
        (KRUISE_FLIPS, KRUISE_QUIET, 404.0),
        (_window(60, writes={"pods/status": 400}), _window(30), 400.0),
        (_window(60, writes={"pods/status": 400, "events": 400}), _window(30, writes={"events": 9}), 400.0),
    ],
)  # fmt: skip
def test_writes_over_rest(flips: Window, quiet: Window, expected: float) -> None:
    assert writes_over_rest(flips, quiet) == pytest.approx(expected)


def test_each_run_is_taken_over_its_own_rounds_baseline() -> None:  # breakage 1
    runs = [
        _baseline(0, apiserver=1.2),
        _run("api", 0, flips=_window(60, apiserver=2.0, system=1.0), quiet=_window(30, system=0.3)),
        _run("api", 1, flips=_window(60, apiserver=2.6, system=1.0), quiet=_window(30, system=0.3)),
        _baseline(1, apiserver=1.8),
    ]
    each = run_figures(runs)
    assert [f.get("apiserver_cpu_ms_per_transition") for f in each] == [None, 2.0, 2.0, None]
    summary = results(runs, [BASELINE, "api"])
    assert list(summary) == [BASELINE, "api"]
    assert summary["api"]["apiserver_cpu_ms_per_transition"] == {
        "median": 2.0, "min": 2.0, "max": 2.0, "runs": 2,
    }  # fmt: skip
    assert summary[BASELINE]["apiserver_cpu_mcores"] == {
        "median": 25.0, "min": 20.0, "max": 30.0, "runs": 2,
    }  # fmt: skip
    assert summary[BASELINE]["latency_ms"] is None


def test_results_pool_the_delays_of_every_run() -> None:
    runs = [
        _baseline(0),
        _run("cri", 0, flips=KRUISE_FLIPS, quiet=KRUISE_QUIET, delays=(0.1, 0.2)),
        _run("cri", 1, flips=KRUISE_FLIPS, quiet=KRUISE_QUIET, delays=(0.3, 0.4, 1.0)),
        _baseline(1),
    ]
    cri = results(runs, [BASELINE, "cri"])["cri"]
    assert cri["latency_ms"] == {"p50": 300.0, "p90": 1000.0, "p99": 1000.0, "max": 1000.0,
                                 "flips": 5}  # fmt: skip
    assert cri["latency_median_ms"] == {"median": 275.0, "min": 150.0, "max": 400.0, "runs": 2}
    assert cri["missed_labels"] == {"median": 0, "min": 0, "max": 0, "runs": 2}


# -- the order ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "round_", "order"),
    [
        (4, 0, [0, 1, 2, 3]),
        (4, 1, [1, 2, 3, 0]),
        (4, 3, [3, 0, 1, 2]),
        (4, 4, [0, 1, 2, 3]),  # round 4 starts where round 0 did
        (3, 5, [2, 0, 1]),
        (1, 7, [0]),
        (0, 2, []),
    ],
)
def test_rotation_starts_round_r_at_column_r_mod_k(
    count: int, round_: int, order: list[int]
) -> None:
    assert rotation(count, round_) == order


def test_rounds_measure_every_column_once_a_round_and_none_always_first() -> None:
    columns = [BASELINE, "kruise v1.5.4", "probemarker-api", "probemarker-cri"]
    order = rounds(columns, 4)
    assert order[:2] == [
        [BASELINE, "kruise v1.5.4", "probemarker-api", "probemarker-cri"],
        ["kruise v1.5.4", "probemarker-api", "probemarker-cri", BASELINE],
    ]
    assert all(sorted(each) == sorted(columns) for each in order)
    assert {each[0] for each in order} == set(columns)
    assert {each[-1] for each in order} == set(columns)
    assert rounds(columns, 1) == [columns]


# -- the other cases' windows: at rest per hour (b), churn (c) ----------------------------------


def test_case_b_rates_at_rest_per_hour_over_the_baseline() -> None:
    quiet = _window(600, apiserver=60.0, node=300.0, system=12.0,
                    writes={"nodepodprobes/status": 6000, "events": 10})  # fmt: skip
    run = _run("kruise v1.5.4", flips=None, quiet=quiet, missed=None, delays=())
    base = _run(BASELINE, flips=None, quiet=_window(600, apiserver=30.0, node=240.0),
                missed=None, delays=())  # fmt: skip
    out = figures(run, base, hourly=True)
    assert out["steady_writes_per_hour"] == 36060.0  # breakage 5: an hour is 3600 s
    assert out["steady_writes_per_hour_by_resource"] == {
        "nodepodprobes/status": 36000.0, "events": 60.0,
    }  # fmt: skip
    assert "steady_writes_per_min" not in out
    assert out["apiserver_cpu_mcores_steady_over_baseline"] == 50.0  # breakage 1
    assert out["node_cpu_mcores_steady_over_baseline"] == 100.0
    assert out["cpu_mcores_steady"] == 20.0
    assert "writes_per_transition" not in out  # no flips in case b
    assert "steady_writes_per_hour" not in figures(base, base, hourly=True)


def test_case_c_per_pod_lifecycle_over_the_baseline() -> None:
    churn = _window(360, apiserver=36.0, node=90.0, system=7.2,
                    writes={"pods/status": 200, "nodepodprobes/status": 300, "events": 2500})  # fmt: skip
    run = Run("kruise v1.5.4", 0, 0, 0, None, None, churn=churn, lifecycles=100)
    base = Run(BASELINE, 0, 1, 0, None, None, churn=_window(360, apiserver=18.0, node=54.0),
               lifecycles=100)  # fmt: skip
    out = figures(run, base)
    assert out["writes_per_lifecycle"] == 5.0  # breakage 2: pods and NodePodProbes only
    assert out["pod_writes_per_lifecycle"] == 2.0
    assert out["events_per_lifecycle"] == 25.0
    assert out["apiserver_cpu_ms_per_lifecycle"] == 180.0  # breakage 1: (36 - 18) s / 100
    assert out["node_cpu_ms_per_lifecycle"] == 360.0
    assert out["cpu_mcores_churn"] == 20.0
    assert out["lifecycles"] == 100
    own = figures(base, base)
    assert "writes_per_lifecycle" not in own
    assert "apiserver_cpu_ms_per_lifecycle" not in own
    assert own["apiserver_cpu_mcores_churn"] == 50.0


def _agent(uid: str, ready: str | None, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"daemon-{uid}", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": meta, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("pods", "ready"),
    [
        ([_agent("old", "True")], False),  # the DaemonSet has not seen it go yet
        ([_agent("old", "True", deleting=True), _agent("new", None)], False),
        ([_agent("new", "False")], False),
        ([_agent("new", "True", deleting=True)], False),
        ([_agent("old", "True", deleting=True), _agent("new", "True")], True),
        ([], False),
    ],
)
def test_a_restart_window_starts_when_the_replacement_is_ready(
    pods: list[dict[str, Any]], ready: bool
) -> None:
    assert replacement_ready(pods, "old") is ready


def test_restart_writes_are_a_transitions_kinds_with_the_pods_apart() -> None:
    # Kruise's restarted daemon writes its NodePodProbe; the manager then the pods
    writes = {"nodepodprobes/status": 5, "pods/status": 2, "events": 3}
    assert restart_figures(writes) == {
        "restart_writes": 7,
        "restart_pod_writes": 2,
        "restart_writes_by_resource": writes,
    }
