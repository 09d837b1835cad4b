"""The daemon through what happens to it in a cluster: a DaemonSet rollout, its pod
deleted, the API server restarted, containerd restarted under the cri backend.

What must hold, each time: the pods it marks keep their labels and conditions (no
flip), it writes nothing that is already on the pods (counted in the API server's audit
log: every write by the daemon's ServiceAccount), and it works again afterwards (a
change in a container is followed).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from tests.cluster.conftest import Addon, Cluster
from tests.cluster.kube import (
    DAEMON_NAMESPACE,
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


class Watcher:
    """What the target pods carried, read every 0.2 s until stopped."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.seen: set[tuple[str, str | None, str | None]] = set()
        self.unread = 0
        self._cluster, self._namespace = cluster, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            done = self._cluster.kubectl.run(
                "-n", self._namespace, "get", "pods", "-o", "json", check=False
            )
            if done.returncode != 0:  # the API server restarting: nothing to read
                self.unread += 1
                self._stop.wait(0.2)
                continue
            for pod in json.loads(done.stdout)["items"]:
                state = (condition(pod, KIND) or {}).get("status")
                self.seen.add((pod["metadata"]["name"], labels_of(pod).get("probe"), state))
            self._stop.wait(0.2)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def flips(self) -> set[tuple[str, str | None, str | None]]:
        return {seen for seen in self.seen if seen[1:] != ("ok", "True")}


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
    with Watcher(cluster, steady) as watcher:
        kubectl.run("-n", DAEMON_NAMESPACE, "set", "env", "daemonset/probemarker",
                    f"PROBEMARKER_CLEANUP_DELAY_SECONDS={30 + int(started) % 7}")  # fmt: skip
        addon.rolled_out()
        _settle(3)
    took = time.monotonic() - started
    assert watcher.flips() == set(), f"flips during the rollout ({took:.1f} s)"
    writes = cluster.audit.daemon_writes(mark, namespace=steady)
    assert writes == [], [w.get("requestURI") for w in writes]
    _works(cluster, steady)


def test_a_deleted_daemon_pod_is_replaced_by_one_that_writes_nothing_and_warns_nothing(
    cluster: Cluster, addon: Addon, steady: str
) -> None:
    kubectl = cluster.kubectl
    old = addon.daemon_pod()
    mark = cluster.audit.mark()
    with Watcher(cluster, steady) as watcher:
        kubectl.run("-n", DAEMON_NAMESPACE, "delete", "pod", old["metadata"]["name"], "--wait=true")
        addon.rolled_out()
        new = wait_for(
            addon.daemon_pod,
            lambda pod: (
                pod["metadata"]["uid"] != old["metadata"]["uid"]
                and (condition(pod, "Ready") or {}).get("status") == "True"
            ),
            timeout=60,
            what="the replacement daemon pod Ready",
        )
        _settle(3)
    assert watcher.flips() == set()
    writes = cluster.audit.daemon_writes(mark, namespace=steady)
    assert writes == [], [w.get("requestURI") for w in writes]
    # a normal start raises no Warning from the kubelet's probes (issue 23)
    events = kubectl.json(
        "-n", DAEMON_NAMESPACE, "get", "events",
        "--field-selector", f"involvedObject.uid={new['metadata']['uid']},type=Warning",
    )["items"]  # fmt: skip
    unhealthy = [e["message"] for e in events if e.get("reason") == "Unhealthy"]
    assert unhealthy == []
    _works(cluster, steady)


def test_the_daemon_recovers_from_an_api_server_restart(
    cluster: Cluster, addon: Addon, steady: str
) -> None:
    mark = cluster.audit.mark()
    with Watcher(cluster, steady) as watcher:
        cluster.script("restart-apiserver")
        _settle(3)
    assert watcher.flips() == set()
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
    with Watcher(cluster, namespace) as watcher:
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
    assert watcher.flips() == set()
    assert cluster.audit.daemon_writes(mark, namespace=namespace) == []
    _works(cluster, namespace)
