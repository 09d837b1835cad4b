"""The simulated kubelet never starts a pod again that is being or has been deleted.

`finish_deletion` and `remove_pod` forget the pod while the kubelet's watch still holds
events about it (its own status writes); those must not start it a second time (new
pod IP, Pulled/Created/Started/Killing recorded again).
"""

from __future__ import annotations

from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from probemarker.sim.kubelet.node import pod_ip_for
from tests.sim.server_helpers import pod_manifest


async def settle(sim: SimCluster, core: client.CoreV1Api, name: str) -> dict[str, object]:
    """Create one more pod and wait for it to run: the kubelet handles pod events in
    order, so by then it has handled every event queued before it."""
    await core.create_namespaced_pod("default", pod_manifest(name))
    return await sim.kubelet.wait_running("default", name)


async def kubelet_event_counts(core: client.CoreV1Api, pod: str) -> dict[str, int]:
    events = await core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={pod}"
    )
    return {e.reason: e.count for e in events.items}


async def test_finishing_a_graceful_deletion_does_not_run_the_pod_again(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    sim.kubelet.auto_finish_deletion = False
    await core.create_namespaced_pod("default", pod_manifest("once"))
    await sim.kubelet.wait_running("default", "once")
    await core.delete_namespaced_pod("once", "default", grace_period_seconds=30)
    await sim.kubelet.wait_for_pod(
        "default", "once", lambda p: bool(p["metadata"].get("deletionTimestamp"))
    )
    assert sim.kubelet.finish_deletion("default", "once") is True
    await sim.kubelet.wait_removed("default", "once")
    later = await settle(sim, core, "later")
    counts = await kubelet_event_counts(core, "once")
    assert counts == {"Pulled": 1, "Created": 1, "Started": 1, "Killing": 1}
    # No pod IP was taken by a second run: the next pod got the second address.
    assert later["status"]["podIP"] == pod_ip_for(1)
    assert sim.kubelet.pod_ip("default", "once") is None


async def test_removing_a_running_pod_does_not_run_it_again(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("gone"))
    await sim.kubelet.wait_running("default", "gone")
    # A status write whose MODIFIED event is still queued in the kubelet's watch when
    # the pod is removed.
    sim.kubelet.set_container_ready("default", "gone", "app", False)
    assert sim.kubelet.remove_pod("default", "gone") is True
    later = await settle(sim, core, "after")
    assert (await kubelet_event_counts(core, "gone")) == {"Pulled": 1, "Created": 1, "Started": 1}
    assert later["status"]["podIP"] == pod_ip_for(1)
    assert sim.kubelet.pod_ip("default", "gone") is None


async def test_a_pod_created_again_under_the_same_name_runs(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("again"))
    first = await sim.kubelet.wait_running("default", "again")
    await core.delete_namespaced_pod("again", "default", grace_period_seconds=30)
    sim.kubelet.finish_deletion("default", "again")
    await core.create_namespaced_pod("default", pod_manifest("again"))
    second = await sim.kubelet.wait_running("default", "again")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["status"]["podIP"] == pod_ip_for(1)
    assert second["metadata"].get("deletionTimestamp") is None
