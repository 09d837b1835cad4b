"""The daemon through what happens to it in a cluster: a DaemonSet rollout, its pod
deleted, the API server restarted, containerd restarted under the cri backend.

What must hold, each time: the pods it marks keep their labels and conditions (no
flip), it writes nothing that is already on the pods (counted in the API server's audit
log: every write by the daemon's ServiceAccount), and it works again afterwards (a
change in a container is followed).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster.install import Addon, Cluster
from tests.cluster.kube import (
    DAEMON_NAMESPACE,
    Watch,
    busybox_pod,
    exec_in,
    marker,
    pod_ready,
    wait_for,
    wait_label,
)
from tests.podfields import condition, labels_of

pytestmark = pytest.mark.timeout(600)

PODS = ("t-0", "t-1", "t-2")
KIND = "probemarker.test/steady"


def _targets(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    script = "touch /tmp/ok && exec sleep 2147483647"
    probe = {"exec": {"command": ["cat", "/tmp/ok"]}}
    kubectl.apply(
        *(busybox_pod(name, namespace, script=script, labels={"app": "t"}) for name in PODS),
        marker("steady", namespace, app="t", probe=probe, condition_type=KIND),
    )
    for name in PODS:
        pod_ready(kubectl, namespace, name)
        wait_for(
            lambda name=name: kubectl.get("pod", name, namespace),
            lambda pod: (
                labels_of(pod).get("probe") == "ok"
                and (condition(pod, KIND) or {}).get("status") == "True"
            ),
            timeout=30,
            what=f"pod {name} marked ok",
        )


def _watch(cluster: Cluster, namespace: str) -> Watch:
    """Every state the namespace's pods show, from a real watch (none missed)."""
    return Watch(cluster.kubectl, f"/api/v1/namespaces/{namespace}/pods")


def _flips(watch: Watch) -> set[tuple[str, str | None, str | None]]:
    """(pod, label, condition) seen other than (ok, True)."""
    seen = {
        (
            pod["metadata"]["name"],
            labels_of(pod).get("probe"),
            (condition(pod, KIND) or {}).get("status"),
        )
        for _, pod in watch.seen
    }
    assert {state[0] for state in seen} >= set(PODS), f"the watch saw {sorted(seen)}"
    return {state for state in seen if state[1:] != ("ok", "True")}


@pytest.fixture
def steady(cluster: Cluster, addon: Addon, namespace: str) -> str:
    addon.use("api")
    _targets(cluster, namespace)
    return namespace


def _works(cluster: Cluster, namespace: str, timeout: float = 60) -> None:
    exec_in(cluster.kubectl, namespace, "t-0", "rm", "/tmp/ok")
    wait_label(cluster.kubectl, namespace, "t-0", "probe", "bad", timeout=timeout)
    exec_in(cluster.kubectl, namespace, "t-0", "touch", "/tmp/ok")
    wait_label(cluster.kubectl, namespace, "t-0", "probe", "ok", timeout=timeout)


def _settle(seconds: float) -> None:
    """Probes keep running with period 1 s: a steady state is a span of time."""
    time.sleep(seconds)


def test_a_rollout_writes_nothing_and_flips_nothing(
    cluster: Cluster, addon: Addon, steady: str
) -> None:
    kubectl = cluster.kubectl
    mark = cluster.audit.mark()
    started = time.monotonic()
    with _watch(cluster, steady) as watch:
        kubectl.run("-n", DAEMON_NAMESPACE, "set", "env", "daemonset/probemarker",
                    f"PROBEMARKER_CLEANUP_DELAY_SECONDS={30 + int(started) % 7}")  # fmt: skip
        addon.rolled_out()
        _settle(3)
    took = time.monotonic() - started
    assert _flips(watch) == set(), f"flips during the rollout ({took:.1f} s)"
    writes = cluster.audit.daemon_writes(mark, namespace=steady)
    assert writes == [], [w.get("requestURI") for w in writes]
    _works(cluster, steady)


def test_a_deleted_daemon_pod_is_replaced_by_one_that_writes_nothing_and_warns_nothing(
    cluster: Cluster, addon: Addon, steady: str
) -> None:
    kubectl = cluster.kubectl
    mark = cluster.audit.mark()
    with _watch(cluster, steady) as watch:
        old, new = addon.replace_daemon_pod()
        _settle(3)
    assert _flips(watch) == set()
    writes = cluster.audit.daemon_writes(mark, namespace=steady)
    assert writes == [], [w.get("requestURI") for w in writes]
    # A normal start (issue 23) and a normal stop (issue 29: /readyz stays 200 while
    # stopping, the kubelet probes readiness until the container has stopped) raise no
    # Warning from the kubelet's probes.
    for pod in (old, new):
        events = kubectl.json(
            "-n", DAEMON_NAMESPACE, "get", "events",
            "--field-selector", f"involvedObject.uid={pod['metadata']['uid']},type=Warning",
        )["items"]  # fmt: skip
        unhealthy = [e["message"] for e in events if e.get("reason") == "Unhealthy"]
        assert unhealthy == [], pod["metadata"]["name"]
    _works(cluster, steady)


def test_the_daemon_recovers_from_an_api_server_restart(
    cluster: Cluster, addon: Addon, steady: str
) -> None:
    mark = cluster.audit.mark()
    with _watch(cluster, steady) as watch:
        cluster.script("restart-apiserver")
        _settle(3)
    assert _flips(watch) == set()
    assert cluster.audit.daemon_writes(mark, namespace=steady) == []
    _works(cluster, steady)


def _restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


@pytest.mark.timeout(900)
def test_cri_backend_recovers_from_a_containerd_restart_as_docs_say(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    """docs/cri.md: the daemon's mount of the socket goes stale; exec probes are Unknown
    (labels kept), /healthz fails after 60 s of refusals, the kubelet's liveness probe
    restarts the container onto the new socket, and probes work again."""
    addon.use("cri")
    _targets(cluster, namespace)
    before = addon.daemon_pod()
    mark = cluster.audit.mark()
    with _watch(cluster, namespace) as watch:
        cluster.script("restart-containerd")
        restarted = wait_for(
            addon.daemon_pod,
            lambda pod: (
                _restarts(pod) > _restarts(before)
                and (condition(pod, "Ready") or {}).get("status") == "True"
            ),
            timeout=240,
            what="the daemon container restarted by its liveness probe, and Ready",
        )
    assert restarted["metadata"]["uid"] == before["metadata"]["uid"]
    assert _flips(watch) == set()
    assert cluster.audit.daemon_writes(mark, namespace=namespace) == []
    _works(cluster, namespace)
