"""`probemarker status` on a real node (issue 34): the daemon's answer, read as the admin
through the API server and `pods/exec` into the daemon's container, agrees with the
pods: a probe waiting for its threshold, a held hanging command, a missing container,
pending writes under a throttled budget, and a pod bound to another node not shown.

The write budget is throttled for this test only (one write, then one per 100 s:
`kubectl set env` on the DaemonSet, a rollout) and given back after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.install import Addon, Cluster
from tests.cluster.kube import DAEMON_NAMESPACE, busybox_pod, marker, pod_ready, wait_for
from tests.podfields import labels_of

pytestmark = pytest.mark.timeout(300)

SLEEP = "exec sleep 2147483647"
THROTTLE = ("PROBEMARKER_WRITE_QPS=0.01", "PROBEMARKER_WRITE_BURST=1")


@pytest.fixture
def throttled(addon: Addon) -> Iterator[Addon]:
    kubectl = addon.cluster.kubectl
    daemonset = ("-n", DAEMON_NAMESPACE, "daemonset/probemarker")
    kubectl.run("set", "env", *daemonset, *THROTTLE)
    addon.rolled_out()
    try:
        yield addon
    finally:
        names = [f"{setting.partition('=')[0]}-" for setting in THROTTLE]
        kubectl.run("set", "env", *daemonset, *names)
        addon.rolled_out()


def status(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "probemarker", "status", "--kubeconfig",
         str(cluster.kubectl.kubeconfig), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def rows(answer: dict[str, Any], namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(pod, marker/probe) -> row, of the pods of `namespace`."""
    (node,) = answer["nodes"]
    assert node["problem"] is None, node
    return {
        (pod["name"], f"{probe['marker'].partition('/')[2]}/{probe['probe']}"): {
            **probe,
            "write": pod["write"],
        }
        for pod in node["pods"]
        if pod["namespace"] == namespace
        for probe in pod["probes"]
    }


def test_status_agrees_with_the_pods(cluster: Cluster, throttled: Addon, namespace: str) -> None:
    kubectl = cluster.kubectl
    node = throttled.daemon_pod()["spec"]["nodeName"]
    kubectl.apply(
        # never decided: 100 failures needed; and a marker whose container it lacks
        marker("waits", namespace, app="waits", probe={"exec": {"command": ["false"]},
               "failureThreshold": 100}),
        marker("side", namespace, app="waits", container="sidecar",
               probe={"exec": {"command": ["true"]}}),
        # a command that outlives its timeout: held, its periods skipped
        marker("hangs", namespace, app="hangs", probe={"exec": {"command": ["sleep", "600"]}}),
        # decided at once; their writes wait for the budget
        marker("budget", namespace, app="budget", probe={"exec": {"command": ["true"]}}),
        busybox_pod("waits", namespace, script=SLEEP, labels={"app": "waits"}),
        busybox_pod("hangs", namespace, script=SLEEP, labels={"app": "hangs"}),
        *(busybox_pod(f"budget-{i}", namespace, script=SLEEP, labels={"app": "budget"})
          for i in range(3)),
        # bound to a node that does not exist: Pending, not this daemon's
        busybox_pod("elsewhere", namespace, script=SLEEP, labels={"app": "budget"},
                    spec={"nodeName": "probemarker-ghost-node"}),
    )  # fmt: skip
    for name in ("waits", "hangs", "budget-0", "budget-1", "budget-2"):
        pod_ready(kubectl, namespace, name)

    ghost_there: list[bool] = []  # whether the pod on the missing node existed, per read

    def read() -> dict[tuple[str, str], dict[str, Any]]:
        there = kubectl.run("get", "pod", "elsewhere", "-n", namespace, check=False)
        ghost_there.append(there.returncode == 0)
        done = status(cluster, "--node", node, "-o", "json")
        assert done.returncode in (0, 1), done.stderr
        found = rows(json.loads(done.stdout), namespace)
        assert not any(name == "elsewhere" for name, _ in found)  # another node's
        return found

    def settled(found: dict[tuple[str, str], dict[str, Any]]) -> bool:
        waits, hangs = found.get(("waits", "waits/p")), found.get(("hangs", "hangs/p"))
        budget = [found.get((f"budget-{i}", "budget/p")) for i in range(3)]
        return (
            waits is not None
            and (waits["count"]["runs"] or 0) >= 2
            and hangs is not None
            and (hangs["waiting"] or {}).get("reason") == "CommandHeld"
            and all(b is not None and b["state"] == "Succeeded" for b in budget)
            and all(b is None or b["write"] is None or b["write"]["waits"] == "WriteBudget"
                    for b in budget)
        )  # fmt: skip

    found = wait_for(read, settled, timeout=90, what="status: every situation", interval=1.0)
    pods = {p["metadata"]["name"]: p for p in kubectl.json("get", "pods", "-n", namespace)["items"]}

    waits = found[("waits", "waits/p")]
    assert waits["state"] is None  # short of its threshold: nothing on the pod
    assert (waits["count"]["result"], waits["count"]["threshold"]) == ("Failed", 100)
    assert waits["last"]["result"] == "Failed"
    assert "probe" not in labels_of(pods["waits"])
    assert found[("waits", "side/p")]["waiting"]["reason"] == "ContainerMissing"
    assert found[("waits", "side/p")]["last"] is None

    hangs = found[("hangs", "hangs/p")]
    assert hangs["last"]["result"] == "Failed"  # its timeout
    assert hangs["waiting"]["reason"] == "CommandHeld"

    pending = {
        name: row["write"]
        for (name, _), row in found.items()
        if name.startswith("budget-") and row["write"] is not None
    }
    assert len(pending) >= 2, found  # one token for 100 s, and three pods to write
    for name, write in pending.items():
        assert write["waits"] == "WriteBudget", write
        assert write["changes"]["labels_set"] == {"probe": "ok"}
        assert "probe" not in labels_of(pods[name])  # the pod agrees: not written yet
    for name in {f"budget-{i}" for i in range(3)} - set(pending):
        assert labels_of(pods[name]).get("probe") == "ok"  # written: the one token

    # Never shown, and it was there for the first reads (the pod GC removes an orphan
    # bound to a node that does not exist after 40 s); Pending while it is.
    assert ghost_there[0], "the pod on the missing node was gone before the first read"
    assert pods.get("elsewhere", {"status": {"phase": "Pending"}})["status"]["phase"] == "Pending"

    table = status(cluster, "--node", node)
    assert table.returncode == 1, table.stdout + table.stderr  # undecided, unwritten
    print(table.stdout)  # docs/cli.md shows this run
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["POD", "MARKER/PROBE", "STATE", "COUNT", "LAST", "NEXT", "MESSAGE"]
    assert any(f"{namespace}/hangs" in line and "CommandHeld" in line for line in lines)
    assert "Pending writes:" in lines
    ghost = status(cluster, "--node", "probemarker-ghost-node")
    assert ghost.returncode == 1
    assert "no daemon pod on node probemarker-ghost-node" in ghost.stdout
