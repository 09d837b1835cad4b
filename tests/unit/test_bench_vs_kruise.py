"""bench/vs_kruise.py's and bench/kruise.py's pure parts: the audit log's counts, the
statistics, the delays and flaps read from a pod watch, and the changes made to
Kruise's config/default (the bench itself needs a real node and is not run in CI)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from bench.kruise import CHANGES, DAEMON, MANAGER, customize
from bench.vs_kruise import (
    answer_after,
    condition_expected,
    count_requests,
    delays,
    flaps,
    label_value,
    percentile,
    schedule,
    sequences,
    summary_ms,
    table,
    uptime_cs,
    working_set_mib,
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


def test_count_requests_counts_each_request_once_and_writes_by_resource() -> None:
    events = [
        # a watch logs two stages under one auditID: one request
        _event("w1", MANAGER_USER, "watch", "pods", stage="ResponseStarted"),
        _event("w1", MANAGER_USER, "watch", "pods"),
        _event("a", MANAGER_USER, "update", "pods", sub="status"),
        _event("b", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
        _event("c", DAEMON_USER, "patch", "events"),
        _event("d", MANAGER_USER, "update", "leases", namespace="kruise-system"),
        _event("e", OURS, "patch", "pods", sub="status"),  # another system: not counted
    ]
    found = count_requests(events, (MANAGER_USER, DAEMON_USER))
    assert found.by_verb == {"watch": 1, "update": 3, "patch": 1}
    assert found.writes == {"pods/status": 1, "nodepodprobes/status": 1, "events": 1, "leases": 1}
    assert found.object_writes() == 2  # pods and NodePodProbes
    assert found.pod_writes() == 1
    assert found.event_writes() == 1
    assert found.all_writes() == 4


def test_count_requests_exec_is_a_request_not_a_write() -> None:
    # pods/exec over a WebSocket is a GET; over SPDY a POST (verb create): neither stores
    events = [
        _event("x1", OURS, "get", "pods", sub="exec"),
        _event("x2", OURS, "create", "pods", sub="exec"),
        _event("x3", OURS, "create", "pods", sub="portforward"),
    ]
    found = count_requests(events, (OURS,))
    assert found.by_verb == {"get": 1, "create": 2}
    assert found.writes == {}


def test_count_requests_keeps_the_bench_namespace_and_cluster_scoped_writes() -> None:
    events = [
        _event("1", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
        _event("2", MANAGER_USER, "update", "pods", sub="status", namespace="vs-kruise"),
        _event("3", MANAGER_USER, "update", "leases", namespace="kruise-system"),
    ]
    found = count_requests(events, (MANAGER_USER, DAEMON_USER), namespaces=["vs-kruise"])
    assert found.writes == {"nodepodprobes/status": 1, "pods/status": 1}
    assert found.by_verb == {"update": 3}  # every request counts by verb


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


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 90, 5.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.0),
        ([10.0, 1.0, 2.0], 50, 2.0),
        ([1.0, 2.0], 100, 2.0),
        ([1.0, 2.0], 1, 1.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_summary_ms() -> None:
    assert summary_ms([]) is None
    assert summary_ms([0.1, 0.3, 0.2]) == {"median": 200.0, "p90": 300.0, "max": 300.0}


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


def test_uptime_in_centiseconds_as_the_pods_script_reads_it() -> None:
    assert uptime_cs("350735.47 1386913.33\n") == 35073547
    assert uptime_cs("12.05 3.00") == 1205


def _pod(name: str, label: str | None) -> dict[str, Any]:
    labels = {} if label is None else {"vs.bench/answer": label}
    return {"metadata": {"name": name, "labels": labels}, "status": {}}


def test_delays_take_the_first_new_value_after_each_flip_and_before_the_next() -> None:
    seen = [
        (9.0, _pod("a", "yes")),
        (10.4, _pod("b", "no")),  # another pod
        (10.6, _pod("a", "no")),  # flip 0 at 10.0: 0.6 s
        (20.0, _pod("a", "no")),  # a relist: the same value again
        (30.9, _pod("a", "no")),  # flip 2 at 30: the value it brings
    ]
    found, missed = delays(seen, "a", [10.0, 15.0, 30.0], label_value, answer_after)
    # flip 1 (to "yes" at 15) was never seen before flip 2: missed, not matched late
    assert found == pytest.approx([0.6, 0.9])
    assert missed == 1
    assert [answer_after(i) for i in range(3)] == ["no", "yes", "no"]
    assert [condition_expected(i) for i in range(2)] == ["False", "True"]


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


def test_the_cgroup_working_set() -> None:
    memory_stat = "cache 100\ntotal_inactive_file 1048576\ntotal_active_file 5\n"
    assert working_set_mib(3 * 2**20, memory_stat) == pytest.approx(2.0)
    assert working_set_mib(2**20, "total_inactive_file 4194304\n") == 0.0


def _workload(kind: str, name: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [container], **spec}}}}  # fmt: skip


def _config_default() -> list[dict[str, Any]]:
    env = [{"name": "KUBE_CACHE_MUTATION_DETECTOR", "value": "true"}]
    limits = {"limits": {"cpu": "100m", "memory": "200Mi"}}
    return [
        _workload("Deployment", MANAGER, {"name": "manager", "image": "controller:latest",
                  "args": ["--v=5", "--feature-gates=AllAlpha=true"], "env": env,
                  "resources": limits}),
        _workload("DaemonSet", DAEMON, {"name": "daemon", "image": "controller:latest",
                  "args": ["-v=5"], "env": env, "resources": limits},
                  volumes=[{"name": "runtime-socket", "hostPath": {"path": "/var/run"}}]),
        {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": [
            {"name": "mpod.kb.io", "failurePolicy": "Fail", "rules": [{"resources": ["pods"]}]},
            {"name": "mcloneset.kb.io", "failurePolicy": "Fail",
             "rules": [{"resources": ["clonesets"]}]},
        ]},
        {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [
            {"name": "vpodeviction.kb.io", "failurePolicy": "Fail",
             "rules": [{"resources": ["pods/eviction"]}]},
        ]},
    ]  # fmt: skip


def test_customize_applies_the_helm_charts_production_values_and_the_nodes_socket() -> None:
    docs = _config_default()
    out = customize(docs, "localhost/kruise:v1.5.4", Path("/run/pmcri.x/containerd.sock"))
    assert docs == _config_default()  # the input is kept
    manager = out[0]["spec"]["template"]["spec"]["containers"][0]
    daemon = out[1]["spec"]["template"]["spec"]["containers"][0]
    for container in (manager, daemon):
        assert container["image"] == "localhost/kruise:v1.5.4"
        assert container["imagePullPolicy"] == "Never"
        assert container["env"] == [{"name": "KUBE_CACHE_MUTATION_DETECTOR", "value": "false"}]
        assert container["resources"] == {"limits": {"memory": "200Mi"}}
        assert "--feature-gates=ImagePullJobGate=true" in container["args"]
        assert not any("AllAlpha" in arg for arg in container["args"])
    assert "--enable-leader-election" in manager["args"]
    assert "--socket-file=containerd.sock" in daemon["args"]
    assert out[1]["spec"]["template"]["spec"]["volumes"] == [
        {"name": "runtime-socket", "hostPath": {"path": "/run/pmcri.x", "type": "Directory"}}
    ]
    policies = {hook["name"]: hook["failurePolicy"] for doc in out[2:] for hook in doc["webhooks"]}
    assert policies == {"mpod.kb.io": "Ignore", "mcloneset.kb.io": "Fail",
                        "vpodeviction.kb.io": "Ignore"}  # fmt: skip
    assert len(CHANGES) == 6


def test_customize_names_what_config_default_lacks() -> None:
    with pytest.raises(SystemExit, match="renders no DaemonSet kruise-daemon"):
        customize(_config_default()[:1], "i", Path("/run/containerd.sock"))


def test_table_prints_every_system_given() -> None:
    row = {"latency_ms": {"median": 600.0, "p90": 900.4, "max": 1000.0}, "restart_flaps": 0,
           "left_after_delete": {"labels": 0, "conditions": 0, "pods": 20}}  # fmt: skip
    text = table({"kruise": row, "probemarker-api": row})
    assert text.splitlines()[0] == "| | kruise | probemarker-api |"
    assert "| 600 / 900 / 1000 | 600 / 900 / 1000 |" in text
    assert "0 labels, 0 conditions of 20 pods" in text
