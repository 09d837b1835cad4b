"""The simulated kubelet: pods bound to a node run, report conditions, restart, stop, go."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from probemarker.sim.kubelet.node import pod_ip_for
from probemarker.sim.kubelet.scheduler import unschedulable_message
from tests.sim.server_helpers import pod_manifest


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions", [])}


async def test_bound_pod_runs_with_ip_and_container_status(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("r"))
    await core.create_namespaced_pod("default", pod_manifest("r2", node="node-2"))
    pod = await sim.kubelet.wait_running("default", "r")
    other = await sim.kubelet.wait_running("default", "r2")
    status = pod["status"]
    assert status["podIP"].startswith("127.")
    assert status["podIP"] != other["status"]["podIP"]
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    (container,) = status["containerStatuses"]
    assert container["containerID"].startswith("containerd://")
    assert len(container["containerID"]) == len("containerd://") + 64
    assert container["ready"] is True
    assert container["started"] is True
    assert container["restartCount"] == 0
    assert "startedAt" in container["state"]["running"]
    assert list(conditions(pod)) == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert all(c["status"] == "True" for c in conditions(pod).values())


async def test_pod_for_unknown_node_stays_pending(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("far", node="node-9"))
    await core.create_namespaced_pod("default", pod_manifest("near"))
    await sim.kubelet.wait_running("default", "near")
    far = await core.read_namespaced_pod("far", "default")
    assert far.status.phase == "Pending"
    assert far.status.pod_ip is None


async def test_readiness_gates_hold_ready_until_true(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    gate = "probemarker.io/healthy"
    await core.create_namespaced_pod(
        "default", pod_manifest("gated", readinessGates=[{"conditionType": gate}])
    )
    pod = await sim.kubelet.wait_running("default", "gated")
    ready = conditions(pod)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert (
        ready["message"]
        == f'corresponding condition of pod readiness gate "{gate}" does not exist.'
    )
    assert conditions(pod)["ContainersReady"]["status"] == "True"
    await core.patch_namespaced_pod_status(
        "gated", "default", {"status": {"conditions": [{"type": gate, "status": "False"}]}}
    )
    pod = await sim.kubelet.wait_for_pod(
        "default", "gated", lambda p: "but False" in conditions(p)["Ready"].get("message", "")
    )
    await core.patch_namespaced_pod_status(
        "gated", "default", {"status": {"conditions": [{"type": gate, "status": "True"}]}}
    )
    pod = await sim.kubelet.wait_for_pod(
        "default", "gated", lambda p: conditions(p)["Ready"]["status"] == "True"
    )
    assert conditions(pod)[gate]["status"] == "True"


async def test_restart_and_stop_container(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("rs"))
    before = (await sim.kubelet.wait_running("default", "rs"))["status"]["containerStatuses"][0]
    after = sim.kubelet.restart_container("default", "rs", "app")
    assert after is not None
    restarted = after["status"]["containerStatuses"][0]
    assert restarted["restartCount"] == 1
    assert restarted["containerID"] != before["containerID"]
    assert restarted["lastState"]["terminated"]["containerID"] == before["containerID"]
    stopped = sim.kubelet.stop_container("default", "rs", "app", exit_code=1)
    assert stopped is not None
    state = stopped["status"]["containerStatuses"][0]
    assert state["state"]["terminated"]["exitCode"] == 1
    assert state["ready"] is False
    assert conditions(stopped)["Ready"]["reason"] == "ContainersNotReady"
    assert conditions(stopped)["Ready"]["message"] == "containers with unready status: [app]"


async def test_native_sidecar_gets_init_container_status(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod(
        "default",
        pod_manifest(
            "side",
            initContainers=[
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
            ],
        ),
    )
    pod = await sim.kubelet.wait_running("default", "side")
    inits = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
    assert inits["setup"]["state"]["terminated"]["reason"] == "Completed"
    assert "running" in inits["proxy"]["state"]


async def test_set_phase(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("ph"))
    await sim.kubelet.wait_running("default", "ph")
    pod = sim.kubelet.set_phase("default", "ph", "Failed", reason="Evicted", message="gone")
    assert pod is not None
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", "Evicted")


async def test_deletion_finishes_after_grace_period(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("brief"))
    await sim.kubelet.wait_running("default", "brief")
    await core.delete_namespaced_pod("brief", "default", grace_period_seconds=1)
    listed = await core.list_namespaced_pod("default")
    names = [p.metadata.name for p in listed.items]
    assert "brief" in names
    await sim.kubelet.wait_removed("default", "brief", within=5)


async def test_kubelet_writes_events(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("evts"))
    await sim.kubelet.wait_running("default", "evts")
    events = await core.list_namespaced_event("default", field_selector="involvedObject.name=evts")
    assert {"Pulled", "Created", "Started"} <= {e.reason for e in events.items}


@pytest.mark.parametrize(
    ("index", "ip"), [(0, "127.0.1.1"), (253, "127.0.1.254"), (254, "127.0.2.1")]
)
def test_pod_ips(index: int, ip: str) -> None:
    assert pod_ip_for(index) == ip


async def test_terminating_pod_stays_until_finished(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    sim.kubelet.auto_finish_deletion = False
    await core.create_namespaced_pod("default", pod_manifest("slow"))
    await sim.kubelet.wait_running("default", "slow")
    await core.delete_namespaced_pod("slow", "default", grace_period_seconds=1)
    pod = await core.read_namespaced_pod("slow", "default")
    assert pod.metadata.deletion_timestamp is not None
    assert sim.kubelet.finish_all_deletions() == 1
    await sim.kubelet.wait_removed("default", "slow")


async def test_second_delete_shortens_the_grace_period(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("long"))
    await sim.kubelet.wait_running("default", "long")
    await core.delete_namespaced_pod("long", "default")
    shortened = await core.delete_namespaced_pod("long", "default", grace_period_seconds=1)
    assert shortened.metadata.deletion_grace_period_seconds == 1
    await sim.kubelet.wait_removed("default", "long", within=3)


async def test_optional_scheduler_binds_unscheduled_pods(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        SimCluster(node_names=("a", "b"), scheduler=True) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        core = client.CoreV1Api(api)
        await core.create_namespaced_pod("default", pod_manifest("s1", node=None))
        await core.create_namespaced_pod("default", pod_manifest("s2", node=None))
        await core.create_namespaced_pod(
            "default", pod_manifest("s3", node=None, nodeSelector={"kubernetes.io/hostname": "b"})
        )
        await core.create_namespaced_pod(
            "default", pod_manifest("none", node=None, nodeSelector={"disk": "ssd"})
        )
        nodes = [
            (await sim.kubelet.wait_running("default", n))["spec"]["nodeName"]
            for n in ("s1", "s2", "s3")
        ]
        assert nodes == ["a", "b", "b"]
        events = await core.list_namespaced_event("default", field_selector="reason=Scheduled")
        assert "Successfully assigned default/s1 to a" in [e.message for e in events.items]
        unschedulable = await core.read_namespaced_pod("none", "default")
        assert unschedulable.spec.node_name is None
        # As kube-scheduler reports it: condition, Warning event, and a line in the sim's log.
        why = (
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
        condition = unschedulable.status.conditions[0]
        assert (condition.type, condition.status, condition.reason, condition.message) == (
            "PodScheduled",
            "False",
            "Unschedulable",
            why,
        )
        failed = await core.list_namespaced_event(
            "default", field_selector="reason=FailedScheduling"
        )
        assert [(e.type, e.involved_object.name, e.message) for e in failed.items] == [
            ("Warning", "none", why)
        ]
        assert f"pod default/none stays Pending, no node fits: {why}" in caplog.messages


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        pytest.param({}, "no nodes available to schedule pods", id="no-nodes"),
        pytest.param(
            {
                "node(s) were unschedulable": 1,
                "node(s) didn't match Pod's node affinity/selector": 12,
            },
            "0/13 nodes are available: 1 node(s) were unschedulable, 12 node(s) didn't match "
            "Pod's node affinity/selector. preemption: 0/13 nodes are available: 13 Preemption "
            "is not helpful for scheduling.",
            id="sorted-as-strings-with-counts",
        ),
    ],
)
def test_unschedulable_message(reasons: dict[str, int], expected: str) -> None:
    assert unschedulable_message(Counter(reasons)) == expected
