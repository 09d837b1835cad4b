"""`{{.Result}}` on a real node (issue 24): the container's answer is the label's value.

An exec probe reads a file the test rewrites with `kubectl exec`; an httpGet probe's
body (busybox httpd) is an annotation. Each new answer reaches the pod; an answer that
is no label value leaves the label as it was and raises one `InvalidResultValue`
Warning; a replaced daemon pod takes the values from the pods and writes nothing (the
API server's audit log), nor raises that Warning again.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster.install import Addon, Cluster
from tests.cluster.kube import (
    busybox_pod,
    exec_in,
    pod_ready,
    wait_for,
    wait_label,
)
from tests.podfields import annotations_of

pytestmark = pytest.mark.timeout(600)

MAP, BODY = "game.test/map", "game.test/status"
SERVE = (
    "mkdir -p /www && echo de_dust2 >/tmp/map && echo 'players: 12 | full' >/www/status "
    "&& httpd -p 8080 -h /www && exec sleep 2147483647"
)


def _marker(namespace: str) -> dict[str, Any]:
    timing = {"periodSeconds": 1, "timeoutSeconds": 1, "successThreshold": 1}
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "game", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "game"}},
            "probes": [
                {
                    "name": "map",
                    "containerName": "main",
                    "probe": {"exec": {"command": ["cat", "/tmp/map"]}, **timing},
                    "markerPolicy": [
                        {"state": "Succeeded", "labels": {MAP: "{{ .Result }}"}},
                    ],
                },
                {
                    "name": "status",
                    "containerName": "main",
                    "probe": {"httpGet": {"path": "/status", "port": 8080}, **timing},
                    "markerPolicy": [
                        {"state": "Succeeded", "annotations": {BODY: "{{.Result}}"}},
                    ],
                },
            ],
        },
    }


def _annotation(cluster: Cluster, namespace: str, value: str) -> None:
    wait_for(
        lambda: cluster.kubectl.get("pod", "g", namespace),
        lambda pod: annotations_of(pod).get(BODY) == value,
        timeout=30,
        what=f"annotation {BODY}={value!r}",
    )


def test_the_answer_is_the_value_on_a_real_node(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    addon.use("api")
    kubectl = cluster.kubectl
    kubectl.apply(
        busybox_pod("g", namespace, script=SERVE, labels={"app": "game"}), _marker(namespace)
    )
    pod_ready(kubectl, namespace, "g")
    wait_label(kubectl, namespace, "g", MAP, "de_dust2")
    _annotation(cluster, namespace, "players: 12  full")  # '|' removed, as kruise-game
    exec_in(kubectl, namespace, "g", "sh", "-c", "echo de_nuke >/tmp/map")
    wait_label(kubectl, namespace, "g", MAP, "de_nuke")
    exec_in(kubectl, namespace, "g", "sh", "-c", "echo 'players: 3' >/www/status")
    _annotation(cluster, namespace, "players: 3")

    # No label value: not written, one Warning, the label keeps de_nuke.
    exec_in(kubectl, namespace, "g", "sh", "-c", "echo 'Dust II (night)' >/tmp/map")
    events = wait_for(
        lambda: kubectl.json(
            "-n", namespace, "get", "events", "--field-selector", "reason=InvalidResultValue"
        )["items"],
        lambda items: bool(items),
        timeout=30,
        what="an InvalidResultValue event",
    )
    time.sleep(3)  # three more runs of the same answer
    events = kubectl.json(
        "-n", namespace, "get", "events", "--field-selector", "reason=InvalidResultValue"
    )["items"]
    assert len(events) == 1
    assert (events[0].get("count") or 1) == 1  # once, not once a period
    note = events[0].get("note") or events[0].get("message") or ""
    assert "'Dust II (night)'" in note
    pod = kubectl.get("pod", "g", namespace)
    assert pod["metadata"]["labels"][MAP] == "de_nuke"

    # A replaced daemon writes nothing, and raises no Warning again for the invalid
    # answer that still stands: the pods show what it would render, and the ownership
    # record notes the Warning (issue 29).
    mark = cluster.audit.mark()
    addon.replace_daemon_pod()
    time.sleep(5)  # five periods of both probes
    writes = cluster.audit.daemon_writes(mark, namespace=namespace)
    assert writes == [], [w.get("requestURI") for w in writes]
    events = kubectl.json(
        "-n", namespace, "get", "events", "--field-selector", "reason=InvalidResultValue"
    )["items"]
    assert len(events) == 1
    assert (events[0].get("count") or 1) == 1
    exec_in(kubectl, namespace, "g", "sh", "-c", "echo de_nuke >/tmp/map")
    exec_in(kubectl, namespace, "g", "sh", "-c", "echo de_inferno >/tmp/map")
    wait_label(kubectl, namespace, "g", MAP, "de_inferno")
